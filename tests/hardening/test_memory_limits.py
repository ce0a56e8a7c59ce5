"""A login node's `ulimit -v` / `ulimit -d`: the doctor fits its threads under the limit, says
up front when the limit is too small to run in, and never blames running out of memory on a
file or on itself (doctor/address_space.py, errors.reraise_out_of_resources)."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import textwrap

import pytest
from testsupport.ci_support import wheel_libtorch
from testsupport.support import REPO


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LIBTORCH", "GITHUB_"))}
    env["PYTHONPATH"] = str(REPO)
    return env


def _doctor(tmp_path, limit: int, mib: int, *args: str) -> subprocess.CompletedProcess:
    def apply() -> None:
        resource.setrlimit(limit, (mib << 20, mib << 20))

    env = _env() | {"HOME": str(tmp_path)}
    return subprocess.run([sys.executable, "-m", "doctor", *args], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=90, preexec_fn=apply)


@pytest.mark.parametrize("limit, mib", [(resource.RLIMIT_AS, 500), (resource.RLIMIT_AS, 1000),
                                        (resource.RLIMIT_DATA, 200)], ids=["ulimit-v-500M", "ulimit-v-1G", "ulimit-d-200M"])
def test_check_runs_to_its_report_under_a_login_nodes_limit(tmp_path, limit, mib):
    # twenty threads reserved 1.2 GB of address space (a 64 MiB malloc arena and an 8 MiB stack
    # each): under `ulimit -v 1000000` most runs ended "can't start new thread", at 500 MiB all
    proc = _doctor(tmp_path, limit, mib, "check", "--json")
    assert "error" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout)
    assert "error" not in report and proc.returncode == report["exit_code"] in (0, 1)
    assert {area["name"] for area in report["areas"]} >= {"libtorch", "loader", "toolchain", "gpu"}


@pytest.mark.parametrize("limit, flag, what", [(resource.RLIMIT_AS, "-v", "address-space"),
                                               (resource.RLIMIT_DATA, "-d", "data")], ids=["ulimit-v", "ulimit-d"])
def test_a_limit_too_small_to_run_in_is_said_up_front(tmp_path, limit, flag, what):
    # at 55 MiB a thread that died while starting hung the run for good; a clear error beats that
    proc = _doctor(tmp_path, limit, 100, "check", "--json")
    first, hint = proc.stderr.splitlines()[:2]
    assert proc.returncode == 1
    assert first == f"error: the {what} limit is 100 MiB (ulimit {flag}), below the 128 MiB the doctor needs"
    assert hint == f"hint: raise it in this shell (ulimit {flag} 262144), or run the doctor where the limit is higher"
    assert json.loads(proc.stdout)["error"]["id"] == "env.out-of-resources"


def test_running_out_of_memory_while_reading_a_library_is_not_blamed_on_the_library(tmp_path):
    # it was "not a readable ELF file: MemoryError", and in check "remove the tree and install it again"
    script = textwrap.dedent("""
        import os, resource, sys
        from doctor.host import Host
        from doctor.probe.binary import inspect_binary

        host = Host(dict(os.environ))
        size = next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmSize")) << 10
        resource.setrlimit(resource.RLIMIT_AS, (size + (8 << 20), resource.RLIM_INFINITY))
        try:
            facts = inspect_binary(host, sys.argv[1], {})
        except MemoryError:
            print("MemoryError")
        else:
            print("returned:", facts.error)
    """)
    library = wheel_libtorch() / "lib" / "libtorch_cpu.so"  # its symbol tables alone are tens of MB
    proc = subprocess.run([sys.executable, "-c", script, str(library)], capture_output=True, text=True,
                          env=_env(), cwd=tmp_path, timeout=90)
    assert proc.stdout.strip() == "MemoryError", proc.stdout + proc.stderr


@pytest.mark.parametrize("mib", [500, 1000], ids=["ulimit-v-500M", "ulimit-v-1G"])
@pytest.mark.parametrize("how", ["pipe", "file", "process-substitution"])
def test_explain_reads_a_log_from_stdin_or_a_pipe_under_a_login_nodes_limit(tmp_path, mib, how):
    """`make 2>&1 | doctor explain -` under `ulimit -v 1000000`: the stdin stream's read(1 GiB)
    asked for 1 GiB before reading a byte, and a 30-byte log ended "the doctor ran out of memory".
    The log is read to its end: through a pipe, a 40 MB one."""
    line = b"/usr/bin/ld: main.o: undefined reference to `c10::Error::Error(c10::SourceLocation, std::string)'\n"
    log = tmp_path / "build.log"
    log.write_bytes(line * (400_000 if how == "pipe" else 1))

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (mib << 20, mib << 20))

    env = _env() | {"HOME": str(tmp_path)}
    cmd = {"pipe": f"cat {log} | {sys.executable} -m doctor explain --no-facts --json -",
           "file": f"{sys.executable} -m doctor explain --no-facts --json - < {log}",
           "process-substitution": f"{sys.executable} -m doctor explain --no-facts --json <(cat {log})"}[how]
    proc = subprocess.run(["bash", "-c", cmd], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120,
                          preexec_fn=apply)
    assert proc.returncode == 1 and "out of memory" not in proc.stderr, proc.stderr
    report = json.loads(proc.stdout)
    assert [f["id"] for f in report["findings"]] == ["abi.mismatch"], report["findings"]
