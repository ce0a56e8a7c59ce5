"""The install record: the one home of its file name, its fields and how it is read and written.

`fetch-libtorch` writes `torch-doctor.json` and Hasktorch's `.ok` marker at the top of every
tree it installs. Other commands (`emit nix`, the libtorch probe) read the record; the fetch
pipeline trusts an existing tree, and may replace it, only when the record is well formed and
the marker is present (`install_problem`).

The record's `nar_hash` is the NAR hash of the tree exactly as unpacked: every entry except
the two files named in `NOT_HASHED`. Archives holding entries with those names are refused
before anything is written (extract.py), so the hash never hides a file of the archive.
Its `nar_parts` are the sha256 of each `size` bytes of the same NAR stream, computed in the
same walk: `--verify` checks those on every idle CPU instead of one sequential sha256
(docs/performance.md, "verify"); a record without them (an earlier doctor's) is checked against
`nar_hash`.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, field
from pathlib import Path
from typing import Any

from doctor.errors import DoctorError
from doctor.record import record

RECORD = "torch-doctor.json"
MARKER = ".ok"  # Hasktorch's "this cache entry is complete" marker
NOT_HASHED = (RECORD, MARKER)
RECORD_VERSION = 1
MAX_RECORD_BYTES = 1 << 20  # a record is a few hundred bytes; anything bigger is not ours
NO_RECORD = "no install record"
UNFINISHED = f"no {MARKER} marker (an install that did not finish)"

SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
SRI_SHA256 = re.compile(r"^sha256-[A-Za-z0-9+/]{43}=$")
PART_SIZES = (4 << 20, 64 << 20)  # bytes of NAR per recorded part, smallest and largest
MAX_PARTS = 4096  # 4096 x 64 MiB: 256 GiB of tree, ~270 KB of record


def part_size_for(content_bytes: int) -> int:
    """The part size recorded for a tree of about `content_bytes`: 4 MiB, doubled (up to
    64 MiB) while the tree would have more than 1,024 parts. Small enough that every CPU of a
    machine gets many parts of a libtorch (~120 for a CPU build), large enough that the record
    stays small and a part's bytes in flight stay bounded (Digester's slots)."""
    size = PART_SIZES[0]
    while content_bytes > 1024 * size and size < PART_SIZES[1]:
        size *= 2
    return size


def nar_parts(size: int, digests: list[str]) -> dict:
    """The record's `nar_parts`: `digests` (hex), one per `size` bytes of the NAR."""
    return {"size": size, "sha256": list(digests)}


class BadRecord(ValueError):
    """A record that is not one fetch-libtorch wrote (wrong types, missing fields)."""


@record
class InstallRecord:
    version: str | None
    variant: str
    abi: str | None
    platform: str
    debug: bool
    channel: str
    build_version: str | None
    source: dict  # kind ("url" | "archive" | "wheel"), url (None when it held secrets), file, [path, url_redacted]
    sha256: str
    size: int
    nar_hash: str
    strip_root: str | None
    installed_at: str
    doctor_version: str
    nar_excludes: list[str] = field(default_factory=lambda: list(NOT_HASHED))
    record_version: int = RECORD_VERSION
    nar_parts: dict | None = None  # {"size": bytes of NAR per part, "sha256": [hex, ...]}

    def as_dict(self) -> dict[str, Any]:
        """The JSON form, keys in the order the file has always had."""
        d = asdict(self)
        order = ["record_version", "version", "variant", "abi", "platform", "debug", "channel",
                 "build_version", "source", "sha256", "size", "nar_hash", "nar_excludes", "strip_root",
                 "installed_at", "doctor_version"]
        out = {k: d[k] for k in order}
        if self.nar_parts is not None:
            out["nar_parts"] = d["nar_parts"]
        return out

    @classmethod
    def from_dict(cls, data: Any) -> InstallRecord:
        """Validate `data` (parsed JSON) as a record; BadRecord says which field is wrong."""
        if not isinstance(data, dict):
            raise BadRecord("not a JSON object")
        if data.get("record_version") != RECORD_VERSION or isinstance(data.get("record_version"), bool):
            raise BadRecord(f"record_version is {data.get('record_version')!r}, not {RECORD_VERSION}")
        _want(data, "version", (str, type(None)))
        _want(data, "variant", str)
        _want(data, "abi", (str, type(None)))
        _want(data, "platform", str)
        _want(data, "debug", bool)
        _want(data, "channel", str)
        _want(data, "build_version", (str, type(None)))
        _want(data, "source", dict)
        _want(data, "sha256", str)
        _want(data, "size", int)
        _want(data, "nar_hash", str)
        _want(data, "installed_at", str)
        _want(data, "doctor_version", str)
        if not SHA256_HEX.match(data["sha256"]):
            raise BadRecord(f"sha256 {data['sha256'][:80]!r} is not 64 lowercase hex digits")
        if not SRI_SHA256.match(data["nar_hash"]):
            raise BadRecord(f"nar_hash {data['nar_hash'][:80]!r} is not an SRI sha256 hash")
        if isinstance(data["size"], bool) or data["size"] < 0:
            raise BadRecord("size is not a byte count")
        excludes = data.get("nar_excludes", list(NOT_HASHED))
        if not isinstance(excludes, list) or sorted(excludes) != sorted(NOT_HASHED):
            raise BadRecord(f"nar_excludes is {excludes!r}, not {list(NOT_HASHED)!r}")
        strip = data.get("strip_root")
        if not isinstance(strip, (str, type(None))):
            raise BadRecord("strip_root is not a string or null")
        parts = data.get("nar_parts")
        if parts is not None:
            parts = _parts(parts)
        return cls(data["version"], data["variant"], data["abi"], data["platform"], data["debug"],
                   data["channel"], data["build_version"], dict(data["source"]), data["sha256"], data["size"],
                   data["nar_hash"], strip, data["installed_at"], data["doctor_version"], list(excludes),
                   nar_parts=parts)


