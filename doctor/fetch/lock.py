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
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from doctor.errors import DoctorError

LOCK_VERSION = 1


def read_lock(path: Path) -> dict:
    """The lock's entries by key ({} when the file does not exist)."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise DoctorError(f"cannot read the lock file {path}: {exc.strerror or exc}") from exc
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise DoctorError(f"{path} is not valid JSON ({exc})",
                          "fix it, or remove it to record fresh hashes (trust on first use)") from exc
    if not isinstance(data, dict) or not isinstance(data.get("libtorch", {}), dict):
        raise DoctorError(f"{path} is not a libtorch lock file (no \"libtorch\" table)")
    if data.get("lock_version", LOCK_VERSION) > LOCK_VERSION:
        raise DoctorError(f"{path} was written by a newer torch-doctor (lock_version {data['lock_version']})",
                          "upgrade torch-doctor")
    return data.get("libtorch", {})


def lock_entry(path: Path | None, key: str) -> dict | None:
    if path is None:
        return None
    entry = read_lock(path).get(key)
    return entry if isinstance(entry, dict) else None


def write_lock_entry(path: Path, key: str, entry: dict) -> None:
    """Add or replace one entry; the file is replaced atomically, other entries kept."""
    from filelock import FileLock

    with FileLock(str(_guard(path)), timeout=60):
        entries = read_lock(path)
        entries[key] = entry
        text = json.dumps({"lock_version": LOCK_VERSION, "libtorch": entries}, indent=2, sort_keys=True) + "\n"
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
        try:
            with os.fdopen(fd, "w") as fh:
                fh.write(text)
            os.chmod(tmp, 0o644)
            os.replace(tmp, path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise


def _guard(path: Path) -> Path:
    """A lock serialising writers of one lock file, kept in our own cache dir so users'
    project directories get no stray files (and never unlinked: that would race)."""
    import hashlib

    import platformdirs

    folder = Path(platformdirs.user_cache_dir("torch-doctor", appauthor=False)) / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256(str(path.resolve()).encode()).hexdigest()[:16]
    return folder / f"lockfile-{digest}.lock"
