"""NAR hashes computed in Python equal what Nix's own `nix-hash` says (nix-bin)."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import zipfile
from pathlib import Path

import pytest

from testsupport.fetch_helpers import libtorch_zip, nix_hash_sri
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from doctor.fetch.extract import nar_hash_zip
from doctor import nar
from doctor.nar import nar_hash, nix_base32, sri_to_hex


def make_tree(root: Path) -> Path:
    (root / "lib").mkdir(parents=True)
    (root / "lib/libc10.so.1").write_bytes(b"\x7fELF" + bytes(range(256)) * 5)
    os.chmod(root / "lib/libc10.so.1", 0o755)
    os.symlink("libc10.so.1", root / "lib/libc10.so")
    os.symlink("../nowhere", root / "lib/dangling")
    (root / "empty").mkdir()
    (root / "include/a b").mkdir(parents=True)
    (root / "include/a b/é.h").write_text("// unicode name\n")
    (root / "include/a-b.h").write_text("")  # sorts between 'a b' and the dir contents
    (root / ("x" * 7)).write_bytes(b"1234567")  # lengths around the 8-byte padding
    (root / ("y" * 8)).write_bytes(b"12345678")
    (root / "group-exec").write_text("g+x only: not executable for Nix\n")
    os.chmod(root / "group-exec", 0o654)
    return root


def test_tree_hash_equals_nix_hash(tmp_path):
    root = make_tree(tmp_path / "t")
    assert nar_hash(root) == nix_hash_sri(root)


def test_single_file_and_symlink_roots(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"hello")
    os.chmod(f, 0o755)
    assert nar_hash(f) == nix_hash_sri(f)
    os.symlink("f", tmp_path / "l")
    assert nar_hash(tmp_path / "l") == nix_hash_sri(tmp_path / "l")
    for size in (0, nar.READ - 1, nar.READ, nar.READ + 1, 3 * nar.READ + 5):  # read READ bytes at a time
        f.write_bytes(bytes(range(256)) * (size // 256) + b"x" * (size % 256))
        assert nar_hash(f) == nix_hash_sri(f), size


def test_a_single_file_that_shrinks_after_its_stat_is_an_error_not_a_wrong_hash(tmp_path):
    f = tmp_path / "f"
    f.write_bytes(b"y" * 20)
    st = os.lstat(f)
    f.write_bytes(b"y" * 5)
    for threads in (1, 2):
        sink = nar.Digester(True, None, threads)
        with pytest.raises(ValueError, match="shrank"):
            try:
                nar._dump_root(f, st, sink)
            finally:
                sink.close()


def test_exclude_top_leaves_the_tree_as_nix_saw_it(tmp_path):
    root = make_tree(tmp_path / "t")
    before = nix_hash_sri(root)
    (root / "torch-doctor.json").write_text("{}")
    (root / ".ok").write_text("")
    assert nar_hash(root) != before
    assert nar_hash(root, exclude_top=["torch-doctor.json", ".ok"]) == before


def test_base32_and_hex_forms_match_nix_hash(tmp_path):
    root = make_tree(tmp_path / "t")
    value = nar_hash(root)
    b32 = subprocess.run(["nix-hash", "--type", "sha256", "--base32", str(root)], capture_output=True, text=True,
                         check=True).stdout.strip()
    hexa = subprocess.run(["nix-hash", "--type", "sha256", str(root)], capture_output=True, text=True,
                          check=True).stdout.strip()
    assert nix_base32(base64.b64decode(value[len("sha256-"):])) == b32
    assert sri_to_hex(value) == hexa


def test_zip_hash_equals_nix_hash_of_unzipped_tree_with_root_stripped(tmp_path):
    z = libtorch_zip(tmp_path / "l.zip")
    subprocess.run(["unzip", "-q", str(z), "-d", str(tmp_path / "out")], check=True)
    assert nar_hash_zip(z) == nix_hash_sri(tmp_path / "out/libtorch")


names = st.text(alphabet="abAB._-é 0", min_size=1, max_size=6).filter(lambda s: s not in (".", ".."))


@st.composite
def trees(draw, depth=0):
    entries = draw(st.dictionaries(names, st.integers(0, 3 if depth < 2 else 1), max_size=4))
    out = {}
    for name, kind in entries.items():
        if kind == 0:
            out[name] = ("file", draw(st.binary(max_size=20)), draw(st.booleans()))
        elif kind == 1:
            out[name] = ("link", draw(names))
        else:
            out[name] = ("dir", draw(trees(depth + 1)))
    return out


def build(root: Path, spec: dict) -> None:
    root.mkdir()
    for name, node in spec.items():
        p = root / name
        if node[0] == "file":
            p.write_bytes(node[1])
            os.chmod(p, 0o755 if node[2] else 0o644)
        elif node[0] == "link":
            os.symlink(node[1], p)
        else:
            build(p, node[1])


@settings(max_examples=25, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(spec=trees())
def test_random_trees_hash_like_nix(tmp_path_factory, spec):
    root = tmp_path_factory.mktemp("h") / "t"
    build(root, spec)
    assert nar_hash(root) == nix_hash_sri(root)
    # and through a zip made by the real `zip -r -y`, hashed without unpacking
    z = root.parent / "t.zip"
    subprocess.run(["zip", "-q", "-r", "-y", str(z), "t"], cwd=root.parent, check=True)
    with zipfile.ZipFile(z) as zf:
        single_top = bool(zf.namelist())
    if single_top:
        assert nar_hash_zip(z) == nar_hash(root)


def sized_tree(root: Path) -> Path:
    """Files on both sides of the sizes where the reader changes its way: empty, whole-read
    small files (up to nar.SMALL), large ones read in pieces (around nar.READ and nar.CHUNK),
    and enough small files that their framing fills more than one hashed block."""

    root.mkdir()
    sizes = [0, 1, 7, 8, 9, nar.SMALL - 1, nar.SMALL, nar.SMALL + 1, nar.READ - 1, nar.READ, nar.READ + 1,
             3 * nar.READ + 5, nar.CHUNK - 1, nar.CHUNK, nar.CHUNK + 1, 2 * nar.CHUNK + 7]
    for i, size in enumerate(sizes):
        p = root / f"f{i:02d}-{size}"
        p.write_bytes(hashlib.shake_256(str(size).encode()).digest(size))
        os.chmod(p, 0o755 if i % 2 else 0o644)
    many = root / "many"
    many.mkdir()
    for i in range(300):  # 300 x 4 KiB: the framing and contents fill 1 MiB blocks
        (many / f"h{i:03d}.h").write_bytes(hashlib.shake_256(b"%d" % i).digest(4096))
    os.symlink("many/h000.h", root / "link")
    return root


def test_large_and_small_files_hash_like_nix_with_and_without_the_hashing_thread(tmp_path):
    root = sized_tree(tmp_path / "t")
    expected = nix_hash_sri(root)
    for threads in (1, 2, 3):
        assert nar_hash(root, threads=threads) == expected


def nar_bytes(path: Path) -> bytes:
    """The NAR itself, as Nix writes it (`nix-store --dump`): the parts are slices of this."""
    return subprocess.run(["nix-store", "--dump", str(path)], capture_output=True, check=True).stdout


@pytest.mark.parametrize("part_size", [1000, nar.READ + 3, nar.CHUNK, 4 << 20])
def test_parts_are_the_sha256_of_slices_of_nixs_own_nar(tmp_path, part_size):
    """Cut anywhere (inside framing, inside a large file, across several files) and on any
    number of threads, each part is sha256 of the same slice of `nix-store --dump`'s output,
    and the whole hash computed beside them is nix-hash's."""
    root = sized_tree(tmp_path / "t")
    (root / "big").write_bytes(hashlib.shake_256(b"big").digest(3 * nar.CHUNK + 11))  # spans parts
    dump = nar_bytes(root)
    slices = [hashlib.sha256(dump[i:i + part_size]).hexdigest() for i in range(0, len(dump), part_size)]
    for threads in (1, 2, 3):
        whole, parts = nar.nar_digests(root, part_size=part_size, threads=threads)
        assert (whole, parts) == (nix_hash_sri(root), slices)
        assert nar.nar_digests(root, whole=False, part_size=part_size, threads=threads) == (None, slices)
    one = nar_bytes(root / "big")
    assert nar.nar_digests(root / "big", part_size=part_size)[1] == [
        hashlib.sha256(one[i:i + part_size]).hexdigest() for i in range(0, len(one), part_size)]


