"""Unpack a zip the way Info-ZIP `unzip` does, safely, and hash the tree (NAR) in the same pass.

Why not `zipfile.extractall`: it drops the executable bit and turns symlinks into regular
files, which breaks libtorch (its `.so` symlinks, its tools) and changes the Nix hash. Here
every entry's mode and type follow Info-ZIP's `mapattr` (unix/unix.c), so the tree equals
what `unzip` makes — the tree Nix's fetchzip hashes — and the tests compare the two.

Refused before anything is written: absolute paths, `..`, entries inside a file or symlink,
duplicates, symlinks that resolve (following the archive's own symlinks) outside the tree,
name components over 255 bytes, encrypted entries, compression methods this Python cannot
inflate (zstd, ...), and entries named like files the caller adds itself (`reserved`: the
install record and marker).

`nar_hash_zip` hashes a zip's tree without unpacking it (this module owns the layout rules,
so the NAR serialiser in doctor/nar.py stays free of zip knowledge: no import circle).
"""

from __future__ import annotations

import hashlib
import os
import stat
import struct
import zipfile
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

from doctor.errors import DoctorError
from doctor.fetch.record import nar_parts, part_size_for
from doctor.nar import Digester, NarWriter, idle_cpus
from doctor.record import record

CHUNK = 1 << 20

# Info-ZIP host numbers (zip "version made by", high byte)
FS_FAT, AMIGA, VMS, UNIX, ATARI, QDOS, ACORN, BEOS, TANDEM, THEOS, ATHEOS = 0, 1, 2, 3, 5, 12, 13, 16, 17, 18, 30
_UNIX_LIKE = {VMS, UNIX, ATARI, QDOS, ACORN, BEOS, TANDEM, THEOS, ATHEOS}
_SYMLINK_HOSTS = {UNIX, ATARI, ATHEOS, BEOS, VMS}
_EF_ASIUNIX, _EF_PKVMS = 0x756E, 0x000C
NAME_MAX = 255  # bytes in one path component
# What zipfile can inflate here; anything else (zstd = 93, ...) is refused before writing.
_METHODS = {zipfile.ZIP_STORED: "stored", zipfile.ZIP_DEFLATED: "deflate", zipfile.ZIP_BZIP2: "bzip2",
            zipfile.ZIP_LZMA: "lzma"}
_METHOD_NAMES = {9: "deflate64", 93: "zstd", 95: "xz", 98: "ppmd", 99: "AES-encrypted"}


class BadArchive(DoctorError):
    """Not a usable zip: truncated, damaged, or unsafe. Its bytes are never resumed from."""

    default_id = "fetch.bad-archive"


class UnsafeArchive(BadArchive):
    """An entry would land outside the tree (or is otherwise not something to unpack)."""

    default_id = "fetch.unsafe-archive"

    def __init__(self, name: str, why: str) -> None:
        super().__init__(f"refusing to unpack this archive: entry {name!r} {why}",
                         "the archive is damaged or malicious; nothing was written")


