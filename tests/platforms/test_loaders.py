"""dyld and the Windows loader simulated on trees built from the real wheels, broken variants included."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from testsupport.platform_wheels import tree_copy
from testsupport.support import doctor_subprocess

from doctor.diagnose.platform_tree import platform_area
from doctor.host import Host
from doctor.probe.apple import detect_apple
from doctor.probe.platform_mac import detect_mac_tree
from doctor.probe.platform_tree import detect_platform_tree, tree_system
from doctor.probe.platform_win import detect_win_tree


def _host(root: Path, system: str, env: dict | None = None, machine: str = "x86_64") -> Host:
    return Host.for_test(root, env=env, system=system, machine=machine)


def _ids(area) -> list[str]:
    return [f.id for f in area.findings]


# -- macOS --


def test_whole_tree_resolves_through_loader_path(tmp_path):
    root = tree_copy("macos-arm64", tmp_path)
    host = _host(tmp_path, "Linux")
    facts = detect_mac_tree(host, "/libtorch/lib")
    own = {(r.image, r.name): (r.path, r.via) for r in facts.resolutions if r.name.startswith("@rpath/")}
    assert own[("libtorch.dylib", "@rpath/libc10.dylib")] == ("/libtorch/lib/libc10.dylib", "LC_RPATH @loader_path")
    assert own[("libtorch_cpu.dylib", "@rpath/libomp.dylib")] == ("/libtorch/lib/libomp.dylib", "LC_RPATH @loader_path")
    assert set(facts.images) == {"libtorch.dylib", "libtorch_cpu.dylib", "libc10.dylib", "libomp.dylib"}
    assert facts.unresolved == [] and facts.cxx_stdlib == "libc++" and not facts.on_this_machine
    area = platform_area(detect_platform_tree(host, "/libtorch/lib"))
    assert area.findings == [] and "checked from Linux" in area.summary
    assert any("not this machine" in d for d in area.details)
    assert any("no _GLIBCXX_USE_CXX11_ABI question" in d for d in area.details)
    assert root.is_dir()


def test_removed_rpath_leaves_rpath_names_unresolved(tmp_path):
    tool = shutil.which("llvm-install-name-tool-14") or shutil.which("llvm-install-name-tool")
    if tool is None:
        pytest.fail("llvm-install-name-tool is needed (apt-get install llvm)")
    root = tree_copy("macos-arm64", tmp_path, copy=("lib/libtorch.dylib",))
    subprocess.run([tool, "-delete_rpath", "@loader_path", str(root / "lib/libtorch.dylib")], check=True)
    host = _host(tmp_path, "Linux")
    facts = detect_mac_tree(host, "/libtorch/lib")
    assert sorted(r.name for r in facts.unresolved) == ["@rpath/libc10.dylib", "@rpath/libtorch_cpu.dylib"]
    area = platform_area(detect_platform_tree(host, "/libtorch/lib"))
    assert _ids(area) == ["loader.library-not-found"] * 2
    assert "install_name_tool -add_rpath @loader_path" in area.findings[0].fix
    # A program's own rpath to the folder repairs it (what -Wl,-rpath does).
    fixed = detect_mac_tree(host, "/libtorch/lib", program_rpaths=("/libtorch/lib",))
    assert fixed.unresolved == []


def test_duplicate_rpath_added_by_install_name_tool(tmp_path):
    root = tree_copy("macos-arm64", tmp_path, copy=("lib/libc10.dylib",))
    # install_name_tool refuses a duplicate; patch a second LC_RPATH in by turning the
    # LC_ID_DYLIB-free libc10's rpath list into two: add one of another path, then rewrite it.
    tool = shutil.which("llvm-install-name-tool-14") or shutil.which("llvm-install-name-tool")
    if tool is None:
        pytest.fail("llvm-install-name-tool is needed (apt-get install llvm)")
    lib = root / "lib/libc10.dylib"
    subprocess.run([tool, "-add_rpath", "@loader_pathX", str(lib)], check=True)
    lib.write_bytes(lib.read_bytes().replace(b"@loader_pathX\0", b"@loader_path\0\0", 1))
    area = platform_area(detect_platform_tree(_host(tmp_path, "Linux"), "/libtorch/lib"))
    [dup] = [f for f in area.findings if f.id == "macos.duplicate-rpath"]
    assert dup.title == "libc10.dylib has LC_RPATH '@loader_path' twice"


def test_dropped_dylib_is_found_nowhere(tmp_path):
    root = tree_copy("macos-arm64", tmp_path)
    (root / "lib/libomp.dylib").unlink()
    facts = detect_mac_tree(_host(tmp_path, "Linux"), "/libtorch/lib")
    [missing] = facts.unresolved
    assert (missing.image, missing.name) == ("libtorch_cpu.dylib", "@rpath/libomp.dylib")
    # its own LC_RPATH, then that of libtorch.dylib which loaded it: the same folder twice
    assert missing.tried == ["/libtorch/lib/libomp.dylib"] * 2


def test_on_a_mac_dyld_library_path_wins_and_sip_is_noted(tmp_path):
    tree_copy("macos-arm64", tmp_path)
    other = tmp_path / "other"
    other.mkdir()
    shutil.copyfile(tmp_path / "libtorch/lib/libc10.dylib", other / "libc10.dylib")
    host = _host(tmp_path, "Darwin", {"DYLD_LIBRARY_PATH": "/other", "HOME": "/Users/me"}, machine="arm64")
    facts = detect_mac_tree(host, "/libtorch/lib")
    c10 = [r for r in facts.resolutions if r.name == "@rpath/libc10.dylib"]
    assert {(r.path, r.via) for r in c10} == {("/other/libc10.dylib", "DYLD_LIBRARY_PATH")}
    assert [r.via for r in facts.resolutions if r.name == "/usr/lib/libc++.1.dylib"][0] == "dyld shared cache"
    assert facts.dyld_fallback == ["/Users/me/lib", "/usr/local/lib", "/usr/lib"]
    area = platform_area(detect_platform_tree(host, "/libtorch/lib"))
    sip = [f for f in area.findings if f.subject == "sip"]
    assert sip and "SIP" in sip[0].title and "CMAKE_INSTALL_RPATH" in sip[0].fix


def _fake_mac(root: Path, version: str, translated: str | None) -> None:
    """sw_vers and sysctl printing what the real tools print (one line each)."""
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    (bin_dir / "sw_vers").write_text(f"#!/bin/sh\necho {version}\n")
    body = {None: "exit 1", "1": "echo 1"}[translated]
    (bin_dir / "sysctl").write_text(f'#!/bin/sh\ncase "$2" in sysctl.proc_translated) {body};; hw.optional.arm64) echo 1;; esac\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)


def test_rosetta_python_with_an_arm64_tree_and_an_old_macos(tmp_path):
    tree_copy("macos-arm64", tmp_path)
    _fake_mac(tmp_path, "13.6.1", "1")
    host = _host(tmp_path, "Darwin", {"HOME": "/Users/me"}, machine="x86_64")
    apple = detect_apple(host, 5.0)
    assert apple.rosetta and apple.apple_silicon and apple.macos_version == "13.6.1"
    area = platform_area(detect_platform_tree(host, "/libtorch/lib", apple))
    titles = {f.id: f.title for f in area.findings}
    assert "this Rosetta process needs x86_64" in titles["arch.mismatch"]
    assert titles["macos.min-version"] == "the tree needs macOS 14.0, this Mac runs 13.6.1"
    assert any("MPS usable: no (rosetta, macos-too-old)" in d for d in area.details)


def test_native_arm64_mac_new_enough(tmp_path):
    tree_copy("macos-arm64", tmp_path)
    _fake_mac(tmp_path, "15.1", None)
    host = _host(tmp_path, "Darwin", {"HOME": "/Users/me"}, machine="arm64")
    area = platform_area(detect_platform_tree(host, "/libtorch/lib", detect_apple(host, 5.0)))
    assert area.findings == [] and any("MPS usable: yes" in d for d in area.details)


# -- Windows --


def test_windows_tree_from_linux(tmp_path):
    tree_copy("windows-x86_64", tmp_path)
    host = _host(tmp_path, "Linux")
    assert tree_system(host, "/libtorch/lib") == "Windows"
    facts = detect_win_tree(host, "/libtorch/lib")
    assert facts.machines == {"c10.dll": "x86_64", "torch.dll": "x86_64", "torch_cpu.dll": "x86_64"}
    assert set(facts.crt.values()) == {"release"} and not facts.cuda
    vias = {r.name: r.via for r in facts.resolutions if r.image == "torch_cpu.dll"}
    assert vias["c10.dll"] == "program folder" and vias["MSVCP140.dll"].endswith("(not this machine)")
    area = platform_area(detect_platform_tree(host, "/libtorch/lib"))
    assert area.findings == [] and area.title == "Platform (Windows)"


def test_dll_moved_away(tmp_path):
    root = tree_copy("windows-x86_64", tmp_path)
    (root / "lib/uv.dll").rename(tmp_path / "uv.dll")
    area = platform_area(detect_platform_tree(_host(tmp_path, "Linux"), "/libtorch/lib"))
    [f] = area.findings
    assert (f.id, f.title) == ("loader.library-not-found", "uv.dll needed by torch_cpu.dll is found nowhere")
    assert "$env:PATH = '/libtorch/lib;' + $env:PATH" in f.fix


def test_debug_runtime_in_one_dll(tmp_path):
    root = tree_copy("windows-x86_64", tmp_path, copy=("lib/c10.dll",))
    path = root / "lib/c10.dll"
    path.write_bytes(path.read_bytes().replace(b"MSVCP140.dll\0\0", b"MSVCP140D.dll\0", 1))
    area = platform_area(detect_platform_tree(_host(tmp_path, "Linux"), "/libtorch/lib"))
    crt = [f for f in area.findings if f.id == "windows.crt-mismatch"]
    assert crt and crt[0].title.startswith("c10.dll import the Debug C runtime") and "LNK2038" in crt[0].detail


def test_cuda_build_told_from_dll_names(tmp_path):
    root = tree_copy("windows-x86_64", tmp_path)
    for name in ("torch_cuda.dll", "c10_cuda.dll"):  # the names a CUDA zip carries
        (root / "lib" / name).symlink_to(root / "lib/torch.dll")
    (root / "version.py").unlink()  # the wheel's version.py says +cpu; with no file naming a variant, the DLLs decide
    facts = detect_win_tree(_host(tmp_path, "Linux"), "/libtorch/lib")
    assert facts.cuda and "torch_cuda.dll" in facts.machines
    out = doctor_subprocess("check", "--json", "--libtorch", str(root))
    active = json.loads(out.stdout)["facts"]["libtorch"]
    [install] = [c for c in active["candidates"] if c["root"] == str(root)]
    assert install["variant"] == "cuda"


def _windows(tmp_path: Path, path_entries: list[str], system32: tuple[str, ...] = ("vcruntime140.dll", "vcruntime140_1.dll", "msvcp140.dll")):
    """A Windows machine in a test root: C:\\ is <root>/C; the tree at C:\\libtorch."""
    tree_copy("windows-x86_64", tmp_path / "C")
    sys32 = tmp_path / "C/Windows/System32"
    sys32.mkdir(parents=True)
    for name in system32 + ("kernel32.dll", "advapi32.dll", "dbghelp.dll", "ws2_32.dll"):
        (sys32 / name).write_bytes(b"MZ")
    return _host(tmp_path, "Windows", {"PATH": ";".join(path_entries), "SystemRoot": r"C:\Windows"})


def test_windows_path_order_and_a_shadowing_torch(tmp_path):
    host = _windows(tmp_path, [r"C:\old\torch\lib", r"C:\libtorch\lib"])
    (tmp_path / "C/old/torch/lib").mkdir(parents=True)
    shutil.copyfile(tmp_path / "C/libtorch/lib/c10.dll", tmp_path / "C/old/torch/lib/c10.dll")
    facts = detect_win_tree(host, r"C:\libtorch\lib")
    assert facts.c10_candidates == [r"C:\old\torch\lib\c10.dll", r"C:\libtorch\lib\c10.dll"]
    via = {r.name: r.via for r in facts.resolutions if r.image == "torch_cpu.dll"}
    assert (via["c10.dll"], via["uv.dll"], via["MSVCP140.dll"]) == ("PATH[0]", "PATH[1]", "System32")
    area = platform_area(detect_platform_tree(host, r"C:\libtorch\lib"))
    assert _ids(area) == ["windows.dll-shadowed"] and r"C:\old\torch\lib\c10.dll" in area.findings[0].title


def test_windows_python_uses_add_dll_directory_not_path(tmp_path):
    host = _windows(tmp_path, [r"C:\old\torch\lib"])
    facts = detect_win_tree(host, r"C:\libtorch\lib", program_dir=r"C:\Python311", python=True)
    via = {r.name: r.via for r in facts.resolutions if r.image == "torch_cpu.dll"}
    assert via["c10.dll"] == "os.add_dll_directory"


def test_windows_missing_vc_runtime(tmp_path):
    host = _windows(tmp_path, [r"C:\libtorch\lib"], system32=())
    area = platform_area(detect_platform_tree(host, r"C:\libtorch\lib"))
    [f] = [f for f in area.findings if f.id == "windows.vc-runtime-missing"]
    assert "msvcp140.dll, vcruntime140.dll, vcruntime140_1.dll" in f.title and "vc_redist.x64.exe" in f.fix
    assert "loader.library-not-found" not in _ids(area)


# -- the command --


@pytest.mark.parametrize("platform,title", [("macos-arm64", "Platform (macOS)"), ("windows-x86_64", "Platform (Windows)")])
def test_check_libtorch_on_a_foreign_tree(tmp_path, platform, title):
    root = tree_copy(platform, tmp_path)
    out = doctor_subprocess("check", "--json", "--libtorch", str(root))
    assert out.returncode == 0, out.stderr
    result = json.loads(out.stdout)
    areas = {a["title"]: a for a in result["areas"]}
    assert title in areas and areas[title]["level"] == "ok"
    assert [f for f in result["findings"] if f["area"] == "platform"] == []
    [install] = [c for c in result["facts"]["libtorch"]["candidates"] if c["root"] == str(root)]
    assert (install["version"], install["variant"], install["cxx_standard"], install["complete"]) == ("2.13.0", "cpu", 20, True)
    assert install["broken_libraries"] == {}


def test_check_libtorch_broken_tree_fails(tmp_path):
    root = tree_copy("macos-arm64", tmp_path)
    (root / "lib/libc10.dylib").unlink()
    (root / "lib/libc10.dylib").write_bytes(b"")
    out = doctor_subprocess("check", "--libtorch", str(root))
    assert out.returncode == 1 and "not a usable Mach-O file: empty file (0 bytes)" in out.stdout


def test_check_libtorch_missing_dir_is_usage_error(tmp_path):
    out = doctor_subprocess("check", "--libtorch", str(tmp_path / "nope"))
    assert out.returncode == 2 and out.stderr.startswith("error:") and "hint:" in out.stderr


def test_the_linux_loader_area_defers_to_the_platform_area(tmp_path):
    from doctor.diagnose.loader import loader_area
    from doctor.probe.loader import detect_loader

    tree_copy("windows-x86_64", tmp_path)
    for system in ("Linux", "Windows"):
        facts = detect_loader(_host(tmp_path, system), "/libtorch/lib", {})
        assert facts.foreign == "Windows" and facts.libraries == []
        assert loader_area(facts).summary == "a Windows tree: its loader is simulated in the Platform area"
