"""A remote zip's central directory, read before its body with range requests.

The streaming unzip (stream.py) learns each entry's name from its local header, when the
entry's bytes arrive; in a libtorch zip the ~9,500 headers come last (the libraries are 83 %
of the bytes and come first), and creating their files then is the largest cost left after
the transfer (issue 19). With the central directory known before the body, those files are
created while the libraries arrive (precreate.py).

`read_directory` asks for the archive's last 64 KiB (where its end records are), then for
the central directory itself when the tail does not hold it, and lets `zipfile` parse them
from a file made of just those bytes. Nothing read here is trusted: the names pass the same
rules as a local header's before anything is created (entry_parts here, the doctor's own
names in stream.py), the files are created empty in the
private staging folder, and when the transfer ends the bytes read here must equal the same
bytes of the downloaded file (whose sha256 and lock were checked) — else the streamed tree is
thrown away and the archive unpacked from the file.
"""

from __future__ import annotations

import io
import os
import zipfile
from collections.abc import Callable

from doctor.fetch.extract import entry_parts
from doctor.record import record

TAIL = (64 << 10) + 22  # what zipfile reads to find the end record behind a comment of up to 64 KiB
MAX_DIRECTORY = 16 << 20  # ~150,000 entries; a libtorch zip's is 1–3 MiB


class Unusable(Exception):
    """The directory cannot be used: the message says why (logged; the stream goes on without it)."""


# (range spec as in "bytes=<spec>", most bytes expected) -> (first byte's offset, the bytes, file size)
GetRange = Callable[[str, int], tuple[int, bytes, int]]


@record(frozen=True)
class Planned:
    """An entry as the central directory names it, in the order of its local header."""

    header_at: int
    parts: tuple[bytes, ...]  # path components, the archive's top folder included
    is_dir: bool


@record
class Directory:
    entries: list[Planned]  # by local-header offset
    size: int  # the archive's size, as the range answers gave it
    pieces: list[tuple[int, bytes]]  # (offset, bytes) read from the server

    def differs_from(self, path: str | os.PathLike[str]) -> str | None:
        """Why the downloaded file at `path` does not hold the bytes read here, or None."""
        try:
            with open(path, "rb") as fh:
                if os.fstat(fh.fileno()).st_size != self.size:
                    return "the downloaded file's size differs from the one its central directory was read with"
                for at, data in self.pieces:
                    fh.seek(at)
                    if fh.read(len(data)) != data:
                        return "the central directory read first differs from the downloaded file's"
        except OSError as exc:
            return f"the downloaded file cannot be read back ({exc})"
        return None


def read_directory(get_range: GetRange) -> Directory:
    """The archive's entries from its central directory, or `Unusable`. `get_range` raises
    `Unusable` for an answer that is not the range asked for."""
    at, tail, size = get_range(f"-{TAIL}", TAIL)
    if at + len(tail) != size:
        raise Unusable("the server's answer is not the end of the file")
    sparse = _Sparse(size, [(at, tail)])
    for _ in range(3):  # the tail, then the directory (zip64: its end record too)
        try:
            with zipfile.ZipFile(sparse) as zf:
                infos = zf.infolist()
            break
        except _Missing as missing:
            want = missing.end - missing.start
            if want > MAX_DIRECTORY:
                raise Unusable(f"the central directory is over {MAX_DIRECTORY >> 20} MiB") from None
            got_at, data, got_size = get_range(f"{missing.start}-{missing.end - 1}", want)
            if (got_at, len(data), got_size) != (missing.start, want, size):
                raise Unusable("the server answered another range than the one asked for") from None
            sparse.pieces.append((got_at, data))
        except (zipfile.BadZipFile, ValueError, EOFError, OSError) as exc:  # zipfile's ways of saying "not a zip"
            raise Unusable(f"its end records cannot be read ({exc})") from None
    else:
        raise Unusable("the central directory is not where its end record says")
    return Directory(_planned(infos), size, sparse.pieces)


def _planned(infos: list[zipfile.ZipInfo]) -> list[Planned]:
    from doctor.errors import DoctorError

    out = []
    for info in infos:
        if "\\" in info.orig_filename:
            raise Unusable("an entry name holds a backslash")
        try:
            parts = entry_parts(info)
        except DoctorError as exc:  # the unpack from the file reports it, as it would have
            raise Unusable(exc.message) from None
        if not parts:
            raise Unusable(f"entry {info.filename!r} has an empty name")
        out.append(Planned(info.header_offset, tuple(os.fsencode(p) for p in parts), info.filename.endswith("/")))
    out.sort(key=lambda p: p.header_at)
    return out


class _Missing(Exception):
    def __init__(self, start: int, end: int) -> None:
        super().__init__(start, end)
        self.start, self.end = start, end


class _Sparse(io.RawIOBase):
    """A read-only file of `size` bytes of which only `pieces` are known: what `zipfile` reads
    of a zip to list it (its end records and central directory). Reading elsewhere raises
    `_Missing` with the span it wanted."""

    def __init__(self, size: int, pieces: list[tuple[int, bytes]]) -> None:
        super().__init__()
        self.size, self.pieces, self._pos = size, pieces, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = {0: 0, 1: self._pos, 2: self.size}[whence] + offset
        if self._pos < 0:
            raise OSError("seek before the start of the file")
        return self._pos

    def read(self, n: int = -1) -> bytes:
        start = self._pos
        end = self.size if n is None or n < 0 else min(self.size, start + n)
        if end <= start:
            return b""
        for at, data in self.pieces:
            if at <= start and end <= at + len(data):
                self._pos = end
                return data[start - at:end - at]
        raise _Missing(start, end)

    def readinto(self, buffer) -> int:
        data = self.read(len(buffer))
        buffer[:len(data)] = data
        return len(data)
