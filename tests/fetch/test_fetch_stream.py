"""The streaming unpack: a download is unpacked from its local headers while it arrives
(doctor/fetch/stream.py) and the tree is kept only when the central directory agrees
(doctor/fetch/adopt.py). Real zips made by Info-ZIP `zip -r -y` (symlinks, modes, a data
descriptor), served by a real local HTTP server; the installed tree is compared with what
`unzip` makes and what `nix-hash` says of it."""

from __future__ import annotations

import hashlib
import os
import struct
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from testsupport.fetch_helpers import DoctorMain, doctor_env, nix_hash_sri, tree_listing, zinfo

from doctor.fetch.adopt import Adopted, adopt
from doctor.fetch.extract import extract_zip
from doctor.fetch.record import NOT_HASHED
from doctor.fetch.stream import StreamUnzip
from doctor.fetch.stream_thread import ThreadedUnzip

NAME = "/cpu/libtorch-shared-with-deps-2.13.0+cpu.zip"
STREAMED = "unpacked libtorch-shared-with-deps-2.13.0+cpu.zip while downloading"
FROM_FILE = "unpacking libtorch-shared-with-deps-2.13.0+cpu.zip from the file: the unpack while downloading was not used"


def cli(*args, env=None):
    return CliRunner().invoke(DoctorMain("fetch-libtorch"), list(args), env=env, catch_exceptions=False)


def args(server, tmp_path, *extra):
    lock = [] if "--no-lock" in extra else ["--lock", str(tmp_path / "libtorch.lock")]
    return ["--mirror", server.base, "--allow-http", "--version", "2.13.0", "--variant", "cpu",
            "--dest", str(tmp_path / "dest"), *lock, "--backoff", "0.01", *extra]


def make_tree(root: Path, seed: int = 0, payload: int = 200_000) -> Path:
    """A small libtorch tree with what real ones hold: a .so symlink, executables, an empty
    folder, nested headers, build-version."""
    top = root / "libtorch"
    for d in ("lib", "bin", "include/torch/csrc", "share/cmake/Torch", "share/empty"):
        (top / d).mkdir(parents=True, exist_ok=True)
    (top / "build-version").write_text("2.13.0+cpu\n")
    (top / "lib/libc10.so").write_bytes(hashlib.shake_256(f"c10-{seed}".encode()).digest(payload))
    (top / "lib/libtorch.so.2").write_bytes(b"\x7fELF torch " * 5000)
    (top / "lib/libtorch.so").symlink_to("libtorch.so.2")
    (top / "bin/protoc").write_text("#!/bin/sh\necho protoc\n")
    (top / "bin/protoc").chmod(0o755)
    (top / "include/torch/csrc/api.h").write_text("#pragma once\n" * 2000)
    (top / "include/empty.h").write_bytes(b"")
    (top / "share/cmake/Torch/TorchConfig.cmake").write_text("set(TORCH_FOUND TRUE)\n")
    return top


def info_zip(tmp_path: Path, seed: int = 0, payload: int = 200_000, name: str = "src") -> Path:
    """`zip -r -y` of the tree, then one more header added with `zip -fd`: that entry is
    deflated with a data descriptor (its sizes and CRC-32 follow its data)."""
    src = tmp_path / f"{name}-tree"
    make_tree(src, seed, payload)
    out = tmp_path / f"{name}.zip"
    subprocess.run(["zip", "-q", "-r", "-y", str(out), "libtorch"], cwd=src, check=True)
    (src / "libtorch/include/late.h").write_text("#define LATE 1\n" * 3000)
    subprocess.run(["zip", "-q", "-fd", str(out), "libtorch/include/late.h"], cwd=src, check=True)
    late = zipfile.ZipFile(out).getinfo("libtorch/include/late.h")
    assert late.flag_bits & 0x08 and late.compress_type == zipfile.ZIP_DEFLATED  # the descriptor is there
    return out


def unzip_tree(z: Path, where: Path) -> Path:
    subprocess.run(["unzip", "-q", str(z), "-d", str(where)], check=True)
    return where / "libtorch"


