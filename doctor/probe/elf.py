"""What an ELF shared library says about itself, read with pyelftools (no `nm`, no `readelf`)."""

from __future__ import annotations

import functools
import os
import struct
from dataclasses import dataclass, field

# Defined dynamic symbols in these namespaces decide the ABI; other namespaces (fmt, std
# helpers) carry __cxx11 symbols even in old-ABI builds.
TORCH_NAMESPACES = tuple(
    prefix + ns for prefix in ("_ZN", "_ZNK") for ns in ("3c10", "2at", "5torch", "6caffe2")
)
CXX11_STRING = "St7__cxx11"
OLD_STRING = "Ss"

ELF_MAGIC = b"\x7fELF"
EHDR_SIZE = {1: 52, 2: 64}  # ELFCLASS32, ELFCLASS64


class ElfProblem(ValueError):
    """The file is not a usable ELF shared library; the message is the evidence."""


def header_problem(data: bytes, size: int) -> str | None:
    """Why the first bytes of a file (of `size` bytes) are not an ELF header, or None.

    A pure function of the bytes, fuzzed: empty, truncated, not ELF, an unknown class or byte
    order, section headers beyond the end of the file."""
    if size == 0:
        return "empty file (0 bytes)"
    if not data.startswith(ELF_MAGIC):
        return f"not an ELF file (starts with {data[:8]!r})"
    if len(data) < 6:
        return f"truncated ELF header ({size} bytes)"
    elfclass, endian = data[4], data[5]
    if elfclass not in EHDR_SIZE:
        return f"unknown ELF class {elfclass}"
    if endian not in (1, 2):
        return f"unknown ELF byte order {endian}"
    need = EHDR_SIZE[elfclass]
    if size < need or len(data) < need:
        return f"truncated ELF header ({size} bytes, a {32 * elfclass}-bit header needs {need})"
    order = "<" if endian == 1 else ">"
    if elfclass == 2:
        shoff, = struct.unpack_from(order + "Q", data, 0x28)
        shentsize, shnum = struct.unpack_from(order + "HH", data, 0x3A)
    else:
        shoff, = struct.unpack_from(order + "I", data, 0x20)
        shentsize, shnum = struct.unpack_from(order + "HH", data, 0x2E)
    if shoff + shentsize * shnum > size:
        return f"truncated: section headers end at byte {shoff + shentsize * shnum}, the file has {size}"
    return None


def identity(data: bytes) -> tuple[int, str] | None:
    """(32 or 64, "little" or "big") from a header that `header_problem` accepted."""
    return (32 * data[4], "little" if data[5] == 1 else "big") if len(data) > 5 else None


MACHINES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64", "EM_386": "i386", "EM_ARM": "arm", "EM_PPC64": "ppc64le"}


@dataclass
class ElfInfo:
    path: str
    machine: str  # "x86_64", "aarch64", or the raw EM_ value
    elfclass: int  # 32 or 64
    endian: str = "little"  # "little" | "big"
    needed: list[str] = field(default_factory=list)
    runpath: list[str] = field(default_factory=list)
    rpath: list[str] = field(default_factory=list)
    version_needs: dict[str, list[str]] = field(default_factory=dict)  # "libstdc++.so.6" -> ["GLIBCXX_3.4.30", ...]
    cxx11_symbols: int | None = None  # defined torch-namespace symbols using std::__cxx11::basic_string
    old_abi_symbols: int | None = None  # ... using the pre-C++11 COW std::string (`Ss`)


def read_elf(path: str, real_path: str, count_abi_symbols: bool = False) -> ElfInfo:
    """Dynamic section, version needs and (optionally) ABI symbol counts. Raises OSError/ELFError.

    Memoised per file and mtime: the libtorch and loader probes both read libc10.so.
    A FIFO or device is refused before it is opened (it would block or never end); a file that
    is empty, truncated or not ELF raises ElfProblem saying so, before pyelftools reads it.
    """
    import stat as st

    fd = os.open(real_path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    try:
        info = os.fstat(fd)
        if not st.S_ISREG(info.st_mode):
            raise ElfProblem("not a regular file (a FIFO, socket or device)")
        head = os.read(fd, 64)
    finally:
        os.close(fd)
    problem = header_problem(head, info.st_size)
    if problem:
        raise ElfProblem(problem)
    return _read_elf(path, real_path, count_abi_symbols, info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=64)
def _read_elf(path: str, real_path: str, count_abi_symbols: bool, _mtime: int, _size: int) -> ElfInfo:
    from elftools.elf.elffile import ELFFile

    with open(real_path, "rb") as fh:
        elf = ELFFile(fh)
        info = ElfInfo(
            path=path,
            machine=MACHINES.get(elf["e_machine"], str(elf["e_machine"])),
            elfclass=elf.elfclass,
            endian="little" if elf.little_endian else "big",
        )
        # Build only the three sections we read: constructing all of them (GNU hash tables
        # included) costs far more than reading these.
        wanted = {}
        for i in range(elf.num_sections()):
            kind = elf._get_section_header(i)["sh_type"]
            if kind in ("SHT_DYNAMIC", "SHT_GNU_verneed", "SHT_DYNSYM"):
                wanted[kind] = elf.get_section(i)
        for kind, section in wanted.items():
            if kind == "SHT_DYNAMIC":
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        info.needed.append(tag.needed)
                    elif tag.entry.d_tag == "DT_RUNPATH":
                        info.runpath.extend(p for p in tag.runpath.split(":") if p)
                    elif tag.entry.d_tag == "DT_RPATH":
                        info.rpath.extend(p for p in tag.rpath.split(":") if p)
            elif kind == "SHT_GNU_verneed":
                for verneed, auxes in section.iter_versions():
                    info.version_needs[verneed.name] = [aux.name for aux in auxes]
        if count_abi_symbols:
            dynsym = wanted.get("SHT_DYNSYM")
            info.cxx11_symbols, info.old_abi_symbols = _abi_counts(elf, dynsym) if dynsym else (0, 0)
    return info


def _defined_symbol_names(elf, dynsym):
    """Names of defined dynamic symbols. pyelftools finds the tables; for 64-bit little-endian
    files (every libtorch we meet) the entries are decoded with struct, ~20× faster than
    building a Symbol object per entry."""
    if elf.elfclass != 64 or not elf.little_endian or dynsym["sh_entsize"] != 24:
        for sym in dynsym.iter_symbols():
            if sym["st_shndx"] != "SHN_UNDEF":
                yield sym.name
        return
    strtab = elf.get_section(dynsym["sh_link"])
    strings = strtab.data()
    for st_name, _info, _other, shndx, _value, _size in struct.iter_unpack("<IBBHQQ", dynsym.data()):
        if shndx != 0:  # SHN_UNDEF
            yield strings[st_name : strings.index(b"\0", st_name)].decode("ascii", "replace")


def _abi_counts(elf, dynsym) -> tuple[int, int]:
    cxx11 = old = 0
    for name in _defined_symbol_names(elf, dynsym):
        if not name.startswith(TORCH_NAMESPACES):
            continue
        if CXX11_STRING in name:
            cxx11 += 1
        elif OLD_STRING in name:
            old += 1
    return cxx11, old


def abi_from_counts(cxx11: int, old: int) -> str | None:
    """The ABI the counts show, or None when the library has no std::string in its interface."""
    if cxx11 == old == 0:
        return None
    return "cxx11" if cxx11 > old else "pre-cxx11"
