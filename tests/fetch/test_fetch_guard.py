"""The per-destination install lock (doctor/fetch/guard.py): a second fetch into the same
folder waits for the first, and the lock file is never opened through a planted symlink."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import time
from pathlib import Path

from testsupport.fetch_helpers import doctor_env, libtorch_zip, run_doctor

from doctor.fetch.record import read_install_record


def fetch_args(tmp_path: Path) -> list[str]:
    z = libtorch_zip(tmp_path / "src.zip")
    return ["fetch-libtorch", "--archive", str(z), "--version", "2.13.0", "--variant", "cpu", "--no-lock",
            "--dest", str(tmp_path / "dest")]


def test_a_fetch_waits_while_another_holds_the_destination_lock(tmp_path):
    args = fetch_args(tmp_path)
    fd = os.open(tmp_path / ".dest.lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)  # what a running fetch holds (filelock takes the same lock)
    proc = subprocess.Popen([sys.executable, "-m", "doctor", *args], cwd=tmp_path, env=doctor_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()  # blocks until the doctor says why it waits
        assert line == f"another fetch is installing into {tmp_path / 'dest'}; waiting for it\n"
        time.sleep(0.3)
        assert proc.poll() is None and not (tmp_path / "dest").exists()  # still waiting, nothing written
    finally:
        os.close(fd)  # the first fetch ends
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    assert read_install_record(tmp_path / "dest")["version"] == "2.13.0"


def test_the_lock_file_is_not_opened_through_a_symlink(tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("keep me\n")
    os.symlink(victim, tmp_path / ".dest.lock")
    r = run_doctor(*fetch_args(tmp_path), cwd=tmp_path)
    assert r.returncode == 1, r.stdout + r.stderr
    assert r.stderr.startswith("error: ") and "hint: " in r.stderr and "Traceback" not in r.stderr
    assert str(tmp_path / ".dest.lock") in r.stderr
    assert victim.read_text() == "keep me\n" and not (tmp_path / "dest").exists()


def test_a_destination_ending_in_dotdot_is_locked_and_installed_as_the_folder_it_names(tmp_path):
    """The install lock was `<dest's lexical parent>/.<dest's last name>.lock`: `deep/a/..` made
    the folder deep/a and a lock named `....lock` in it."""
    (tmp_path / "deep").mkdir()
    args = fetch_args(tmp_path)
    args[args.index("--dest") + 1] = str(tmp_path / "deep" / "a" / "..")
    r = run_doctor(*args, cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert read_install_record(tmp_path / "deep")["version"] == "2.13.0"
    assert sorted(p.name for p in tmp_path.iterdir()) == [".deep.lock", "deep", "src.zip"]
    assert not (tmp_path / "deep" / "a").exists()


def test_the_root_folder_as_destination_is_refused_before_anything_is_created(tmp_path):
    args = fetch_args(tmp_path)
    before = sorted(os.listdir("/"))
    for root in ("/", "/.."):
        args[args.index("--dest") + 1] = root
        r = run_doctor(*args, cwd=tmp_path)
        assert r.returncode == 2 and "error: --dest / is the root folder" in r.stderr and "hint: " in r.stderr, r.stderr
    assert sorted(os.listdir("/")) == before