def installed(dest: Path) -> list[tuple]:
    return [row for row in tree_listing(dest) if row[0] not in NOT_HASHED]


def leftovers(tmp_path: Path) -> list[str]:
    return sorted(p.name for p in tmp_path.iterdir() if ".staging-" in p.name or ".old-" in p.name or ".part" in p.name)


@pytest.mark.parametrize("entries", ["small", "large"])  # large: some go through the offload thread
def test_streamed_install_is_the_tree_unzip_makes(server, tmp_path, entries):
    z = info_zip(tmp_path) if entries == "small" else big_zip(tmp_path)
    server.add(NAME, z.read_bytes())
    r = cli(*args(server, tmp_path))
    assert r.exit_code == 0, r.output
    assert STREAMED in r.stderr and "unpacking" not in r.stderr
    dest = tmp_path / "dest"
    ref = unzip_tree(z, tmp_path / "u")
    assert installed(dest) == tree_listing(ref)
    assert (dest / "lib/libtorch.so").is_symlink() and os.readlink(dest / "lib/libtorch.so") == "libtorch.so.2"
    assert (dest / "bin/protoc").stat().st_mode & 0o111 and (dest / "share/empty").is_dir()
    from doctor.fetch.record import read_install_record

    assert read_install_record(dest)["nar_hash"] == nix_hash_sri(ref)
    assert leftovers(tmp_path) == []


