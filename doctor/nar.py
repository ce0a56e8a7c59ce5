"""Nix archive (NAR) hashes in pure Python: the `hash = "sha256-…"` that Nix's fetchzip expects.

Nix hashes a fetched tree by serialising it as a NAR and taking sha256 of the bytes. A NAR
records only names, file types, the owner-executable bit, symlink targets and file contents,
with directory entries sorted by name (bytes). Times, owners and other mode bits do not count.

Two ways in, one serialiser (and no knowledge of zips: `doctor.fetch.extract.nar_hash_zip`
feeds a zip's layout to the same writer):
- `nar_hash(path)`: a tree (or a single file / symlink) on disk, like `nix-hash --type sha256 PATH`;
  walked iteratively, so a tree thousands of levels deep cannot exhaust the stack.
  `nar_digests(path, part_size=N)` adds the sha256 of each N bytes of the same NAR (the parts
  fetch-libtorch records and `--verify` checks on every idle CPU).
- `NarWriter`: fed entries in sorted order while extracting, so installing and hashing are one pass.
Both hand their bytes to a `Digester`, which hashes them on the CPUs it was given.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
import stat
import struct
from collections.abc import Callable, Iterable
from pathlib import Path

MAGIC = b"nix-archive-1"
CHUNK = 1 << 20  # the framing and small files are hashed in blocks of about this size
READ = 128 << 10  # a large file is read this much at a time (see Digester)
UNIT = 4 << 20  # bytes of NAR per piece of work when no part size is asked
_PREADV = getattr(os, "preadv", None)  # each thread reads a shared file at its own offset
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
# O_BINARY: a text-mode read on Windows (the default of os.open there) turns \r\n into \n
# and ends at the first Ctrl-Z.
_OPEN_FLAGS = (os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
               | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0))


def nar_hash(path: str | os.PathLike[str], exclude_top: Iterable[str] = (), threads: int | None = None) -> str:
    """SRI sha256 of the NAR of `path` (a directory, file or symlink), as Nix computes it.

    `exclude_top` names entries directly under a directory `path` to leave out (the
    install record and `.ok` marker that fetch-libtorch adds to a tree). `threads`: how many
    CPUs may hash (default: those idle now, `idle_cpus`); the digest is the same either way.
    """
    return nar_digests(path, exclude_top, threads=threads)[0]


def nar_digests(path: str | os.PathLike[str], exclude_top: Iterable[str] = (), *, whole: bool = True,
                part_size: int | None = None, threads: int | None = None) -> tuple[str | None, list[str] | None]:
    """The NAR hash of `path` (SRI, when `whole`) and, with `part_size`, the sha256 (hex) of
    each `part_size` bytes of the same NAR stream, the last part shorter.

    One sha256 over the whole stream is sequential: one CPU, whatever the machine has. The
    parts are independent, so `--verify` checks a tree against the parts its install recorded
    on every idle CPU (`threads`, default `idle_cpus()`); together they cover every byte of
    the NAR in order, so they match exactly when the NAR hash would (docs/performance.md,
    "verify"). An install computes both from one walk."""
    p = Path(path)
    st = os.lstat(p)
    digester = Digester(whole, part_size, idle_cpus() if threads is None else threads)
    try:
        if stat.S_ISDIR(st.st_mode):
            _dump_tree(os.fsencode(p), digester, {os.fsencode(n) for n in exclude_top})
        else:
            _dump_root(p, st, digester)
    finally:
        digester.close()
    return digester.whole, digester.parts


def nar_entries(path: str | os.PathLike[str], start: int, end: int, exclude_top: Iterable[str] = ()) -> list[str]:
    """The files and symlinks of the directory `path` whose NAR entries overlap the bytes
    [start, end) of its NAR, as paths relative to `path`: what `--verify` names when a part
    differs. Walks the tree once more, hashing nothing."""
    root = os.fsencode(path)
    marks: list[tuple[int, bytes]] = []
    sink = Digester(False, None, 1)
    try:
        _dump_tree(root, sink, {os.fsencode(n) for n in exclude_top}, marks)
    finally:
        sink.close()
    ends = [m[0] for m in marks[1:]] + [sink.position]
    return [os.fsdecode(os.path.relpath(name, root)) for (begin, name), stop in zip(marks, ends)
            if begin < end and stop > start]


MAX_WORKERS = 4  # sha256 threads at most: past that the reads, not the CPUs, set the pace


def idle_cpus() -> int:
    """How many CPUs this process may hash on now, its own included (1 to MAX_WORKERS): those
    of its affinity that the tasks runnable at this moment leave idle (Linux: /proc/loadavg's
    fourth field); elsewhere, those the 1-minute load average leaves idle by half a CPU. On a
    busy machine the hand-offs between threads cost more than they save (docs/performance.md,
    "verify"). The moment, not the 1-minute average: at the end of a fetch the average still
    counts the download and the unpack this process just finished, and said "busy" on an idle
    machine (issue 19)."""
    host = os.cpu_count() or 1
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # macOS: no affinity call
        cpus = host
    running = _runnable_now()
    if running is not None:
        return spare(cpus, host, running)
    try:
        load = os.getloadavg()[0]
    except (AttributeError, OSError):  # Windows
        load = 0.0
    return max(1, min(1 + max(0, math.ceil(cpus - 0.5 - load)), cpus, MAX_WORKERS))


def spare(cpus: int, host: int, running: int) -> int:
    """CPUs to hash on, this thread's included, for a process allowed `cpus` of the `host`'s
    CPUs while `running` tasks (this one among them) are runnable on the whole host. The tasks
    are counted host-wide (a container's /proc/loadavg is the host's), so a process held to a
    few CPUs of a large host takes its share of them: 30 runnable of 64 leave ~half of its 8."""
    others = (running - 1) * cpus / max(host, cpus)
    return max(1, min(int(cpus - others), MAX_WORKERS))


def _runnable_now(path: str = "/proc/loadavg") -> int | None:
    """Tasks runnable at this moment ("1/82" in /proc/loadavg: 1), or None where unknown."""
    try:
        with open(path, "rb") as f:
            return int(f.read(256).split()[3].split(b"/")[0])
    except (OSError, IndexError, ValueError):
        return None


class _File:
    """A large file's descriptor, shared by the units its contents were cut into; closed when
    the last of them is hashed."""

    __slots__ = ("fd", "path", "units")

    def __init__(self, fd: int, path: bytes, units: int) -> None:
        self.fd, self.path, self.units = fd, path, units


class _Unit:
    """`size` consecutive bytes of the NAR (the last unit shorter): byte strings (framing and
    small files) and (file, offset, length) ranges that the hashing thread reads itself."""

    __slots__ = ("index", "pieces", "left")

    def __init__(self, index: int, pieces: list, left: int) -> None:
        self.index, self.pieces, self.left = index, pieces, left


class Digester:
    """Where NAR bytes go (the walker's, or NarWriter's while unzipping): cut into units of the
    part size (or UNIT), each hashed into the whole stream's sha256 (in order) and/or into a
    digest of its own. `close()`, then read `whole` (SRI) and `parts` (hex).

    With one worker everything runs in the walker's thread as it cuts. With more, a thread
    keeps the whole hash (units in order) and the others hash parts, in any order; the walker
    waits when `_slots` units are in flight (at most that many part sizes of small files
    held in memory). A large file's contents are read by the thread that hashes them, READ
    bytes at a time into a buffer that stays in that CPU's cache: the kernel's copy into a
    buffer that fits there costs less than half of the copy into a larger one (a fresh process
    re-hashing the 522 MB tree: 0.15 against 0.35–0.45 s of system time)."""

    def __init__(self, whole: bool, part_size: int | None, workers: int) -> None:
        if part_size is not None and part_size < 1:
            raise ValueError(f"part size {part_size} is not a byte count")
        self._size = part_size or UNIT
        self._room = self._size
        self._pieces: list = []
        self._count = 0
        self.position = 0  # NAR bytes received
        self._sha = hashlib.sha256() if whole else None
        self._digests: dict[int, bytes] | None = {} if part_size else None
        self._consumers = int(whole) + int(part_size is not None)
        self._error: BaseException | None = None
        self._buffer = bytearray(READ)
        self._queues: list = []
        self._threads: list = []
        self.whole: str | None = None
        self.parts: list[str] | None = None
        if workers < 2 or not self._consumers or _PREADV is None:  # Windows: no pread, one thread
            return
        import queue
        import threading

        self._lock = threading.Lock()
        part_threads = 0 if self._digests is None else max(1, workers - (self._sha is not None))
        self._slots = threading.BoundedSemaphore(2 * (part_threads + 1) + 2)
        try:
            if self._sha is not None:
                self._whole_queue: queue.SimpleQueue = queue.SimpleQueue()
                self._start(self._whole_queue, self._hash_whole)
            if part_threads:
                self._part_queue: queue.SimpleQueue = queue.SimpleQueue()
                for _ in range(part_threads):
                    self._start(self._part_queue, self._hash_part)
        except RuntimeError:  # "can't start new thread" (ulimit -u, a container's pids limit): hash here
            for q in self._queues:
                q.put(None)
            for thread in self._threads:
                thread.join()
            self._queues, self._threads = [], []

    def _start(self, source, work: Callable) -> None:
        import threading

        thread = threading.Thread(target=self._run, args=(source, work), name="nar-sha256", daemon=True)
        thread.start()
        self._queues.append(source)
        self._threads.append(thread)

    # -- the walker's side --

    def block(self, data: bytes | bytearray) -> None:
        """Bytes of the NAR (the caller no longer touches them)."""
        if self._error is not None:  # stop walking: a thread already failed
            raise self._error
        view = memoryview(data)
        self.position += len(view)
        while len(view) >= self._room:
            self._pieces.append(view[:self._room])
            view = view[self._room:]
            self._cut()
        if view:
            self._pieces.append(view)
            self._room -= len(view)

    def contents(self, fd: int, size: int, path: bytes) -> None:
        """`size` bytes of the open file `fd`, read when hashed; the hasher closes `fd`."""
        self.position += size
        if not size:
            os.close(fd)
            return
        first = min(size, self._room)
        units = 1 + -(-(size - first) // self._size)
        shared = _File(fd, path, units)
        offset = 0
        while offset < size:
            length = min(size - offset, self._room)
            self._pieces.append((shared, offset, length))
            offset += length
            self._room -= length
            if not self._room:
                self._cut()

    def _cut(self) -> None:
        unit = _Unit(self._count, self._pieces, self._consumers)
        self._count += 1
        self._pieces = []
        self._room = self._size
        if not self._threads:
            if self._sha is not None:
                self._guard(self._hash_whole, unit, self._buffer)
            if self._digests is not None:
                self._guard(self._hash_part, unit, self._buffer)
            if not self._consumers:  # only walked (nar_entries): nothing will read the files
                self._release(unit)
            return
        self._slots.acquire()
        if self._sha is not None:
            self._whole_queue.put(unit)
        if self._digests is not None:
            self._part_queue.put(unit)

    def close(self) -> None:
        """Hash what is left, wait for the threads; raise what failed, else set `whole`/`parts`."""
        if self._pieces or not self._count:
            self._cut()
        for q in self._queues:
            q.put(None)
        for thread in self._threads:
            thread.join()
        if self._error is not None:
            raise self._error
        if self._sha is not None:
            self.whole = sri(self._sha.digest())
        if self._digests is not None:
            self.parts = [self._digests[i].hex() for i in range(self._count)]

    # -- the hashing side --

    def _run(self, source, work: Callable) -> None:
        buffer = bytearray(READ)
        while (unit := source.get()) is not None:
            self._guard(work, unit, buffer)

    def _guard(self, work: Callable, unit: _Unit, buffer: bytearray) -> None:
        """Run `work` on `unit` unless something failed already; keep the first failure (the
        walker must never wait forever), and close the unit's files when it was the last."""
        try:
            if self._error is None:
                work(unit, buffer)
        except BaseException as exc:
            self._error = self._error or exc
        finally:
            self._done(unit)

    def _hash_whole(self, unit: _Unit, buffer: bytearray) -> None:
        _feed(unit.pieces, self._sha.update, buffer)

    def _hash_part(self, unit: _Unit, buffer: bytearray) -> None:
        h = hashlib.sha256()
        _feed(unit.pieces, h.update, buffer)
        self._digests[unit.index] = h.digest()

    def _done(self, unit: _Unit) -> None:
        if self._threads:
            with self._lock:
                unit.left -= 1
                last = not unit.left
                if last:
                    self._release(unit)
            if last:
                self._slots.release()
        else:
            unit.left -= 1
            if not unit.left:
                self._release(unit)

    @staticmethod
    def _release(unit: _Unit) -> None:
        for piece in unit.pieces:
            if type(piece) is tuple:
                shared = piece[0]
                shared.units -= 1
                if not shared.units:
                    os.close(shared.fd)


