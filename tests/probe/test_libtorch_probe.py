"""libtorch detection on hosts built over temporary roots, with real ELF files of both ABIs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from testsupport.support import make_tree

from doctor.check import build_areas, gather_facts
from doctor.host import Host
from doctor.probe.elf import abi_from_counts, read_elf
from doctor.probe.libtorch import ABI_FROM_VERSION, detect_libtorch


def ids(areas) -> list[str]:
    return [f.id for a in areas for f in a.findings]


def test_elf_symbol_counts_tell_both_abis(abi_libs):
    old = read_elf("libc10.so", str(abi_libs["pre-cxx11"]), count_abi_symbols=True)
    new = read_elf("libc10.so", str(abi_libs["cxx11"]), count_abi_symbols=True)
    assert old.old_abi_symbols > 0 and old.cxx11_symbols == 0
    assert new.cxx11_symbols > 0 and new.old_abi_symbols == 0
    assert abi_from_counts(old.cxx11_symbols, old.old_abi_symbols) == "pre-cxx11"
    assert abi_from_counts(new.cxx11_symbols, new.old_abi_symbols) == "cxx11"
    assert new.machine == "x86_64" and "libstdc++.so.6" in new.needed


def test_libtorch_env_pointing_nowhere_is_an_error_naming_it(tmp_path):
    host = Host.for_test(tmp_path, {"LIBTORCH": "/nonexistent/libtorch"})
    facts = gather_facts(host)
    assert facts["libtorch"].active_install.root == "/nonexistent/libtorch"
    findings = [f for a in build_areas(facts, host) for f in a.findings if f.id == "libtorch.path-invalid"]
    assert findings and findings[0].level.value == "error"
    assert "LIBTORCH=/nonexistent/libtorch" in findings[0].title
    assert "unset LIBTORCH" in findings[0].fix


def test_old_tree_with_abi_line_in_torch_config(tmp_path, abi_libs):
    # ≤ 2.7: TorchConfig.cmake carries the flag; it wins over symbols.
    make_tree(tmp_path / "opt/libtorch", "2.6.0", "cu124", abi_line="0", libc10=abi_libs["pre-cxx11"], cuda=True)
    host = Host.for_test(tmp_path)
    c = detect_libtorch(host, None).active_install
    assert (c.version, c.variant, c.abi, c.abi_source) == ("2.6.0", "cu124", "pre-cxx11", "TorchConfig.cmake")
    assert c.origins == ["/opt/libtorch"] and c.cxx_standard == 17


def test_new_tree_without_abi_line_reads_libc10_symbols(tmp_path, abi_libs):
    # ≥ 2.8: the line is gone; the symbols in libc10.so answer.
    make_tree(tmp_path / "work/libtorch", "2.8.0", "cpu", libc10=abi_libs["cxx11"])
    host = Host.for_test(tmp_path)
    c = detect_libtorch(host, None).active_install
    assert (c.version, c.abi, c.abi_source) == ("2.8.0", "cxx11", "libc10 symbols")
    assert any("std::__cxx11::string" in e.excerpt for e in c.evidence)
    old = make_tree(tmp_path / "old", "2.8.0", "cpu", libc10=abi_libs["pre-cxx11"])
    c = detect_libtorch(Host.for_test(tmp_path, {"LIBTORCH": "/old"}), None).active_install
    assert c.root == "/old" and c.abi == "pre-cxx11" and old.exists()


def test_trees_a_build_does_not_use_take_the_abi_from_their_version(tmp_path, abi_libs):
    # Reading libc10's symbols costs ~0.4 ms a tree and a Hasktorch cache holds dozens: a tree a
    # build does not use, of a version only ever built with the CXX11 ABI, says so from the
    # version. The tree a build uses is always read, so a mislabelled one is caught once chosen.
    make_tree(tmp_path / "opt/libtorch", "2.9.1", "cpu", libc10=abi_libs["cxx11"])
    make_tree(tmp_path / "work/libtorch", "2.10.0", "cpu", libc10=abi_libs["pre-cxx11"])  # says 2.10, is old-ABI
    make_tree(tmp_path / "usr/local/libtorch", "2.6.0", "cpu", libc10=abi_libs["pre-cxx11"])  # 2.6 had both ABIs
    lt = detect_libtorch(Host.for_test(tmp_path, {"LIBTORCH": "/opt/libtorch"}), None)
    by_root = {c.root: (c.abi, c.abi_source) for c in lt.candidates}
    assert lt.active_install.root == "/opt/libtorch"
    assert by_root["/opt/libtorch"] == ("cxx11", "libc10 symbols")
    assert by_root["/work/libtorch"] == ("cxx11", ABI_FROM_VERSION) and "2.6" in ABI_FROM_VERSION
    assert by_root["/usr/local/libtorch"] == ("pre-cxx11", "libc10 symbols")
    assert not any(e.kind == "elf" and "symbols" in e.excerpt for c in lt.candidates if c.root == "/work/libtorch"
                   for e in c.evidence)
    chosen = detect_libtorch(Host.for_test(tmp_path, {"LIBTORCH": "/work/libtorch"}), None).active_install
    assert (chosen.root, chosen.abi, chosen.abi_source) == ("/work/libtorch", "pre-cxx11", "libc10 symbols")
    assert any("with the old std::string" in e.excerpt for e in chosen.evidence)


def test_version_files_that_disagree(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/libtorch", "2.9.1", "cu130", version_h="2.8.0", libc10=abi_libs["cxx11"])
    host = Host.for_test(tmp_path)
    facts = gather_facts(host)
    c = facts["libtorch"].active_install
    assert c.version == "2.9.1" and c.variant == "cu130"
    assert {s.file: s.version for s in c.version_sources} == {
        "build-version": "2.9.1+cu130",
        "version.h": "2.8.0",
        "TorchConfigVersion.cmake": "2.9.1",
    }
    finding = next(f for a in build_areas(facts, host) for f in a.findings if f.id == "libtorch.version-disagree")
    assert "2.8.0" in finding.title and "2.9.1" in finding.title


def test_two_conflicting_installs_and_precedence(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/libtorch", "2.7.1", "cpu", libc10=abi_libs["cxx11"])
    make_tree(tmp_path / "home/user/lt", "2.9.0", "cpu", libc10=abi_libs["cxx11"])
    host = Host.for_test(tmp_path, {"Torch_DIR": "/home/user/lt/share/cmake/Torch"})
    facts = gather_facts(host)
    lt = facts["libtorch"]
    assert [c.root for c in lt.candidates] == ["/home/user/lt", "/opt/libtorch"]
    assert lt.active_install.root == "/home/user/lt" and "Torch_DIR" in lt.active_reason
    assert "libtorch.conflict" in ids(build_areas(facts, host))


@pytest.mark.parametrize("variable", ["CMAKE_PREFIX_PATH", "Torch_DIR"])
@pytest.mark.parametrize("below", ["", "share/cmake", "share/cmake/Torch"])
def test_every_prefix_form_cmake_accepts_names_the_tree(tmp_path, abi_libs, variable, below):
    """CMake's find_package(Torch) finds a tree from its root, from its share/cmake (what
    torch.utils.cmake_prefix_path gives) and from share/cmake/Torch, in CMAKE_PREFIX_PATH and in
    the environment's Torch_DIR (run here with the real cmake). The doctor named another tree
    active (CMAKE_PREFIX_PATH=<root>/share/cmake was ignored) or called Torch_DIR=<root>/share/cmake
    not a libtorch."""
    tree = make_tree(tmp_path / "lt", "2.9.0", "cpu", libc10=abi_libs["cxx11"])
    (tree / "share/cmake/Torch/TorchConfig.cmake").write_text("set(Torch_FOUND 1)\n")
    project = tmp_path / "project"
    project.mkdir()
    (project / "CMakeLists.txt").write_text("cmake_minimum_required(VERSION 3.18)\nproject(p NONE)\n"
                                            "find_package(Torch CONFIG REQUIRED)\nmessage(STATUS \"found ${Torch_DIR}\")\n")
    env = {variable: str(tree / below) if below else str(tree)}
    ran = subprocess.run(["cmake", "-S", project, "-B", tmp_path / "build"], capture_output=True, text=True,
                         env={"PATH": os.environ["PATH"], **env}, timeout=120)
    assert ran.returncode == 0 and f"found {tree}/share/cmake/Torch" in ran.stdout, ran.stderr
    lt = detect_libtorch(Host(env=env), None)
    assert lt.active_install.root == str(tree) and variable in lt.active_install.origins


def test_same_tree_reached_twice_is_one_candidate(tmp_path, abi_libs):
    make_tree(tmp_path / "work/libtorch", "2.9.0", "cpu", libc10=abi_libs["cxx11"])
    host = Host.for_test(tmp_path, {"LIBTORCH": "/work/libtorch", "CMAKE_PREFIX_PATH": "/nowhere:/work/libtorch"})
    lt = detect_libtorch(host, None)
    assert len(lt.candidates) == 1
    assert lt.candidates[0].origins == ["LIBTORCH", "CMAKE_PREFIX_PATH", "./libtorch"]


def test_hasktorch_cache_layout_and_libtorch_version(tmp_path, abi_libs):
    home = tmp_path / "home/user/.cache/libtorch"
    for version in ("2.5.0", "2.9.1"):
        tree = make_tree(home / version / "linux-x86_64" / "cpu", version, "cpu", libc10=abi_libs["cxx11"])
        (tree / ".ok").write_text("")
    host = Host.for_test(tmp_path, {"LIBTORCH_VERSION": "2.9.1"})
    lt = detect_libtorch(host, None)
    active = lt.active_install
    assert active.version == "2.9.1" and "LIBTORCH_VERSION=2.9.1" in lt.active_reason
    assert active.hasktorch == {"home": "/home/user/.cache/libtorch", "version": "2.9.1",
                                "platform": "linux-x86_64", "flavour": "cpu", "ok": True}


def test_nothing_installed_is_an_error_with_the_fetch_fix(tmp_path):
    host = Host.for_test(tmp_path)
    facts = gather_facts(host)
    f = next(f for a in build_areas(facts, host) for f in a.findings if f.id == "libtorch.not-found")
    assert "doctor fetch-libtorch" in f.fix


def test_foreign_architecture_is_reported(tmp_path, abi_libs):
    make_tree(tmp_path / "opt/libtorch", "2.9.0", "cpu", libc10=abi_libs["cxx11"])
    host = Host.for_test(tmp_path, machine="aarch64")
    facts = gather_facts(host)
    f = next(f for a in build_areas(facts, host) for f in a.findings if f.id == "arch.mismatch")
    assert "x86_64" in f.title and "aarch64" in f.title


def test_loader_view_follows_ld_library_path(tmp_path, wheel_root: Path):
    host = Host.from_system()
    host.env = {**host.env, "LD_LIBRARY_PATH": str(wheel_root / "lib")}
    facts = gather_facts(host)
    loader = facts["loader"]
    c10 = next(v for v in loader.libraries if v.library == "libc10.so")
    assert c10.for_programs.via == "LD_LIBRARY_PATH"
    assert loader.unresolved == []
    torch_cpu = next(v for v in loader.libraries if v.library == "libtorch_cpu.so")
    gomp = next(n for n in torch_cpu.needed if n.name == "libgomp.so.1")
    assert gomp.via in ("LD_LIBRARY_PATH", "RUNPATH")
