"""Files the doctor opens with `os.open` for their bytes carry O_BINARY where the platform has
one. Windows opens a file in text mode otherwise (cpython#52646): `os.write` turns each \\n into
\\r\\n and a read ends at the first Ctrl-Z, so a fetched library would be installed altered and
its NAR hash read wrong. Linux has no O_BINARY: here the doctor runs with one planted before it
is imported (a bit no Linux flag uses) and `os.open` wrapped; every call from the doctor's own
code on something other than a folder must set the bit, which the wrapper strips before the
real open. Real runs: a fetch streamed from a local server (with the files created ahead), a
fetch unpacked from the file, `--verify`, and `check` of the installed tree."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import doctor
from testsupport.fetch_helpers import doctor_env, libtorch_zip

BOOT = r"""
import atexit, os, stat, sys
BIT = 1 << 30
os.O_BINARY = BIT
real_open, package, seen = os.open, os.path.join(sys.argv[1], ""), [0]
def checked(path, flags, mode=0o777, *, dir_fd=None):
    caller = sys._getframe(1).f_code.co_filename
    if caller.startswith(package):
        seen[0] += bool(flags & BIT)
        if not flags & BIT:
            try:
                folder = stat.S_ISDIR(os.stat(path, dir_fd=dir_fd).st_mode)
            except OSError:
                folder = False
            if not folder and path != os.devnull:
                sys.stderr.write(f"opened without O_BINARY: {path!r} from {caller}\n")
    return real_open(path, flags & ~BIT, mode, dir_fd=dir_fd)
os.open = checked
atexit.register(lambda: sys.stderr.write(f"binary opens: {seen[0]}\n"))
import doctor.fetch.download
doctor.fetch.download.DIRECTORY_FIRST = 0  # the files created ahead, whatever the archive's size
sys.argv = ["doctor", *sys.argv[2:]]
from doctor.cli import run
run()
"""


def booted(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", BOOT, str(Path(doctor.__file__).parent), *args],
                          capture_output=True, text=True, timeout=300,
                          env=doctor_env(HOME=str(tmp_path / "home"), LIBTORCH_HOME=str(tmp_path / "none")))


def test_every_file_the_doctor_opens_for_its_bytes_is_opened_binary(server, tmp_path):
    z = libtorch_zip(tmp_path / "libtorch.zip", payload=300_000)
    server.add("/cpu/libtorch-shared-with-deps-2.13.0+cpu.zip", z.read_bytes())
    common = ["--version", "2.13.0", "--variant", "cpu", "--no-lock"]
    streamed, from_file = tmp_path / "streamed", tmp_path / "from-file"
    runs = {
        "streamed": ["fetch-libtorch", "--mirror", server.base, "--allow-http", *common, "--dest", str(streamed)],
        "from the file": ["fetch-libtorch", "--archive", str(z), *common, "--dest", str(from_file)],
        "--verify": ["fetch-libtorch", "--archive", str(z), *common, "--dest", str(from_file), "--verify"],
        "check": ["check", "--libtorch", str(streamed), "--json"],
    }
    for name, args in runs.items():
        r = booted(tmp_path, *args)
        assert r.returncode in ((0, 1) if name == "check" else (0,)), (name, r.stderr[-2000:])
        assert "opened without O_BINARY" not in r.stderr, (name, r.stderr[-2000:])
        opens = int(r.stderr.rpartition("binary opens: ")[2].split()[0])
        assert opens > 0, name  # the wrapper saw the doctor's own opens
    assert "read the central directory first" in booted(
        tmp_path, *runs["streamed"][:-1], str(tmp_path / "again")).stderr
