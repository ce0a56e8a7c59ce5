"""Real compiler, real linker, real loader, against the torch 2.13 wheel's libtorch on this machine.

Each case breaks one thing the way users do (the ABI flag, an include dir, -L, the loader path),
runs the real toolchain, and feeds its real output to `doctor explain`. The c10-only probe keeps
each compile around a second; one test builds <torch/torch.h> in full.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from doctor.buildcheck import PROGRAMS, build_check
from doctor.explain_machine import explain_on, machine_facts
from doctor.host import Host

CLEAN = ("LD_LIBRARY_PATH", "LIBRARY_PATH", "CPATH", "CPLUS_INCLUDE_PATH", "CXX", "CXXFLAGS", "LDFLAGS",
         "LIBTORCH", "LIBTORCH_INCLUDE", "LIBTORCH_LIB", "Torch_DIR", "CMAKE_PREFIX_PATH")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in CLEAN}
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def gxx() -> str:
    path = shutil.which("g++")
    if path is None:
        pytest.fail("g++ is needed for the real build tests (apt-get install g++)")
    return path


class Machine:
    """This machine as `doctor explain` sees it: the Host, the active libtorch install, its plain facts."""

    def __init__(self, host: Host):
        from doctor.probe.libtorch import detect_libtorch
        from doctor.probe.python_torch import detect_python_torch

        self.host = host
        self.install = detect_libtorch(host, detect_python_torch(host)).active_install
        self.facts = machine_facts(host, self.install)


def explain_text(text: str, machine: Machine):
    return explain_on(machine.host, text, machine.facts)


@pytest.fixture(scope="module")
def facts(wheel_root) -> Machine:
    host = Host.from_system()
    host.env = clean_env()
    found = Machine(host)
    assert found.facts.install is not None and Path(found.facts.install.root) == wheel_root, "the wheel should be the active libtorch"
    assert found.facts.install.abi == "cxx11"
    return found


@pytest.fixture(scope="module")
def probe(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("probe") / "probe.cpp"
    src.write_text(PROGRAMS["c10"])
    return src


def compile_(gxx: str, probe: Path, *flags: str) -> subprocess.CompletedProcess:
    argv = [gxx, "-std=c++20", *flags, str(probe), "-o", str(probe.with_suffix("")), "-lc10"]
    result = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=120)
    # As make or a CI log shows it: the command line, then what the toolchain said.
    result.log = " ".join(argv) + "\n" + result.stdout + result.stderr
    return result


def test_abi_flag_0_against_the_wheel(gxx, probe, wheel_root, facts):
    result = compile_(gxx, probe, "-D_GLIBCXX_USE_CXX11_ABI=0", f"-I{wheel_root}/include", f"-L{wheel_root}/lib")
    assert result.returncode != 0
    assert "undefined reference to `c10::Device::Device(std::string const&)'" in result.log  # the real linker said it
    (finding,) = explain_text(result.log, facts)
    assert finding.id == "abi.mismatch"
    assert finding.fix.startswith("compile with -D_GLIBCXX_USE_CXX11_ABI=1")
    assert "Your command line has -D_GLIBCXX_USE_CXX11_ABI=0." in finding.detail
    assert f"at {wheel_root} uses the CXX11 std::string ABI (evidence: libc10 symbols)" in finding.detail


def test_libtorch_left_off_the_link_line_is_not_an_abi_mismatch(gxx, probe, wheel_root, facts):
    """No -lc10 at all: the real linker misses `c10::Device::Device(std::__cxx11::basic_string…)`, which
    alone reads like an ABI mismatch, and `c10::operator<<(std::ostream&, c10::Device const&)`, whose
    name is the same under both ABIs. -D_GLIBCXX_USE_CXX11_ABI=0 would not help: no id is named."""
    argv = [gxx, "-std=c++20", f"-I{wheel_root}/include", str(probe), "-o", str(probe.with_suffix(""))]
    result = subprocess.run(argv, capture_output=True, text=True, env=clean_env(), timeout=120)
    log = " ".join(argv) + "\n" + result.stdout + result.stderr
    assert result.returncode != 0
    assert "undefined reference to `c10::Device::Device(std::__cxx11::basic_string" in log  # the real linker said it
    assert "undefined reference to `c10::operator<<(std::ostream&, c10::Device const&)'" in log
    assert explain_text(log, facts) == []
    assert explain_on(Host.for_test(Path("/nonexistent-root")), log, None) == []  # --no-facts reads it alike


def test_missing_include_dir(gxx, probe, wheel_root, facts):
    result = compile_(gxx, probe, f"-L{wheel_root}/lib")
    (finding,) = explain_text(result.log, facts)
    assert finding.id == "headers.missing"
    assert f"c10/core/Device.h is in {wheel_root}/include" in finding.detail
    assert f"{wheel_root}/include:{wheel_root}/include/torch/csrc/api/include" in finding.fix


def test_missing_library_dir(gxx, probe, wheel_root, facts):
    result = compile_(gxx, probe, f"-I{wheel_root}/include")
    (finding,) = explain_text(result.log, facts)
    assert finding.id == "link.library-missing"
    assert f"libc10.so is in {wheel_root}/lib" in finding.detail
    assert f'export LIBRARY_PATH="{wheel_root}/lib' in finding.fix


def test_a_tilde_after_I_or_L_reaches_the_compiler_as_a_folder_name(gxx, probe, wheel_root, facts, tmp_path):
    """`g++ -I~/lt/include`, typed in a real bash: no shell expands a ~ that does not start a word,
    so the headers (and with -L~/…, the libraries) in the home folder are not found."""
    home = tmp_path / "home"
    home.mkdir()
    (home / "lt").symlink_to(wheel_root)
    for flags, rule in ((f"-I~/lt/include -c -o {tmp_path / 'probe.o'}", "headers.missing"),
                        (f"-I{wheel_root}/include -L~/lt/lib -o {tmp_path / 'probe'} -lc10", "link.library-missing")):
        command = f"{gxx} -std=c++20 {probe} {flags}"
        run = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120,
                             env=clean_env(HOME=str(home)))
        assert run.returncode != 0
        (finding,) = explain_text(f"{command}\n{run.stdout}{run.stderr}", facts)
        assert finding.id == rule
        tilde = next(word for word in flags.split() if "~" in word)
        written = tilde[:2] + '"$HOME' + tilde[3:] + '"'
        assert finding.fix.startswith(f"write {written} instead of {tilde}; or "), finding.fix
        assert f"The command line has {tilde}: a shell expands ~ only at the start of a word" in finding.detail
        fixed = subprocess.run(["bash", "-c", command.replace(tilde, written)], capture_output=True, text=True,
                               timeout=120, env=clean_env(HOME=str(home)))
        assert fixed.returncode == 0, fixed.stderr[-2000:]  # and the fix works


def test_running_without_the_loader_path(gxx, probe, wheel_root, facts):
    built = compile_(gxx, probe, f"-I{wheel_root}/include", f"-L{wheel_root}/lib")
    assert built.returncode == 0, built.log
    exe = str(probe.with_suffix(""))
    ran = subprocess.run([exe], capture_output=True, text=True, env=clean_env(), timeout=60)
    assert ran.returncode != 0
    (finding,) = explain_text(f"{exe}\n{ran.stderr}", facts)
    assert finding.id == "loader.library-not-found"
    assert f'export LD_LIBRARY_PATH="{wheel_root}/lib' in finding.fix
    ok = subprocess.run([exe], capture_output=True, text=True, env=clean_env(LD_LIBRARY_PATH=f"{wheel_root}/lib"), timeout=60)
    assert ok.returncode == 0 and "torch-doctor build probe: cpu" in ok.stdout  # and the fix works


@pytest.mark.parametrize("lib,fix", [("libc10_cuda.so", "fetch a CUDA build of libtorch 2.13.0: "),
                                     ("libtorchvision.so", "build and install torchvision 0.28.x")])
def test_a_library_the_active_wheel_lacks_is_not_sent_to_its_lib_dir(facts, wheel_root, lib, fix):
    """The CPU wheel here has neither (its lib dir is read for real): its LD_LIBRARY_PATH cannot help."""
    assert not (wheel_root / "lib" / lib).exists()
    line = f"./app: error while loading shared libraries: {lib}: cannot open shared object file: No such file or directory"
    (finding,) = explain_text(line, facts)
    assert finding.fix.startswith(fix), finding.fix
    assert str(wheel_root) not in finding.fix and "LD_LIBRARY_PATH=" not in finding.fix


def host_with(**env: str) -> Host:
    host = Host.from_system()
    host.env = clean_env(**env)
    return host


def test_build_check_passes_here(facts):
    result = build_check(host_with(), facts.install)
    assert result.ok and not result.findings, result.details
    assert result.summary.startswith("compiled, linked and ran a c10 program against libtorch 2.13.0+cpu")
    assert any(d.startswith("compile: ") and "-D_GLIBCXX_USE_CXX11_ABI=1" in d for d in result.details)
    area = result.area()
    assert area.name == "build" and area.level.value == "ok"


def test_build_check_with_the_old_abi_in_cxxflags_names_abi_mismatch(facts):
    result = build_check(host_with(CXXFLAGS="-D_GLIBCXX_USE_CXX11_ABI=0"), facts.install)
    assert not result.ok
    assert [f.id for f in result.findings] == ["abi.mismatch"]
    finding = result.findings[0]
    assert finding.fix.startswith("compile with -D_GLIBCXX_USE_CXX11_ABI=1")
    assert finding.area == "build" and finding.evidence[0].kind == "command"


def test_build_check_explains_a_broken_include_dir_and_lib_dir(facts, tmp_path):
    empty = str(tmp_path)
    no_headers = replace(facts.install, include_dirs=[empty, empty])
    assert [f.id for f in build_check(host_with(), no_headers).findings] == ["headers.missing"]
    no_libs = replace(facts.install, lib_dir=empty)
    assert [f.id for f in build_check(host_with(), no_libs).findings] == ["link.library-missing"]


def test_build_check_without_a_compiler_or_a_libtorch(facts):
    missing = build_check(host_with(CXX="/nonexistent/g++"), facts.install)
    assert [f.id for f in missing.findings] == ["toolchain.compiler-missing"]
    assert missing.findings[0].title.startswith("$CXX names a compiler that is not found")  # not "no compiler on PATH"
    assert missing.findings[0].fix.startswith("unset CXX")
    skipped = build_check(host_with(), None)
    assert skipped.skipped and not skipped.ok and not skipped.findings
    with pytest.raises(ValueError):
        build_check(host_with(), facts.install, mode="turbo")


@pytest.mark.slow
def test_build_check_full_builds_torch_h_and_runs_a_tensor_op(facts):
    result = build_check(host_with(), facts.install, mode="full")
    assert result.ok, result.details
    assert any("torch-doctor build probe: 8" in d for d in result.details)
