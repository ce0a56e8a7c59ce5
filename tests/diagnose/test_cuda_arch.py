"""TORCH_CUDA_ARCH_LIST / PYTORCH_ROCM_ARCH against visible GPUs and the real nvcc 13.0 target list."""

from __future__ import annotations


import pytest

from doctor.diagnose.cuda_arch import built_when_unset, covers, cuda_arch_area, parse_arch_list
from doctor.host import Host
from doctor.probe.cuda_toolkit import detect_cuda_toolkit, parse_gpu_codes
from testsupport.cuda_fakes import BANNERS, toolkit

CODES_13 = parse_gpu_codes((BANNERS / "13.0.list-gpu-code.txt").read_text())


def test_real_list_gpu_code():
    assert CODES_13[0] == "sm_75" and "sm_90" in CODES_13 and "sm_120" in CODES_13 and "sm_60" not in CODES_13


@pytest.mark.parametrize(("value", "want"), [
    ("8.6", [("8.6", False, True)]),
    ("8.6+PTX", [("8.6", True, True)]),
    ("7.5 8.0;9.0a", [("7.5", False, True), ("8.0", False, True), ("9.0a", False, True)]),
    ("sm_90a", [("9.0a", False, False)]),
    ("Ampere", [("8.0", False, True), ("8.6", True, True)]),
    ("Ampere+Tegra;Hopper", [("8.7", False, True), ("9.0", True, True)]),
    ("banana", [(None, False, False)]),
])
def test_parse(value, want):
    assert [(e.cc, e.ptx, e.cpp_extension_ok) for e in parse_arch_list(value)] == want


def test_coverage_rules():
    entries = parse_arch_list("8.0;9.0a")
    assert covers(entries, "8.6") == "sm"  # sm_80 runs on 8.6
    assert covers(entries, "9.0") == "sm" and covers(entries, "12.0") is None  # 9.0a is not PTX
    assert covers(parse_arch_list("8.0+PTX"), "12.0") == "ptx"
    assert covers(parse_arch_list("9.0"), "8.6") is None


def _ids(area):
    return sorted((f.id, f.subject) for f in area.findings)


def test_list_against_gpus_and_toolkit():
    area = cuda_arch_area({"TORCH_CUDA_ARCH_LIST": "6.1;8.6;sm_90a"}, ["8.6", "12.0"], CODES_13, True)
    assert _ids(area) == [("cuda.arch-list-invalid", "6.1:nvcc"), ("cuda.arch-list-invalid", "sm_90a"),
                          ("cuda.arch-list-misses-gpu", "12.0")]
    assert next(f for f in area.findings if f.subject == "sm_90a").fix == "write it as 9.0a"
    # the fix check and explain share: which releases still build for 6.1
    assert "(CUDA 8.0 to 12.9)" in next(f for f in area.findings if f.subject == "6.1:nvcc").fix


def test_unset_says_what_will_be_built_or_that_nothing_can_be():
    area = cuda_arch_area({}, ["8.6", "8.0", "8.6"], CODES_13, True)
    assert area.findings == [] and area.details[0].endswith("8.0;8.6+PTX")
    area = cuda_arch_area({}, [], CODES_13, True)
    assert _ids(area) == [("cuda.arch-list-misses-gpu", "TORCH_CUDA_ARCH_LIST")]
    assert cuda_arch_area({}, [], [], False) is None  # CPU build, nothing set: nothing to say


def test_rocm():
    area = cuda_arch_area({"PYTORCH_ROCM_ARCH": "gfx90a;gfx1100;sm_90"}, [], [], False, ["gfx942"])
    assert _ids(area) == [("cuda.arch-list-invalid", "sm_90"), ("cuda.arch-list-misses-gpu", "gfx942")]


def test_probe_reads_the_toolkits_targets(fake_root):
    toolkit(fake_root / "tk", "13.0", gpu_codes=(BANNERS / "13.0.list-gpu-code.txt").read_text())
    facts = detect_cuda_toolkit(Host.for_test(fake_root, {"CUDA_HOME": "/tk"}))
    assert facts.active.gpu_codes == CODES_13


def test_visible_gpus_are_read_from_the_gpu_facts_shape():
    from dataclasses import dataclass, field

    from doctor.cuda_stack_check import _visible_ccs, _visible_gfx

    @dataclass
    class Dev:
        compute_capability: str | None

    @dataclass
    class Nv:
        visible_gpus: list = field(default_factory=list)

    @dataclass
    class Amd:
        usable: bool
        agents: list

    @dataclass
    class Facts:
        nvidia: Nv
        amd: Amd

    facts = Facts(Nv([Dev("8.6"), Dev(None), Dev("9.0")]), Amd(True, [{"name": "gfx942"}, {"name": "gfx90a"}]))
    assert _visible_ccs(facts) == ["8.6", "9.0"] and _visible_gfx(facts) == ["gfx90a", "gfx942"]
    assert _visible_ccs(None) == [] and _visible_gfx(Facts(Nv(), Amd(False, [{"n": "gfx942"}]))) == []


def test_unset_list_builds_each_gpu_clamped_to_the_torch_build():
    # cpp_extension: min(the GPU's capability, the newest the torch build carries)
    assert built_when_unset(["12.0", "8.6"], ("7.5", "8.0", "8.6", "9.0")) == ["8.6", "9.0"]
    assert built_when_unset(["12.0"], ()) == ["12.0"]  # the torch build unknown: unclamped


def test_an_nvcc_without_a_target_list_is_judged_by_its_release():
    # an nvcc that prints no target list (older releases lack --list-gpu-code): its release's
    # range in the catalog decides
    area = cuda_arch_area({"TORCH_CUDA_ARCH_LIST": "8.0;8.6"}, [], [], True, nvcc_release="11.0")
    (f,) = [f for f in area.findings if f.id == "cuda.arch-list-invalid"]
    assert f.subject == "8.6:nvcc" and "(CUDA 11.0's nvcc builds 3.5 to 8.0)" in f.title
    # with the list unset, the GPU itself is judged, but only when the torch build (the clamp) is known
    area = cuda_arch_area({}, ["8.6"], [], True, nvcc_release="11.0", torch_archs=("7.5", "8.0", "8.6"))
    (f,) = area.findings
    assert f.subject == "8.6:nvcc" and 'TORCH_CUDA_ARCH_LIST="8.0+PTX"' in f.fix
    assert cuda_arch_area({}, ["8.6"], [], True, nvcc_release="11.0").findings == []
    assert cuda_arch_area({}, ["8.6"], CODES_13, True, torch_archs=("8.6",)).findings == []