def _text_answer(path) -> str | None:
    """What the file is when it starts as a web page or an XML document: `wget` of a URL behind a
    proxy keeps the login page under the zip's name (an S3 mirror's denial is XML), and unzip then
    speaks only of a missing central directory."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(512).lstrip(b"\xef\xbb\xbf \t\r\n").lower()
    except OSError:
        return None
    if head.startswith((b"<!doctype html", b"<html", b"<head")) or (head.startswith(b"<") and b"<html" in head):
        return "a web page (HTML)"
    if head.startswith(b"<?xml"):
        return "an XML document (a server's error answer)"
    return None


@record
class Entry:
    path: tuple[bytes, ...]  # inside the tree, after stripping the top folder
    kind: str  # "file" | "dir" | "symlink"
    perms: int  # permission bits to set, as unzip would
    info: zipfile.ZipInfo | None = None
    data: bytes | None = None  # contents given directly (symlink target, synthesized files)

    @property
    def executable(self) -> bool:
        return bool(self.perms & stat.S_IXUSR)

    @property
    def size(self) -> int:
        return len(self.data) if self.data is not None else (self.info.file_size if self.info else 0)


@record
class Layout:
    entries: list[Entry]  # in NAR order (paths sorted as tuples of bytes)
    root_perms: int | None  # the stripped top folder's own mode, when the zip names it
    stripped: str | None  # the top folder that was stripped ("libtorch"), if any
    total_size: int = 0


@record
class Extracted:
    nar_hash: str  # SRI sha256 of the tree as unpacked
    files: int
    size: int  # bytes of file contents written
    stripped: str | None
    nar_parts: dict | None = None  # the record's nar_parts: {"size": ..., "sha256": [...]}


def current_umask() -> int:
    mask = os.umask(0o22)
    os.umask(mask)
    return mask


def unzip_mode(info: zipfile.ZipInfo, umask: int) -> tuple[str, int]:
    """(kind, permission bits) of an entry as Info-ZIP unzip 6.0 extracts it on Unix."""
    attr = info.external_attr
    host = info.create_system
    is_dir = info.filename.endswith("/")
    if host == AMIGA:
        rwe = (attr >> 17) & 7
        return ("dir" if is_dir else "file"), (rwe << 6 | rwe << 3 | rwe) & ~umask
    mode = 0
    use_dos = True
    if host in _UNIX_LIKE:
        mode = attr >> 16
        use_dos = False
        if mode == 0 and info.extra:
            use_dos, mode = _mode_from_extra(info.extra)
        if not use_dos:
            link = stat.S_ISLNK(mode) and host in _SYMLINK_HOSTS
            return _kind(is_dir, link), _filter(mode)
        mode = attr >> 16
    elif host == FS_FAT:
        mode = attr >> 16
    dos = attr & 0xFFFF
    if not dos & 0x10 and is_dir:
        dos |= 0x10
    t = (0 if dos & 1 else 1) << 1 | (dos & 0x10) >> 4
    if (mode & 0o700) == (0o400 | t << 6):
        # owner bits agree with the DOS flags: unzip trusts the stored Unix mode
        link = stat.S_ISLNK(mode) and host == FS_FAT
        return _kind(is_dir, link), _filter(mode)
    return _kind(is_dir, False), (0o444 | t << 6 | t << 3 | t) & ~umask


def _mode_from_extra(extra: bytes) -> tuple[bool, int]:
    """unzip's work-around for zips that keep Unix modes in an extra field: (use DOS flags, mode)."""
    pos = 0
    while pos + 4 <= len(extra):
        ident, size = struct.unpack_from("<HH", extra, pos)
        if size > len(extra) - pos - 4:
            break
        if ident == _EF_ASIUNIX and size >= 6:
            return False, struct.unpack_from("<H", extra, pos + 8)[0]
        if ident in (_EF_ASIUNIX, _EF_PKVMS):
            return True, 0
        pos += 4 + size
    return False, 0


def raw_name(info: zipfile.ZipInfo) -> bytes:
    """The entry's name as bytes, as unzip names the file: UTF-8 when the archive says so
    (flag bit 11, or Info-ZIP's Unicode Path extra field 0x7075 whose CRC matches the stored
    name); otherwise the stored bytes unchanged (Python decoded them as cp437)."""
    if info.flag_bits & 0x800:
        return info.filename.encode("utf-8")
    stored = info.filename.encode("cp437")
    pos, extra = 0, info.extra or b""
    while pos + 4 <= len(extra):
        ident, size = struct.unpack_from("<HH", extra, pos)
        body = extra[pos + 4:pos + 4 + size]
        if ident == 0x7075 and size >= 5 and body[0] == 1:
            if struct.unpack_from("<I", body, 1)[0] == zlib.crc32(stored):
                return body[5:]
        pos += 4 + size
    return stored


def _kind(is_dir: bool, link: bool) -> str:
    return "dir" if is_dir else ("symlink" if link else "file")


def _filter(mode: int) -> int:
    # unzip drops setuid/setgid/sticky unless -K
    return mode & 0o777


