"""What an ELF shared library says about itself, read with pyelftools (no `nm`, no `readelf`)."""

from __future__ import annotations

from dataclasses import dataclass, field

# Defined dynamic symbols in these namespaces decide the ABI; other namespaces (fmt, std
# helpers) carry __cxx11 symbols even in old-ABI builds.
TORCH_NAMESPACES = tuple(
    prefix + ns for prefix in ("_ZN", "_ZNK") for ns in ("3c10", "2at", "5torch", "6caffe2")
)
CXX11_STRING = "St7__cxx11"
OLD_STRING = "Ss"

MACHINES = {"EM_X86_64": "x86_64", "EM_AARCH64": "aarch64", "EM_386": "i386", "EM_ARM": "arm", "EM_PPC64": "ppc64le"}


@dataclass
class ElfInfo:
    path: str
    machine: str  # "x86_64", "aarch64", or the raw EM_ value
    elfclass: int  # 32 or 64
    needed: list[str] = field(default_factory=list)
    runpath: list[str] = field(default_factory=list)
    rpath: list[str] = field(default_factory=list)
    version_needs: dict[str, list[str]] = field(default_factory=dict)  # "libstdc++.so.6" -> ["GLIBCXX_3.4.30", ...]
    cxx11_symbols: int | None = None  # defined torch-namespace symbols using std::__cxx11::basic_string
    old_abi_symbols: int | None = None  # ... using the pre-C++11 COW std::string (`Ss`)


def read_elf(path: str, real_path: str, count_abi_symbols: bool = False) -> ElfInfo:
    """Dynamic section, version needs and (optionally) ABI symbol counts. Raises OSError/ELFError."""
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerNeedSection

    with open(real_path, "rb") as fh:
        elf = ELFFile(fh)
        info = ElfInfo(
            path=path,
            machine=MACHINES.get(elf["e_machine"], str(elf["e_machine"])),
            elfclass=elf.elfclass,
        )
        for section in elf.iter_sections():
            if isinstance(section, DynamicSection):
                for tag in section.iter_tags():
                    if tag.entry.d_tag == "DT_NEEDED":
                        info.needed.append(tag.needed)
                    elif tag.entry.d_tag == "DT_RUNPATH":
                        info.runpath.extend(p for p in tag.runpath.split(":") if p)
                    elif tag.entry.d_tag == "DT_RPATH":
                        info.rpath.extend(p for p in tag.rpath.split(":") if p)
            elif isinstance(section, GNUVerNeedSection):
                for verneed, auxes in section.iter_versions():
                    info.version_needs[verneed.name] = [aux.name for aux in auxes]
        if count_abi_symbols:
            info.cxx11_symbols, info.old_abi_symbols = _abi_counts(elf)
    return info


def _abi_counts(elf) -> tuple[int, int]:
    dynsym = elf.get_section_by_name(".dynsym")
    cxx11 = old = 0
    if dynsym is None:
        return 0, 0
    for sym in dynsym.iter_symbols():
        name = sym.name
        if not name.startswith(TORCH_NAMESPACES) or sym["st_shndx"] == "SHN_UNDEF":
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
