"""Nix archive (NAR) hashes in pure Python: the `hash = "sha256-…"` that Nix's fetchzip expects.

Nix hashes a fetched tree by serialising it as a NAR and taking sha256 of the bytes. A NAR
records only names, file types, the owner-executable bit, symlink targets and file contents,
with directory entries sorted by name (bytes). Times, owners and other mode bits do not count.

Two ways in, one serialiser (and no knowledge of zips: `doctor.fetch.extract.nar_hash_zip`
feeds a zip's layout to the same writer):
- `nar_hash(path)`: a tree (or a single file / symlink) on disk, like `nix-hash --type sha256 PATH`;
  walked iteratively, so a tree thousands of levels deep cannot exhaust the stack.
- `NarWriter`: fed entries in sorted order while extracting, so installing and hashing are one pass.
"""

from __future__ import annotations

import base64
import hashlib
import os
import stat
import struct
from collections.abc import Callable, Iterable
from pathlib import Path

MAGIC = b"nix-archive-1"
CHUNK = 1 << 20  # the framing and small files are hashed in blocks of about this size
READ = 128 << 10  # a large file is read this much at a time (see _Sink)
# Nix's own base32 alphabet (no e, o, u, t) and its odd bit order; used by `nix-hash --base32`.
_NIX32 = "0123456789abcdfghijklmnpqrsvwxyz"

Path_ = tuple[bytes, ...]  # a path inside the archive, as components


def sri(digest: bytes) -> str:
    return "sha256-" + base64.b64encode(digest).decode()


def sri_to_hex(value: str) -> str:
    algo, _, b64 = value.partition("-")
    if algo != "sha256":
        raise ValueError(f"not a sha256 SRI hash: {value!r}")
    return base64.b64decode(b64).hex()


def nix_base32(digest: bytes) -> str:
    """The digest as `nix-hash --base32` prints it."""
    n = (len(digest) * 8 - 1) // 5 + 1
    out = []
    for i in range(n - 1, -1, -1):
        b = i * 5
        j, k = divmod(b, 8)
        c = digest[j] >> k
        if j + 1 < len(digest):
            c |= digest[j + 1] << (8 - k)
        out.append(_NIX32[c & 0x1F])
    return "".join(out)


def _str(data: bytes) -> bytes:
    pad = (8 - len(data) % 8) % 8
    return struct.pack("<Q", len(data)) + data + b"\0" * pad


_OPEN, _CLOSE = _str(b"("), _str(b")")
_TYPE, _ENTRY, _NAME, _NODE = _str(b"type"), _str(b"entry"), _str(b"name"), _str(b"node")
_DIRECTORY, _REGULAR, _SYMLINK = _str(b"directory"), _str(b"regular"), _str(b"symlink")
_EXECUTABLE, _EMPTY, _CONTENTS, _TARGET = _str(b"executable"), _str(b""), _str(b"contents"), _str(b"target")