class _Pipe:
    """A write-only, unseekable file: zipfile then writes a data descriptor after every entry."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, b) -> int:
        self.data += b
        return len(b)

    def flush(self) -> None:
        pass


def python_streamed_zip(path: Path) -> Path:
    """A zip written by Python's zipfile to a pipe: deflated entries with signed descriptors,
    one forced to zip64 (8-byte sizes in its descriptor), a symlink, a directory."""
    pipe = _Pipe()
    with zipfile.ZipFile(pipe, "w") as zf:
        zf.writestr(zinfo("libtorch/", 0o40755, dos=0x10), b"")
        zf.writestr(zinfo("libtorch/build-version", 0o100644), b"2.13.0+cpu\n")
        zf.writestr(zinfo("libtorch/lib/libtorch.so.2", 0o100755), os.urandom(70_000))
        zf.writestr(zinfo("libtorch/lib/libtorch.so", 0o120777), b"libtorch.so.2")
        with zf.open(zinfo("libtorch/include/big.h", 0o100644), "w", force_zip64=True) as fh:
            fh.write(b"#define X 1\n" * 20_000)
        zf.writestr(zinfo("libtorch/share/cmake/Torch/TorchConfig.cmake", 0o100644), b"set(TORCH_FOUND TRUE)\n")
    path.write_bytes(bytes(pipe.data))
    infos = zipfile.ZipFile(path).infolist()
    assert all(i.flag_bits & 0x08 for i in infos if not i.is_dir())
    return path


@pytest.mark.parametrize("chunk,threaded", [(1, False), (7, False), (4096, True), (1 << 20, True)])
def test_any_chunking_gives_the_tree_extract_zip_makes(tmp_path, chunk, threaded):
    for z in (info_zip(tmp_path), python_streamed_zip(tmp_path / "py.zip")):
        data = z.read_bytes()
        staging = tmp_path / f"s-{z.stem}"
        staging.mkdir()
        unzip = StreamUnzip(staging, reserved=NOT_HASHED)
        if threaded:
            unzip = ThreadedUnzip(unzip)
        for i in range(0, len(data), chunk):
            unzip.feed(data[i:i + chunk])
        got = adopt(unzip, z, reserved=NOT_HASHED)
        assert isinstance(got, Adopted), got
        ref = tmp_path / f"e-{z.stem}"
        ref.mkdir()
        want = extract_zip(z, ref, reserved=NOT_HASHED)
        assert got.extracted == want
        assert tree_listing(got.root) == tree_listing(ref)


def hand_zip(path: Path, entries: list[tuple[str, bytes, int, str | None, int]]) -> Path:
    """A zip written byte by byte, for the forms no tool here writes on demand: entries are
    (name, contents, method, descriptor: None | "signed" | "unsigned", Unix mode)."""
    import zlib

    local, central = bytearray(), bytearray()
    for name, data, method, descriptor, mode in entries:
        raw = name.encode()
        crc = zlib.crc32(data)
        if method == zipfile.ZIP_DEFLATED:
            packer = zlib.compressobj(6, zlib.DEFLATED, -15)
            body = packer.compress(data) + packer.flush()
        else:
            body = data
        flags = 0x08 if descriptor else 0
        offset = len(local)
        stated = (0, 0, 0) if descriptor else (crc, len(body), len(data))
        local += struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, flags, method, 0, 0x21, *stated, len(raw), 0) + raw + body
        if descriptor:
            local += (b"PK\x07\x08" if descriptor == "signed" else b"") + struct.pack("<III", crc, len(body), len(data))
        central += struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 3 << 8 | 20, 20, flags, method, 0, 0x21, crc,
                               len(body), len(data), len(raw), 0, 0, 0, 0, mode << 16, offset) + raw
    n = len(entries)
    path.write_bytes(bytes(local + central) + struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, n, n, len(central),
                                                            len(local), 0))
    return path


def test_unsigned_descriptors_and_empty_stored_entries_with_descriptors_stream(tmp_path):
    z = hand_zip(tmp_path / "hand.zip", [
        ("libtorch/", b"", zipfile.ZIP_STORED, "signed", 0o40755),  # what `zip -fd` writes for a folder
        ("libtorch/lib/libc10.so", os.urandom(50_000) * 2, zipfile.ZIP_DEFLATED, "unsigned", 0o100755),
        ("libtorch/include/empty.h", b"", zipfile.ZIP_STORED, "signed", 0o100644),
        ("libtorch/build-version", b"2.13.0+cpu\n", zipfile.ZIP_STORED, None, 0o100644),
        ("libtorch/lib/libc10.so.1", b"libc10.so", zipfile.ZIP_DEFLATED, "unsigned", 0o120777),
    ])
    data = z.read_bytes()
    unzip = StreamUnzip(tmp_path / "s", reserved=NOT_HASHED)
    (tmp_path / "s").mkdir()
    for i in range(0, len(data), 1000):
        unzip.feed(data[i:i + 1000])
    got = adopt(unzip, z, reserved=NOT_HASHED)
    assert isinstance(got, Adopted), got
    (tmp_path / "e").mkdir()
    assert got.extracted == extract_zip(z, tmp_path / "e", reserved=NOT_HASHED)
    assert tree_listing(got.root) == tree_listing(tmp_path / "e")
    assert os.readlink(got.root / "lib/libc10.so.1") == "libc10.so"


def test_a_stored_entry_with_a_descriptor_and_contents_stops_the_stream(tmp_path):
    z = hand_zip(tmp_path / "hand.zip", [
        ("libtorch/lib/libc10.so", b"its end cannot be found", zipfile.ZIP_STORED, "signed", 0o100644)])
    unzip = StreamUnzip(tmp_path / "s")
    (tmp_path / "s").mkdir()
    unzip.feed(z.read_bytes())
    assert adopt(unzip, z) == "stored entry 'libtorch/lib/libc10.so' has a data descriptor: its end cannot be found"
    assert not (tmp_path / "s").exists()  # what it wrote is gone at once


def _drop_central_record(data: bytes, name: bytes) -> bytes:
    """The zip without `name`'s central directory record: its local header and data stay,
    listed nowhere (what an unzip reading local headers would install, and unzip would not)."""
    eocd = data.rindex(b"PK\x05\x06")
    sig, disk, cd_disk, n_here, n_all, cd_size, cd_at, comment = struct.unpack_from("<4s4H2LH", data, eocd)
    records, pos = [], cd_at
    while pos < cd_at + cd_size:
        n, m, k = struct.unpack_from("<3H", data, pos + 28)
        records.append(data[pos:pos + 46 + n + m + k])
        pos += 46 + n + m + k
    kept = [r for r in records if r[46:46 + struct.unpack_from("<H", r, 28)[0]] != name]
    assert len(kept) == len(records) - 1
    central = b"".join(kept)
    return (data[:cd_at] + central
            + struct.pack("<4s4H2LH", sig, disk, cd_disk, n_here - 1, n_all - 1, len(central), cd_at, 0))


def test_an_entry_only_the_local_headers_list_is_never_installed(server, tmp_path):
    z = info_zip(tmp_path)
    tree = tmp_path / "src-tree/libtorch"
    (tree / "lib/libhidden.so").write_bytes(b"not in the central directory")
    subprocess.run(["zip", "-q", str(z), "libtorch/lib/libhidden.so"], cwd=tree.parent, check=True)
    data = _drop_central_record(z.read_bytes(), b"libtorch/lib/libhidden.so")
    server.add(NAME, data)
    r = cli(*args(server, tmp_path, "--no-lock"))
    assert r.exit_code == 0, r.output
    assert f"{FROM_FILE} (the central directory lists" in r.stderr
    dest = tmp_path / "dest"
    assert not (dest / "lib/libhidden.so").exists() and (dest / "lib/libc10.so").is_file()
    (tree / "lib/libhidden.so").unlink()  # the reference: the tree the central directory describes
    assert installed(dest) == tree_listing(tree)
    assert leftovers(tmp_path) == []


def test_a_local_header_naming_another_file_is_refused_and_never_written(server, tmp_path):
    z = info_zip(tmp_path)
    server.add(NAME, z.read_bytes())
    assert cli(*args(server, tmp_path, "--no-lock")).exit_code == 0
    dest = tmp_path / "dest"
    before = tree_listing(dest)
    data = bytearray(info_zip(tmp_path, seed=1, name="other").read_bytes())
    local = data.index(b"libtorch/bin/protoc")  # the first mention is its local header; the central one stays
    data[local:local + 19] = b"libtorch/bin/pwned!"  # same length: offsets unchanged
    server.add(NAME, bytes(data))
    r = cli(*args(server, tmp_path, "--no-lock", "--force"))
    assert r.exit_code == 1, r.output
    assert FROM_FILE in r.stderr and "the archive is damaged" in r.stderr
    assert tree_listing(dest) == before
    assert not list(tmp_path.rglob("pwned!"))
    assert leftovers(tmp_path) == []


def test_tampered_archive_streams_then_leaves_nothing_behind(server, tmp_path):
    z = info_zip(tmp_path, payload=3_000_000)
    server.add(NAME, z.read_bytes())
    assert cli(*args(server, tmp_path)).exit_code == 0  # records the lock
    dest = tmp_path / "dest"
    before = tree_listing(dest), (dest / "torch-doctor.json").read_text()
    server.add(NAME, info_zip(tmp_path, seed=7, payload=3_000_000, name="tampered").read_bytes())
    server.slow[NAME] = 3.0
    p = subprocess.Popen([sys.executable, "-m", "doctor", "fetch-libtorch", *args(server, tmp_path, "--force")],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path, env=doctor_env())
    streamed: list[str] = []
    deadline = time.monotonic() + 30
    while p.poll() is None and time.monotonic() < deadline and not streamed:
        for staging in tmp_path.glob(".dest.staging-*"):
            streamed = [f for _, _, files in os.walk(staging) for f in files]
        time.sleep(0.01)
    _, err = p.communicate(timeout=60)
    assert streamed, "nothing was unpacked while the download went on"
    assert p.returncode == 1 and "sha256 mismatch" in err, err
    assert (tree_listing(dest), (dest / "torch-doctor.json").read_text()) == before
    assert leftovers(tmp_path) == []


def test_a_download_resumed_from_an_earlier_run_unpacks_from_the_file(server, tmp_path):
    z = info_zip(tmp_path)
    data = z.read_bytes()
    server.add(NAME, data)
    server.script(NAME, [("cut", 100_000)] * 3)
    r = cli(*args(server, tmp_path, "--no-lock", "--retries", "1"))
    assert r.exit_code == 1 and "download failed after 3 attempts" in r.stderr, r.output
    assert [p.name for p in tmp_path.glob(".dest.*.part")] and not list(tmp_path.glob(".dest.staging-*"))
    r = cli(*args(server, tmp_path, "--no-lock"))
    assert r.exit_code == 0, r.output
    assert "resuming a partial download" in r.stderr
    assert f"{FROM_FILE} (the download resumed a partial file from an earlier run)" in r.stderr
    assert server.gets(NAME)[-1] == "bytes=100000-"
    assert installed(tmp_path / "dest") == tree_listing(unzip_tree(z, tmp_path / "u"))
    assert leftovers(tmp_path) == []


def test_a_connection_dropped_within_the_run_keeps_streaming(server, tmp_path):
    z = info_zip(tmp_path)
    server.add(NAME, z.read_bytes())
    server.script(NAME, [("drop", 100_000)])
    r = cli(*args(server, tmp_path, "--no-lock"))
    assert r.exit_code == 0, r.output
    assert server.gets(NAME) == [None, "bytes=100000-"]
    assert STREAMED in r.stderr
    assert installed(tmp_path / "dest") == tree_listing(unzip_tree(z, tmp_path / "u"))


def test_stored_entries_with_data_descriptors_unpack_from_the_file(server, tmp_path):
    """`zip` writing into a pipe gives every entry a descriptor; a stored one's end cannot be
    found in the stream (its length comes after it), so the file is unpacked as before."""
    src = tmp_path / "tree"
    make_tree(src)
    z = tmp_path / "piped.zip"
    with open(z, "wb") as out:
        zip_ = subprocess.Popen(["zip", "-q", "-r", "-y", "-", "libtorch"], cwd=src, stdout=subprocess.PIPE)
        out.write(zip_.stdout.read())
        assert zip_.wait() == 0
    assert any(i.flag_bits & 0x08 and i.compress_type == zipfile.ZIP_STORED and i.file_size
               for i in zipfile.ZipFile(z).infolist())
    server.add(NAME, z.read_bytes())
    r = cli(*args(server, tmp_path, "--no-lock"))
    assert r.exit_code == 0, r.output
    assert FROM_FILE in r.stderr and "has a data descriptor: its end cannot be found" in r.stderr
    assert installed(tmp_path / "dest") == tree_listing(unzip_tree(z, tmp_path / "u"))
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("name,says", [
    ("libtorch/../../escaped", "climbs out of the tree with '..'"),
    ("/tmp/escaped", "has an absolute path"),
    ("libtorch/" + "e" * 256, "has a name component over 255 bytes"),
    ("libtorch/torch-doctor.json", "is named like a file fetch-libtorch writes itself"),
    ("libtorch\\..\\escaped", "backslash"),
])
def test_a_name_the_rules_refuse_stops_the_stream_before_it_is_written(tmp_path, name, says):
    z = hand_zip(tmp_path / "evil.zip", [
        ("libtorch/build-version", b"2.13.0+cpu\n", zipfile.ZIP_STORED, None, 0o100644),
        (name, b"escaped", zipfile.ZIP_STORED, None, 0o100644)])
    staging = tmp_path / "deep/er/s"
    staging.mkdir(parents=True)
    unzip = StreamUnzip(staging, reserved=NOT_HASHED)
    unzip.feed(z.read_bytes())
    assert unzip.failed is not None and says in unzip.failed
    assert not staging.exists() and not list(tmp_path.rglob("escaped")) and not Path("/tmp/escaped").exists()


# -- large entries: inflated on the offload thread (stream_offload.py), read back from the partial file --

BIG_HEX = 10_000_000  # hex text: deflates to ~5 MB, over the offload threshold (4 MiB)


def big_zip(tmp_path: Path) -> Path:
    """The small tree, plus a large library that deflates (hex text) and a large one `zip`
    stores (random bytes): both go to the offload thread."""
    src = tmp_path / "big-tree"
    top = make_tree(src)
    (top / "lib/libtorch_cpu.so").write_text(hashlib.shake_256(b"cpu").hexdigest(BIG_HEX // 2))
    (top / "lib/libpadding.bin").write_bytes(hashlib.shake_256(b"pad").digest(5_000_000))
    out = tmp_path / "big.zip"
    subprocess.run(["zip", "-q", "-r", "-y", "-n", ".bin", str(out), "libtorch"], cwd=src, check=True)
    infos = {i.filename: i for i in zipfile.ZipFile(out).infolist()}
    assert infos["libtorch/lib/libtorch_cpu.so"].compress_type == zipfile.ZIP_DEFLATED
    assert infos["libtorch/lib/libpadding.bin"].compress_type == zipfile.ZIP_STORED
    assert all(infos[n].compress_size >= 4 << 20 for n in ("libtorch/lib/libtorch_cpu.so", "libtorch/lib/libpadding.bin"))
    return out


def feed_as_downloaded(unzip, data: bytes, part: Path, chunk: int = 256 << 10, stop_at: int | None = None,
                       buffering: int = -1) -> None:
    """What download.py does: each chunk is written to the partial file, then fed. With a
    `buffering` larger than the chunks, fed bytes reach the file only later (at the latest when
    it is closed, before the install finishes the stream), as a small last chunk may."""
    with open(part, "wb", buffering=buffering) as fh:
        for i in range(0, len(data) if stop_at is None else stop_at, chunk):
            fh.write(data[i:i + chunk])
            if buffering == -1:
                fh.flush()
            unzip.feed(data[i:i + chunk])


@pytest.mark.parametrize("threaded", [False, True])
def test_large_entries_are_inflated_beside_the_stream_into_the_same_tree(tmp_path, threaded):
    z = big_zip(tmp_path)
    (tmp_path / "s").mkdir()
    unzip = StreamUnzip(tmp_path / "s", reserved=NOT_HASHED, source=tmp_path / "z.part")
    sink = ThreadedUnzip(unzip) if threaded else unzip
    feed_as_downloaded(sink, z.read_bytes(), tmp_path / "z.part")
    got = adopt(sink, z, reserved=NOT_HASHED)
    assert isinstance(got, Adopted), got
    assert len(unzip._offload.finished) == 2  # both large entries went through the offload thread
    (tmp_path / "e").mkdir()
    assert got.extracted == extract_zip(z, tmp_path / "e", reserved=NOT_HASHED)
    assert tree_listing(got.root) == tree_listing(tmp_path / "e")


def test_large_entries_wait_for_bytes_still_in_the_downloads_write_buffer(tmp_path):
    z = big_zip(tmp_path)
    (tmp_path / "s").mkdir()
    unzip = StreamUnzip(tmp_path / "s", reserved=NOT_HASHED, source=tmp_path / "z.part")
    feed_as_downloaded(unzip, z.read_bytes(), tmp_path / "z.part", chunk=64 << 10, buffering=32 << 20)
    got = adopt(unzip, z, reserved=NOT_HASHED)
    assert isinstance(got, Adopted), got
    assert len(unzip._offload.finished) == 2
    (tmp_path / "e").mkdir()
    assert got.extracted == extract_zip(z, tmp_path / "e", reserved=NOT_HASHED)
    assert tree_listing(got.root) == tree_listing(tmp_path / "e")


def test_a_large_entry_whose_crc_is_wrong_stops_the_stream_and_leaves_nothing(tmp_path):
    big = hashlib.shake_256(b"x").digest(5 << 20)
    z = hand_zip(tmp_path / "hand.zip", [("libtorch/build-version", b"2.13.0+cpu\n", zipfile.ZIP_STORED, None, 0o100644),
                                         ("libtorch/lib/libc10.so", big, zipfile.ZIP_STORED, None, 0o100644)])
    data = bytearray(z.read_bytes())
    at = data.index(b"PK\x03\x04", 1) + 14  # the second local header's CRC-32
    data[at:at + 4] = b"\0\0\0\0"
    (tmp_path / "s").mkdir()
    unzip = StreamUnzip(tmp_path / "s", source=tmp_path / "z.part")
    feed_as_downloaded(unzip, bytes(data), tmp_path / "z.part")
    assert unzip.finish() == "entry 'libtorch/lib/libc10.so': its size or CRC-32 disagrees with its header"
    assert not (tmp_path / "s").exists()


def test_a_large_deflated_entry_that_is_damaged_stops_the_stream(tmp_path):
    z = big_zip(tmp_path)
    data = bytearray(z.read_bytes())
    info = zipfile.ZipFile(z).getinfo("libtorch/lib/libtorch_cpu.so")
    start = info.header_offset + 30 + len(info.filename) + len(info.extra)
    data[start + 1000:start + 1100] = bytes(100)  # inside the deflate stream
    (tmp_path / "s").mkdir()
    unzip = StreamUnzip(tmp_path / "s", source=tmp_path / "z.part")
    feed_as_downloaded(unzip, bytes(data), tmp_path / "z.part")
    why = unzip.finish()
    assert why is not None and why.startswith("entry 'libtorch/lib/libtorch_cpu.so': "), why
    assert not (tmp_path / "s").exists()


def test_abandoned_while_a_large_entry_is_inflated_stops_the_thread_and_removes_the_tree(tmp_path):
    z = big_zip(tmp_path)
    info = zipfile.ZipFile(z).getinfo("libtorch/lib/libtorch_cpu.so")
    (tmp_path / "s").mkdir()
    unzip = StreamUnzip(tmp_path / "s", source=tmp_path / "z.part")
    # the bytes stop in the middle of the large entry: its thread waits for more
    feed_as_downloaded(unzip, z.read_bytes(), tmp_path / "z.part", chunk=64 << 10,
                       stop_at=info.header_offset + info.compress_size // 2)
    thread = unzip._offload._thread
    assert thread.is_alive()
    unzip.abandon("the install ended")
    assert not thread.is_alive() and not (tmp_path / "s").exists()


# -- the central directory read first (directory.py) and the files created ahead (precreate.py) --

AHEAD = "read the central directory first:"


@pytest.fixture
def directory_first(monkeypatch):
    """Read the central directory first whatever the archive's size (the fixtures are small)."""
    from doctor.fetch import download

    monkeypatch.setattr(download, "DIRECTORY_FIRST", 0)


