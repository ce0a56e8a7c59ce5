"""The version and variant facts explain and the fix builders state, as catalog data: each
checked against the release table (and, for the fix lines, against a real shell)."""

from __future__ import annotations

import subprocess

import pytest

from doctor import fixes
from doctor.catalog.cuda import cuda_only_library
from doctor.catalog.platforms import library_file, loader_variable, separator
from doctor.catalog.releases import (
    SERIES,
    abis,
    cuda_variants,
    glibc_needed,
    has_pre_cxx11,
    is_variant,
    last_series_with,
    newest_series_for_glibc,
    separate_project,
    series_name,
    torchvision_for,
)
from doctor.catalog.toolkit import compilers_for, cuda_library_prefixes, pip_package
from doctor.formats import clip, excerpt, human_bytes, symbol_version_key, version_tuple


def test_pre_cxx11_builds_stop_after_2_6_and_abis_agree():
    assert has_pre_cxx11("2.6.0") and has_pre_cxx11("1.13.1")
    assert not has_pre_cxx11("2.7.0") and not has_pre_cxx11("2.13.0+cpu")
    for s in SERIES:
        assert ("pre-cxx11" in abis(s.versions[0], "linux-x86_64")) == has_pre_cxx11(s.versions[0])


def test_glibc_floor_moves_to_2_28_with_2_7():
    assert glibc_needed("2.6.0") == "2.17" and glibc_needed("2.7.0") == "2.28" and glibc_needed("2.13.0") == "2.28"
    assert glibc_needed("1.2.0") is None
    assert newest_series_for_glibc("2.27") == "2.6"  # a RHEL 8-era glibc keeps 2.6
    assert newest_series_for_glibc("2.35") == SERIES[-1].series
    assert newest_series_for_glibc("2.5") is None


def test_the_last_series_of_a_variant_comes_from_the_table():
    assert last_series_with("cu118") == "2.7"
    assert last_series_with("cu121") == "2.5"
    assert last_series_with("cu999") is None
    assert cuda_variants("2.13.0") == list(SERIES[-1].cuda) and cuda_variants("0.1.0") == []


def test_torchvision_rows_follow_the_series():
    assert torchvision_for("2.6.0+cu126") == "0.21" and torchvision_for("1.13.1") == "0.14"
    assert torchvision_for("9.9.0") is None
    assert series_name("2.10.0") == "2.10"
    # one row per series of the release table, and each a distinct torchvision minor
    assert all(torchvision_for(s.versions[0]) for s in SERIES)
    assert len({torchvision_for(s.versions[0]) for s in SERIES}) == len(SERIES)


def test_cuda_only_and_separate_libraries_by_name(wheel_root):
    for name in ("libc10_cuda.so", "libtorch_cuda.so", "libtorch_cuda_linalg.so", "libcaffe2_nvrtc.so", "torch_cuda.dll",
                 "libtorch_cuda_cpp.so"):
        assert cuda_only_library(name), name
    assert separate_project("libtorchvision.so") == "torchvision" and separate_project("torchvision.dll") == "torchvision"
    assert separate_project("libtorchaudio.so") == "torchaudio" and separate_project("libtorch_cpu.so") is None
    # the real CPU wheel here: none of its libraries is CUDA-only or another project's
    libs = [p.name for p in (wheel_root / "lib").iterdir()]
    assert "libc10.so" in libs and not any(cuda_only_library(n) or separate_project(n) for n in libs), libs


def test_variant_vocabulary():
    for v in ("cpu", "cu126", "rocm6.2.4", "xpu"):
        assert is_variant(v)
    for v in ("cuda", "cu1", "rocm", "CPU", "cpu;rm -rf /", ""):
        assert not is_variant(v)


def test_compilers_per_standard_and_cuda_libraries():
    assert compilers_for(20) == (11, 14) and compilers_for(17) == (9, 10) and compilers_for(23) is None
    prefixes = cuda_library_prefixes()
    assert "libcudart" in prefixes and "cudnn64" in prefixes and "libnccl" in prefixes
    assert pip_package("nccl", 12) == "nvidia-nccl-cu12" and pip_package("nope", 12) is None
    assert pip_package("cudnn", None) == "nvidia-cudnn-cu<CUDA major>"


def test_platform_vocabulary():
    assert [loader_variable(s) for s in ("Linux", "Darwin", "Windows")] == ["LD_LIBRARY_PATH", "DYLD_LIBRARY_PATH", "PATH"]
    assert separator("Windows") == ";" and separator("Darwin") == ":"
    assert [library_file("c10", s) for s in ("Linux", "Darwin", "Windows")] == ["libc10.so", "libc10.dylib", "c10.dll"]


def test_formats():
    assert version_tuple("570.124.06") == (570, 124, 6) and version_tuple("2.6.0+cu126") == (2, 6, 0)
    assert version_tuple("abc") == () and version_tuple("12.x") == (12,)
    assert symbol_version_key("GLIBCXX_3.4.30") == (3, 4, 30)
    assert human_bytes(1536) == "1.5 KiB" and human_bytes(10) == "10 B" and human_bytes(None) == "unknown"
    assert human_bytes(5 << 40) == "5.0 TiB"
    assert human_bytes(64 << 20, compact=True) == "64 MiB" and human_bytes(1536, compact=True) == "1.5 KiB"
    assert human_bytes(1023, compact=True) == "1023 B"
    assert clip("x" * 10, 5) == "xxxx…" and clip("abc", 5) == "abc"
    assert excerpt("a\n  b\tc", 10) == "a b c"


def test_fix_builders_take_facts_from_the_catalog():
    assert fixes.other_abi_build("2.13.0", "pre-cxx11") is None
    assert fixes.other_abi_build("2.5.1", "pre-cxx11") == "or fetch the pre-cxx11 build of libtorch 2.5.1 (published up to 2.6)"
    assert fixes.abi_define("pre-cxx11") == "-D_GLIBCXX_USE_CXX11_ABI=0"
    assert "g++ ≥ 11 or clang++ ≥ 14" in fixes.cxx_standard(20)
    assert fixes.fetch("2.13.0", "cu126") == "doctor fetch-libtorch --version 2.13.0 --variant cu126"


@pytest.mark.parametrize("lib_dir", ["/opt/lib torch/lib", "/tmp/it's $HOME/`id`/lib", "/x;y/lib"])
def test_loader_path_fix_is_pasted_safely_into_a_real_shell(lib_dir):
    line = fixes.loader_path(lib_dir)
    out = subprocess.run(["bash", "-c", f'LD_LIBRARY_PATH=/usr/lib\n{line}\nprintf %s "$LD_LIBRARY_PATH"'],
                         capture_output=True, text=True, timeout=30, env={"PATH": "/usr/bin:/bin"})
    assert out.returncode == 0, out.stderr
    assert out.stdout == f"{lib_dir}:/usr/lib"