# -- planning: every check happens here, before a byte is written --


NameMap = Callable[[str], "str | None"]


def plan_entries(
    infos: Iterable[zipfile.ZipInfo],
    *,
    strip_root: bool = True,
    rename: NameMap | None = None,
    extra: Iterable[tuple[str, bytes, int]] = (),
    read: Callable[[zipfile.ZipInfo], bytes] | None = None,
    umask: int | None = None,
    reserved: Iterable[str] = (),
) -> Layout:
    """Check and order the entries. `rename` maps an entry name to its place in the tree (None
    drops it; used to lay out a wheel); `extra` adds (name, contents, perms) files; `read`
    returns a symlink entry's target (its stored contents); `reserved` names top-level
    entries the caller writes itself, refused in the archive."""
    umask = current_umask() if umask is None else umask
    reserved_top = {os.fsencode(n) for n in reserved}
    raw: list[tuple[tuple[str, ...], str, int, zipfile.ZipInfo]] = []
    for info in infos:
        parts = entry_parts(info, rename)
        if parts is None:
            continue
        kind, perms = unzip_mode(info, umask)
        if not parts:
            if kind != "dir":
                raise UnsafeArchive(info.filename, "has an empty name")
            continue
        raw.append((parts, kind, perms, info))

    stripped = None
    root_perms = None
    if strip_root and raw:
        tops = {parts[0] for parts, *_ in raw}
        top = next(iter(tops))
        lone_dir = all(len(parts) > 1 or kind == "dir" for parts, kind, *_ in raw)
        if len(tops) == 1 and lone_dir:
            stripped = top
            kept = []
            for parts, kind, perms, info in raw:
                if len(parts) == 1:
                    root_perms = perms
                else:
                    kept.append((parts[1:], kind, perms, info))
            raw = kept

    entries: dict[tuple[bytes, ...], Entry] = {}
    for parts, kind, perms, info in raw:
        path = tuple(os.fsencode(p) for p in parts)
        if path in entries:
            if kind == "dir" and entries[path].kind == "dir":
                continue  # a repeated directory entry is harmless
            raise UnsafeArchive(info.filename, "appears twice")
        entries[path] = Entry(path, kind, perms, info)
    for path in entries:
        check_reserved(path, reserved_top)
    for name, data, perms in extra:
        path = tuple(os.fsencode(p) for p in name.split("/") if p)
        entries[path] = Entry(path, "file", perms, None, data)

    # Nothing may live inside a file or a symlink: writing through an archive's own symlink
    # is the classic way out of the tree.
    for path, entry in entries.items():
        for i in range(1, len(path)):
            parent = entries.get(path[:i])
            if parent is not None and parent.kind != "dir":
                raise UnsafeArchive(_show(path), f"lies inside {_show(path[:i])!r}, which is a {parent.kind}")

    links = {}
    for path, entry in entries.items():
        if entry.kind == "symlink":
            target = entry.data if entry.data is not None else (read(entry.info) if read else b"")
            entry.data = target
            links[path] = target
    for path, target in links.items():
        if not target or b"\0" in target:
            raise UnsafeArchive(_show(path), "is a symlink with an empty or invalid target")
        if _resolve(list(path[:-1]), target, links, 0) is None:
            raise UnsafeArchive(_show(path), f"is a symlink to {os.fsdecode(target)!r}, outside the tree")

    ordered = [entries[k] for k in sorted(entries)]
    total = sum(e.size for e in ordered if e.kind == "file")
    return Layout(ordered, root_perms, stripped, total)


