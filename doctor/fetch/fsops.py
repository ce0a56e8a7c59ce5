"""File-system steps of an install, each turning the world's errors into a DoctorError.

(Host has no write side yet — issue 12 §3 — so the fetch stage keeps its writes here, in one
place, ready to move behind Host.)

- `rmtree`: iterative (a tree thousands of levels deep cannot exhaust Python's stack) and
  able to remove what an archive made read-only;
- `swap`: put a staging tree in place with one rename (RENAME_EXCHANGE on Linux);
- `os_error`: the one translation of an OSError into a message and a hint.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import stat
import sys
import tempfile
from pathlib import Path

from doctor.errors import DoctorError


def os_error(exc: OSError, doing: str, where: str | os.PathLike[str] | None = None) -> DoctorError:
    """`exc` as a DoctorError: what failed, where, why, and what to do about it."""
    where = where or exc.filename
    why = exc.strerror or str(exc)
    hint = {
        errno.ENOSPC: "the disk (or its inodes) is full: free some space, or choose another --dest (or LIBTORCH_HOME)",
        errno.EDQUOT: "the disk quota is exhausted: free some space, or choose another --dest",
        errno.EROFS: "that file system is read-only: choose another --dest (or --lock)",
        errno.EACCES: "no permission there: choose another --dest (or --lock), or fix the directory's permissions",
        errno.EPERM: "no permission there: choose another --dest (or --lock)",
        errno.ENAMETOOLONG: "a file name or path is too long for the file system: choose a shorter --dest",
        errno.ENOTDIR: "a part of that path is a file, not a directory (check --dest, LIBTORCH_HOME, XDG_CACHE_HOME)",
        errno.EEXIST: "something is already there: choose another --dest",
        errno.ELOOP: "a symlink loop or a symlink where a directory was expected: choose another --dest",
    }.get(exc.errno or 0, "check the destination directory, or choose another --dest")
    place = f" {where}" if where else ""
    return DoctorError(f"cannot {doing}{place}: {why}", hint)


def rmtree(path: str | os.PathLike[str]) -> None:
    """Remove `path` (a tree, file or symlink) without recursion; errors are ignored, like
    cleaning up a staging tree should be (what is left is removed by the next fetch)."""
    top = os.fsencode(path)
    if not os.path.lexists(top):
        return
    try:
        st = os.lstat(top)
    except OSError:
        return
    if not stat.S_ISDIR(st.st_mode):
        _quiet(os.unlink, top)
        return
    # Depth-first with an explicit stack: a directory is removed after its children.
    stack: list[tuple[bytes, bool]] = [(top, False)]
    while stack:
        d, listed = stack.pop()
        if listed:
            _quiet(os.rmdir, d)
            continue
        _quiet(os.chmod, d, 0o700)  # archives may hold read-only directories
        stack.append((d, True))
        try:
            with os.scandir(d) as it:
                children = list(it)
        except OSError:
            continue
        for child in children:
            try:
                is_dir = child.is_dir(follow_symlinks=False)
            except OSError:
                is_dir = False
            if is_dir:
                stack.append((child.path, False))
            else:
                _quiet(os.unlink, child.path)


def _quiet(fn, *args) -> None:
    try:
        fn(*args)
    except OSError:
        pass


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
        raise DoctorError(message, "free some space, or choose another --dest (or LIBTORCH_HOME)")


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
