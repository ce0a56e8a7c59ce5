"""The per-destination install lock: one fetch at a time into one folder.

`flock` on `<parent>/.<name>.lock`, the lock filelock's UnixFileLock takes too (so fetches
by doctors of either kind wait for each other), taken directly where the platform has
`fcntl`; filelock where it has not. Not filelock everywhere: importing filelock 4 costs
~35 ms (it pulls logging, decimal, secrets), a quarter of the start of a
`fetch-libtorch --verify` that must stay within 1.1 x `nix-hash` (docs/performance.md).
"""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path


# flock refused by the file system itself: NFS without a lock daemon ("No locks available"),
# some FUSE and SMB mounts. HPC homes are often such mounts; refusing to install there would
# leave those users without a fetch at all, so the install goes on unguarded (pipeline says so).
NO_LOCKS = {errno.ENOLCK, errno.EOPNOTSUPP, getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)}


class Guard:
    """A held lock; `release()` ends it (closing the file descriptor would too). `Guard(held=False)`
    stands for a lock the file system could not give (see `take`)."""

    def __init__(self, fd: int | None = None, other=None, held: bool = True) -> None:
        self._fd = fd
        self._other = other
        self.held = held

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the only descriptor drops the flock
            self._fd = None
        if self._other is not None:
            self._other.release()
            self._other = None


def take(path: Path, on_wait: Callable[[], None]) -> Guard:
    """Hold the lock at `path` (created if missing, never through a symlink), calling
    `on_wait()` once first when someone else holds it. OSError as the system said it."""
    try:
        import fcntl
    except ImportError:  # Windows
        return _take_filelock(path, on_wait)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
                 | getattr(os, "O_BINARY", 0), 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            on_wait()
            fcntl.flock(fd, fcntl.LOCK_EX)  # Ctrl-C interrupts the wait (KeyboardInterrupt)
    except OSError as exc:
        os.close(fd)
        if exc.errno in NO_LOCKS:
            return Guard(held=False)
        raise
    except BaseException:
        os.close(fd)
        raise
    return Guard(fd)


def _take_filelock(path: Path, on_wait: Callable[[], None]) -> Guard:
    from filelock import FileLock, Timeout

    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0.05)
    except Timeout:
        on_wait()
        lock.acquire()
    return Guard(other=lock)
