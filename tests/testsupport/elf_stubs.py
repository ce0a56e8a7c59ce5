"""Real ELF files built by g++ for the binary and libstdc++ tests: an old conda libstdc++.so.6
stub with its real symbol versions, and the g++ runner."""

from __future__ import annotations

import shutil
import subprocess

import pytest

# An old conda libstdc++ (gcc 4.8 era): versions only up to GLIBCXX_3.4.19 / CXXABI_1.3.7.
OLD_LIBSTDCXX_MAP = """GLIBCXX_3.4 { global: _ZNSt8ios_base4InitC1Ev; local: *; };
GLIBCXX_3.4.19 { global: _ZNSt6chrono3_V212steady_clock3nowEv; } GLIBCXX_3.4;
CXXABI_1.3 { global: __cxa_begin_catch; };
CXXABI_1.3.7 { global: __cxa_thread_atexit; } CXXABI_1.3;
"""
OLD_LIBSTDCXX_SRC = """
extern "C" void __cxa_begin_catch() {} extern "C" void __cxa_thread_atexit() {}
namespace std { struct ios_base { struct Init { Init(); }; }; ios_base::Init::Init() {}
namespace chrono { inline namespace _V2 { struct steady_clock { static long now(); }; long steady_clock::now() { return 0; } } } }
"""


def gxx(*args) -> None:
    exe = shutil.which("g++")
    if exe is None:
        pytest.fail("g++ is needed (scripts/test installs it)")
    subprocess.run([exe, *map(str, args)], check=True, capture_output=True)