@pytest.mark.parametrize("entries", ["small", "large"])
def test_files_created_ahead_of_their_bytes_make_the_tree_unzip_makes(server, tmp_path, entries, directory_first):
    z = info_zip(tmp_path) if entries == "small" else big_zip(tmp_path)
    server.add(NAME, z.read_bytes())
    r = cli(*args(server, tmp_path))
    assert r.exit_code == 0, r.output
    assert f"{AHEAD} {len(zipfile.ZipFile(z).infolist())} entries" in r.stderr
    assert STREAMED in r.stderr and "unpacking" not in r.stderr
    from doctor.fetch.directory import TAIL

    assert server.gets(NAME)[:2] == [None, f"bytes=-{TAIL}"]
    dest = tmp_path / "dest"
    ref = unzip_tree(z, tmp_path / "u")
    assert installed(dest) == tree_listing(ref)
    from doctor.fetch.record import read_install_record

    assert read_install_record(dest)["nar_hash"] == nix_hash_sri(ref)
    assert leftovers(tmp_path) == []


def _served_apart(z: Path, old: bytes, new: bytes) -> bytes:
    """The zip with `old` changed to `new` (same length) in its central directory only."""
    data = bytearray(z.read_bytes())
    at = data.rindex(old)  # the last mention is the central record's
    assert at > data.rindex(b"PK\x01\x02") - 200_000 and len(old) == len(new)
    data[at:at + len(old)] = new
    return bytes(data)


