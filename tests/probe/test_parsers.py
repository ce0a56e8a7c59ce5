"""Parsers on real captured strings, and fuzzed: they return None or data, never raise."""

from __future__ import annotations

import subprocess
from pathlib import Path

from hypothesis import given, strategies as st

from doctor.probe.ldcache import parse_ld_so_cache
from doctor.probe.system import newest_symbol_versions, parse_cpuinfo, parse_meminfo
from doctor.probe.toolchain import parse_cmake_version, parse_compiler_version, parse_flags, parse_nvcc_version
from doctor.probe.versions import (
    parse_build_version,
    parse_config_version_cmake,
    parse_os_release,
    parse_torch_config_cmake,
    parse_version_h,
    parse_version_py,
    pep440_release,
    split_local,
)

# torch 2.13.0+cpu wheel's torch/version.py, verbatim
VERSION_PY = """from typing import Optional

__all__ = ['__version__', 'debug', 'cuda', 'git_version', 'hip', 'rocm', 'xpu']
__version__ = '2.13.0+cpu'
debug = False
cuda: Optional[str] = None
git_version = 'cf30153c4c131c8164ee7798e5022d810682e2cb'
hip: Optional[str] = None
rocm: Optional[str] = None
xpu: Optional[str] = None
"""

CUDA_VERSION_PY = """__version__ = '2.9.1+cu130'
debug = False
cuda: Optional[str] = '13.0'
git_version = 'd38164a545b4a4e4e0cf73ce67173f70574890b6'
hip: Optional[str] = None
"""


def test_version_py_real_wheel_text():
    info = parse_version_py(VERSION_PY)
    assert info["__version__"] == "2.13.0+cpu"
    assert info["cuda"] is None and info["hip"] is None and info["debug"] is False
    assert info["git_version"] == "cf30153c4c131c8164ee7798e5022d810682e2cb"
    assert parse_version_py(CUDA_VERSION_PY)["cuda"] == "13.0"


def test_version_h_and_cmake_and_build_version():
    h = "#define TORCH_VERSION_MAJOR 2\n\n#define TORCH_VERSION_MINOR 13\n\n#define TORCH_VERSION_PATCH 0\n#define TORCH_VERSION_ABI_TAG 0\n"
    assert parse_version_h(h) == "2.13.0"
    assert parse_version_h("#define TORCH_VERSION_MAJOR 2\n") is None
    assert parse_config_version_cmake('set(PACKAGE_VERSION "2.13.0")\n\n# Check whether') == "2.13.0"
    assert parse_build_version("2.9.1+cu130\n") == "2.9.1+cu130"
    assert parse_build_version("2.7.0\n") == "2.7.0"
    assert parse_build_version("<html>404</html>") is None
    assert split_local("2.9.1+cu130") == ("2.9.1", "cu130")
    assert split_local("2.2.0") == ("2.2.0", None)


def test_torch_config_cmake_abi_line_and_standard():
    old = 'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0")\nset_property(TARGET torch PROPERTY CXX_STANDARD 17)\n'
    assert parse_torch_config_cmake(old) == {"abi_flag": "0", "cxx_standard": 17}
    new = "set_target_properties(torch PROPERTIES\n    CXX_STANDARD 20\n)"
    assert parse_torch_config_cmake(new) == {"abi_flag": None, "cxx_standard": 20}


