"""The Mach-O and PE readers on the real torch 2.13.0 macOS arm64 and Windows x86_64 libraries."""

from __future__ import annotations

import shutil
import struct
import subprocess

import pytest

from doctor.probe.macho import MachOProblem, decode_version, read_macho
from doctor.probe.pe import PEProblem, read_pe


def _mac(tree, name):
    path = tree / "lib" / name
    return read_macho(str(path), str(path))


def test_libtorch_dylib_load_commands(mac_tree):
    info = _mac(mac_tree, "libtorch.dylib")
    assert (info.fat, info.archs) == (False, ["arm64"])
    s = info.slices[0]
    assert s.filetype == "dylib" and s.install_name == "@rpath/libtorch.dylib"
    strong = [d.name for d in s.dylibs if not d.weak]
    assert strong[:2] == ["@rpath/libtorch_cpu.dylib", "@rpath/libc10.dylib"]
    assert "/usr/lib/libc++.1.dylib" in strong
    assert any(d.weak and "Metal.framework" in d.name for d in s.dylibs)  # MPS frameworks are weak
    assert s.rpaths == ["@loader_path"]
    assert (s.platform, s.min_macos) == ("macos", "14.0")
    assert s.cxx_stdlib == "libc++"


def test_libomp_is_older_and_has_its_own_install_name(mac_tree):
    s = _mac(mac_tree, "libomp.dylib").slices[0]
    assert s.min_macos == "11.0" and s.install_name.endswith("/libomp.dylib") and s.rpaths == ["@loader_path/"]
    cpu = _mac(mac_tree, "libtorch_cpu.dylib").slices[0]
    assert "@rpath/libomp.dylib" in [d.name for d in cpu.dylibs]


def test_fat_file_from_two_slices(mac_tree, tmp_path):
    """llvm-lipo builds a fat file from the real arm64 libc10 and a copy labelled x86_64."""
    lipo = shutil.which("llvm-lipo-14") or shutil.which("llvm-lipo")
    if lipo is None:
        pytest.fail("llvm-lipo is needed (apt-get install llvm)")
    arm = tmp_path / "arm.dylib"
    shutil.copyfile(mac_tree / "lib/libc10.dylib", arm)
    data = bytearray(arm.read_bytes())
    struct.pack_into("<II", data, 4, 0x01000007, 3)  # cputype x86_64, cpusubtype ALL
    (tmp_path / "x86.dylib").write_bytes(bytes(data))
    fat = tmp_path / "fat.dylib"
    subprocess.run([lipo, "-create", str(arm), str(tmp_path / "x86.dylib"), "-output", str(fat)], check=True)
    info = read_macho(str(fat), str(fat))
    assert info.fat and sorted(info.archs) == ["arm64", "x86_64"]
    assert info.slice_for("x86_64").install_name == "@rpath/libc10.dylib"


@pytest.mark.parametrize("content,why", [(b"", "empty"), (b"\x7fELF" + b"\0" * 60, "not a Mach-O"),
                                         (b"\xca\xfe\xba\xbe\x00\x00\x00\x01" + b"\0" * 8, "truncated fat"),
                                         (struct.pack("<IiiIIII", 0xFEEDFACF, 0x0100000C, 0, 6, 10**6, 10**9, 0), "implausible")])
def test_bad_macho_is_a_problem_not_a_crash(tmp_path, content, why):
    path = tmp_path / "bad.dylib"
    path.write_bytes(content)
    with pytest.raises(MachOProblem, match=why):
        read_macho(str(path), str(path))


def test_version_decoding():
    assert [decode_version(v) for v in (0xE0000, 0xB0000, 0xC0300, 0xA0F01)] == ["14.0", "11.0", "12.3", "10.15.1"]


def test_c10_dll_imports_and_runtime(win_tree):
    path = win_tree / "lib/c10.dll"
    info = read_pe(str(path), str(path))
    assert (info.machine, info.is_dll) == ("x86_64", True)
    assert {"MSVCP140.dll", "VCRUNTIME140.dll", "VCRUNTIME140_1.dll", "KERNEL32.dll"} <= set(info.imports)
    assert info.crt_flavour == "release" and info.ucrt and info.delay_imports == []


def test_torch_cpu_dll_needs_c10_and_openmp(win_tree):
    path = win_tree / "lib/torch_cpu.dll"
    info = read_pe(str(path), str(path), resources=False)
    assert info.imports[:3] == ["libiomp5md.dll", "uv.dll", "c10.dll"]


def test_version_resources(win_tree):
    path = win_tree / "lib/libiomp5md.dll"
    info = read_pe(str(path), str(path))
    assert info.version["OriginalFilename"] == "libiomp5md.dll"
    assert info.version["FileVersion"] == "20260213"


def test_debug_runtime_import_patched_in_a_copy(win_tree, tmp_path):
    data = (win_tree / "lib/c10.dll").read_bytes()
    assert b"MSVCP140.dll\0\0" in data  # two NULs: room for one more letter
    copy = tmp_path / "c10.dll"
    copy.write_bytes(data.replace(b"MSVCP140.dll\0\0", b"MSVCP140D.dll\0", 1))
    info = read_pe(str(copy), str(copy))
    assert "MSVCP140D.dll" in info.imports and info.crt_flavour == "mixed"


@pytest.mark.parametrize("content", [b"", b"MZ" + b"\0" * 100, b"\x7fELF" * 40])
def test_bad_pe_is_a_problem(tmp_path, content):
    path = tmp_path / "bad.dll"
    path.write_bytes(content)
    with pytest.raises(PEProblem):
        read_pe(str(path), str(path))


from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=150, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(1, 16752), flips=st.lists(st.tuples(st.integers(0, 8191), st.integers(0, 255)), max_size=20))
def test_damaged_real_files_are_problems_never_crashes(mac_tree, win_tree, tmp_path, cut, flips):
    """Prefixes of the real libtorch.dylib / torch.dll with bytes changed in their headers."""
    for source, read, problem in ((mac_tree / "lib/libtorch.dylib", read_macho, MachOProblem),
                                  (win_tree / "lib/torch.dll", read_pe, PEProblem)):
        data = bytearray(source.read_bytes()[:cut])
        for at, value in flips:
            if at < len(data):
                data[at] = value
        path = tmp_path / source.name
        path.write_bytes(bytes(data))
        try:
            read(str(path), str(path))
        except problem:
            pass
