"""Shared fixtures: real ELF libraries of both ABIs and the real torch wheel."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from support import C10_SOURCE, torch_root

@pytest.fixture(scope="session")
def wheel_root() -> Path:
    return torch_root()


@pytest.fixture(scope="session")
def abi_libs(tmp_path_factory) -> dict[str, Path]:
    """libc10.so compiled here with -D_GLIBCXX_USE_CXX11_ABI=0 and =1: real ELF files of both ABIs."""
    gxx = shutil.which("g++")
    if gxx is None:
        pytest.fail("g++ is needed to build the ELF fixtures")
    out = tmp_path_factory.mktemp("elf")
    src = out / "c10.cpp"
    src.write_text(C10_SOURCE)
    libs = {}
    for abi, flag in (("pre-cxx11", "0"), ("cxx11", "1")):
        target = out / abi / "libc10.so"
        target.parent.mkdir()
        subprocess.run([gxx, "-shared", "-fPIC", f"-D_GLIBCXX_USE_CXX11_ABI={flag}", "-o", str(target), str(src)], check=True)
        libs[abi] = target
    return libs