def test_nar_entries_names_the_files_whose_bytes_lie_in_a_range(tmp_path):
    root = sized_tree(tmp_path / "t")
    dump = nar_bytes(root)
    content = hashlib.shake_256(str(nar.CHUNK + 1).encode()).digest(nar.CHUNK + 1)
    at = dump.index(content)  # the contents of f14-1048577
    assert nar.nar_entries(root, at + 10, at + 20) == ["f14-1048577"]
    assert nar.nar_entries(root, 0, len(dump)) == sorted(
        str(p.relative_to(root)) for p in root.rglob("*") if not p.is_dir() or p.is_symlink())
    assert nar.nar_entries(root, len(dump), len(dump) + 100) == []


def test_a_fifo_in_the_tree_is_an_error_and_the_hashing_thread_ends_with_every_file_closed(tmp_path):
    import threading

    root = sized_tree(tmp_path / "t")
    os.mkfifo(root / "many" / "zz-fifo")  # after large files and a full block: the thread is busy
    before = threading.active_count()
    fds = len(os.listdir("/proc/self/fd"))
    for threads, part_size in ((1, None), (2, None), (1, 4096), (2, 4096), (3, 4096)):
        with pytest.raises(ValueError, match="zz-fifo: Nix archives hold only files"):
            nar.nar_digests(root, part_size=part_size, threads=threads)
        assert threading.active_count() == before
        assert len(os.listdir("/proc/self/fd")) == fds  # the files handed to the hasher were closed