def _feed(pieces: list, update: Callable[[bytes], object], buffer: bytearray) -> None:
    for piece in pieces:
        if type(piece) is tuple:
            _read_range(*piece, update, buffer)
        else:
            update(piece)


def _read_range(shared: _File, offset: int, length: int, update: Callable[[bytes], object],
                buffer: bytearray) -> None:
    """`length` bytes of a file from `offset` into `update`, READ at a time, as Nix reads the
    size stat gave; a file that shrinks meanwhile is an error."""
    view = memoryview(buffer)
    while length:
        want = view[:length] if length < len(buffer) else view
        if _PREADV is not None:
            n = _PREADV(shared.fd, [want], offset)
        else:
            os.lseek(shared.fd, offset, os.SEEK_SET)
            data = os.read(shared.fd, len(want))
            n = len(data)
            want[:n] = data
        if not n:
            raise ValueError(f"{os.fsdecode(shared.path)}: the file shrank while it was read")
        update(view[:n])
        offset += n
        length -= n


def _dump_tree(root: bytes, sink: Digester, skip: set[bytes], marks: list | None = None) -> None:
    """The NAR of the directory `root` into `sink`: depth-first, siblings sorted by name bytes
    (exactly NAR order). An explicit stack of sorted sibling lists, not recursion (a tree
    thousands of levels deep cannot exhaust the stack).

    Speed (`fetch-libtorch --verify` against `nix-hash`, docs/performance.md): scandir's file
    types spare an lstat per directory and symlink; a file is opened once and sized with
    fstat; a small one is read with one os.read and joins the framing in one buffer, hashed a
    megabyte at a time; a large one is read by the sink, in the thread that hashes it.
    `marks` (when given) gets (NAR offset, path) at each file and symlink entry."""
    out = bytearray(_str(MAGIC) + _OPEN + _TYPE + _DIRECTORY)
    stack = [[e for e in _scan(root) if e.name not in skip]]
    while stack:
        pending = stack[-1]
        if not pending:
            stack.pop()
            out += _END if stack else _CLOSE  # a directory's node and entry; the root's node
            continue
        entry = pending.pop()
        if marks is not None and not entry.is_dir(follow_symlinks=False):
            marks.append((sink.position + len(out), entry.path))
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


def _dump_file(path: bytes, out: bytearray, sink: Digester) -> bytearray:
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


def _dump_root(p: Path, st: os.stat_result, sink: Digester) -> None:
    """The NAR of a single file or symlink."""
    if stat.S_ISLNK(st.st_mode):
        sink.block(_str(MAGIC) + _OPEN + _TYPE + _SYMLINK + _TARGET + _str(os.fsencode(os.readlink(p))) + _CLOSE)
    elif stat.S_ISREG(st.st_mode):
        sink.block(_str(MAGIC) + _OPEN + _TYPE + _REGULAR + (_EXECUTABLE + _EMPTY if st.st_mode & stat.S_IXUSR else b"")
                   + _CONTENTS + struct.pack("<Q", st.st_size))
        # exactly the size announced, as in a tree: a file that shrinks or grows meanwhile is not hashed wrong
        sink.contents(os.open(p, _OPEN_FLAGS), st.st_size, os.fsencode(p))
        sink.block(_PAD[st.st_size % 8] + _CLOSE)
    else:
        raise ValueError(f"{p}: not a file, directory or symlink")