def test_os_release_debian():
    text = 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nNAME="Debian GNU/Linux"\nVERSION_ID="12"\nID=debian\n'
    assert parse_os_release(text)["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)"


CPUINFO = """processor	: 0
vendor_id	: GenuineIntel
model name	: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
physical id	: 0
core id		: 0
flags		: fpu vme sse4_2 avx avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 amx_tile

processor	: 1
model name	: Intel(R) Xeon(R) Platinum 8481C CPU @ 2.70GHz
physical id	: 0
core id		: 0
flags		: fpu vme sse4_2 avx avx2 fma avx512f avx512bw avx512_vnni avx512_bf16 amx_tile
"""

CPUINFO_ARM = """processor	: 0
BogoMIPS	: 243.75
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid sve

processor	: 1
Features	: fp asimd evtstrm aes pmull sha1 sha2 crc32 atomics fphp asimdhp cpuid sve
"""


def test_cpuinfo_x86_and_arm():
    x86 = parse_cpuinfo(CPUINFO)
    assert x86.model.startswith("Intel(R) Xeon(R) Platinum 8481C")
    assert (x86.logical, x86.physical_cores, x86.arch) == (2, 1, "x86")
    assert {"sse4_2", "avx512_bf16", "amx_tile"} <= x86.flags
    arm = parse_cpuinfo(CPUINFO_ARM)
    assert arm.logical == 2 and {"asimd", "sve"} <= arm.flags and arm.arch == "arm"


def test_meminfo():
    assert parse_meminfo("MemTotal:       24598060 kB\nMemFree:        20000000 kB\n") == 24598060 * 1024


def test_compiler_versions_real_outputs():
    assert parse_compiler_version("g++ (Debian 12.2.0-14+deb12u1) 12.2.0\nCopyright (C) 2022") == "12.2.0"
    assert parse_compiler_version("g++ (Ubuntu 9.4.0-1ubuntu1~20.04.2) 9.4.0\n") == "9.4.0"
    assert parse_compiler_version("Debian clang version 14.0.6\nTarget: x86_64-pc-linux-gnu") == "14.0.6"
    assert parse_compiler_version("Apple clang version 15.0.0 (clang-1500.3.9.4)\nTarget: arm64-apple-darwin23.4.0") == "15.0.0"
    assert parse_cmake_version("cmake version 3.25.1\n\nCMake suite maintained") == "3.25.1"
    nvcc = "nvcc: NVIDIA (R) Cuda compiler driver\nCuda compilation tools, release 13.0, V13.0.88\n"
    assert parse_nvcc_version(nvcc) == "13.0"


def test_flags():
    assert parse_flags("-O2 -D_GLIBCXX_USE_CXX11_ABI=0 -std=c++17") == (["0"], [17])
    assert parse_flags("-std=gnu++20 '-DX=a b'") == ([], [20])
    assert parse_flags("") == ([], [])


def test_ld_so_cache_matches_ldconfig():
    data = Path("/etc/ld.so.cache").read_bytes()
    parsed = parse_ld_so_cache(data)
    listed = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=True).stdout
    pairs = [line.split(" => ") for line in listed.splitlines()[1:] if " => " in line]
    assert len(pairs) == sum(len(v) for v in parsed.values())
    for left, path in pairs[:50]:
        assert path.strip() in parsed[left.split()[0]]


def test_newest_glibcxx_of_system_libstdcxx():
    cache = parse_ld_so_cache(Path("/etc/ld.so.cache").read_bytes())
    data = Path(cache["libstdc++.so.6"][0]).read_bytes()
    glibcxx, cxxabi = newest_symbol_versions(data)
    strings = subprocess.run(["strings", cache["libstdc++.so.6"][0]], capture_output=True, text=True).stdout
    versions = [int(s.rsplit(".", 1)[1]) for s in strings.split() if s.startswith("GLIBCXX_3.4.") and s.count(".") == 2 and s.rsplit(".", 1)[1].isdigit()]
    assert glibcxx == f"GLIBCXX_3.4.{max(versions)}"
    assert cxxabi.startswith("CXXABI_1.3")


@given(st.text())
def test_text_parsers_never_raise(text):
    parse_version_py(text)
    parse_version_h(text)
    parse_config_version_cmake(text)
    parse_build_version(text)
    parse_torch_config_cmake(text)
    parse_os_release(text)
    parse_cpuinfo(text)
    parse_meminfo(text)
    parse_compiler_version(text)
    parse_flags(text)


@given(st.binary())
def test_binary_parsers_never_raise(data):
    parse_ld_so_cache(data)
    parse_ld_so_cache(b"glibc-ld.so.cache1.1" + data)
    newest_symbol_versions(data)


def packaging_release(text: str) -> str | None:
    """pep440_release's rules with packaging alone: the oracle of its fast path."""
    from packaging.version import InvalidVersion, Version

    if len(text) > 100:
        return None
    try:
        release = Version(text).release
    except (InvalidVersion, ValueError):
        return None
    return None if len(release) > 4 or max(release) > 10**6 else ".".join(map(str, release))


@given(st.from_regex(r"(0|[1-9][0-9]{0,7}|0[0-9]{1,3})(\.(0|[1-9][0-9]{0,7})){0,5}(\+[a-zA-Z0-9._-]{0,80})?", fullmatch=True)
       | st.from_regex(r"v?[0-9.]{1,12}(a|b|rc|\.dev|\.post)?[0-9]{0,3}(\+[a-z0-9]{0,5})?\s?", fullmatch=True)
       | st.text(max_size=40))
def test_pep440_release_equals_packaging(text):
    assert pep440_release(text) == packaging_release(text)


def test_pep440_release_of_what_torch_says():
    assert [pep440_release(t) for t in ("2.13.0+cpu", "2.13.0", "2.14.0.dev20260101+cu130", "2.7.1+rocm6.3",
                                        "02.13", "2.13.0abc", "1.2.3.4.5", "2.13.0+" + "a" * 95)] == [
        "2.13.0", "2.13.0", "2.14.0", "2.7.1", "2.13", None, None, None]
