"""`--binary` on programs built here by real g++: against the real torch wheel, against ELF
stubs with real sonames (a CUDA libtorch's libtorch_cuda.so, an old conda libstdc++.so.6 with
its real symbol versions), with and without -Wl,--as-needed, both ABIs."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from doctor.diagnose.binary import binary_area
from doctor.host import Host
from doctor.model import Level
from doctor.probe.binary import inspect_binary
from doctor.probe.loader import read_ld_cache
from testsupport.elf_stubs import OLD_LIBSTDCXX_MAP, OLD_LIBSTDCXX_SRC, gxx

PROGRAM = r"""
#include <string>
namespace c10 { struct Device { explicit Device(const std::string& s); std::string str() const; std::string name; }; }
int main() { c10::Device d(std::string("cpu")); return d.str().size() == 3 ? 0 : 1; }
"""
WHEEL_PROGRAM = r"""
#include <c10/core/Device.h>
int main() { c10::Device d(std::string("cpu")); return d.str() == "cpu" ? 0 : 1; }
"""
CUDA_STUB = "extern \"C\" int warp_size() { return 32; }\n"


@pytest.fixture(scope="module")
def cache():
    return read_ld_cache(Host.from_system())


def _check(path: Path, cache, env=None, active_abi=None):
    host = Host.for_test(Path("/"), {"PATH": "/usr/bin:/bin", **(env or {})})
    facts = inspect_binary(host, str(path), cache)
    return facts, binary_area(facts, active_abi)


def test_program_against_the_real_wheel_is_clean(tmp_path, wheel_root, cache):
    (tmp_path / "p.cpp").write_text(WHEEL_PROGRAM)
    lib = wheel_root / "lib"
    gxx("-std=c++17", "-o", tmp_path / "p", tmp_path / "p.cpp", f"-I{wheel_root}/include", f"-L{lib}", "-lc10",
        f"-Wl,-rpath,{lib}")
    facts, area = _check(tmp_path / "p", cache)
    assert facts.program_abi == "cxx11" and facts.torch_abi_loaded == "cxx11"
    assert [(r.name, r.via) for r in facts.needed if r.name == "libc10.so"] == [("libc10.so", "RUNPATH")]
    assert facts.unresolved_count == 0 and facts.libstdcxx and "GLIBCXX_3.4.30" in facts.libstdcxx_versions
    assert area.findings == [], [f.title for f in area.findings]
    assert not facts.torch_cuda_beside  # the CPU wheel has no libtorch_cuda.so


def test_old_abi_program_run_with_the_wheel(tmp_path, wheel_root, abi_libs, cache):
    (tmp_path / "p.cpp").write_text(PROGRAM)
    old = abi_libs["pre-cxx11"].parent
    gxx("-D_GLIBCXX_USE_CXX11_ABI=0", "-o", tmp_path / "p", tmp_path / "p.cpp", f"-L{old}", "-lc10")
    facts, area = _check(tmp_path / "p", cache, {"LD_LIBRARY_PATH": str(wheel_root / "lib")})
    assert facts.program_abi == "pre-cxx11" and facts.torch_abi_loaded == "cxx11"
    ids = {f.id: f for f in area.findings}
    assert set(ids) == {"abi.mismatch", "binary.symbol-unresolved"}
    assert "-D_GLIBCXX_USE_CXX11_ABI=1" in ids["abi.mismatch"].fix
    assert any("_ZN3c106DeviceC1ERKSs" in s for s in facts.unresolved_symbols)
    # The same program with its own libc10 beside it: consistent, clean.
    facts, area = _check(tmp_path / "p", cache, {"LD_LIBRARY_PATH": str(old)})
    assert area.findings == [] and facts.torch_abi_loaded == "pre-cxx11"


@pytest.mark.parametrize("as_needed", [True, False])
def test_as_needed_drops_libtorch_cuda(tmp_path, abi_libs, cache, as_needed):
    lib = tmp_path / "libtorch/lib"
    lib.mkdir(parents=True)
    shutil.copy(abi_libs["cxx11"], lib / "libc10.so")
    (tmp_path / "cuda.cpp").write_text(CUDA_STUB)
    gxx("-shared", "-fPIC", "-Wl,-soname,libtorch_cuda.so", "-o", lib / "libtorch_cuda.so", tmp_path / "cuda.cpp")
    (tmp_path / "p.cpp").write_text(PROGRAM)
    mode = "-Wl,--as-needed" if as_needed else "-Wl,--no-as-needed"
    gxx("-o", tmp_path / "p", tmp_path / "p.cpp", f"-L{lib}", mode, "-lc10", "-ltorch_cuda", f"-Wl,-rpath,{lib}")
    facts, area = _check(tmp_path / "p", cache)
    assert facts.torch_cuda_beside
    assert ("libtorch_cuda.so" in [r.name for r in facts.needed]) is (not as_needed)
    assert [f.id for f in area.findings] == (["link.as-needed"] if as_needed else [])


def test_old_conda_libstdcxx_shadows_the_system_one(tmp_path, cache):
    conda = tmp_path / "conda/lib"
    conda.mkdir(parents=True)
    (tmp_path / "v.map").write_text(OLD_LIBSTDCXX_MAP)
    (tmp_path / "s.cpp").write_text(OLD_LIBSTDCXX_SRC)
    gxx("-shared", "-fPIC", "-nostdlib", "-Wl,-soname,libstdc++.so.6", f"-Wl,--version-script={tmp_path / 'v.map'}",
        "-o", conda / "libstdc++.so.6", tmp_path / "s.cpp")
    (tmp_path / "p.cpp").write_text('#include <string>\n#include <iostream>\nint main(){ std::string s("x"); '
                                    'std::cout << s << std::endl; }\n')
    gxx("-o", tmp_path / "p", tmp_path / "p.cpp")
    facts, area = _check(tmp_path / "p", cache, {"LD_LIBRARY_PATH": str(conda)})
    assert facts.libstdcxx == str(conda / "libstdc++.so.6")
    assert facts.libstdcxx_versions == ["CXXABI_1.3", "CXXABI_1.3.7", "GLIBCXX_3.4", "GLIBCXX_3.4.19"]
    too_old = next(f for f in area.findings if f.id == "glibc.too-old")
    assert "GLIBCXX_3.4.21" in too_old.title and "GLIBCXX_3.4.19" in too_old.detail
    # Without the conda directory the system's libstdc++ serves it.
    facts, area = _check(tmp_path / "p", cache)
    assert [f.id for f in area.findings] == []


def test_missing_library_and_non_elf(tmp_path, abi_libs, cache):
    lib = tmp_path / "lib"
    lib.mkdir()
    shutil.copy(abi_libs["cxx11"], lib / "libc10.so")
    (tmp_path / "p.cpp").write_text(PROGRAM)
    gxx("-o", tmp_path / "p", tmp_path / "p.cpp", f"-L{lib}", "-lc10")
    facts, area = _check(tmp_path / "p", cache)
    assert [f.id for f in area.findings] == ["loader.library-not-found"]
    (tmp_path / "text").write_text("#!/bin/sh\n")
    facts, area = _check(tmp_path / "text", cache)
    assert not facts.readable and [f.id for f in area.findings] == ["binary.unreadable"]
    facts, area = _check(tmp_path / "nothing", cache)
    assert facts.error == "no such file" and area.findings[0].level is Level.ERROR
