"""--from-wheel: the torch wheel on this machine laid out as a libtorch tree that CMake builds
against (the only source on Linux aarch64)."""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from testsupport.fetch_helpers import doctor_env, run_doctor, zinfo

from doctor.fetch import wheel
from doctor.fetch.record import read_install_record

CMAKE = """cmake_minimum_required(VERSION 3.18)
project(hello CXX)
find_package(Torch REQUIRED)
add_executable(hello hello.cpp)
target_link_libraries(hello "${TORCH_LIBRARIES}")
set_property(TARGET hello PROPERTY CXX_STANDARD 20)
"""
# c10 only: compiles in about a second, and c10::Device(std::string) is the symbol an ABI
# mismatch breaks, so linking it proves the tree's ABI too.
HELLO = """#include <c10/core/Device.h>
#include <iostream>
int main() {
  c10::Device d("cpu");
  std::cout << "device " << d.str() << std::endl;
  return 0;
}
"""


@pytest.mark.slow
def test_from_wheel_installs_a_tree_that_cmake_builds_against(tmp_path):
    dest = tmp_path / "libtorch"
    r = run_doctor("fetch-libtorch", "--from-wheel", "--version", "2.13.0", "--variant", "cpu", "--dest", str(dest),
                   "--lock", str(tmp_path / "libtorch.lock"), cwd=tmp_path, timeout=600)
    assert r.returncode == 0, r.stderr
    assert "Installed libtorch 2.13.0+cpu (cxx11 ABI, linux-x86_64)" in r.stdout
    rec = read_install_record(dest)
    assert (rec["source"]["kind"], rec["abi"], rec["build_version"]) == ("wheel", "cxx11", "2.13.0+cpu")
    assert rec["source"]["file"].startswith("torch-2.13.0+cpu-") and rec["source"]["file"].endswith(".whl")
    assert (dest / "build-version").read_text() == "2.13.0+cpu\n"
    assert sorted(p.name for p in dest.iterdir()) == [".ok", "build-hash", "build-version", "include", "lib",
                                                      "share", "torch-doctor.json"]
    assert "2.13.0/linux-x86_64/cpu/cxx11/wheel" in json.loads((tmp_path / "libtorch.lock").read_text())["libtorch"]

    # doctor check sees it as 2.13.0 with the CXX11 ABI
    check = run_doctor("check", "--json", cwd=tmp_path, env=doctor_env(LIBTORCH=str(dest)))
    facts = json.loads(check.stdout)["facts"]["libtorch"]
    found = [c for c in facts["candidates"] if c["root"] == str(dest)]
    assert found and found[0]["version"] == "2.13.0" and found[0]["abi"] == "cxx11"

    # and CMake's find_package(Torch) builds and runs a program against it
    src = tmp_path / "src"
    src.mkdir()
    (src / "CMakeLists.txt").write_text(CMAKE)
    (src / "hello.cpp").write_text(HELLO)
    build = tmp_path / "build"
    cfg = subprocess.run(["cmake", "-S", str(src), "-B", str(build), f"-DCMAKE_PREFIX_PATH={dest}"],
                         capture_output=True, text=True, timeout=300)
    assert cfg.returncode == 0, cfg.stdout + cfg.stderr
    bld = subprocess.run(["cmake", "--build", str(build)], capture_output=True, text=True, timeout=300)
    assert bld.returncode == 0, bld.stdout + bld.stderr
    run = subprocess.run([str(build / "hello")], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0 and run.stdout.strip() == "device cpu", run.stdout + run.stderr

    # fetching it again is a no-op
    again = run_doctor("fetch-libtorch", "--from-wheel", "--version", "2.13.0", "--variant", "cpu", "--dest", str(dest),
                       "--lock", str(tmp_path / "libtorch.lock"), cwd=tmp_path)
    assert again.returncode == 0 and "already installed" in again.stdout


def fake_wheel(path: Path, version_py: str, config: str | None = None) -> Path:
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr(zinfo("torch/version.py", 0o100644), version_py)
        zf.writestr(zinfo("torch/__init__.py", 0o100644), "")
        zf.writestr(zinfo("torch/lib/libc10.so", 0o100755), b"\x7fELF")
        zf.writestr(zinfo("torch/include/c10/core/Device.h", 0o100644), b"#pragma once\n")
        zf.writestr(zinfo("torch/bin/torch_shm_manager", 0o100755), b"x")
        if config is not None:
            zf.writestr(zinfo("torch/share/cmake/Torch/TorchConfig.cmake", 0o100644), config)
        zf.writestr(zinfo("torch-2.6.0.dist-info/RECORD", 0o100644), "")
    return path


def real_small_wheel(folder: Path, torch_dir: Path, python: str, cuda: str | None = None) -> Path:
    """A torch 2.13.0+cpu wheel for CPython `python` ("3.12") made of the installed torch's own
    version.py, libc10.so, a header and TorchConfig.cmake, with the metadata pip reads; with
    `cuda`, named and versioned as PyPI's CUDA wheel is (no local label)."""
    tag = "cp" + python.replace(".", "")
    version = "2.13.0" if cuda else "2.13.0+cpu"
    path = folder / f"torch-{version}-{tag}-{tag}-manylinux_2_28_x86_64.whl"
    info = f"torch-{version}.dist-info"
    with zipfile.ZipFile(path, "w") as zf:
        for name, mode in (("version.py", 0o644), ("lib/libc10.so", 0o755), ("include/c10/core/Device.h", 0o644),
                           ("share/cmake/Torch/TorchConfig.cmake", 0o644)):
            data = (torch_dir / name).read_bytes()
            if cuda and name == "version.py":
                data = data.replace(b"2.13.0+cpu", b"2.13.0").replace(b"cuda: Optional[str] = None",
                                                                      f"cuda: Optional[str] = '{cuda}'".encode())
            zf.writestr(zinfo(f"torch/{name}", 0o100000 | mode), data)
        zf.writestr(zinfo(f"{info}/METADATA", 0o100644), f"Metadata-Version: 2.1\nName: torch\nVersion: {version}\n")
        zf.writestr(zinfo(f"{info}/WHEEL", 0o100644),
                    f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {tag}-{tag}-manylinux_2_28_x86_64\n")
        zf.writestr(zinfo(f"{info}/RECORD", 0o100644), "")
    return path


@pytest.mark.skipif(sys.platform != "linux" or platform.machine() != "x86_64", reason="the wheel is tagged linux x86_64")
def test_a_python_the_release_has_no_wheel_for_gets_another_pythons_wheel(tmp_path, wheel_root):
    """pip finds no torch==V wheel for the Python that runs it (a Python newer than the release,
    the usual case on aarch64, where --from-wheel is the only source): the doctor asks real pip
    again for the other CPythons, nearest first, and builds the tree from the first wheel found.
    pip reads a private find-links folder and nothing else (no index, no configuration)."""
    from doctor.fetch.wheel import other_pythons

    own = f"{sys.version_info[0]}.{sys.version_info[1]}"
    second = other_pythons(sys.version_info[:2])[1]  # one more refusal before the wheel is found
    links = tmp_path / "links"
    links.mkdir()
    real_small_wheel(links, wheel_root, second)
    env = {k: v for k, v in doctor_env().items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(links), PIP_DISABLE_PIP_VERSION_CHECK="1")
    dest = tmp_path / "libtorch"
    r = run_doctor("fetch-libtorch", "--from-wheel", "--version", "2.13.0", "--variant", "cpu", "--dest", str(dest),
                   "--no-lock", cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    asked = re.findall(r"no torch==2\.13\.0\+cpu wheel for Python (\S+) there; asking for Python (\S+)'s", r.stderr)
    assert asked == [(own, p) for p in other_pythons(sys.version_info[:2])[:2]], r.stderr
    rec = read_install_record(dest)
    assert rec["source"]["file"] == f"torch-2.13.0+cpu-cp{second.replace('.', '')}-cp{second.replace('.', '')}-manylinux_2_28_x86_64.whl"
    assert (dest / "lib/libc10.so").read_bytes() == (wheel_root / "lib/libc10.so").read_bytes()
    assert (dest / "build-version").read_text() == "2.13.0+cpu\n"

    # no CPython has one: one error naming what was asked, pip's own words, exit 1, nothing left
    (links / next(links.iterdir()).name).unlink()
    r = run_doctor("fetch-libtorch", "--from-wheel", "--version", "2.13.0", "--variant", "cpu", "--dest",
                   str(tmp_path / "other"), "--no-lock", cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 1 and len(re.findall("asking for Python", r.stderr)) == len(other_pythons(sys.version_info[:2]))
    assert f"error: pip could not download torch==2.13.0+cpu for Python {own} or any CPython 3.8–3.15: " in r.stderr
    assert "No matching distribution found for torch==2.13.0" in r.stderr
    assert not (tmp_path / "other").exists() and [p.name for p in tmp_path.glob(".other.*")] == [".other.lock"]


@pytest.mark.skipif(sys.platform != "linux" or platform.machine() != "x86_64", reason="the wheel is tagged linux x86_64")
def test_the_cpu_build_is_asked_for_by_its_label_and_pypis_cuda_wheel_never_fetched(tmp_path, wheel_root):
    """PyPI's torch for Linux x86_64 is a CUDA build, unlabelled: `--variant cpu` asked pip for
    torch==2.13.0, pip fetched that wheel (gigabytes, from PyPI), and the fetch refused it. Now
    pip is asked for torch==2.13.0+cpu: an index holding only the CUDA wheel fails without
    fetching it, and the hint names PyTorch's CPU index. Real pip, a private find-links folder."""
    own = f"{sys.version_info[0]}.{sys.version_info[1]}"
    links = tmp_path / "links"
    links.mkdir()
    real_small_wheel(links, wheel_root, own, cuda="13.0")
    env = {k: v for k, v in doctor_env().items() if not k.startswith("PIP_")}
    env.update(PIP_CONFIG_FILE=os.devnull, PIP_NO_INDEX="1", PIP_FIND_LINKS=str(links), PIP_DISABLE_PIP_VERSION_CHECK="1")
    r = run_doctor("fetch-libtorch", "--from-wheel", "--version", "2.13.0", "--variant", "cpu", "--dest",
                   str(tmp_path / "libtorch"), "--no-lock", cwd=tmp_path, env=env, timeout=300)
    assert r.returncode == 1, r.stderr
    assert "running: python -m pip download torch==2.13.0+cpu --no-deps" in r.stderr
    assert "error: pip could not download torch==2.13.0+cpu for Python" in r.stderr
    assert "hint: PyPI's torch for Linux x86_64 is a CUDA build; the cpu build is on PyTorch's index: give --index-url " \
           "https://download.pytorch.org/whl/cpu" in r.stderr
    assert "pip downloaded torch" not in r.stderr  # the CUDA wheel was never fetched, so never refused
    # a CUDA variant stays unlabelled (PyPI's torch is one), and a cpu one elsewhere too
    assert wheel.requirement("2.13.0", "cu130", "linux-x86_64") == "torch==2.13.0"
    assert wheel.requirement("2.13.0", "cpu", "linux-aarch64") == "torch==2.13.0"
    assert wheel.requirement("2.13.0", "rocm6.4", "linux-x86_64") == "torch==2.13.0+rocm6.4"


def test_wheel_facts_from_real_version_py_text(tmp_path, wheel_root):
    real = (wheel_root / "version.py").read_text()
    with zipfile.ZipFile(fake_wheel(tmp_path / "w.whl", real)) as zf:
        facts = wheel.read_wheel_facts(zf)
    assert (facts.version, facts.base_version, facts.variant) == ("2.13.0+cpu", "2.13.0", "cpu")
    assert facts.git_version and len(facts.git_version) == 40


def test_pypi_style_wheel_variant_from_cuda_field_and_old_abi_from_config(tmp_path):
    text = "__version__ = '2.6.0'\ndebug = False\ncuda: Optional[str] = '12.4'\ngit_version = 'abc'\nhip: Optional[str] = None\n"
    config = 'set(TORCH_CXX_FLAGS "-D_GLIBCXX_USE_CXX11_ABI=0")\n'
    with zipfile.ZipFile(fake_wheel(tmp_path / "w.whl", text, config)) as zf:
        facts = wheel.read_wheel_facts(zf)
    assert (facts.variant, facts.abi) == ("cu124", "pre-cxx11")


def test_only_lib_include_share_become_the_tree():
    assert wheel.tree_name("torch/lib/libc10.so") == "lib/libc10.so"
    assert wheel.tree_name("torch/include/c10/core/Device.h") == "include/c10/core/Device.h"
    assert wheel.tree_name("torch/share/cmake/Torch/TorchConfig.cmake") == "share/cmake/Torch/TorchConfig.cmake"
    assert wheel.tree_name("torch/bin/torch_shm_manager") is None
    assert wheel.tree_name("torch/nn/__init__.py") is None
    assert wheel.tree_name("torch/library.py") is None  # "lib" prefix, but not the lib/ folder


def _fetch_with_fake_pip(tmp_path: Path, whl: Path):
    """fetch --from-wheel with a fake `pip` that "downloads" `whl`; the DoctorError it ends with."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_python = bin_dir / "python"
    fake_python.write_text(f'#!/bin/sh\n# pip download ... -d DIR: copy the wheel there\nwhile [ $# -gt 0 ]; do '
                           f'if [ "$1" = "-d" ]; then cp "{whl}" "$2/"; fi; shift; done\necho "Saved"\n')
    fake_python.chmod(0o755)
    from doctor.fetch.pipeline import FetchOptions, fetch
    from doctor.fetch.plan import FetchRequest, resolve_plan
    from doctor.host import Host
    from doctor.errors import DoctorError

    host = Host.from_system()
    host.python = str(fake_python)
    plan = resolve_plan(host, FetchRequest(version="2.13.0", variant="cpu", from_wheel=True, dest=tmp_path / "d",
                                           no_lock=True))
    with pytest.raises(DoctorError) as err:
        fetch(host, plan, FetchOptions(), lambda s: None)
    assert not (tmp_path / "d").exists()
    assert [p.name for p in tmp_path.glob(".d.*")] == [".d.lock"]  # no staging tree, no wheel left
    return err.value


def test_wheel_of_the_wrong_variant_is_refused(tmp_path):
    """pip honours the user's index: PyPI's default torch is a CUDA build; asking for cpu from it
    must fail with the index to use, not install the wrong thing. A fake `pip` stands in."""
    whl = fake_wheel(tmp_path / "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl",
                     "__version__ = '2.13.0'\ncuda: Optional[str] = '13.0'\n")
    err = _fetch_with_fake_pip(tmp_path, whl)
    assert "variant cu130), not the cpu variant" in err.message
    assert "--index-url https://download.pytorch.org/whl/cpu" in err.hint


@pytest.mark.parametrize("kind, says, hint", [
    ("another release", "pip downloaded torch 2.12.0+cpu, not 2.13.0", "serves torch==2.13.0"),
    ("no version.py", "has no torch/version.py: not a PyTorch wheel", "PyTorch's own torch wheels"),
    ("no __version__", "names no __version__", "PyTorch's own torch wheels"),
    ("not a zip", "is not a readable wheel", "run the fetch again"),
])
def test_a_wheel_that_is_not_the_one_asked_for_is_refused_with_a_hint(tmp_path, kind, says, hint):
    whl = tmp_path / "torch-2.13.0+cpu-cp311-cp311-manylinux_2_28_x86_64.whl"
    if kind == "another release":
        fake_wheel(whl, "__version__ = '2.12.0+cpu'\n")
    elif kind == "no __version__":
        fake_wheel(whl, "debug = False\n")
    elif kind == "no version.py":
        with zipfile.ZipFile(whl, "w") as zf:
            zf.writestr(zinfo("torch/__init__.py", 0o100644), "")
    else:
        whl.write_bytes(b"PK\x03\x04 not really a zip")
    err = _fetch_with_fake_pip(tmp_path, whl)
    assert says in err.message and hint in err.hint