class NarWriter:
    """Streams a NAR of a directory tree into `update` (e.g. `hashlib.sha256().update`).

    Call `file`/`symlink`/`directory` in NAR order (paths as tuples of name bytes, sorted);
    parent directories that were not named explicitly are opened on the way, as a zip implies them.
    """

    def __init__(self, update: Callable[[bytes], object]) -> None:
        self._update = update
        self._open: list[bytes] = []  # directories currently open below the root
        self._done = False
        update(_str(MAGIC) + _OPEN + _TYPE + _DIRECTORY)

    def _enter(self, path: Path_) -> None:
        """Close and open directories so that `path`'s parent is the innermost open one."""
        if not path:
            raise ValueError("the root is a directory and cannot be named again")
        parent = list(path[:-1])
        common = 0
        while common < min(len(self._open), len(parent)) and self._open[common] == parent[common]:
            common += 1
        while len(self._open) > common:
            self._open.pop()
            self._update(_CLOSE + _CLOSE)
        for name in parent[common:]:
            self._update(_ENTRY + _OPEN + _NAME + _str(name) + _NODE + _OPEN + _TYPE + _DIRECTORY)
            self._open.append(name)
        self._update(_ENTRY + _OPEN + _NAME + _str(path[-1]) + _NODE + _OPEN)

    def directory(self, path: Path_) -> None:
        self._enter(path)
        self._update(_TYPE + _DIRECTORY)
        self._open.append(path[-1])

    def symlink(self, path: Path_, target: bytes) -> None:
        self._enter(path)
        self._update(_TYPE + _SYMLINK + _TARGET + _str(target) + _CLOSE + _CLOSE)

    def file(self, path: Path_, size: int, executable: bool) -> Callable[[bytes], None]:
        """Open a regular file of `size` bytes; feed its contents to the returned function,
        then call `end_file()`."""
        self._enter(path)
        self._update(_TYPE + _REGULAR + (_EXECUTABLE + _EMPTY if executable else b"") + _CONTENTS
                     + struct.pack("<Q", size))
        self._pending = size
        self._fed = 0
        return self._feed

    def _feed(self, data: bytes) -> None:
        self._fed += len(data)
        self._update(data)

    def end_file(self) -> None:
        if self._fed != self._pending:
            raise ValueError(f"file contents were {self._fed} bytes, announced {self._pending}")
        self._update(b"\0" * ((8 - self._pending % 8) % 8) + _CLOSE + _CLOSE)

    def finish(self) -> None:
        if self._done:
            return
        self._update((_CLOSE + _CLOSE) * len(self._open) + _CLOSE)
        self._open.clear()
        self._done = True


# -- trees on disk --

# The NAR framing of a directory entry as whole byte strings, appended to one buffer: the
# 9,431 headers of a libtorch tree cost ~40 sha256 update calls, not ~10 each.
_ENTRY_NAME = _ENTRY + _OPEN + _NAME
_DIR_NODE = _NODE + _OPEN + _TYPE + _DIRECTORY
_LINK_NODE = _NODE + _OPEN + _TYPE + _SYMLINK + _TARGET
_FILE_NODE = _NODE + _OPEN + _TYPE + _REGULAR + _CONTENTS
_EXEC_NODE = _NODE + _OPEN + _TYPE + _REGULAR + _EXECUTABLE + _EMPTY + _CONTENTS
_END = _CLOSE + _CLOSE  # closes a node and its entry
_PAD = [b"\0" * ((8 - i) % 8) for i in range(8)]
_SIZE = struct.Struct("<Q").pack
SMALL = 64 << 10  # files up to this size are read whole, and hashed together with the framing
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_CLOEXEC", 0))


def nar_hash(path: str | os.PathLike[str], exclude_top: Iterable[str] = (), overlap: bool | None = None) -> str:
    """SRI sha256 of the NAR of `path` (a directory, file or symlink), as Nix computes it.

    `exclude_top` names entries directly under a directory `path` to leave out (the
    install record and `.ok` marker that fetch-libtorch adds to a tree). `overlap`: hash in a
    second thread while this one walks and reads (default: when a second CPU is idle); the
    digest is the same either way.
    """
    h = hashlib.sha256()
    p = Path(path)
    st = os.lstat(p)
    if not stat.S_ISDIR(st.st_mode):
        h.update(_str(MAGIC))
        _dump_node(p, st, h.update)
        return sri(h.digest())
    skip = {os.fsencode(n) for n in exclude_top}
    sink = _Sink(h.update, _spare_cpu() if overlap is None else overlap)
    try:
        _dump_tree(os.fsencode(p), sink, skip)
    finally:
        sink.close()
    return sri(h.digest())


