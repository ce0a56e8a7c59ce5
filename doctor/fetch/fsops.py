"""File-system steps of an install, each turning the world's errors into a DoctorError.

The fetch stage works on real paths (the pipeline maps the destination through `host.real`
once); its writes go through doctor/writes.py, the write side of the Host door, and its
errors through the same translation (`os_error`, with fetch's way out: another --dest).

- `rmtree` (from doctor/writes.py): iterative, able to remove what an archive made read-only;
- `swap`: put a staging tree in place with one rename (RENAME_EXCHANGE on Linux).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
import tempfile
from pathlib import Path

from doctor import writes
from doctor.errors import DoctorError
from doctor.writes import _quiet, rmtree


# What to do instead when a fetch cannot write somewhere: the hint's second half.
INSTEAD = "or choose another --dest (or LIBTORCH_HOME, --lock)"


def os_error(exc: OSError, doing: str, where: str | os.PathLike[str] | None = None) -> DoctorError:
    """`exc` as a DoctorError (doctor.writes.os_error, the one translation), with fetch's way out."""
    return writes.os_error(exc, doing, where, INSTEAD)


def swap(staging: Path, dest: Path) -> None:
    """Put `staging` at `dest` in one step; the old tree (if any) goes away after."""
    try:
        if not dest.exists() and not dest.is_symlink():
            os.rename(staging, dest)
            return
        if _exchange(staging, dest):
            rmtree(staging)  # now holds the old tree
            return
        old = Path(tempfile.mkdtemp(prefix=f".{dest.name}.old-", dir=dest.parent))
        os.rmdir(old)
        os.rename(dest, old)
        os.rename(staging, dest)
        rmtree(old)
    except OSError as exc:
        raise os_error(exc, "put the new tree in place at", dest) from exc


def _exchange(a: Path, b: Path) -> bool:
    """renameat2(RENAME_EXCHANGE): swap two paths atomically (Linux ≥ 3.15, glibc ≥ 2.28)."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    at_fdcwd, rename_exchange = -100, 2
    return fn(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0


def ensure_space(path: Path, need: int, what: str) -> None:
    try:
        free = shutil.disk_usage(path).free
    except OSError:
        return
    message = space_error(need, free, path, what)
    if message:
        raise DoctorError(message, "free some space, or choose another --dest (or LIBTORCH_HOME)", error_id="io.enospc")


def space_error(need: int, free: int, path: Path, what: str) -> str | None:
    from doctor.formats import human_bytes

    if need > free:
        return f"not enough free space in {path} to {what}: need about {human_bytes(need)}, {human_bytes(free)} free"
    return None


def sha256_file(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    n = 0
    try:
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                h.update(chunk)
                n += len(chunk)
    except OSError as exc:
        raise os_error(exc, "read", path) from exc
    return h.hexdigest(), n


def file_size(p: Path) -> int:
    try:
        return p.stat().st_size
    except OSError:
        return 0


def remove_part(part: Path) -> None:
    _quiet(os.unlink, part)
    _quiet(os.unlink, part.with_name(part.name + ".json"))


def cleanup_leftovers(parent: Path, name: str) -> None:
    """Staging trees of a fetch that was killed: only the lock holder creates them, so any
    seen while holding the lock are dead."""
    for prefix in (f".{name}.staging-", f".{name}.old-", f".{name}.wheel-"):
        try:
            found = list(parent.glob(prefix + "*"))
        except OSError:
            continue
        for p in found:
            rmtree(p)