def entry_parts(info: zipfile.ZipInfo, rename: NameMap | None = None) -> tuple[str, ...] | None:
    """One entry's path components, after the rules each entry must pass on its own: not
    encrypted, a compression method this Python inflates, no absolute path, no `..`, no NUL,
    no component over NAME_MAX bytes. None when `rename` drops the entry. Shared by
    `plan_entries` and the streaming unpack (stream.py), which checks each local header as it
    arrives."""
    if info.flag_bits & 0x1:
        raise BadArchive(f"the archive's entry {info.filename!r} is encrypted",
                         "a libtorch archive is never encrypted; use an official zip")
    if info.compress_type not in _METHODS:
        method = _METHOD_NAMES.get(info.compress_type, f"method {info.compress_type}")
        raise BadArchive(f"the archive's entry {info.filename!r} is compressed with {method}, "
                         "which this Python cannot unpack",
                         "use an official libtorch zip (deflate), or repack the archive with `zip`")
    name = os.fsdecode(raw_name(info))
    if info.create_system == FS_FAT and "\\" in name:
        name = name.replace("\\", "/")  # as unzip does for archives made on DOS/Windows
    if rename is not None:
        mapped = rename(name)
        if mapped is None:
            return None
        name = mapped
    if name.startswith("/") or (len(name) > 1 and name[1] == ":" and name[0].isalpha()):
        raise UnsafeArchive(info.filename, "has an absolute path")
    parts = tuple(p for p in name.split("/") if p not in ("", "."))
    if ".." in parts:
        raise UnsafeArchive(info.filename, "climbs out of the tree with '..'")
    if "\0" in name:
        raise UnsafeArchive(info.filename, "has a NUL byte in its name")
    if len(name) > NAME_MAX // 4 and any(len(os.fsencode(p)) > NAME_MAX for p in parts):  # 4 bytes a char at most
        raise UnsafeArchive(info.filename[:120] + "...", f"has a name component over {NAME_MAX} bytes")
    return parts


def check_reserved(path: tuple[bytes, ...], reserved_top: set[bytes]) -> None:
    """Refuse an entry (path inside the tree) named like a file the caller writes itself."""
    if path and path[0] in reserved_top:
        # The record and marker are the doctor's own: a copy in the archive would be
        # hidden from the NAR hash (and could point elsewhere as a symlink).
        raise UnsafeArchive(_show(path), "is named like a file fetch-libtorch writes itself "
                            f"({os.fsdecode(path[0])}); it could stand in for the install record")


def _show(path: tuple[bytes, ...]) -> str:
    return os.fsdecode(b"/".join(path))


def _resolve(base: list[bytes], target: bytes, links: dict, depth: int) -> list[bytes] | None:
    """Where `target` (relative to directory `base`) lands, following the archive's symlinks;
    None when it leaves the tree. A loop cannot lead anywhere (the kernel answers ELOOP), so
    past 40 hops the walk stops where it is."""
    if target.startswith(b"/"):
        return None
    if depth > 40:
        return list(base)
    parts = list(base)
    for comp in target.split(b"/"):
        if comp in (b"", b"."):
            continue
        if comp == b"..":
            if not parts:
                return None
            parts.pop()
            continue
        parts.append(comp)
        inner = links.get(tuple(parts))
        if inner is not None:
            resolved = _resolve(parts[:-1], inner, links, depth + 1)
            if resolved is None:
                return None
            parts = resolved
    return parts


# -- writing --