def _parts(value: Any) -> dict:
    """A record's nar_parts, validated: a part size the doctor writes and 1..MAX_PARTS digests."""
    if not isinstance(value, dict) or set(value) != {"size", "sha256"}:
        raise BadRecord("nar_parts is not an object of size and sha256")
    size, digests = value["size"], value["sha256"]
    if (type(size) is not int or not PART_SIZES[0] <= size <= PART_SIZES[1] or size & (size - 1)):
        raise BadRecord(f"nar_parts size {str(size)[:40]!r} is not a power of two from 4 to 64 MiB")
    if not isinstance(digests, list) or not 1 <= len(digests) <= MAX_PARTS:
        raise BadRecord(f"nar_parts sha256 is not a list of 1 to {MAX_PARTS} digests")
    for digest in digests:
        if not isinstance(digest, str) or not SHA256_HEX.match(digest):
            raise BadRecord(f"nar_parts holds {str(digest)[:80]!r}, not 64 lowercase hex digits")
    return nar_parts(size, digests)


def _want(data: dict, key: str, types) -> None:
    if key not in data:
        raise BadRecord(f"no {key!r} field")
    value = data[key]
    if types is int and isinstance(value, bool) or not isinstance(value, types):
        raise BadRecord(f"{key} is {type(value).__name__}, not {getattr(types, '__name__', 'the expected type')}")


def load_record(root: str | os.PathLike[str]) -> InstallRecord | None:
    """The validated record at `root`; None when absent, unreadable or not one we wrote."""
    return examine_record(root)[0]


def examine_record(root: str | os.PathLike[str]) -> tuple[InstallRecord | None, str]:
    """(the validated record at `root`, "") or (None, why there is none), the reason worded to
    follow "nothing to verify at DEST: " and "DEST holds a libtorch that fetch-libtorch cannot vouch for: ".

    Read without following a symlink and bounded in size: a tree the doctor did not write
    is hostile input like any other. A damaged record is named as damaged, not as missing: the
    user who sees "no install record" beside the file looks for the wrong cause."""
    data, problem = _read_json(Path(root) / RECORD)
    if problem:
        return None, problem
    try:
        return InstallRecord.from_dict(data), ""
    except BadRecord as exc:
        from doctor.formats import clip

        return None, f"its {RECORD} is not one the doctor wrote: {clip(str(exc), 160)}"


def read_install_record(root: str | os.PathLike[str]) -> dict | None:
    """The install record fetch-libtorch wrote at `root` as a dict, or None (absent, unreadable,
    malformed). The form `emit nix` and the JSON output read."""
    record = load_record(root)
    return record.as_dict() if record is not None else None


def _read_json(path: Path) -> tuple[Any, str]:
    """(the parsed JSON at `path`, "") or (None, what is wrong with the file)."""
    import errno
    import stat

    flags = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
             | getattr(os, "O_BINARY", 0))
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        if exc.errno in (errno.ENOENT, errno.ENOTDIR):
            return None, NO_RECORD
        if exc.errno == errno.ELOOP or os.path.islink(path):
            return None, f"its {RECORD} is a symlink"
        return None, f"its {RECORD} cannot be read ({exc.strerror or exc})"
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, f"its {RECORD} is not a regular file"  # a FIFO or device: never block on it
        with os.fdopen(fd, "rb", closefd=False) as fh:
            raw = fh.read(MAX_RECORD_BYTES + 1)
    except OSError as exc:
        return None, f"its {RECORD} cannot be read ({exc.strerror or exc})"
    finally:
        os.close(fd)
    if len(raw) > MAX_RECORD_BYTES:
        return None, f"its {RECORD} is over {MAX_RECORD_BYTES >> 20} MiB"
    try:
        return json.loads(raw.decode("utf-8")), ""
    except UnicodeDecodeError:
        return None, f"its {RECORD} is not UTF-8 text"
    except RecursionError:
        return None, f"its {RECORD} is nested too deeply to be a record"
    except ValueError as exc:  # json's message names only a position: nothing of the file's text
        return None, f"its {RECORD} is not valid JSON: {exc}"


def install_problem(root: str | os.PathLike[str]) -> str:
    """Why `root` is not a tree fetch-libtorch installed ("" when it is one: a well-formed
    record and the marker, both plain files)."""
    record, problem = examine_record(root)
    if record is None:
        return problem
    return "" if marked(root) else UNFINISHED


def marked(root: str | os.PathLike[str]) -> bool:
    """Whether `root` holds the marker as a plain file: a symlink of that name vouches for nothing."""
    marker = Path(root) / MARKER
    return marker.is_file() and not marker.is_symlink()


def write_new_file(path: Path, data: bytes) -> None:
    """Create `path` with `data`; never through a symlink, never over an existing file."""
    from doctor import writes

    try:
        writes.create_new(path, data)  # O_EXCL | O_NOFOLLOW: the write side of the Host door
    except FileExistsError as exc:
        raise DoctorError(f"refusing to write {path}: something already has that name",
                          "the archive carries a file named like the doctor's own; nothing was installed",
                          error_id="fetch.unsafe-archive") from exc


def write_record(tree: Path, record: InstallRecord) -> None:
    """Write the record and the marker into `tree` (a staging tree about to be swapped in)."""
    write_new_file(tree / RECORD, (json.dumps(record.as_dict(), indent=2) + "\n").encode())
    write_new_file(tree / MARKER, b"")
