"""`doctor check` over a fake root: a CUDA torch (version.py as the wheel writes it), a fake
toolkit with a real nvcc banner, and what the report and its JSON then carry."""

from __future__ import annotations

import json

from doctor.check import run_check
from doctor.host import Host
from doctor.model import to_jsonable
from testsupport.cuda_fakes import compiler, fake_root, toolkit  # noqa: F401  (fake_root: a fixture)


def test_cuda_torch_with_an_older_toolkit_and_a_too_new_gcc(fake_root):
    site = fake_root / "venv/lib/python3.12/site-packages"
    (site / "torch").mkdir(parents=True)
    (site / "torch/version.py").write_text(
        "from typing import Optional\n__version__ = '2.8.0+cu128'\ndebug = False\ncuda: Optional[str] = '12.8'\n"
        "git_version = 'a1cb3cc05d46d198467bebbb6e8fba50a325d4e7'\nhip: Optional[str] = None\n")
    toolkit(fake_root / "usr/local/cuda-12.4", "12.4")
    compiler(fake_root / "bin", "gcc", "gcc-14")
    host = Host.for_test(fake_root, {"CUDA_HOME": "/usr/local/cuda-12.4", "PATH": str(fake_root / "bin")},
                         sys_path=["/venv/lib/python3.12/site-packages"])
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
