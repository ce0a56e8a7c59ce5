"""The CUDA-stack explain ids on their real logs: ids, and advice made concrete from the log."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

from doctor.explain import explain_text

LOGS = Path(__file__).resolve().parent.parent / "fixtures" / "logs"
BLOCK = [e for e in json.loads((LOGS / "index.json").read_text())["logs"] if e.get("block") == "cuda-stack (issue 13)"]
IDS = ["cuda.host-compiler-unsupported", "cuda.toolkit-mismatch", "cuda.toolkit-not-found", "cuda.library-too-old",
       "cmake.nvtoolsext-missing", "cmake.torch-library-missing", "openmp.duplicate-runtime", "build.ninja-missing"]


def _one(name: str):
    [finding] = explain_text((LOGS / name).read_text(), source=name)
    return finding


def test_every_new_id_has_public_logs_that_match():
    counts = Counter(i for e in BLOCK for i in e["ids"])
    assert set(counts) == set(IDS)
    # cmake.torch-library-missing has one public log so far (see docs/cuda.md).
    assert {i: n for i, n in counts.items() if n < 3} == {"cmake.torch-library-missing": 1}
    for entry in BLOCK:
        assert entry["source"].startswith("https://github.com/")
        assert [f.id for f in explain_text((LOGS / entry["file"]).read_text(), source=entry["file"])] == entry["ids"]


def test_host_compiler_advice_uses_the_catalog():
    f = _one("cuda.host-compiler-unsupported--pytorch-136556.log")
    assert "gcc ≤ 12" in f.title and "CUDAHOSTCXX=/usr/bin/g++-12" in f.fix and "CUDA ≥ 12.4" in f.fix
    f = _one("cuda.host-compiler-unsupported--cutorch-631.log")
    assert "gcc ≤ 5" in f.title and "CUDA ≥ 11.8" in f.fix


def test_toolkit_mismatch_reads_both_versions_across_the_wrapped_line():
    f = _one("cuda.toolkit-mismatch--autoalign-25.log")
    assert f.title == "nvcc is CUDA 11.8, torch was built with CUDA 12.4"
    assert "majors differ" in f.detail and "/whl/cu118" in f.fix


def test_library_advice_names_the_library():
    assert "nvidia-nvjitlink-cu12>=12.4" in _one("cuda.library-too-old--nvjitlink-pytorch-131312.log").fix
    f = _one("cuda.library-too-old--nvjitlink-ragflow-4466.log")
    assert "/usr/local/cuda-12.1/lib64" in f.fix
    assert "NCCL 2.19" in _one("cuda.library-too-old--nccl-yolov10-306.log").detail
    assert _one("cuda.library-too-old--cudnn-co-gat-2.log").title == "cuDNN (8, 3, 3) loaded, torch was compiled against (8, 5, 0)"


def test_toolkit_not_found_uses_this_machines_toolkit(tmp_path):
    from doctor.explain_machine import explain_on, machine_facts
    from doctor.host import Host
    from testsupport.cuda_fakes import toolkit

    name = "cuda.toolkit-not-found--storm-14.log"
    text = (LOGS / name).read_text()
    toolkit(tmp_path / "usr/local/cuda", "12.8")
    host = Host.for_test(tmp_path, {"CUDA_HOME": "/opt/none"})
    [f] = explain_on(host, text, machine_facts(host), source=name)
    assert f.fix.startswith("export CUDA_HOME=/usr/local/cuda ") and "/opt/none, which has no bin/nvcc" in f.detail
    empty = Host.for_test(tmp_path / "empty")
    [f] = explain_on(empty, text, machine_facts(empty), source=name)
    assert "nvidia-cuda-nvcc-cu12" in f.fix


def test_nvcc_arch_advice_names_the_releases_and_the_logs_nvcc():
    f = _one("cuda.arch-list-invalid--internimage-284.log")
    assert f.title == "this nvcc cannot build for compute_86 (compute capability 8.6)"
    assert "needs CUDA 11.1 or newer" in f.detail and "The nvcc in the log is CUDA 11.0, older than that range" in f.detail
    assert "CUDA 11.1 or newer" in f.fix and "drop 8.6 from TORCH_CUDA_ARCH_LIST" in f.fix
    f = _one("cuda.arch-list-invalid--butterfly-23.log")  # nvcc's other wording; an nvcc too new for the GPU
    assert f.subject == "sm_30" and "CUDA 4.2 to 10.2" in f.fix
    f = _one("cuda.arch-list-invalid--fsdet-11.log")  # the excerpt lost the closing quote; no version in the log
    assert f.subject == "compute_61" and "CUDA 8.0 to 12.9" in f.fix and "The nvcc in the log" not in f.detail


def test_a_bracketed_arch_is_not_read_as_one():
    # pytorch-mask-rcnn#38: '-arch=[sm_61]' is a typo, not a toolkit that lacks 6.1
    assert explain_text("nvcc fatal   : Value '[sm_61]' is not defined for option 'gpu-architecture'") == []


def test_host_headers_nvcc_cannot_parse_get_an_older_gcc_or_a_newer_toolkit():
    f = _one("cuda.host-compiler-unsupported--capellinisptrsv-2.log")
    assert f.title == "this nvcc cannot read GCC 11's C++ headers" and "nvcc 11.5 accepted" in f.detail
    assert "CUDAHOSTCXX=/usr/bin/g++-10" in f.fix and "newer CUDA toolkit" in f.fix
    assert "g++-5" in _one("cuda.host-compiler-unsupported--nccl-102.log").fix
    # the same words about the user's own code are a C++ error, not a toolchain clash
    assert explain_text("src/ops.cu:12:5: error: parameter packs not expanded with '...':") == []


def test_tritons_own_ptxas_gets_tritons_fix():
    f = _one("cuda.arch-list-invalid--triton-8539.log")
    assert f.title == "Triton's ptxas cannot build for sm_121a (compute capability 12.1a)"
    assert f.fix.startswith("export TRITON_PTXAS_PATH=") and "CUDA 12.9 or newer" in f.fix
    f = _one("cuda.arch-list-invalid--altis-19.log")  # a toolkit's ptxas: the toolkit's fix
    assert f.subject == "sm_30" and "CUDA 4.2 to 10.2" in f.fix and "TRITON" not in f.fix


def test_the_toolkits_own_header_missing_under_torchs_cuda_headers_is_no_toolkit():
    f = _one("cuda.toolkit-not-found--box-discretization-41.log")  # gcc in Chinese
    assert "found no cuda_runtime_api.h" in f.detail
    # the same header named in a build that works is not a finding
    assert explain_text("-- Looking for cuda_runtime_api.h - found\n#include <cuda_runtime_api.h>\n") == []
