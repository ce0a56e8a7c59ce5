"""libtorch.lock reading and writing, the free-space verdict, and the install-record reader."""

from __future__ import annotations

import json
import multiprocessing
import os
from pathlib import Path

import pytest
from testsupport.fetch_helpers import libtorch_zip, run_doctor

from doctor.errors import DoctorError
from doctor.fetch.fsops import space_error
from doctor.fetch.record import read_install_record
from doctor.fetch.lock import lock_entry, read_lock, write_lock_entry

NAR = "sha256-" + "A" * 43 + "="


def test_round_trip_keeps_other_entries_and_is_diff_friendly(tmp_path):
    lock = tmp_path / "libtorch.lock"
    write_lock_entry(lock, "2.13.0/linux-x86_64/cpu/cxx11", {"sha256": "a" * 64, "nar_hash": NAR, "size": 1})
    write_lock_entry(lock, "2.6.0/linux-x86_64/cu124/pre-cxx11", {"sha256": "b" * 64, "nar_hash": NAR, "size": 2})
    write_lock_entry(lock, "2.13.0/linux-x86_64/cpu/cxx11", {"sha256": "c" * 64, "nar_hash": NAR, "size": 3})
    assert set(read_lock(lock)) == {"2.13.0/linux-x86_64/cpu/cxx11", "2.6.0/linux-x86_64/cu124/pre-cxx11"}
    assert lock_entry(lock, "2.13.0/linux-x86_64/cpu/cxx11")["sha256"] == "c" * 64
    text = lock.read_text()
    assert text.endswith("}\n") and '\n      "sha256": "' in text  # one field a line
    assert list(tmp_path.iterdir()) == [lock]  # no stray temp or guard files


def test_missing_lock_is_empty_and_none_path_is_no_lock(tmp_path):
    assert read_lock(tmp_path / "none.lock") == {}
    assert lock_entry(None, "x") is None


@pytest.mark.parametrize("text, message", [
    ("{not json", "is not valid JSON"),
    ('["a"]', "is not a libtorch lock file"),
    ('{"lock_version": 99, "libtorch": {}}', "written by a newer torch-doctor"),
])
def test_bad_lock_files_are_clear_errors(tmp_path, text, message):
    lock = tmp_path / "libtorch.lock"
    lock.write_text(text)
    with pytest.raises(DoctorError, match=message):
        read_lock(lock)


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_a_lock_path_that_is_no_regular_file_is_refused_before_anything_is_installed(tmp_path, kind):
    """A FIFO at --lock hung the fetch for good (a blocking open, waiting for a writer); /dev/zero
    was read up to the 16 MiB cap."""
    if kind == "fifo":
        lock = tmp_path / "f.lock"
        os.mkfifo(lock)
    else:
        lock = Path("/dev/zero")
    z = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip")
    r = run_doctor("fetch-libtorch", "--archive", str(z), "--dest", str(tmp_path / "d"), "--lock", str(lock),
                   cwd=tmp_path, timeout=30)
    assert r.returncode == 1, r.stderr
    said = "a named pipe (FIFO)" if kind == "fifo" else "a device"
    assert f"error: the lock file {lock} is {said}, not a file" in r.stderr and "hint: " in r.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("target", ["real.lock", "missing.lock"])
def test_a_symlinked_lock_is_refused_not_read_through_then_replaced_by_a_plain_file(tmp_path, target):
    real = tmp_path / "repo" / target
    real.parent.mkdir()
    if target == "real.lock":
        write_lock_entry(real, "2.6.0/linux-x86_64/cpu/cxx11", {"sha256": "a" * 64, "nar_hash": NAR})
    before = real.read_bytes() if real.exists() else None
    link = tmp_path / "sl.lock"
    link.symlink_to(Path("repo") / target)
    with pytest.raises(DoctorError, match="is a symbolic link") as err:
        read_lock(link)
    assert f"--lock {real}" in err.value.hint
    with pytest.raises(DoctorError, match="is a symbolic link"):
        write_lock_entry(link, "2.13.0/linux-x86_64/cpu/cxx11", {"sha256": "b" * 64, "nar_hash": NAR})
    assert link.is_symlink() and (real.read_bytes() if real.exists() else None) == before
    z = libtorch_zip(tmp_path / "libtorch-shared-with-deps-2.13.0+cpu.zip")
    r = run_doctor("fetch-libtorch", "--archive", str(z), "--dest", str(tmp_path / "d"), "--lock", str(link),
                   cwd=tmp_path)
    assert r.returncode == 1 and f"error: the lock file {link} is a symbolic link" in r.stderr, r.stderr
    assert link.is_symlink() and not (tmp_path / "d").exists()


def _writer(lock: str, i: int) -> None:
    write_lock_entry(Path(lock), f"2.{i}.0/linux-x86_64/cpu/cxx11", {"sha256": f"{i:064x}", "nar_hash": NAR})


def test_concurrent_writers_lose_no_entry(tmp_path):
    lock = tmp_path / "libtorch.lock"
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(str(lock), i)) for i in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(30)
    assert len(read_lock(lock)) == 6


def test_space_error():
    assert space_error(10, 100, Path("/x"), "unpack") is None
    assert space_error(3_000_000_000, 1_000_000_000, Path("/x"), "unpack 2.8 GiB") == \
        "not enough free space in /x to unpack 2.8 GiB: need about 2.8 GiB, 953.7 MiB free"


def test_read_install_record(tmp_path):
    assert read_install_record(tmp_path) is None
    (tmp_path / "torch-doctor.json").write_text("{broken")
    assert read_install_record(tmp_path) is None
    (tmp_path / "torch-doctor.json").write_text(json.dumps({"version": "2.13.0"}))
    assert read_install_record(tmp_path) is None  # not a record fetch-libtorch wrote: not trusted
