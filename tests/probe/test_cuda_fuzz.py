"""Parsers of outside text never raise and stay bounded, whatever they are fed."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from doctor.diagnose.cuda_arch import cuda_arch_area, parse_arch_list
from doctor.probe.cuda_libs import expectations, parse_header_version, parse_metadata
from doctor.probe.cuda_toolkit import parse_compiler_banner, parse_gpu_codes, parse_nvcc_banner, parse_version_json

TEXT = st.text(alphabet=st.characters(codec="utf-8"), max_size=400) | st.sampled_from(
    ["8.6+PTX;sm_90a Ampere", "release 12.4, V12.4.131", '{"cuda": {"version": []}}', "#define CUDNN_MAJOR 9",
     "Name: x\nVersion: 1\nRequires-Dist: nvidia-nccl-cu12==2.21.5; bad marker ((", "gcc (GCC) 14.2.1"])


@settings(max_examples=300)
@given(TEXT)
def test_parsers_never_raise(text):
    parse_nvcc_banner(text)
    parse_version_json(text)
    parse_compiler_banner(text)
    parse_header_version(text, "CUDNN")
    parse_metadata(text)
    expectations(parse_metadata(text)[2] + [text], "fuzz")
    assert len(parse_gpu_codes(text)) <= 64
    entries = parse_arch_list(text)
    assert len(entries) <= 64
    cuda_arch_area({"TORCH_CUDA_ARCH_LIST": text, "PYTORCH_ROCM_ARCH": text}, ["8.6", "12.0"], ["sm_80"], True, ["gfx90a"])


def test_huge_arch_list_is_bounded():
    area = cuda_arch_area({"TORCH_CUDA_ARCH_LIST": ";".join(["banana"] * 100000)}, [], [], True)
    assert len(area.findings) <= 64
