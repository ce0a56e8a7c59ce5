"""The check command end to end: against the real torch wheel, and exit codes as a user sees them."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner
from testsupport.support import REPO, doctor_subprocess

from doctor.cli import cli

TORCH_SAYS = (
    "import json, torch; print(json.dumps({'version': torch.__version__, 'cuda': torch.version.cuda,"
    " 'abi': bool(torch._C._GLIBCXX_USE_CXX11_ABI)}))"
)


@pytest.fixture(scope="module")
def report() -> dict:
    result = doctor_subprocess("check", "--json")
    assert result.returncode in (0, 1), result.stderr
    return json.loads(result.stdout)


def test_json_agrees_with_torch_itself(report, wheel_root):
    torch_says = json.loads(subprocess.run([sys.executable, "-c", TORCH_SAYS], capture_output=True, text=True, check=True).stdout)
    python = report["facts"]["python_torch"]
    assert python["version"] == torch_says["version"] == "2.13.0+cpu"
    assert python["cuda"] is torch_says["cuda"] is None
    lt = report["facts"]["libtorch"]
    active = lt["candidates"][lt["active"]]
    assert active["root"] == str(wheel_root) and "python" in active["origins"]
    assert active["version"] == "2.13.0" and active["variant"] == "cpu"
    assert active["abi"] == ("cxx11" if torch_says["abi"] else "pre-cxx11")
    assert active["abi_source"] == "libc10 symbols"
    assert any(e["kind"] == "elf" and e["source"].endswith("libc10.so") for e in active["evidence"])
    assert active["cxx_standard"] == 20 and active["cxx_standard_source"] == "TorchConfig.cmake"


def test_json_has_loader_toolchain_and_schema(report):
    assert report["schema"] == "torch-doctor/report" and report["schema_version"] == 2
    names = [lib["library"] for lib in report["facts"]["loader"]["libraries"]]
    assert names[:3] == ["libc10.so", "libtorch.so", "libtorch_cpu.so"]
    gxx = next(c for c in report["facts"]["toolchain"]["compilers"] if c["name"] == "g++")
    assert gxx["max_std"] >= 20 and gxx["version"]
    assert {a["name"] for a in report["areas"]} >= {"system", "python_torch", "libtorch", "loader", "toolchain"}
    for finding in report["findings"]:
        assert set(finding) >= {"id", "level", "title", "fix", "evidence"}


def test_libtorch_nonexistent_exits_1_naming_it():
    result = doctor_subprocess("check", env={"LIBTORCH": "/nonexistent"})
    assert result.returncode == 1
    assert "LIBTORCH=/nonexistent does not exist" in result.stdout
    assert "unset LIBTORCH" in result.stdout


@pytest.mark.parametrize(
    "requirement, code",
    [("libtorch>=3", 1), ("abi=pre-cxx11", 1), ("libtorch>=2.5,<2.14", 0), ("torch==2.13.*", 0),
     ("abi=cxx11", 0), ("variant=cpu", 0), ("variant=cu128", 1)],
)
def test_requirements_drive_the_exit_code(requirement, code):
    result = doctor_subprocess("check", "--require", requirement)
    assert result.returncode == code, result.stdout + result.stderr
    if code:
        assert f"requirement not met: {requirement}" in result.stdout


@pytest.mark.parametrize("bad", ["libtorch>>3", "abi=cxx12", "python>=3", "variant=gpu9"])
def test_malformed_requirement_exits_2_naming_it(bad):
    result = doctor_subprocess("check", "--require", bad)
    assert result.returncode == 2
    assert bad in result.stderr and len(result.stderr.strip().splitlines()) <= 2


def test_strict_turns_warnings_into_failures():
    # Without LD_LIBRARY_PATH the loader area warns (the wheel's lib dir is not on it).
    plain = doctor_subprocess("check", env={"LD_LIBRARY_PATH": ""})
    strict = doctor_subprocess("check", "--strict", env={"LD_LIBRARY_PATH": ""})
    assert plain.returncode == 0 and strict.returncode == 1


def test_check_never_has_the_loader_look_for_libuuid(tmp_path):
    # click imports uuid, whose C part links libuuid.so.1: ld.so would look for it in every
    # LD_LIBRARY_PATH directory (a network file system on a cluster). ld.so's own trace of the
    # doctor's process (LD_DEBUG_OUTPUT writes one file per process id) says whether it looked.
    env = {k: v for k, v in os.environ.items() if not k.startswith("LIBTORCH")}
    env.update(PYTHONPATH=str(REPO), LD_DEBUG="libs", LD_DEBUG_OUTPUT=str(tmp_path / "ld"), LD_LIBRARY_PATH=str(tmp_path))
    proc = subprocess.Popen([sys.executable, "-m", "doctor", "check", "--json"], env=env, cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode in (0, 1), err
    trace = (tmp_path / f"ld.{proc.pid}").read_text(errors="replace")
    assert "find library=libc.so.6" in trace  # the trace is the doctor's, and complete
    assert "libuuid" not in trace
    made = subprocess.run([sys.executable, "-c", "import doctor.cli, uuid; print(uuid.uuid4().version)"],
                          env={**env, "LD_DEBUG": ""}, capture_output=True, text=True)
    assert made.stdout.strip() == "4", made.stderr  # uuid still works, in Python


def test_cli_runner_text_report_and_verbose():
    runner = CliRunner()
    result = runner.invoke(cli, ["check", "-v", "--color", "never"], catch_exceptions=False)
    assert "[✓] Python torch: 2.13.0+cpu" in result.output
    assert "evidence:" in result.output or "•" in result.output
    assert "\x1b[" not in result.output


def test_color_only_when_asked():
    result = CliRunner().invoke(cli, ["check", "--color", "always"], catch_exceptions=False)
    assert "\x1b[32m✓" in result.output


def test_console_entry_points_and_version():
    result = doctor_subprocess("--version")
    assert result.returncode == 0 and "torch-doctor" in result.stdout
    assert doctor_subprocess("no-such-command").returncode == 2


@pytest.mark.slow
def test_check_build_passes_here_and_fails_on_the_old_abi():
    ok = doctor_subprocess("check", "--build", env={"CXXFLAGS": "", "LD_LIBRARY_PATH": ""})
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert "Build probe (c10): compiled, linked and ran" in ok.stdout
    bad = doctor_subprocess("check", "--build", "--json", env={"CXXFLAGS": "-D_GLIBCXX_USE_CXX11_ABI=0"})
    assert bad.returncode == 1
    report = json.loads(bad.stdout)
    build_ids = [f["id"] for f in report["findings"] if f["area"] == "build"]
    assert build_ids == ["abi.mismatch"]
    assert "-D_GLIBCXX_USE_CXX11_ABI=1" in next(f["fix"] for f in report["findings"] if f["area"] == "build")


@pytest.mark.slow
def test_check_build_from_a_noexec_tmpdir_says_so_instead_of_an_unknown_failure(tmp_path):
    """A hardened /tmp (mounted noexec): the probe compiles and links, and cannot run there. Run
    in a mount namespace of its own (`unshare`: a user namespace maps this user to root there), on
    a tmpfs mounted noexec."""
    import os
    import shlex

    tmp = tmp_path / "noexec"
    tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LIBTORCH", "Torch_DIR"))}
    env.update(PYTHONPATH=str(REPO), TMPDIR=str(tmp), CXXFLAGS="", LD_LIBRARY_PATH="")
    script = (f"mount -t tmpfs -o noexec,size=64m none {shlex.quote(str(tmp))} && "
              f"exec {shlex.quote(sys.executable)} -m doctor check --build --json")
    out = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert out.stdout, out.stderr
    report = json.loads(out.stdout)
    (build,) = [f for f in report["findings"] if f["area"] == "build"]
    assert (build["id"], build["level"]) == ("build.failed", "warning")
    assert build["title"] == f"the c10 probe built, but cannot run where it was built: {tmp} is mounted noexec"
    assert "TMPDIR=" in build["fix"] and "does not recognise" not in out.stdout


def test_a_libtorch_on_a_noexec_mount_is_named_and_fetch_warns_before_installing_there(tmp_path):
    """The loader cannot map a library from a noexec file system ('failed to map segment from
    shared object'): check says so for the tree LIBTORCH names, and fetch says so before it
    installs into such a place. Both run in a mount namespace of their own on a noexec tmpfs."""
    import hashlib
    import os
    import shlex

    from testsupport.fetch_helpers import libtorch_zip

    archive = libtorch_zip(tmp_path / "lt.zip")
    mount = tmp_path / "data"
    mount.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LIBTORCH", "Torch_DIR"))}
    env.update(PYTHONPATH=str(REPO), LIBTORCH=str(mount / "lt"), LD_LIBRARY_PATH="")
    doctor = f"{shlex.quote(sys.executable)} -m doctor"
    script = (f"mount -t tmpfs -o noexec,size=64m none {shlex.quote(str(mount))} && "
              f"{doctor} fetch-libtorch --archive {shlex.quote(str(archive))} --sha256 "
              f"{hashlib.sha256(archive.read_bytes()).hexdigest()} --no-lock --version 2.13.0 --variant cpu "
              f"--dest {shlex.quote(str(mount / 'lt'))} >&2 && exec {doctor} check --json")
    out = subprocess.run(["unshare", "--user", "--map-root-user", "--mount", "sh", "-c", script],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert f"note: {mount / 'lt'} is on a file system mounted noexec: the tree installs" in out.stderr, out.stderr
    assert out.stdout, out.stderr
    titles = [f["title"] for f in json.loads(out.stdout)["findings"] if f["id"] == "libtorch.path-invalid"]
    assert f"{mount / 'lt' / 'lib'} is on a file system mounted noexec: no program can load libtorch from there" in titles


def test_backend_option_overrides_the_recommendation_and_rejects_nonsense():
    result = doctor_subprocess("check", "--json", "--backend", "cu130")
    recommended = json.loads(result.stdout)["facts"]["gpu"]["recommended"]
    assert recommended["variant"] == "cu130" and recommended["source"] == "override"
    assert any("--backend=cu130" in r for r in recommended["reasons"])
    bad = doctor_subprocess("check", "--backend", "cu99x")
    assert bad.returncode == 2 and "--backend='cu99x' is not a backend" in bad.stderr
