"""Unpack a zip while it downloads, from its local headers, in the order the bytes arrive.

A zip's central directory is at its end, but each entry is preceded by a local header that
names it (as `bsdtar -x` reads a zip from a pipe). `StreamUnzip` is fed the downloaded bytes
(download.py calls `feed` for each chunk it writes to the partial file) and writes each entry
into a staging folder as it arrives, so that unpacking overlaps the transfer.

Nothing it writes counts yet: when the transfer ends, install.py checks the sha256 and the
lock, then adopt.py reads the central directory from the file, plans it with `plan_entries`
(every check) and keeps the streamed tree only when each entry matches a streamed one.
Until then:

- each entry passes the same per-entry rules as `plan_entries` (extract.`entry_parts`:
  absolute, `..`, NUL, over-long components, encrypted, unknown methods) and is not named like
  the doctor's own files (extract.`check_reserved`, for either choice of the stripped top);
- files are created `O_EXCL|O_NOFOLLOW` (a name seen twice fails), directories with `mkdir`,
  both private (0o600/0o700); no symlink is ever made (a local header does not say which
  entries are symlinks: they are written as small files, turned into links once planned),
  so no path can lead out of the staging folder;
- the tree keeps the archive's top folder (whether it is stripped is known only at the end);
- inflating is bounded (1 MiB of output per call; in all, 20× the bytes that arrived), and
  a size or CRC-32 that disagrees with the header or data descriptor stops the stream;
- a large entry (4 MiB or more compressed, sizes in its header) is inflated on a second thread
  from the partial file (stream_offload.py), under the same checks, while the stream goes on;
- when the central directory was read first (directory.py, `use_directory`), the folders and
  empty files are created ahead on a thread of their own (precreate.py) and the stream fills
  them; each local header must then be the entry the directory lists at its offset, and when
  the transfer ends the directory's bytes must be the downloaded file's.

Anything it does not handle stops it — a stored entry with a data descriptor (unless empty:
its end cannot be found), bzip2/lzma, a name with a backslash, bytes before the first header,
a write error, anything unexpected: it records why, removes what it wrote at once, and the
install unpacks from the file as before.
"""

from __future__ import annotations

import os
import struct
import zipfile
import zlib
from collections.abc import Iterable
from pathlib import Path

from doctor.errors import DoctorError
from doctor.fetch.directory import Directory, Planned
from doctor.fetch.extract import check_reserved, entry_parts
from doctor.fetch.precreate import CREATE, Precreator, make_dirs
from doctor.fetch.stream_offload import BIG, Job, Offload
from doctor.record import record

LOCAL_SIG = b"PK\x03\x04"
# What may follow the last entry: the central directory, the zip64 end records, the archive
# extra data record (all of it is read from the file at the end, not from the stream).
END_SIGS = (b"PK\x01\x02", b"PK\x05\x06", b"PK\x06\x06", b"PK\x06\x07", b"PK\x06\x08")
DESCRIPTOR_SIG = b"PK\x07\x08"
_LOCAL = struct.Struct("<4sHHHHHIIIHH")  # a local file header without its name and extra field
OUT = 1 << 20  # the most bytes one inflate call may produce: a 1000:1 entry stays bounded
_MAX32 = 0xFFFFFFFF
# A libtorch zip unpacks to ~3.5× its size. An entry with a data descriptor states no size, so
# what the stream writes is bounded by what has arrived: past 20× (plus 64 MiB) it stops and
# the unpack from the file (sizes from the central directory, checked against free space) decides.
MAX_RATIO, SLACK = 20, 64 << 20
_O_FILL = CREATE & ~(os.O_CREAT | os.O_EXCL)  # a file created ahead (precreate.py)
_DESCRIPTOR_MAX = 4 + 4 + 16  # signature, CRC-32, two zip64 sizes
STORED, DEFLATED = zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED


@record(frozen=True)
class Streamed:
    """One entry as its local header and data said: what adopt.py compares with the central
    directory."""

    parts: tuple[str, ...]  # path components, the archive's top folder included
    is_dir: bool
    method: int
    flags: int
    csize: int
    usize: int
    crc: int  # CRC-32 of the bytes written, computed here


class _Stop(Exception):
    """The stream cannot go on; the message says why (logged, then the file is unpacked)."""


