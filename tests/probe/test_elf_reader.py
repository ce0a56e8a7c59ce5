"""probe/elf.py's struct reader against pyelftools (the oracle) on real ELF files: the two
g++-built libc10 fixtures, the torch wheel's libraries, this machine's libstdc++ and a
32-bit object built here."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from elftools.elf.elffile import ELFFile

from doctor.probe.elf import ElfProblem, ElfReader, read_elf
from doctor.probe.ldcache import parse_ld_so_cache


def oracle(path: Path, symbols: bool = True) -> dict:
    """What pyelftools reads; symbols=False leaves out the symbol table (libtorch_cpu's ~10⁵)."""
    with open(path, "rb") as fh:
        elf = ELFFile(fh)
        out = {"class": elf.elfclass, "little": elf.little_endian, "needed": [], "runpath": [], "rpath": [],
               "verneed": {}, "verdef": [], "defined": set(), "undefined": set()}
        for section in elf.iter_sections():
            kind = section["sh_type"]
            if kind == "SHT_DYNAMIC":
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        out["needed"].append(tag.needed)
                    elif tag.entry.d_tag == "DT_RUNPATH":
                        out["runpath"] += [p for p in tag.runpath.split(":") if p]
                    elif tag.entry.d_tag == "DT_RPATH":
                        out["rpath"] += [p for p in tag.rpath.split(":") if p]
            elif kind == "SHT_GNU_verneed":
                for need, auxes in section.iter_versions():
                    out["verneed"][need.name] = [a.name for a in auxes]
            elif kind == "SHT_GNU_verdef":
                for _d, auxes in section.iter_versions():
                    out["verdef"] += [a.name for a in auxes]
            elif kind == "SHT_DYNSYM" and symbols:
                for sym in section.iter_symbols():
                    if sym.name:
                        undef = sym["st_shndx"] == "SHN_UNDEF"
                        (out["undefined"] if undef else out["defined"]).add(
                            (sym.name, sym["st_info"]["bind"] == "STB_WEAK") if undef else sym.name)
        return out


def ours(path: Path) -> dict:
    with open(path, "rb") as fh:
        elf = ElfReader(fh)
        needed, runpath, rpath = elf.dynamic()
        defined, undefined = set(), set()
        for name, is_defined, weak in elf.symbols():
            (defined.add(name) if is_defined else undefined.add((name, weak)))
        return {"class": elf.elfclass, "little": elf.little, "needed": needed, "runpath": runpath, "rpath": rpath,
                "verneed": elf.version_needs(), "verdef": elf.version_definitions(), "defined": defined,
                "undefined": undefined}


def real_files(wheel_root: Path) -> list[Path]:
    cache = parse_ld_so_cache(Path("/etc/ld.so.cache").read_bytes())
    return [wheel_root / "lib/libc10.so", wheel_root / "lib/libshm.so", Path(cache["libstdc++.so.6"][0]),
            Path(cache["libc.so.6"][0]), Path(shutil.which("ls"))]


def test_reader_agrees_with_pyelftools_on_real_libraries(wheel_root, abi_libs):
    files = [*abi_libs.values(), *real_files(wheel_root)]
    for path in files:
        expected, got = oracle(path), ours(path)
        assert got == expected, path
    libc10 = ours(wheel_root / "lib/libc10.so")
    assert "libstdc++.so.6" in libc10["needed"] and libc10["verneed"]["libstdc++.so.6"]
    assert any(v.startswith("GLIBCXX_") for v in ours(real_files(wheel_root)[2])["verdef"])


def test_reader_agrees_on_a_32bit_library_with_rpath(tmp_path):
    src = tmp_path / "c10.c"
    src.write_text("extern int puts(const char *);\nint c10_version(void) { return puts(\"x\"); }\n")
    obj, lib = tmp_path / "c10.o", tmp_path / "libc10-32.so"
    subprocess.run(["gcc", "-m32", "-fPIC", "-c", str(src), "-o", str(obj)], check=True)
    subprocess.run(["ld", "-m", "elf_i386", "-shared", "--disable-new-dtags", "-rpath", "/opt/a:$ORIGIN/b",
                    "-o", str(lib), str(obj)], check=True)
    assert ours(lib) == oracle(lib)
    info = read_elf("libc10.so", str(lib))
    assert (info.elfclass, info.machine, info.rpath, info.runpath) == (32, "i386", ["/opt/a", "$ORIGIN/b"], [])


@pytest.mark.parametrize("cut", [70, 200, 1000])
def test_truncated_library_is_an_elf_problem(tmp_path, abi_libs, cut):
    data = abi_libs["cxx11"].read_bytes()
    bad = tmp_path / "libc10.so"
    bad.write_bytes(data[:cut])
    with pytest.raises(ElfProblem):
        read_elf("libc10.so", str(bad))


def test_section_table_pointing_past_the_end_is_refused(tmp_path, abi_libs):
    import struct

    data = bytearray(abi_libs["cxx11"].read_bytes())
    shoff, = struct.unpack_from("<Q", data, 0x28)
    # the dynamic section's offset moved far past the end of the file
    for i in range(struct.unpack_from("<H", data, 0x3C)[0]):
        at = shoff + i * 64
        if struct.unpack_from("<I", data, at + 4)[0] == 6:
            struct.pack_into("<Q", data, at + 24, len(data) * 4)
    bad = tmp_path / "libc10.so"
    bad.write_bytes(bytes(data))
    with pytest.raises(ElfProblem):
        read_elf("libc10.so", str(bad))


def test_abi_counts_on_bytes_equal_counting_decoded_names(wheel_root, abi_libs):
    from doctor.probe.elf import _abi_counts

    for path in [*abi_libs.values(), wheel_root / "lib/libc10.so", wheel_root / "lib/libtorch_cpu.so"]:
        with open(path, "rb") as fh:
            elf = ElfReader(fh)
            assert elf.abi_counts() == _abi_counts(elf.defined_symbols()), path
    with open(wheel_root / "lib/libc10.so", "rb") as fh:
        cxx11, old = ElfReader(fh).abi_counts()
    assert cxx11 > 50 and old == 0  # the 2.13 wheel is a C++11 ABI build


@pytest.mark.parametrize("whole_table", [0, 1 << 20])
def test_long_run_path_names_cross_the_reads_and_match_pyelftools(tmp_path, monkeypatch, whole_table):
    # A large string table's names are read one by one in growing reads (256 bytes, then 4 KiB,
    # ...): entries longer than each read must come back whole. WHOLE_TABLE=0 takes that path
    # for this small library; the default reads its table at once.
    import doctor.probe.elf as elf

    monkeypatch.setattr(elf, "WHOLE_TABLE", whole_table)
    src = tmp_path / "c10.c"
    src.write_text("int c10_version(void) { return 1; }\n")
    entries = ["/opt/" + "a" * 300, "$ORIGIN/" + "b" * 5000, "/usr/lib"]
    lib = tmp_path / "libc10-long.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(lib), str(src), "-Wl,-rpath," + ":".join(entries)],
                   check=True)
    assert ours(lib) == oracle(lib)
    assert read_elf("libc10.so", str(lib)).runpath == entries


def test_libtorch_cpu_names_are_read_without_its_whole_string_table(wheel_root, monkeypatch):
    import doctor.probe.elf as elf

    path = wheel_root / "lib/libtorch_cpu.so"
    read = []
    real_pread = os.pread

    def counting_pread(fd, size, offset):
        data = real_pread(fd, size, offset)
        read.append(len(data))
        return data

    monkeypatch.setattr(elf.os, "pread", counting_pread)
    with open(path, "rb") as fh:
        reader = ElfReader(fh)
        got = reader.dynamic(), reader.version_needs()
    monkeypatch.undo()
    expected = oracle(path, symbols=False)
    assert got == ((expected["needed"], expected["runpath"], expected["rpath"]), expected["verneed"])
    assert "libc10.so" in got[0][0]
    # its .dynstr is megabytes (every symbol name); the two tables name a few dozen strings
    assert sum(read) < 64 << 10, sum(read)