def extract_zip(
    zip_path: str | os.PathLike[str],
    dest: str | os.PathLike[str],
    *,
    strip_root: bool = True,
    rename: NameMap | None = None,
    extra: Iterable[tuple[str, bytes, int]] = (),
    check_space: Callable[[int], None] | None = None,
    progress: Callable[[int], None] | None = None,
    reserved: Iterable[str] = (),
) -> Extracted:
    """Unpack `zip_path` into the empty directory `dest` and return the tree's NAR hash.

    `dest` is a staging directory beside the final place: the caller renames it into place
    only when everything (checksums, hashes) is right.
    """
    dest = Path(dest)
    umask = current_umask()
    try:
        zf = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError) as exc:
        text = _text_answer(zip_path)
        if text:
            raise BadArchive(f"{Path(zip_path).name} is {text}, not a zip archive",
                             "a proxy's login page or a server's error answer was saved in its place; fetch the "
                             "archive again (a browser or `head` shows what it says)") from exc
        raise BadArchive(f"{Path(zip_path).name} is not a readable zip archive: {exc}",
                          "the download may be truncated or not a libtorch zip") from exc
    with zf:
        layout = plan_entries(zf.infolist(), strip_root=strip_root, rename=rename, extra=extra,
                              read=_reader(zf), umask=umask, reserved=reserved)
        if check_space is not None:
            check_space(layout.total_size)
        part_size = part_size_for(layout.total_size)
        writer = _Writer(Digester(True, part_size, idle_cpus()))
        nar = NarWriter(writer.hash)
        dirs: list[tuple[bytes, int]] = []  # (path, perms) to set once everything is inside
        made: set[tuple[bytes, ...]] = {()}
        root = os.fsencode(dest)
        implied = 0o777 & ~umask
        files = size = 0

        def ensure_parent(path: tuple[bytes, ...]) -> None:
            for i in range(1, len(path)):
                if path[:i] not in made:
                    p = os.path.join(root, *path[:i])
                    os.mkdir(p, 0o700)
                    dirs.append((p, implied))
                    made.add(path[:i])

        try:
            for entry in layout.entries:
                full = os.path.join(root, *entry.path)
                if entry.kind == "dir":
                    ensure_parent(entry.path)
                    if entry.path not in made:
                        os.mkdir(full, 0o700)
                        made.add(entry.path)
                    dirs.append((full, entry.perms))
                    nar.directory(entry.path)
                elif entry.kind == "symlink":
                    ensure_parent(entry.path)
                    os.symlink(entry.data, full)
                    nar.symlink(entry.path, entry.data)
                else:
                    ensure_parent(entry.path)
                    feed = nar.file(entry.path, entry.size, entry.executable)
                    _write_file(zf, entry, full, feed, progress, writer)
                    nar.end_file()
                    files += 1
                    size += entry.size
            nar.finish()
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError,
                lzma_error(), ValueError) as exc:
            raise BadArchive(f"the archive is damaged: {exc}", "fetch it again") from exc
        finally:
            try:
                writer.finish()  # every file written and closed before directories are locked down
            finally:
                # Deepest first, so a read-only directory is closed only after its contents are in.
                for path, perms in sorted(dirs, key=lambda d: d[0].count(b"/"), reverse=True):
                    os.chmod(path, perms)
        os.chmod(root, layout.root_perms if layout.root_perms is not None else implied)
        return Extracted(writer.digester.whole, files, size, layout.stripped,
                         nar_parts(part_size, writer.digester.parts))


MAX_LINK = 4096  # bytes of a symlink target (PATH_MAX)


def _reader(zf: zipfile.ZipFile) -> Callable[[zipfile.ZipInfo], bytes]:
    """Read a symlink entry's target, bounded: a 'symlink' of gigabytes is not one."""
    def read(info: zipfile.ZipInfo) -> bytes:
        if info.file_size > MAX_LINK:
            raise UnsafeArchive(info.filename, f"is a symlink with a {info.file_size}-byte target")
        try:
            return zf.read(info)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as exc:
            raise BadArchive(f"the archive is damaged: {exc}", "fetch it again") from exc
        except OSError as exc:
            raise _outside(exc, info) from exc
    return read


def _chunks(zf: zipfile.ZipFile, info: zipfile.ZipInfo) -> Iterable[bytes]:
    """An entry's bytes, CHUNK at a time (errors of the archive's reading, not of any writing)."""
    try:
        src = zf.open(info)
    except OSError as exc:
        raise _outside(exc, info) from exc
    with src:
        while True:
            try:
                chunk = src.read(CHUNK)
            except OSError as exc:
                raise _outside(exc, info) from exc
            if not chunk:
                return
            yield chunk


def _outside(exc: OSError, info: zipfile.ZipInfo) -> Exception:
    """zipfile seeks to where the central directory puts an entry: in an archive cut at its
    start that is before byte 0, and the seek's EINVAL is the archive's fault, not the folder
    being unpacked into. Any other error reading it stays what it is."""
    import errno

    if exc.errno == errno.EINVAL:
        return BadArchive(f"the archive is damaged: its entry {info.filename!r} lies outside the file "
                          "(cut short at its start?)", "fetch it again")
    return exc


