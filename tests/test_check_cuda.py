"""`doctor check` over a fake root: a CUDA torch (version.py as the wheel writes it), a fake
toolkit with a real nvcc banner, and what the report and its JSON then carry."""

from __future__ import annotations

import json

from doctor.check import run_check
from doctor.host import Host
from doctor.model import to_jsonable
from testsupport.cuda_fakes import compiler, fake_root, toolkit  # noqa: F401  (fake_root: a fixture)


SITE = "/venv/lib/python3.12/site-packages"


def _cuda_torch(root) -> None:
    """torch 2.8.0+cu128 in a venv, its version.py as the wheel writes it."""
    (root / SITE.lstrip("/") / "torch").mkdir(parents=True)
    (root / SITE.lstrip("/") / "torch/version.py").write_text(
        "from typing import Optional\n__version__ = '2.8.0+cu128'\ndebug = False\ncuda: Optional[str] = '12.8'\n"
        "git_version = 'a1cb3cc05d46d198467bebbb6e8fba50a325d4e7'\nhip: Optional[str] = None\n")


def test_cuda_torch_with_an_older_toolkit_and_a_too_new_gcc(fake_root):
    _cuda_torch(fake_root)
    toolkit(fake_root / "usr/local/cuda-12.4", "12.4")
    compiler(fake_root / "bin", "gcc", "gcc-14")
    host = Host.for_test(fake_root, {"CUDA_HOME": "/usr/local/cuda-12.4", "PATH": str(fake_root / "bin")},
                         sys_path=[SITE])
    report = run_check(host)
    cuda = next(a for a in report.areas if a.name == "cuda")
    assert [(f.id, f.level.value) for f in cuda.findings] == [
        ("cuda.toolkit-mismatch", "warning"), ("cuda.host-compiler-unsupported", "error")]
    arch = next(a for a in report.areas if a.name == "cuda-arch")
    assert [f.id for f in arch.findings] == ["cuda.arch-list-misses-gpu"]  # unset, and no GPU here
    facts = json.loads(json.dumps(to_jsonable(report.facts)))
    assert facts["cuda_toolkit"]["cuda_home_via"] == "CUDA_HOME"
    assert facts["cuda_toolkit"]["candidates"][0]["evidence"][0]["excerpt"].endswith("V12.4.131")
    assert facts["env"]["CUDA_HOME"] == "/usr/local/cuda-12.4"
    assert report.exit_code() == 1


def test_cpu_only_machine_adds_no_cuda_noise(fake_root):
    report = run_check(Host.for_test(fake_root))
    assert not [a for a in report.areas if a.name in ("cuda", "cuda-libs", "cuda-arch", "libstdcxx")]


def test_a_gpu_newer_than_the_toolkit_fails_extension_builds_with_the_list_unset(fake_root):
    # An RTX 5090 (12.0), torch 2.8.0+cu128 (which carries 12.0), and a CUDA 12.4 toolkit, whose nvcc
    # has no target past 9.0: cpp_extension builds for 12.0 when TORCH_CUDA_ARCH_LIST is unset.
    from testsupport.gpu_fakes import PROC_OPEN, FakeMachine

    _cuda_torch(fake_root)
    toolkit(fake_root / "usr/local/cuda-12.4", "12.4")  # prints its banner to --list-gpu-code too: no list
    machine = FakeMachine(fake_root)
    machine.nvidia_driver("570.124.06", proc=PROC_OPEN)
    machine.nvidia_smi("0, NVIDIA GeForce RTX 5090, 570.124.06, 32607, 12.0\n")
    env = {"CUDA_HOME": "/usr/local/cuda-12.4", "PATH": str(fake_root / "bin")}
    report = run_check(Host.for_test(fake_root, env, sys_path=[SITE]))
    arch = next(a for a in report.areas if a.name == "cuda-arch")
    (finding,) = [f for f in arch.findings if f.id == "cuda.arch-list-invalid"]
    assert finding.subject == "12.0:nvcc" and "CUDA 12.4's nvcc builds 5.0 to 9.0" in finding.title
    assert "compute_120" in finding.detail
    assert "(CUDA 12.8 or newer)" in finding.fix and 'TORCH_CUDA_ARCH_LIST="9.0+PTX"' in finding.fix
    # with a list the nvcc can build, nothing is wrong; with one it cannot, the entry is named
    for value, want in (("9.0+PTX", []), ("8.6;10.0", ["10.0:nvcc"])):
        report = run_check(Host.for_test(fake_root, {**env, "TORCH_CUDA_ARCH_LIST": value},
                                         sys_path=[SITE]))
        arch = next(a for a in report.areas if a.name == "cuda-arch")
        assert [f.subject for f in arch.findings if f.id == "cuda.arch-list-invalid"] == want