@pytest.mark.parametrize("old,new,why", [
    (b"libtorch/bin/protoc", b"libtorch/bin/pwned!", "is not the entry the central directory lists there"),
    (b"libtorch/include/late.h", b"libtorch/include/LATE.h", "is not the entry the central directory lists there"),
])
def test_a_directory_read_first_that_names_other_files_is_never_installed(server, tmp_path, directory_first, old,
                                                                          new, why):
    """A mirror whose range answers come from another copy than its body: the files created
    from them are thrown away with the streamed tree and the archive is unpacked from the file."""
    z = info_zip(tmp_path)
    server.add(NAME, z.read_bytes())
    server.script(NAME, [None, ("lie", _served_apart(z, old, new))])
    r = cli(*args(server, tmp_path, "--no-lock"))
    assert r.exit_code == 0, r.output
    assert AHEAD in r.stderr and FROM_FILE in r.stderr and why in r.stderr
    assert installed(tmp_path / "dest") == tree_listing(unzip_tree(z, tmp_path / "u"))
    assert not [p for p in (tmp_path / "dest").rglob("*") if p.name in ("pwned!", "LATE.h")]
    assert leftovers(tmp_path) == []


def test_a_directory_read_first_that_differs_only_in_modes_is_caught_at_the_end(server, tmp_path, directory_first):
    z = info_zip(tmp_path)
    data = bytearray(z.read_bytes())
    attrs = data.rindex(b"PK\x01\x02") + 38  # the last central record's external attributes
    data[attrs + 2] ^= 0o22  # group and others may write: nothing the stream itself looks at
    server.add(NAME, z.read_bytes())
    server.script(NAME, [None, ("lie", bytes(data))])
    r = cli(*args(server, tmp_path, "--no-lock"))
    assert r.exit_code == 0, r.output
    assert f"{FROM_FILE} (the central directory read first differs from the downloaded file's)" in r.stderr
    assert installed(tmp_path / "dest") == tree_listing(unzip_tree(z, tmp_path / "u"))
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize("step", [("norange",), "changed"], ids=["no ranges", "another copy (If-Range)"])
def test_a_server_without_ranges_streams_as_before(server, tmp_path, directory_first, step):
    z = info_zip(tmp_path)
    server.add(NAME, z.read_bytes())
    server.script(NAME, [None, step if step != "changed" else ("serve", _served_apart(z, b"protoc", b"PROTOC"))])
    r = cli(*args(server, tmp_path, "--no-lock"))
    assert r.exit_code == 0, r.output
    assert "the central directory was not read first (HTTP 200 to a range request)" in r.stderr
    assert STREAMED in r.stderr and AHEAD not in r.stderr
    assert installed(tmp_path / "dest") == tree_listing(unzip_tree(z, tmp_path / "u"))


