"""Finding the toolkit as torch.utils.cpp_extension does, on fake roots with real nvcc banners."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from doctor.host import Host
from doctor.probe.cuda_toolkit import (
    detect_cuda_toolkit,
    parse_compiler_banner,
    parse_nvcc_banner,
    parse_version_json,
    parse_version_txt,
)
from testsupport.cuda_fakes import BANNERS, compiler, toolkit

EXPECTED = {"11.8": "11.8.89", "12.1": "12.1.105", "12.4": "12.4.131", "12.6": "12.6.68", "12.8": "12.8.93",
            "13.0": "13.0.88"}


@pytest.mark.parametrize("release", sorted(EXPECTED))
def test_every_real_banner_parses(release):
    assert parse_nvcc_banner((BANNERS / f"{release}.txt").read_text()) == (release, EXPECTED[release])


def test_version_files():
    assert parse_version_json('{"cuda": {"name": "CUDA SDK", "version": "12.4.1"}, "cuda_nvcc": {}}') == "12.4.1"
    assert parse_version_json('{"cuda": {"version": "12.4; rm -rf /"}}') is None
    assert parse_version_json("not json") is None
    assert parse_version_txt("CUDA Version 10.2.89\n") == "10.2.89"


@pytest.mark.parametrize(("line", "want"), [
    ("gcc (Ubuntu 13.2.0-23ubuntu4) 13.2.0", ("gcc", "13.2.0")),
    ("gcc (GCC) 14.2.1 20240912 (Red Hat 14.2.1-3)", ("gcc", "14.2.1")),
    ("Ubuntu clang version 18.1.3 (1ubuntu1)", ("clang", "18.1.3")),
    ("g++ (Debian 12.2.0-14+deb12u1) 12.2.0", ("gcc", "12.2.0")),
])
def test_compiler_banners(line, want):
    assert parse_compiler_banner(line) == want


def test_cuda_home_wins_over_path_and_default(fake_root):
    toolkit(fake_root / "opt/cuda-12.4", "12.4", version_json="12.4.1")
    toolkit(fake_root / "usr/local/cuda", "12.8")
    toolkit(fake_root / "path-cuda", "11.8")
    host = Host.for_test(fake_root, {"CUDA_HOME": "/opt/cuda-12.4", "PATH": str(fake_root / "path-cuda/bin")})
    facts = detect_cuda_toolkit(host)
    assert (facts.cuda_home, facts.cuda_home_via) == ("/opt/cuda-12.4", "CUDA_HOME")
    assert facts.active.release == "12.4" and facts.active.file_version == "12.4.1"
    assert [(c.origin, c.release) for c in facts.candidates] == [
        ("CUDA_HOME", "12.4"), ("nvcc on PATH", "11.8"), ("/usr/local/cuda", "12.8")]


def test_cuda_path_then_nvcc_on_path_then_default(fake_root):
    toolkit(fake_root / "usr/local/cuda", "12.8")
    toolkit(fake_root / "tk", "12.1")
    facts = detect_cuda_toolkit(Host.for_test(fake_root, {"CUDA_PATH": "/tk"}))
    assert facts.cuda_home_via == "CUDA_PATH" and facts.active.release == "12.1"
    facts = detect_cuda_toolkit(Host.for_test(fake_root, {"PATH": str(fake_root / "tk/bin")}))
    assert (facts.cuda_home, facts.cuda_home_via) == ("/tk", "nvcc on PATH")
    facts = detect_cuda_toolkit(Host.for_test(fake_root))
    assert (facts.cuda_home, facts.active.release) == ("/usr/local/cuda", "12.8")


def test_nothing_found(fake_root):
    facts = detect_cuda_toolkit(Host.for_test(fake_root))
    assert facts.cuda_home is None and facts.candidates == [] and facts.active is None


def test_cuda_home_without_nvcc_is_kept_as_cpp_extension_keeps_it(fake_root):
    facts = detect_cuda_toolkit(Host.for_test(fake_root, {"CUDA_HOME": "/nowhere"}))
    assert facts.cuda_home == "/nowhere" and facts.active.nvcc is None
    assert any("missing" in e.excerpt for e in facts.active.evidence)


def test_conda_and_pip_nvcc_are_listed(fake_root):
    toolkit(fake_root / "conda/env", "12.6")
    toolkit(fake_root / "venv/site/nvidia/cuda_nvcc", "12.8")
    host = Host.for_test(fake_root, {"CONDA_PREFIX": "/conda/env"}, sys_path=["/venv/site"])
    origins = [(c.origin, c.root, c.release) for c in detect_cuda_toolkit(host).candidates]
    assert ("conda", "/conda/env", "12.6") in origins
    assert ("pip", "/venv/site/nvidia/cuda_nvcc", "12.8") in origins


def test_host_compiler_order(fake_root):
    bin_dir = fake_root / "bin"
    compiler(bin_dir, "gcc", "gcc-14")
    compiler(bin_dir, "g++-13", "gcc-13")
    compiler(bin_dir, "clang", "clang-18")
    compiler(fake_root / "opt", "gcc-11", "gcc-11")
    env = {"NVCC_CCBIN": "clang", "CUDAHOSTCXX": "g++-13"}
    hc = detect_cuda_toolkit(Host.for_test(fake_root, env)).host_compiler
    assert (hc.chosen_by, hc.kind, hc.version) == ("CUDAHOSTCXX", "gcc", "13.2.0")
    hc = detect_cuda_toolkit(Host.for_test(fake_root, {"NVCC_CCBIN": "clang"})).host_compiler
    assert (hc.chosen_by, hc.kind, hc.version) == ("NVCC_CCBIN", "clang", "18.1.3")
    env = {"NVCC_PREPEND_FLAGS": "-ccbin /opt/gcc-11 -allow-unsupported-compiler", "CUDAHOSTCXX": "g++-13"}
    facts = detect_cuda_toolkit(Host.for_test(fake_root, env))
    assert (facts.host_compiler.chosen_by, facts.host_compiler.version) == ("-ccbin in NVCC_PREPEND_FLAGS", "11.4.0")
    assert facts.allow_unsupported_compiler
    hc = detect_cuda_toolkit(Host.for_test(fake_root)).host_compiler
    assert (hc.chosen_by, hc.version) == ("gcc on PATH", "14.2.1")


def test_real_toolkit_on_this_machine():
    """/usr/local/cuda here is a real CUDA 13.0 redistributable with a real nvcc."""
    nvcc = Path("/usr/local/cuda/bin/nvcc")
    if not nvcc.exists():
        pytest.fail("this machine's CUDA 13.0 toolkit is gone: scripts/test expects /usr/local/cuda")
    host = Host.for_test(Path("/"), {"PATH": "/usr/bin:/bin"})
    facts = detect_cuda_toolkit(host)
    assert facts.cuda_home == "/usr/local/cuda" and facts.active.release == "13.0"
    assert facts.host_compiler.kind == "gcc" and facts.host_compiler.path == shutil.which("gcc", path="/usr/bin:/bin")