class StreamUnzip:
    """Feed it the archive's bytes in order (`feed`), then `finish()`; `entries` maps each
    local header's offset to what was written for it."""

    def __init__(self, root: Path, reserved: Iterable[str] = (), source: str | os.PathLike[str] | None = None) -> None:
        self.root = root  # an empty staging folder
        # The partial file the download writes every byte to before feeding it here: large
        # entries are inflated from it on a second thread (stream_offload.py). os.pread: POSIX.
        self._part = source
        self._source = os.fspath(source) if source is not None and hasattr(os, "pread") else None
        self._offload: Offload | None = None
        self._directory: Directory | None = None
        self._planned: dict[int, tuple[int, Planned]] = {}  # local-header offset -> (index, entry)
        self._ahead: Precreator | None = None
        self._handed: dict[int, Streamed] = {}  # what each handed-over entry must turn out to be
        self._root = os.fsencode(root)
        self._reserved = {os.fsencode(n) for n in reserved}
        self.position = 0  # bytes fed so far (download.py feeds only while this equals its offset)
        self.entries: dict[int, Streamed] = {}
        self.failed: str | None = None
        self.done = False  # the central directory began: every entry is in
        self.written = 0  # bytes of file contents written
        self._made: set[tuple[bytes, ...]] = {()}
        self._buf = bytearray()
        self._need = 4
        self._header_at = 0
        self._step = self._header
        self._fd: int | None = None
        self._reset_entry()

    def use_directory(self, directory: Directory) -> bool:
        """The archive's central directory, read before its first byte is fed: its folders and
        files are created ahead (precreate.py) and the stream fills them. False when it is not
        used (the files are then created as they arrive)."""
        if self.position or self._ahead is not None or self._part is None:
            return False
        for entry in directory.entries:
            try:
                check_reserved(entry.parts, self._reserved)
                check_reserved(entry.parts[1:], self._reserved)
            except DoctorError:  # the unpack from the file reports it, as it would have
                return False
        try:
            self._ahead = Precreator(self._root, directory.entries)
        except RuntimeError:  # no thread can start (ulimit -u, a pids limit)
            return False
        self._directory = directory
        self._planned = {p.header_at: (i, p) for i, p in enumerate(directory.entries)}
        return True

    # -- the feeding side --

    def feed(self, data: bytes) -> None:
        """The next bytes of the archive, parsed, inflated and written before it returns (the
        fetch calls it on a thread of its own: stream_thread.py)."""
        if self.failed is not None or self.done:
            self.position += len(data)
            return
        view = memoryview(data)
        stuck = 0
        try:
            while view and self.failed is None and not self.done:
                used = self._step(view)
                view = view[used:]
                self.position += used
                stuck = stuck + 1 if used == 0 else 0
                if stuck > 3:
                    raise _Stop("the streaming unpack made no progress")
        except _Stop as exc:
            self.abandon(str(exc))
        except DoctorError as exc:  # a rule of entry_parts / check_reserved
            self.abandon(exc.message)
        except (OSError, zlib.error, ValueError, struct.error) as exc:
            self.abandon(f"{type(exc).__name__}: {exc}")
        self.position += len(view)  # what was left when it stopped

    def abandon(self, why: str) -> None:
        """Stop for good and remove what was written at once (it may fill a disk the download
        still needs, and the fallback needs the room)."""
        from doctor.writes import rmtree

        if self.failed is None:
            self.failed = why
        self._close()
        if self._offload is not None:
            self._offload.stop()  # before the removal: it writes into the tree
        if self._ahead is not None:
            self._ahead.stop()
        rmtree(self.root)

    def finish(self) -> str | None:
        """After the last byte: None when every entry was streamed, else why not."""
        if self.failed is None and not self.done:
            self.abandon("the download ended before the central directory")
        self._close()
        if self._ahead is not None:
            self._ahead.stop()  # every entry the stream saw exists; any others fail the comparison
        if self.failed is None and self._offload is not None:
            why = self._offload.close()
            if why is None and len(self._offload.finished) != len(self._handed):
                why = "a large entry was not inflated"
            if why is not None:
                self.abandon(why)
            else:
                self.entries.update(self._handed)
        if self.failed is None and self._directory is not None:
            why = self._directory.differs_from(self._part)
            if why is not None:
                self.abandon(why)
        return self.failed

    def _close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    # -- local headers --

    def _header(self, view: memoryview) -> int:
        if not self._buf:
            self._header_at = self.position
        take = max(0, min(self._need - len(self._buf), len(view)))
        self._buf += view[:take]
        while len(self._buf) >= self._need and self._step == self._header and not self.done:
            self._header_phase()
        return take

    def _header_phase(self) -> None:
        buf = self._buf
        if self._need == 4:
            sig = bytes(buf[:4])
            if sig in END_SIGS:
                self.done = True
                return
            if sig != LOCAL_SIG:
                raise _Stop(f"no local header at byte {self._header_at} of the archive")
            self._need = _LOCAL.size
            return
        if self._need == _LOCAL.size:
            name_len, extra_len = struct.unpack_from("<HH", buf, 26)
            self._need = _LOCAL.size + name_len + extra_len
            if self._need > _LOCAL.size:
                return
        if len(buf) != self._need:  # a descriptor's leftover never reaches past a header
            raise _Stop("misaligned local header")
        self._start_entry(bytes(buf))
        self._buf = bytearray()
        self._need = 4

    def _start_entry(self, header: bytes) -> None:
        _, _, flags, method, _, _, crc, csize, usize, name_len, extra_len = _LOCAL.unpack_from(header)
        raw = header[_LOCAL.size:_LOCAL.size + name_len]
        extra = header[_LOCAL.size + name_len:]
        if b"\\" in raw:
            raise _Stop("an entry name holds a backslash (its meaning depends on the central directory)")
        filename = raw.decode("utf-8") if flags & 0x800 else raw.decode("cp437")
        info = zipfile.ZipInfo(filename)  # as zipfile builds it from the central directory
        info.flag_bits, info.compress_type, info.extra, info.create_system = flags, method, extra, 3
        parts = entry_parts(info)  # raises BadArchive/UnsafeArchive: the fallback reports it
        bparts = tuple(os.fsencode(p) for p in parts)
        check_reserved(bparts, self._reserved)
        check_reserved(bparts[1:], self._reserved)  # the top folder may be stripped
        if flags & 0x60:
            raise _Stop(f"entry {filename!r} uses patched data or strong encryption")
        if method not in (STORED, DEFLATED):
            raise _Stop(f"entry {filename!r} is compressed with method {method}")
        descriptor = bool(flags & 0x08)
        zip64 = False
        if csize == _MAX32 or usize == _MAX32:
            usize, csize, zip64 = _zip64_sizes(extra, usize, csize)
        elif _field(extra, 0x0001) is not None:
            zip64 = True
        is_dir = info.filename.endswith("/")  # as unzip_mode decides it, after ZipInfo's clean-up
        self._reset_entry()
        self._entry = (self._header_at, parts, flags, method, crc, csize, usize, is_dir)
        self._descriptor, self._zip64, self._left = descriptor, zip64, csize
        if is_dir and usize:
            raise _Stop(f"directory entry {filename!r} has contents")
        if not is_dir and not bparts:
            raise _Stop(f"entry {filename!r} has an empty name")
        if self._ahead is not None:
            self._created_ahead(bparts, is_dir)
        else:
            make_dirs(self._root, bparts, is_dir, self._made)  # EEXIST: a name seen as a file
        if not is_dir:  # a directory's data (a deflated empty string) is checked, not written
            path = os.path.join(self._root, *bparts)
            self._fd = os.open(path, _O_FILL) if self._ahead is not None else os.open(path, CREATE, 0o600)
            if (self._source is not None and not descriptor and csize >= BIG
                    and usize <= MAX_RATIO * csize + SLACK):  # within the bound the inline inflate keeps
                self._hand_over(self._header_at + len(header))
                return
        if descriptor and method == STORED:
            # Nothing tells where stored data with a descriptor ends, unless there is none:
            # an empty file or a directory (`zip -fd` writes those) is followed at once by a
            # descriptor of zeros. Anything else stops the stream.
            self._buf = bytearray()
            self._step = self._read_descriptor
        elif method == DEFLATED:
            self._inflater = zlib.decompressobj(-15)
            if not descriptor and csize == 0:
                raise _Stop(f"deflated entry {filename!r} has no data")
            self._step = self._inflate
        elif csize == 0:
            self._end_entry(crc, 0, usize)
        else:
            self._step = self._copy

    def _created_ahead(self, bparts: tuple[bytes, ...], is_dir: bool) -> None:
        found = self._planned.get(self._header_at)
        if found is None or (found[1].parts, found[1].is_dir) != (bparts, is_dir):
            raise _Stop(f"the local header at byte {self._header_at} is not the entry the central directory lists there")
        why = self._ahead.wait_for(found[0], lambda: self.failed is not None)
        if why is not None:
            raise _Stop(why)

    # -- entry data --

    def _hand_over(self, data_at: int) -> None:
        """A large entry goes to the offload thread with its (empty) file; the stream skips its data."""
        at, parts, flags, method, crc, csize, usize, _ = self._entry
        if self._offload is None:
            self._offload = Offload(self._source)
        self._handed[at] = Streamed(parts, False, method, flags, csize, usize, crc)
        self._offload.add(Job(self._fd, data_at, csize, usize, crc, method == DEFLATED, "/".join(parts)))
        self._fd = None
        self._step = self._skip

    def _skip(self, view: memoryview) -> int:
        if self._offload.failed is not None:
            raise _Stop(self._offload.failed)
        take = min(len(view), self._left)
        self._left -= take
        self._offload.arrived(self.position + take)  # those bytes are in the partial file
        if self._left == 0:
            self._reset_entry()
            self._step = self._header
        return take

    def _reset_entry(self) -> None:
        self._crc = self._csize = self._usize = 0
        self._inflater = None
        self._entry = None
        self._descriptor = self._zip64 = False
        self._left = 0

    def _copy(self, view: memoryview) -> int:
        take = min(len(view), self._left)
        self._write(view[:take])
        self._csize += take
        self._left -= take
        if self._left == 0:
            self._end_entry(*self._entry[4:7])
        return take

    def _inflate(self, view: memoryview) -> int:
        d = self._inflater
        data = view if self._descriptor else view[:self._left]
        self._write(d.decompress(data, OUT))
        while d.unconsumed_tail and not d.eof:
            self._write(d.decompress(d.unconsumed_tail, OUT))
        used = len(data) - len(d.unused_data) if d.eof else len(data)
        self._csize += used
        if not self._descriptor:
            self._left -= used
            if d.eof != (self._left == 0):
                raise _Stop("a deflate stream's end disagrees with its local header's size")
        if d.eof:
            self._write(d.flush())
            if self._descriptor:
                self._buf = bytearray()
                self._step = self._read_descriptor
            else:
                self._end_entry(*self._entry[4:7])
        return used

    def _write(self, out) -> None:
        if not out:
            return
        if self._fd is None:
            raise _Stop(f"directory entry {'/'.join(self._entry[1])!r} has contents")
        n = len(out)
        if self.written + n > MAX_RATIO * self.position + SLACK:
            raise _Stop(f"the archive inflates to over {MAX_RATIO} times the bytes that arrived")
        self._crc = zlib.crc32(out, self._crc)
        self._usize += n
        if not self._descriptor and self._usize > self._entry[6]:
            raise _Stop("an entry inflates to more than its local header says")
        view = memoryview(out)
        while view:
            view = view[os.write(self._fd, view):]
        self.written += n

    def _read_descriptor(self, view: memoryview) -> int:
        """The CRC-32 and sizes after a deflated entry, with or without the optional signature,
        4- or 8-byte sizes: the form whose values match what was computed is the one."""
        take = min(_DESCRIPTOR_MAX - len(self._buf), len(view))
        self._buf += view[:take]
        if len(self._buf) < _DESCRIPTOR_MAX:
            return take
        buf = bytes(self._buf)
        widths = (8, 4) if self._zip64 else (4, 8)
        for signed in (True, False):
            if signed and buf[:4] != DESCRIPTOR_SIG:
                continue
            at = 4 if signed else 0
            for width in widths:
                crc, csize, usize = struct.unpack_from("<I" + ("QQ" if width == 8 else "II"), buf, at)
                if (crc, csize, usize) == (self._crc, self._csize, self._usize):
                    used = at + 4 + 2 * width
                    self._end_entry(crc, csize, usize)
                    self._buf = bytearray(buf[used:])  # the start of the next header
                    self._header_at = self.position + take - len(self._buf)
                    return take
        if self._entry[3] == STORED:
            raise _Stop(f"stored entry {'/'.join(self._entry[1])!r} has a data descriptor: its end cannot be found")
        raise _Stop("a data descriptor disagrees with the entry's data")

    def _end_entry(self, crc: int, csize: int, usize: int) -> None:
        at, parts, flags, method, _, _, _, is_dir = self._entry
        if (crc, csize, usize) != (self._crc, self._csize, self._usize):
            raise _Stop(f"entry {'/'.join(parts)!r}: its size or CRC-32 disagrees with its header")
        self._close()
        self.entries[at] = Streamed(parts, is_dir, method, flags, csize, usize, crc)
        self._reset_entry()
        self._step = self._header



def _field(extra: bytes, ident: int) -> bytes | None:
    """The body of extra field `ident`, or None."""
    pos = 0
    while pos + 4 <= len(extra):
        kind, size = struct.unpack_from("<HH", extra, pos)
        if kind == ident:
            return extra[pos + 4:pos + 4 + size]
        pos += 4 + size
    return None


def _zip64_sizes(extra: bytes, usize: int, csize: int) -> tuple[int, int, bool]:
    """(uncompressed, compressed, True) from the zip64 extra field, in the order zipfile
    reads them: each size that is 0xFFFFFFFF in the header comes from the field."""
    body = _field(extra, 0x0001)
    if body is None:
        raise _Stop("a zip64 size without its extra field")
    values, pos = [], 0
    for size in (usize, csize):
        if size == _MAX32:
            if pos + 8 > len(body):
                raise _Stop("a zip64 extra field too short for its sizes")
            size = struct.unpack_from("<Q", body, pos)[0]
            pos += 8
        values.append(size)
    return values[0], values[1], True