def test_where_no_thread_can_start_the_files_are_created_as_they_arrive(server, tmp_path, directory_first,
                                                                       monkeypatch):
    import threading

    real_start = threading.Thread.start

    def start(self):
        if self.name == "doctor-precreate":
            raise RuntimeError("can't start new thread")
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start)
    z = info_zip(tmp_path)
    server.add(NAME, z.read_bytes())
    r = cli(*args(server, tmp_path, "--no-lock"))
    assert r.exit_code == 0, r.output
    assert STREAMED in r.stderr and AHEAD not in r.stderr
    assert installed(tmp_path / "dest") == tree_listing(unzip_tree(z, tmp_path / "u"))
    assert leftovers(tmp_path) == []


def test_a_directory_naming_the_doctors_own_files_is_not_used(server, tmp_path, directory_first):
    """The same rule as for a local header: the unpack from the file then refuses the archive."""
    z = info_zip(tmp_path)
    server.add(NAME, z.read_bytes())
    server.script(NAME, [None, ("lie", _served_apart(z, b"libtorch/bin/protoc", b"libtorch/.ok/protoc"))])
    r = cli(*args(server, tmp_path, "--no-lock"))
    assert r.exit_code == 0, r.output
    assert AHEAD not in r.stderr and STREAMED in r.stderr
    assert installed(tmp_path / "dest") == tree_listing(unzip_tree(z, tmp_path / "u"))