def lzma_error() -> type[Exception]:
    try:
        import lzma

        return lzma.LZMAError
    except ImportError:  # Python built without lzma
        return zlib.error


def nar_hash_zip(zip_path: str | os.PathLike[str], strip_root: bool = True) -> str:
    """SRI hash of the tree `unzip` would produce from `zip_path`, with its single top folder
    stripped (fetchzip's default). Raises UnsafeArchive for entries that would escape."""
    from doctor.nar import NarWriter, sri

    h = hashlib.sha256()
    with zipfile.ZipFile(zip_path) as zf:
        read = _reader(zf)
        layout = plan_entries(zf.infolist(), strip_root=strip_root, read=read)
        writer = NarWriter(h.update)
        for entry in layout.entries:
            if entry.kind == "dir":
                writer.directory(entry.path)
            elif entry.kind == "symlink":
                writer.symlink(entry.path, entry.data)
            else:
                feed = writer.file(entry.path, entry.info.file_size, entry.executable)
                for chunk in _chunks(zf, entry.info):
                    feed(chunk)
                writer.end_file()
        writer.finish()
    return sri(h.digest())


def _write_file(zf: zipfile.ZipFile, entry: Entry, full: bytes, feed, progress, writer: _Writer) -> None:
    fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
                 | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0), 0o600)  # Windows: not text mode
    try:
        # feed first: the chunk joins the NAR bytes queued with this write
        if entry.data is not None:
            feed(entry.data)
            writer.write(fd, entry.data)
        else:
            for chunk in _chunks(zf, entry.info):
                feed(chunk)
                writer.write(fd, chunk)
                if progress is not None:
                    progress(len(chunk))
    except BaseException:
        writer.close(fd, None)
        raise
    writer.close(fd, entry.perms)


class _Writer:
    """Writes on a second thread, so inflating the next chunk goes on while the kernel makes a
    write wait for the disk (zlib, hashlib and os.write all release the GIL), and hands the
    NAR bytes to `digester` (the NAR hash and its parts, hashed on the CPUs it was given).

    NAR bytes are queued in order with the file data (`hash` batches the small header pieces
    until the next write), so the hash sees exactly the stream NarWriter produced. A bounded
    queue keeps at most ~64 MB in flight.
    """

    def __init__(self, digester: Digester) -> None:
        import queue
        import threading

        self.digester = digester
        self._pending: list[bytes] = []
        self._queue: queue.Queue = queue.Queue(maxsize=64)
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="doctor-unzip-writer", daemon=True)
        self._thread.start()

    def hash(self, data: bytes) -> None:
        self._pending.append(data)

    def write(self, fd: int, data: bytes) -> None:
        if self._error is not None:
            raise self._error
        self._queue.put((fd, data, self._take(), None))

    def close(self, fd: int, perms: int | None) -> None:
        self._queue.put((fd, None, self._take(), perms))

    def finish(self) -> None:
        self._queue.put((None, None, self._take(), None))
        self._queue.put(None)
        self._thread.join()
        try:
            self.digester.close()
        except BaseException as exc:  # the writer's own error comes first
            self._error = self._error or exc
        if self._error is not None:
            raise self._error

    def _take(self) -> list[bytes]:
        pending, self._pending = self._pending, []
        return pending

    def _run(self) -> None:
        while (item := self._queue.get()) is not None:
            fd, data, hashed, perms = item
            try:
                for piece in hashed:
                    self.digester.block(piece)
                if fd is None or self._error is not None and data is not None:
                    continue
                if data is not None:
                    view = memoryview(data)
                    while view:
                        view = view[os.write(fd, view):]
                else:
                    try:
                        if perms is not None and self._error is None:
                            os.fchmod(fd, perms)
                    finally:
                        os.close(fd)
            except BaseException as exc:  # reported to the extracting thread at its next write
                self._error = self._error or exc
