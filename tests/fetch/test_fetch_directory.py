"""The central directory read first with range requests (doctor/fetch/directory.py) and the
files created ahead from it (doctor/fetch/precreate.py). Real zips (Info-ZIP's `zip -r -y`,
Python's zipfile with zip64 and a comment, one whose directory is larger than the tail asked
for first); the ranges are cut from the zip's bytes as a server would answer them. Through a
real download: tests/fetch/test_fetch_stream.py."""

from __future__ import annotations

import os
import re
import subprocess
import zipfile
from pathlib import Path

import pytest

from doctor.fetch import directory as directory_mod
from doctor.fetch.directory import Planned, Unusable, read_directory
from doctor.fetch.precreate import Precreator


def ranges_of(data: bytes, asked: list[str]):
    """get_range over `data`, as a server that honours single ranges answers; logs each spec."""

    def get_range(spec: str, most: int) -> tuple[int, bytes, int]:
        asked.append(spec)
        m = re.fullmatch(r"(\d*)-(\d*)", spec)
        if m.group(1):
            start, end = int(m.group(1)), min(int(m.group(2) or len(data) - 1), len(data) - 1)
        else:
            start, end = max(0, len(data) - int(m.group(2))), len(data) - 1
        assert end - start + 1 <= most
        return start, data[start:end + 1], len(data)

    return get_range


def expected(path: Path) -> list[tuple]:
    with zipfile.ZipFile(path) as zf:
        infos = sorted(zf.infolist(), key=lambda i: i.header_offset)
    return [(i.header_offset, tuple(os.fsencode(p) for p in i.filename.rstrip("/").split("/")), i.filename.endswith("/"))
            for i in infos]


def info_zip(tmp_path: Path) -> Path:
    top = tmp_path / "tree/libtorch"
    (top / "lib").mkdir(parents=True)
    (top / "include/torch").mkdir(parents=True)
    (top / "lib/libc10.so").write_bytes(os.urandom(50_000))
    (top / "lib/libc10.so.2").symlink_to("libc10.so")
    (top / "include/torch/torch.h").write_text("#pragma once\n" * 100)
    out = tmp_path / "info.zip"
    subprocess.run(["zip", "-q", "-r", "-y", str(out), "libtorch"], cwd=tmp_path / "tree", check=True)
    return out


def python_zip(tmp_path: Path, entries: int, comment: bytes = b"") -> Path:
    out = tmp_path / f"py-{entries}.zip"
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("libtorch/", b"")
        for i in range(entries):
            zf.writestr(f"libtorch/include/ATen/ops/{'operator_' * 6}{i:05}.h", f"#define OP {i}\n")
        with zf.open("libtorch/lib/big.so", "w", force_zip64=True) as fh:
            fh.write(b"\0" * 1000)
        zf.comment = comment
    return out


@pytest.mark.parametrize("kind,requests", [("info-zip", 1), ("zip64 with a comment", 1), ("3,000 entries", 2)])
def test_the_directory_read_by_ranges_lists_what_zipfile_lists(tmp_path, kind, requests):
    path = {"info-zip": lambda: info_zip(tmp_path),
            "zip64 with a comment": lambda: python_zip(tmp_path, 5, comment=b"c" * 60_000),
            "3,000 entries": lambda: python_zip(tmp_path, 3000)}[kind]()
    asked: list[str] = []
    d = read_directory(ranges_of(path.read_bytes(), asked))
    assert [(p.header_at, p.parts, p.is_dir) for p in d.entries] == expected(path)
    assert len(asked) == requests and asked[0] == f"-{directory_mod.TAIL}"
    assert d.size == path.stat().st_size and d.differs_from(path) is None


def test_bytes_that_differ_from_the_downloaded_file_are_named(tmp_path):
    path = python_zip(tmp_path, 10)
    d = read_directory(ranges_of(path.read_bytes(), []))
    data = bytearray(path.read_bytes())
    at = data.rindex(b"PK\x01\x02") + 38  # the last central record's external attributes
    data[at] ^= 0xFF
    changed = tmp_path / "changed.zip"
    changed.write_bytes(bytes(data))
    assert "differs from the downloaded file's" in d.differs_from(changed)
    changed.write_bytes(bytes(data) + b"x")
    assert "size differs" in d.differs_from(changed)
    assert "cannot be read back" in d.differs_from(tmp_path / "gone.zip")


def test_what_cannot_be_used_says_why(tmp_path, monkeypatch):
    with pytest.raises(Unusable, match="end records cannot be read"):
        read_directory(ranges_of(os.urandom(100_000), []))
    big = python_zip(tmp_path, 3000)
    monkeypatch.setattr(directory_mod, "MAX_DIRECTORY", 100_000)
    with pytest.raises(Unusable, match="over 0 MiB"):
        read_directory(ranges_of(big.read_bytes(), []))
    monkeypatch.undo()

    def shifted(spec, most):  # a server that answers another range than the one asked for
        at, data, size = ranges_of(big.read_bytes(), [])(spec, most)
        return (at, data, size) if spec.startswith("-") else (at + 1, data, size)

    with pytest.raises(Unusable, match="another range"):
        read_directory(shifted)
    evil = tmp_path / "evil.zip"
    with zipfile.ZipFile(evil, "w") as zf:
        zf.writestr("libtorch/lib/x.so", b"x")
        zf.writestr("libtorch/../../etc/x", b"x")
    with pytest.raises(Unusable, match=r"\.\."):
        read_directory(ranges_of(evil.read_bytes(), []))


def test_files_and_folders_are_created_ahead_in_order_private_and_empty(tmp_path):
    root = tmp_path / "staging"
    root.mkdir()
    entries = [Planned(0, (b"libtorch",), True), Planned(50, (b"libtorch", b"lib", b"libc10.so"), False),
               Planned(90, (b"libtorch", b"include", b"torch", b"torch.h"), False)]
    ahead = Precreator(os.fsencode(root), entries)
    assert ahead.wait_for(2, lambda: False) is None
    ahead.stop()
    assert (root / "libtorch/lib/libc10.so").stat().st_size == 0
    assert (root / "libtorch/lib/libc10.so").stat().st_mode & 0o777 == 0o600
    assert (root / "libtorch/include/torch").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("second", [(b"a", b"x.h"), (b"a", b"x.h", b"y.h")], ids=["twice", "inside a file"])
def test_a_name_that_cannot_be_created_stops_whoever_waits_for_it(tmp_path, second):
    entries = [Planned(0, (b"a", b"x.h"), False), Planned(10, second, False)]
    ahead = Precreator(os.fsencode(tmp_path), entries)
    assert ahead.wait_for(0, lambda: False) is None
    why = ahead.wait_for(1, lambda: False)
    assert why.startswith("creating the files ahead:") and ("File exists" in why or "Not a directory" in why)
    ahead.stop()
