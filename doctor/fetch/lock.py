"""libtorch.lock: trust on first use for archives PyTorch publishes no checksums for.

JSON (readable without extra packages on every Python we support, and diff-friendly with
sorted keys and one field a line):

    {
      "lock_version": 1,
      "libtorch": {
        "2.13.0/linux-x86_64/cpu/cxx11": {
          "url": "https://download.pytorch.org/libtorch/cpu/libtorch-shared-with-deps-2.13.0%2Bcpu.zip",
          "file": "libtorch-shared-with-deps-2.13.0+cpu.zip",
          "size": 201326592,
          "sha256": "<hex of the archive>",
          "nar_hash": "sha256-<base64 NAR hash of the unpacked, root-stripped tree>",
          "source": "url",
          "recorded_at": "2025-01-01T00:00:00Z"
        }
      }
    }

Keys are `<version>/<platform>/<variant>/<abi or any>[/debug][/wheel]`: the same libtorch
from a mirror or a local copy is checked against the same entry; a wheel-built tree differs
from the zip, so it has its own.

The file is outside input (committed, edited by hand, merged by git): every entry is validated
when read, and a malformed one is an error naming it — never "lock matches", never silently
overwritten. URLs are stored with credentials and query strings redacted.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from doctor import writes
from doctor.errors import DoctorError

LOCK_VERSION = 1
MAX_LOCK_BYTES = 16 << 20
_HEX64 = re.compile(r"^[0-9a-fA-F]{64}$")
_SRI = re.compile(r"^sha256-[A-Za-z0-9+/]{43}=$")
_HINT = "fix that entry (or remove it to record fresh hashes on the next fetch)"
_BAD = "lock.invalid"  # the error id of every malformed lock file


def parse_lock(text: str, path: Path | str = "libtorch.lock") -> dict[str, dict]:
    """The lock's entries by key, validated. DoctorError (exit 1) names what is wrong."""
    try:
        data = json.loads(text)
    except RecursionError as exc:
        raise DoctorError(f"{path} is nested too deeply to be a lock file", _HINT, error_id=_BAD) from exc
    except ValueError as exc:
        raise DoctorError(f"{path} is not valid JSON ({exc})",
                          "fix it, or remove it to record fresh hashes (trust on first use)", error_id=_BAD) from exc
    if not isinstance(data, dict):
        raise DoctorError(f"{path} is not a libtorch lock file (a JSON object is expected)", _HINT, error_id=_BAD)
    version = data.get("lock_version")
    if isinstance(version, bool) or not isinstance(version, int):
        raise DoctorError(f"{path}: lock_version is {_show(version)}, not {LOCK_VERSION}", _HINT, error_id=_BAD)
    if version > LOCK_VERSION:
        raise DoctorError(f"{path} was written by a newer torch-doctor (lock_version {version})", "upgrade torch-doctor", error_id="lock.newer")
    if version != LOCK_VERSION:
        raise DoctorError(f"{path}: lock_version {version} is not one this doctor reads ({LOCK_VERSION})", _HINT, error_id=_BAD)
    entries = data.get("libtorch", {})
    if not isinstance(entries, dict):
        raise DoctorError(f"{path}: \"libtorch\" is {type(entries).__name__}, not a table of entries", _HINT, error_id=_BAD)
    for key, entry in entries.items():
        problem = entry_problem(entry)
        if problem:
            raise DoctorError(f"{path}: entry {_show(key)} {problem}", _HINT, error_id=_BAD)
    return entries


def entry_problem(entry: Any) -> str | None:
    """Why `entry` is not a well-formed lock record, or None."""
    if not isinstance(entry, dict):
        return f"is {_kind(entry)}, not a record"
    sha = entry.get("sha256")
    if not isinstance(sha, str) or not _HEX64.match(sha):
        return f"has sha256 {_show(sha)}, not 64 hex digits"
    nar = entry.get("nar_hash")
    if not isinstance(nar, str) or not _SRI.match(nar):
        return f"has nar_hash {_show(nar)}, not an SRI sha256 hash (sha256-...)"
    size = entry.get("size")
    if size is not None and (isinstance(size, bool) or not isinstance(size, int) or size < 0):
        return f"has size {_show(size)}, not a byte count"
    for field in ("url", "file", "source", "recorded_at"):
        if field in entry and not isinstance(entry[field], (str, type(None))):
            return f"has {field} {_show(entry[field])}, not a string"
    return None