def test_runnable_now_reads_the_kernels_count_and_refuses_anything_else(tmp_path):
    """The hashing thread is used when fewer tasks than CPUs are runnable right now; the count
    comes from /proc/loadavg (this test's own thread is running: at least 1)."""
    from doctor.nar import _runnable_now

    assert _runnable_now() >= 1
    fake = tmp_path / "loadavg"
    fake.write_text("1.52 0.98 0.77 3/412 4242\n")
    assert _runnable_now(str(fake)) == 3
    for bad in ("", "1.52 0.98 0.77\n", "1.52 0.98 0.77 x/412 1\n", "\0" * 300):
        fake.write_text(bad)
        assert _runnable_now(str(fake)) is None
    assert _runnable_now(str(tmp_path / "missing")) is None


def test_without_pread_the_parts_are_hashed_on_one_thread_alike(tmp_path, monkeypatch):
    """Where the OS has no pread (Windows), threads would race on a shared file's offset: one
    thread reads with seek + read, and the digests are the same."""
    import threading

    root = sized_tree(tmp_path / "t")
    expected = nar.nar_digests(root, part_size=nar.READ + 3, threads=2)
    monkeypatch.setattr(nar, "_PREADV", None)
    started = []
    monkeypatch.setattr(threading.Thread, "start", lambda self: started.append(self))
    assert nar.nar_digests(root, part_size=nar.READ + 3, threads=3) == expected
    assert started == []


def test_the_recorded_part_size_keeps_a_record_small():
    from doctor.fetch.record import MAX_PARTS, part_size_for

    mib = 1 << 20
    assert part_size_for(0) == part_size_for(509 * mib) == part_size_for(4096 * mib) == 4 * mib
    assert part_size_for(4097 * mib) == 8 * mib  # a tree just over 4 GiB: 513 parts
    assert part_size_for(1 << 50) == 64 * mib  # no larger: a part's bytes are held while hashed
    assert MAX_PARTS * 64 * mib == 256 << 30


def test_the_cpus_to_hash_on_are_those_the_runnable_tasks_leave_idle():
    """/proc/loadavg counts the whole host's runnable tasks, this one among them: on a 2-CPU
    machine one other task leaves one CPU; a container held to 8 of 64 CPUs takes its share."""
    from doctor.nar import MAX_WORKERS, spare

    assert spare(2, 2, 1) == 2 and spare(2, 2, 2) == 1 and spare(2, 2, 9) == 1
    assert spare(8, 64, 30) == 4  # 29 others over 64 CPUs: ~3.6 of this process's 8 busy
    assert spare(8, 8, 30) == 1  # the same count on an 8-CPU machine: all busy
    assert spare(64, 64, 1) == spare(8, 64, 1) == MAX_WORKERS
    assert spare(1, 1, 1) == 1


def test_where_no_thread_can_start_the_walker_hashes_alone(tmp_path, monkeypatch):
    """A machine out of threads (ulimit -u, a container's pids limit): the second thread fails
    to start, the first is stopped, and the walker hashes everything itself, alike."""
    import threading

    root = sized_tree(tmp_path / "t")
    expected = nar.nar_digests(root, part_size=nar.READ + 3, threads=1)
    real_start, started = threading.Thread.start, []

    def start_once(self):
        if started:
            raise RuntimeError("can't start new thread")
        started.append(self)
        real_start(self)

    monkeypatch.setattr(threading.Thread, "start", start_once)
    before = threading.active_count()
    assert nar.nar_digests(root, part_size=nar.READ + 3, threads=3) == expected
    assert len(started) == 1 and not started[0].is_alive() and threading.active_count() == before
