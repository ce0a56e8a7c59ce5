"""Keep the tree unpacked while downloading (stream.py) only when the central directory agrees.

Called after the transfer, once the sha256 and the lock have been checked. The central
directory is read from the downloaded file and planned with the same `plan_entries` as an
unpack from the file (every check: duplicates, entries inside files or symlinks, symlink
targets, the doctor's own names; its errors are raised as they are), while the unzip's
thread finishes what it was handed. Each central entry must
match a streamed one: same local-header offset, path, directory or not, method, sizes and the
CRC-32 computed while writing; and nothing may have been streamed that it does not list. Only
then is the tree finished as extract.py would leave it (file modes, symlinks made from the
small files that held their targets, directory modes deepest first) and its NAR hash and
parts read back.

Any disagreement returns the reason instead: the caller removes the streamed tree and unpacks
from the file, so a zip whose local headers tell another story than its central directory is
never installed from its local headers.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable
from pathlib import Path

from doctor.errors import DoctorError
from doctor.fetch.extract import Extracted, Layout, _reader, current_umask, entry_parts, plan_entries
from doctor.fetch.stream import Streamed, StreamUnzip
from doctor.fetch.stream_thread import ThreadedUnzip
from doctor.record import record


@record
class Adopted:
    root: Path  # the finished tree: the staging folder, or its top folder when that is stripped
    extracted: Extracted


def adopt(unzip: StreamUnzip | ThreadedUnzip, zip_path: Path, reserved: Iterable[str] = ()) -> Adopted | str:
    """The streamed tree, finished and hashed; or why it cannot be used."""
    from doctor.fetch.record import nar_parts, part_size_for
    from doctor.nar import nar_digests

    # The central directory is planned first: the file is complete, and the unzip's thread
    # may still be writing what it was handed last (a burst of small files), so the two overlap.
    try:
        zf = zipfile.ZipFile(zip_path)
    except (zipfile.BadZipFile, OSError, NotImplementedError) as exc:
        unzip.finish()
        return f"its central directory cannot be read ({exc})"
    umask = current_umask()
    with zf:
        infos = zf.infolist()
        layout = plan_entries(infos, strip_root=True, read=_reader(zf), umask=umask, reserved=reserved)
    why = unzip.finish() or disagreement(infos, unzip.entries)
    if why is not None:
        return why
    root = unzip.root / layout.stripped if layout.stripped else unzip.root
    files, size = _settle(os.fsencode(root), layout, umask)
    part_size = part_size_for(layout.total_size)
    whole, parts = nar_digests(root, exclude_top=reserved, part_size=part_size)
    return Adopted(root, Extracted(whole, files, size, layout.stripped, nar_parts(part_size, parts)))


def disagreement(infos: list[zipfile.ZipInfo], streamed: dict[int, Streamed]) -> str | None:
    """Why the central directory `infos` does not describe exactly the streamed entries."""
    if len(infos) != len(streamed):
        return f"the central directory lists {len(infos)} entries, the local headers {len(streamed)}"
    for info in infos:
        got = streamed.get(info.header_offset)
        if got is None:
            return f"entry {info.filename!r} points at no local header that was streamed"
        try:
            parts = entry_parts(info)
        except DoctorError as exc:
            return exc.message
        central = (parts, info.filename.endswith("/"), info.compress_type, info.compress_size, info.file_size,
                   info.CRC)
        local = (got.parts, got.is_dir, got.method, got.csize, got.usize, got.crc)
        if central != local:
            return f"entry {info.filename!r} differs between the central directory and its local header"
    return None


def _settle(root: bytes, layout: Layout, umask: int) -> tuple[int, int]:
    """Modes and symlinks, as extract_zip leaves them; returns (files, bytes of contents)."""
    implied = 0o777 & ~umask
    dirs: dict[tuple[bytes, ...], int] = {}
    files = size = 0
    # Files first: no symlink exists yet, so no chmod can be led out of the tree.
    for entry in layout.entries:
        for i in range(1, len(entry.path)):
            dirs.setdefault(entry.path[:i], implied)
        if entry.kind == "dir":
            dirs[entry.path] = entry.perms
        elif entry.kind == "file":
            os.chmod(os.path.join(root, *entry.path), entry.perms)
            files += 1
            size += entry.size
    for entry in layout.entries:
        if entry.kind == "symlink":
            full = os.path.join(root, *entry.path)
            os.unlink(full)  # the small file that held the target
            os.symlink(entry.data, full)
    # Deepest first, so a read-only directory is closed only after its contents are in.
    for path in sorted(dirs, key=len, reverse=True):
        os.chmod(os.path.join(root, *path), dirs[path])
    os.chmod(root, layout.root_perms if layout.root_perms is not None else implied)
    return files, size