def _kind(value: Any) -> str:
    return {list: "a list", type(None): "null", str: "a string", bool: "a boolean",
            int: "a number", float: "a number"}.get(type(value), type(value).__name__)


def _show(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=True) if not isinstance(value, (dict, list)) else _kind(value)
    return text if len(text) <= 80 else text[:77] + "..."


def read_lock(path: Path) -> dict:
    """The lock's entries by key ({} when the file does not exist). Opened non-blocking and
    refused unless it is a regular file: a FIFO named by --lock waited forever for a writer, and
    /dev/zero was read up to the size cap. A symlink is refused too: the lock is written by
    replacing the file at its name (never through a link), which would have turned the link
    into a plain file after reading its target."""
    import errno
    import os
    import stat

    from doctor.host import read_fd

    flags = (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0))
    if os.path.islink(path):
        raise _symlink(path)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        return {}
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # made a link since the look above
            raise _symlink(path) from exc
        raise _unreadable(path, exc) from exc
    try:
        st = os.fstat(fd)
        mode = st.st_mode
        if not stat.S_ISREG(mode):
            kind = ("a directory" if stat.S_ISDIR(mode) else "a named pipe (FIFO)" if stat.S_ISFIFO(mode)
                    else "a socket" if stat.S_ISSOCK(mode) else "a device")
            raise DoctorError(f"the lock file {path} is {kind}, not a file",
                              "give --lock a path to a plain file (or to none yet: it is created), or --no-lock",
                              error_id="lock.unreadable")
        raw = read_fd(fd, MAX_LOCK_BYTES + 1, st.st_size)
    except OSError as exc:
        raise _unreadable(path, exc) from exc
    finally:
        os.close(fd)
    if len(raw) > MAX_LOCK_BYTES:
        raise DoctorError(f"{path} is over {MAX_LOCK_BYTES >> 20} MiB: not a libtorch lock file", _HINT, error_id=_BAD)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise DoctorError(f"{path} is not UTF-8 text (byte {exc.start} is {raw[exc.start]:#04x})",
                          "a lock file is JSON in UTF-8; fix it, or remove it to record fresh hashes", error_id=_BAD) from exc
    return parse_lock(text, path)


def _symlink(path: Path) -> DoctorError:
    import os

    from doctor.quoting import sh_paste

    return DoctorError(f"the lock file {path} is a symbolic link: it is neither read nor written through one",
                       f"give the file it points to: --lock {sh_paste(os.path.realpath(path))} (or replace the link "
                       "with the file itself)", error_id="lock.unreadable")


def _unreadable(path: Path, exc: OSError) -> DoctorError:
    return DoctorError(f"cannot read the lock file {path}: {exc.strerror or exc}",
                       "give --lock PATH to a readable file, or --no-lock", error_id="lock.unreadable")


def lock_entry(path: Path | None, key: str) -> dict | None:
    if path is None:
        return None
    return read_lock(path).get(key)


def write_lock_entry(path: Path, key: str, entry: dict) -> None:
    """Add or replace one entry; the file is replaced atomically, other entries kept."""
    from filelock import FileLock

    from doctor.fetch.fsops import os_error

    problem = entry_problem(entry)
    if problem:  # a doctor bug, not the user's
        raise ValueError(f"lock entry {key!r} {problem}")
    try:
        with FileLock(str(_guard(path)), timeout=60):
            entries = read_lock(path)
            entries[key] = entry
            text = json.dumps({"lock_version": LOCK_VERSION, "libtorch": entries}, indent=2, sort_keys=True) + "\n"
            writes.mkdirs(path.parent)
            # Replaced in one step (a reader sees the old lock or the new one), never written
            # through a symlink planted at its name.
            writes.atomic_write(path, text.encode("utf-8"))
    except OSError as exc:
        raise os_error(exc, "write the lock file", path) from exc


def _guard(path: Path) -> Path:
    """A lock serialising writers of one lock file, kept in our own cache dir so users'
    project directories get no stray files (and never unlinked: that would race)."""
    import hashlib

    import platformdirs

    folder = Path(platformdirs.user_cache_dir("torch-doctor", appauthor=False)) / "locks"
    try:
        writes.mkdirs(folder)
    except OSError as exc:
        raise writes.os_error(exc, "create the doctor's cache folder", folder,
                              "or point XDG_CACHE_HOME at a writable directory") from exc
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return folder / f"lockfile-{digest}.lock"
