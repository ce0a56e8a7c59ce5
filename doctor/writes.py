"""The write side of the door to the outside world (Host's sibling; Host exposes it with its
root mapping, see `Host.write_atomic`, `Host.append`, `Host.create_new`, `Host.mkdirs`).

The functions here take real paths (already mapped) and raise OSError; `os_error` is the one
translation of an OSError into a DoctorError whose message says what failed where and whose
hint names the path and what to do. Every writer of the doctor comes through here: emitted
files (`emit -o`), appends to $GITHUB_ENV / $GITHUB_PATH / $GITHUB_STEP_SUMMARY, the fetch lock
file, the install record and marker, the crash report, the build probe's source.

What each does with something that is not a regular file at its name (a named pipe, a device, a
socket): `atomic_write` with `follow` (a path the user named: `emit -o`, `bench --plot`) writes
through a named pipe or character device as the shell's `>` does (`-o /dev/stdout`, `-o >(…)`,
`-o /dev/null`) and refuses a block device or socket; without `follow` (the lock file, the
download's resume note) it refuses all four; `append` refuses all four; `create_new` never opens
an existing name. Nothing of the four is ever replaced: as root, a rename over /dev/null would
delete the system's device.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from pathlib import Path

from doctor.errors import DoctorError

# O_NOFOLLOW / O_CLOEXEC are absent on Windows: there the flags are simply not set.
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
CLOEXEC = getattr(os, "O_CLOEXEC", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)
# Windows opens a file in text mode without O_BINARY (cpython#52646): os.write turns \n into \r\n.
BINARY = getattr(os, "O_BINARY", 0)

# errno -> why, as a hint naming the path ({where}); the caller's `instead` follows.
_WHY = {
    errno.ENOSPC: "the disk holding {where} (or its inodes) is full: free some space",
    errno.EDQUOT: "the disk quota for {where} is exhausted: free some space",
    errno.EROFS: "{where} is on a read-only file system",
    errno.EACCES: "no permission to write {where}: fix the permissions of its folder",
    errno.EPERM: "no permission to write {where}",
    errno.ENAMETOOLONG: "a file name in {where} is too long for the file system: choose a shorter path",
    errno.ENOTDIR: "a part of {where} is a file, not a directory",
    errno.EEXIST: "something is already at {where}",
    errno.ELOOP: "{where} is a symlink loop, or a symlink where a real file or folder was expected",
    errno.EISDIR: "{where} is a directory",
    errno.ENOENT: "a folder on the way to {where} does not exist",
    errno.EPIPE: "the program reading {where} closed it before everything was written",
    errno.ENXIO: "{where} is a named pipe no program is reading, or a device that is not there",
}
# ... where the doing is a read
_READ_WHY = {
    errno.EACCES: "no permission to read {where}: fix its permissions (`ls -l` shows them), or ask its owner",
    errno.EPERM: "no permission to read {where}",
}


def os_error(exc: OSError, doing: str, where: str | os.PathLike[str] | None = None, instead: str = "") -> DoctorError:
    """`exc` as a DoctorError: `cannot <doing> <where>: <why>`, and a hint naming the path with
    what to do about it (`instead`: the caller's way out when writing, e.g. "choose another
    --dest"; a failed read, `doing` "read …", gets the read hint alone, since another place to
    write does not help it)."""
    where = where if where is not None else exc.filename
    why = exc.strerror or str(exc)
    shown = str(where) if where is not None else "that path"
    reading = doing.startswith("read")
    hint = (reading and _READ_WHY.get(exc.errno or 0)) or _WHY.get(exc.errno or 0, "check {where}")
    hint = hint.format(where=shown)
    if isinstance(exc, SpecialFileError) and not exc.through:
        hint = f"{shown} is {exc.kind}, which the doctor neither replaces nor writes into"
    elif isinstance(exc, SpecialFileError) and exc.errno == errno.ENOSPC:  # not a disk: /dev/full
        hint = f"{shown} is {exc.kind} that takes no more data"
    if instead and not reading:
        hint = f"{hint}; {instead}"
    place = f" {where}" if where is not None else ""
    error_id = "io.not-a-file" if isinstance(exc, SpecialFileError) and not exc.through else f"io.{_errno_name(exc)}"
    return DoctorError(f"cannot {doing}{place}: {why}", hint, error_id=error_id)


class SpecialFileError(OSError):
    """A named pipe, device or socket (`kind`, "a block device") where a regular file is written:
    refused before anything is opened, or, `through`, written through and failed (the errno is
    the write's: EPIPE, ENOSPC from /dev/full)."""

    def __init__(self, err: int, why: str, path: str | os.PathLike[str], kind: str, through: bool = False) -> None:
        super().__init__(err, why, str(path))
        self.kind, self.through = kind, through


def special_kind(mode: int) -> str | None:
    """What a file of `mode` is, when it is none of a regular file, a directory, a symlink."""
    for test, kind in ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return kind
    return None


def _errno_name(exc: OSError) -> str:
    name = errno.errorcode.get(exc.errno or 0, "")
    return name.lower() if name else "error"


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def mkdirs(path: Path) -> None:
    """`path` and its parents (nothing when it exists). A file on the way is ENOTDIR, not the
    EEXIST makedirs gives, so the message says what is wrong."""
    try:
        os.makedirs(path, exist_ok=True)
    except FileExistsError as exc:
        raise NotADirectoryError(errno.ENOTDIR, os.strerror(errno.ENOTDIR), exc.filename or str(path)) from exc


def atomic_write(path: Path, data: bytes, mode: int = 0o644, follow: bool = False) -> None:
    """Replace `path` with `data` in one step: a temp file in the same folder, fsync, os.replace.

    A reader sees the old file or the new one, never half; a crash leaves at most a stray
    `.name.*.tmp`. The final name is replaced, never written through: a symlink there is
    replaced by the file unless `follow` (a path the user named, as `> file` follows it), when
    the file it points to is replaced instead. A directory there is an error (EISDIR).

    Never replaced either: a named pipe, device or socket. With `follow` a named pipe or a
    character device is written through, as `> /dev/stdout` or `> >(cmd)` is (waiting, like the
    shell, for a reader of the pipe); anything else of the four is a SpecialFileError."""
    path = Path(path)
    if follow:
        # stat, not realpath first: /dev/stdout and a `>(…)` name (/dev/fd/63) are links to
        # "pipe:[…]", which names nothing once resolved as text.
        st = _stat(path, os.stat)
        if st is not None and (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)):
            _write_through(path, data, special_kind(st.st_mode) or "")
            return
        path = Path(os.path.realpath(path))
    st = _stat(path, os.lstat)
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
    kind = special_kind(st.st_mode) if st is not None else None
    if kind:
        raise SpecialFileError(errno.EINVAL, f"it is {kind}, not a regular file", path, kind)
    if st is not None and stat.S_ISREG(st.st_mode):  # keeps its permissions (a setenv.sh made 0600 stays private)
        mode = stat.S_IMODE(st.st_mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        try:
            _write_all(fd, data)
            if hasattr(os, "fchmod"):  # mkstemp made it 0600; give it the mode a new file gets
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    _fsync_dir(path.parent)


def _stat(path: Path, how) -> os.stat_result | None:
    try:
        return how(path)
    except OSError:  # missing, or a parent that cannot be searched: the write says which
        return None


def _write_through(path: Path, data: bytes, kind: str) -> None:
    """Write `data` into the named pipe or character device `path`, opened as the shell's `>`
    opens it, following links, but without O_CREAT (one removed meanwhile is not recreated as a
    regular file). A write that fails keeps its errno, with the kind for the hint."""
    fd = os.open(path, os.O_WRONLY | CLOEXEC | BINARY)
    try:
        now = os.fstat(fd).st_mode
        if not (stat.S_ISFIFO(now) or stat.S_ISCHR(now)):  # swapped since the lstat: leave what is there now
            raise OSError(errno.EAGAIN, "it was replaced while being opened", str(path))
        try:
            _write_all(fd, data)
        except OSError as exc:
            raise SpecialFileError(exc.errno or errno.EIO, exc.strerror or str(exc), path, kind, through=True) from None
    finally:
        os.close(fd)


def _fsync_dir(folder: Path) -> None:
    """Make the rename itself durable (POSIX); a folder that cannot be opened is no error."""
    if os.name != "posix":
        return
    try:
        fd = os.open(folder, os.O_RDONLY | CLOEXEC)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def rename_over(src: Path, dst: Path) -> None:
    """Move `src` to `dst` in one step, replacing a file there (never following a link at
    `dst`: the link itself would be replaced; callers refuse links first)."""
    os.replace(src, dst)


def create_new(path: Path, data: bytes, mode: int = 0o644) -> None:
    """Create `path` holding `data`: never over an existing file (FileExistsError), never through
    a symlink at the final name (O_EXCL | O_NOFOLLOW: a link there is 'exists' too)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | NOFOLLOW | CLOEXEC | BINARY, mode)
    try:
        _write_all(fd, data)
    finally:
        os.close(fd)


def append(path: Path, data: bytes) -> None:
    """Append `data` to the regular file `path` (created when missing), opened with O_APPEND as
    the GitHub runner's command files expect. A FIFO or device there is refused (an OSError,
    EINVAL) rather than blocked on."""
    # No BINARY: these are text files, and on a Windows runner text mode ends their lines at \r\n
    # as the runner's own shells do.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | NONBLOCK | CLOEXEC, 0o644)
    try:
        kind = special_kind(os.fstat(fd).st_mode)
        if kind:
            raise SpecialFileError(errno.EINVAL, f"it is {kind}, not a regular file", path, kind)
        _write_all(fd, data)
    finally:
        os.close(fd)


def file_size(path: Path) -> int:
    """Size of the regular file `path`, 0 when absent or not a regular file."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return 0
    return st.st_size if stat.S_ISREG(st.st_mode) else 0


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