def _spare_cpu() -> bool:
    """Whether a second thread would run beside this one: the process may use two CPUs and
    fewer tasks than CPUs are runnable at this moment, this thread included (Linux:
    /proc/loadavg's fourth field); elsewhere, the 1-minute load average leaves one idle. On a
    busy machine the hand-offs between the threads cost more than the overlap saves
    (docs/performance.md, "verify"). The moment, not the 1-minute average: at the end of a
    fetch the average still counts the download and the unpack this process just finished,
    and said "busy" on an idle machine (issue 19). The digest is the same either way."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS: no affinity call
        cpus = os.cpu_count() or 1
    if cpus < 2:
        return False
    running = _runnable_now()
    if running is not None:
        return running < cpus
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows
        load = 0.0
    return load < cpus - 0.5


def _runnable_now(path: str = "/proc/loadavg") -> int | None:
    """Tasks runnable at this moment ("1/82" in /proc/loadavg: 1), or None where unknown."""
    try:
        with open(path, "rb") as f:
            return int(f.read(256).split()[3].split(b"/")[0])
    except (OSError, IndexError, ValueError):
        return None


class _Sink:
    """Where the NAR bytes go, in order: straight into `update`, or (overlap) through a queue
    to a thread that runs `update` while the caller walks and reads on.

    A large file's contents are read by the thread that hashes them (`contents`), into one
    buffer of READ bytes that stays in that CPU's cache: the kernel's copy into a buffer that
    fits there costs less than half of the copy into a larger one (a fresh process re-hashing
    the 522 MB tree: 0.15 against 0.35–0.45 s of system time), and handing the bytes to
    another CPU would move them through memory once more. The framing and the small files
    are handed over as blocks the caller no longer touches (`block`). The walker waits when
    the hasher is `_BLOCKS` items behind (each holding at most a block or an open file)."""

    _BLOCKS = 8

    def __init__(self, update: Callable[[bytes], object], overlap: bool) -> None:
        self._update = update
        self._buffer = bytearray(READ)
        self._thread = None
        if not overlap:
            return
        import queue
        import threading

        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._slots = threading.BoundedSemaphore(self._BLOCKS)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="nar-sha256", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                if type(item) is tuple:  # (fd, size, path): a large file's contents
                    if self._error is None:
                        _hash_file(*item, self._update, self._buffer)
                    else:
                        os.close(item[0])
                elif self._error is None:
                    self._update(item)
            except BaseException as exc:  # keep draining: the walker must never wait forever
                self._error = exc
            self._slots.release()

    def block(self, data: bytes | bytearray) -> None:
        if self._thread is None:
            self._update(data)
        else:
            self._slots.acquire()
            self._queue.put(data)

    def contents(self, fd: int, size: int, path: bytes) -> None:
        """Hash `size` bytes of the open file `fd`, then close it (the sink owns it now)."""
        if self._thread is None:
            _hash_file(fd, size, path, self._update, self._buffer)
        else:
            self._slots.acquire()
            self._queue.put((fd, size, path))

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join()
            if self._error is not None:
                raise self._error


def _hash_file(fd: int, size: int, path: bytes, update: Callable[[bytes], object], buffer: bytearray) -> None:
    """Exactly `size` bytes of `fd` into `update`, READ at a time, as Nix reads what stat gave;
    a file that shrinks meanwhile is an error. Closes `fd`."""
    view = memoryview(buffer)
    left = size
    try:
        while left:
            n = os.readv(fd, [view[:left]] if left < len(buffer) else [buffer])
            if not n:
                raise ValueError(f"{os.fsdecode(path)}: the file shrank while it was read")
            update(view[:n])
            left -= n
    finally:
        os.close(fd)


def _dump_tree(root: bytes, sink: _Sink, skip: set[bytes]) -> None:
    """The NAR of the directory `root` into `sink`: depth-first, siblings sorted by name bytes
    (exactly NAR order). An explicit stack of sorted sibling lists, not recursion (a tree
    thousands of levels deep cannot exhaust the stack).

    Speed (`fetch-libtorch --verify` against `nix-hash`, docs/performance.md): scandir's file
    types spare an lstat per directory and symlink; a file is opened once and sized with
    fstat; a small one is read with one os.read and joins the framing in one buffer, hashed a
    megabyte at a time; a large one is read by the sink, in the thread that hashes it."""
    out = bytearray(_str(MAGIC) + _OPEN + _TYPE + _DIRECTORY)
    stack = [[e for e in _scan(root) if e.name not in skip]]
    while stack:
        pending = stack[-1]
        if not pending:
            stack.pop()
            out += _END if stack else _CLOSE  # a directory's node and entry; the root's node
            continue
        entry = pending.pop()
        out += _ENTRY_NAME
        out += _str(entry.name)
        if entry.is_dir(follow_symlinks=False):
            out += _DIR_NODE
            stack.append(_scan(entry.path))
        elif entry.is_symlink():
            out += _LINK_NODE
            out += _str(os.readlink(entry.path))
            out += _END
        elif entry.is_file(follow_symlinks=False):
            out = _dump_file(entry.path, out, sink)
        else:
            raise ValueError(f"{os.fsdecode(entry.path)}: Nix archives hold only files, directories and symlinks")
        if len(out) >= CHUNK:
            sink.block(out)
            out = bytearray()
    sink.block(out)


def _scan(path: bytes) -> list[os.DirEntry]:
    """The entries of a directory, sorted by name in reverse (popped from the end: in order)."""
    with os.scandir(path) as it:
        entries = list(it)
    entries.sort(key=_name, reverse=True)
    return entries


def _name(entry: os.DirEntry) -> bytes:
    return entry.name


def _dump_file(path: bytes, out: bytearray, sink: _Sink) -> bytearray:
    """A regular file's node: appended to `out` when small; else `out` is handed to `sink`
    first and the open file follows (the sink reads it). Exactly the size fstat gave is read,
    as Nix does; a file that shrinks meanwhile is an error. Returns the buffer to go on
    appending to."""
    fd = os.open(path, _OPEN_FLAGS)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):  # replaced by something else since it was listed
            raise ValueError(f"{os.fsdecode(path)}: Nix archives hold only files, directories and symlinks")
        size = st.st_size
        out += _EXEC_NODE if st.st_mode & stat.S_IXUSR else _FILE_NODE
        out += _SIZE(size)
        if size <= SMALL:
            data = os.read(fd, size) if size else b""
            while len(data) < size:  # a short read: rare on a regular file, but allowed
                more = os.read(fd, size - len(data))
                if not more:
                    raise ValueError(f"{os.fsdecode(path)}: the file shrank while it was read")
                data += more
            out += data
        else:
            sink.block(out)
            out = bytearray()
            owner, fd = fd, -1  # the sink closes it from here on, even when it fails
            sink.contents(owner, size, path)
        out += _PAD[size % 8]
        out += _END
        return out
    finally:
        if fd >= 0:
            os.close(fd)


def _dump_node(p: Path, st: os.stat_result, update: Callable[[bytes], object]) -> None:
    if stat.S_ISLNK(st.st_mode):
        update(_OPEN + _TYPE + _SYMLINK + _TARGET + _str(os.fsencode(os.readlink(p))) + _CLOSE)
    elif stat.S_ISREG(st.st_mode):
        update(_OPEN + _TYPE + _REGULAR + (_EXECUTABLE + _EMPTY if st.st_mode & stat.S_IXUSR else b"")
               + _CONTENTS + struct.pack("<Q", st.st_size))
        # exactly the size announced, as in a tree: a file that shrinks or grows meanwhile is not hashed wrong
        _hash_file(os.open(p, _OPEN_FLAGS), st.st_size, os.fsencode(p), update, bytearray(READ))
        update(_PAD[st.st_size % 8] + _CLOSE)
    else:
        raise ValueError(f"{p}: not a file, directory or symlink")
