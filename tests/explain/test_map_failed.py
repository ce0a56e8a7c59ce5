"""loader.map-failed read from the loader's own words, produced here: a library on a noexec mount,
and libtorch under an address-space limit (`ulimit -v`). glibc 2.36 gives both the same line, with
no reason; older glibc adds one, and then the finding names the cause."""

from __future__ import annotations

import resource
import shlex
import subprocess
import sys

import pytest
from testsupport.ci_support import wheel_libtorch

from doctor.explain import explain_text

LOAD = "import ctypes, sys; ctypes.CDLL(sys.argv[1])"


def _only(text: str):
    (finding,) = explain_text(text)
    assert finding.id == "loader.map-failed", finding
    return finding


def test_a_library_on_a_noexec_mount(tmp_path):
    mount = tmp_path / "noexec"
    mount.mkdir()
    library = wheel_libtorch() / "lib" / "libc10.so"
    script = (f"mount -t tmpfs -o noexec,size=64m none {shlex.quote(str(mount))} && "
              f"cp {shlex.quote(str(library))} {shlex.quote(str(mount))}/ && "
              f"exec {shlex.quote(sys.executable)} -c {shlex.quote(LOAD)} {shlex.quote(str(mount / 'libc10.so'))}")
    run = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 1 and "failed to map segment from shared object" in run.stderr, run.stderr
    finding = _only(run.stderr)
    assert finding.subject == str(mount / "libc10.so")
    assert f"findmnt -no OPTIONS -T {mount}" in finding.fix and "ulimit -v" in finding.fix  # no reason given: both


def test_libtorch_under_an_address_space_limit(tmp_path):
    library = wheel_libtorch() / "lib" / "libtorch_cpu.so"  # maps ~500 MB

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (300 << 20, 300 << 20))

    run = subprocess.run([sys.executable, "-c", LOAD, str(library)], capture_output=True, text=True,
                         timeout=120, preexec_fn=limit)
    assert run.returncode == 1 and "failed to map segment from shared object" in run.stderr, run.stderr
    finding = _only(run.stderr)
    assert finding.subject == str(library) and "ulimit -v unlimited" in finding.fix


@pytest.mark.parametrize("line, said, fix, not_fix", [
    # node-memwatch#11 (a partition mounted with `users`, which implies noexec) and ZendOptimizerPlus#134
    ("Error: /home/ubuntu/src/app/node_modules/memwatch-next/build/Release/memwatch.node: failed to map segment "
     "from shared object: Operation not permitted", ": its file system is mounted noexec",
     "findmnt -no OPTIONS -T /home/ubuntu/src/app/node_modules/memwatch-next/build/Release", "ulimit"),
    ("PHP Warning:  PHP Startup: Unable to load dynamic library '/usr/lib64/php/modules/gd.so' - libjpeg.so.62: "
     "failed to map segment from shared object: Cannot allocate memory in Unknown on line 0",
     ": the address-space limit is too small", "ulimit -v unlimited", "findmnt"),
])
def test_the_reason_older_glibc_gives_names_the_cause(line, said, fix, not_fix):
    finding = _only(line)
    assert finding.title.endswith(said) and fix in finding.fix and not_fix not in finding.fix
