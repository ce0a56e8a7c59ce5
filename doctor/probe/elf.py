"""What an ELF shared library says about itself: a small struct reader of the few tables the
probes need (no `nm`, no `readelf`; pyelftools is the oracle in the tests)."""

from __future__ import annotations

import array
import collections
import functools
import itertools
import os
import re
import struct
import sys
from dataclasses import field

from doctor.record import record

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


@record
class ElfInfo:
    """The dynamic-section facts of one ELF file: NEEDED, RUNPATH, RPATH, versions."""
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
    is empty, truncated or not ELF raises ElfProblem saying so, before any table is read.
    """
    import stat as st

    fd = os.open(real_path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    try:
        info = os.fstat(fd)
        if not st.S_ISREG(info.st_mode):
            kind = ("a directory" if st.S_ISDIR(info.st_mode) else "a named pipe" if st.S_ISFIFO(info.st_mode)
                    else "a socket" if st.S_ISSOCK(info.st_mode) else "a device")
            raise ElfProblem(f"not a regular file ({kind})")
        head = os.read(fd, 64)
    finally:
        os.close(fd)
    problem = header_problem(head, info.st_size)
    if problem:
        raise ElfProblem(problem)
    return _read_elf(path, real_path, count_abi_symbols, info.st_mtime_ns, info.st_size)


@functools.lru_cache(maxsize=64)
def _read_elf(path: str, real_path: str, count_abi_symbols: bool, _mtime: int, _size: int) -> ElfInfo:
    with open(real_path, "rb") as fh:
        elf = ElfReader(fh)
        info = ElfInfo(path=path, machine=elf.machine, elfclass=elf.elfclass, endian=elf.endian)
        info.needed, info.runpath, info.rpath = elf.dynamic()
        info.version_needs = elf.version_needs()
        if count_abi_symbols:
            info.cxx11_symbols, info.old_abi_symbols = elf.abi_counts()
    return info


# -- a reader of the few fields the probes need --
#
# pyelftools (the oracle in tests/probe/test_elf_reader.py) costs ~100 ms to import (it pulls
# `pdb` through elftools.construct.debug) and builds an object per entry; `doctor check`
# needs five tables, read here with struct from the section headers. Every offset and count
# comes from a hostile file: each is checked against the file's size before it is used.

SHT_DYNAMIC, SHT_DYNSYM = 6, 11
SHT_GNU_VERDEF, SHT_GNU_VERNEED = 0x6FFFFFFD, 0x6FFFFFFE
DT_NEEDED, DT_RPATH, DT_RUNPATH = 1, 15, 29
_TORCH_PREFIXES = tuple(p.encode() for p in TORCH_NAMESPACES)
_CXX11_BYTES, _OLD_BYTES = CXX11_STRING.encode(), OLD_STRING.encode()
# A NUL, then a whole name that starts a torch namespace and holds one of the two strings. The
# leading NUL lets the engine jump from name start to name start (a literal first byte); the
# greedy `[^\0]*` scans each name once: 0.2 ms for libc10 against 0.8 ms for a lazy search
# tried at every byte (issue 19: once per libtorch tree).
_MARKED_TORCH_NAME = re.compile(b"\\0((?:" + b"|".join(re.escape(p) for p in _TORCH_PREFIXES) + b")[^\\0]*(?:"
                                + re.escape(_CXX11_BYTES) + b"|" + re.escape(_OLD_BYTES) + b")[^\\0]*)")
EM_NAMES = {62: "x86_64", 183: "aarch64", 3: "i386", 40: "arm", 21: "ppc64le"}
MAX_VERSIONS = 1 << 16  # version entries followed in one table (a loop of vn_next ends here)
# A string table up to this size is read whole when a few names are wanted: one read of 1 MiB
# from the page cache costs about what ~60 reads of single names do.
WHOLE_TABLE = 1 << 20


class ElfReader:
    """Section headers of an ELF file opened for reading, and the tables the probes use."""

    def __init__(self, fh) -> None:
        self._fd = fh.fileno()
        self._size = os.fstat(self._fd).st_size
        head = os.pread(self._fd, 64, 0)
        problem = header_problem(head, self._size)
        if problem:
            raise ElfProblem(problem)
        self.elfclass = 32 * head[4]
        self.little = head[5] == 1
        self.endian = "little" if self.little else "big"
        o = "<" if self.little else ">"
        self._o = o
        machine, = struct.unpack_from(o + "H", head, 0x12)
        self.machine = EM_NAMES.get(machine, f"EM_{machine}")
        if self.elfclass == 64:
            shoff, = struct.unpack_from(o + "Q", head, 0x28)
            shentsize, shnum = struct.unpack_from(o + "HH", head, 0x3A)
            shdr = struct.Struct(o + "IIQQQQIIQQ")
        else:
            shoff, = struct.unpack_from(o + "I", head, 0x20)
            shentsize, shnum = struct.unpack_from(o + "HH", head, 0x2E)
            shdr = struct.Struct(o + "IIIIIIIIII")
        if shnum and shentsize < shdr.size:
            raise ElfProblem(f"section header entries of {shentsize} bytes (an ELF{self.elfclass} one has {shdr.size})")
        table = self._read(shoff, shentsize * shnum)
        self._tables: dict[int, bytes] = {}  # string tables read whole, by section index
        self.sections = []  # (type, offset, size, link, info, entsize)
        for i in range(shnum):
            _name, kind, _flags, _addr, off, size, link, info, _align, entsize = shdr.unpack_from(table, i * shentsize)
            self.sections.append((kind, off, size, link, info, entsize))

    def _check_fits(self, offset: int, size: int) -> None:
        if offset < 0 or size < 0 or offset + size > self._size:
            raise ElfProblem(f"truncated: a table at byte {offset} of {size} bytes runs past the end ({self._size} bytes)")

    def _read(self, offset: int, size: int) -> bytes:
        self._check_fits(offset, size)
        data = os.pread(self._fd, size, offset)
        if len(data) != size:
            raise ElfProblem(f"truncated: read {len(data)} of {size} bytes at {offset}")
        return data

    @staticmethod
    def _unpack(st: struct.Struct, data: bytes, offset: int) -> tuple:
        if offset < 0 or offset + st.size > len(data):
            raise ElfProblem(f"a version entry at {offset} runs past its section ({len(data)} bytes)")
        return st.unpack_from(data, offset)

    def _first(self, kind: int):
        return next((s for s in self.sections if s[0] == kind), None)

    def _bytes(self, section) -> bytes:
        return self._read(section[1], section[2])

    def _string_table(self, index: int):
        if not 0 <= index < len(self.sections):
            raise ElfProblem(f"a string table index {index} out of range")
        return self.sections[index]

    def _strings(self, index: int) -> bytes:
        if index not in self._tables:
            self._tables[index] = self._bytes(self._string_table(index))
        return self._tables[index]

    def _names(self, index: int):
        """A function from an offset to the name there in string table `index`. The dynamic
        section and the version tables name a few dozen strings of the table that holds every
        symbol name: a table of up to WHOLE_TABLE bytes is read once (libc10's, 85 KB, which the
        ABI count reads anyway), a larger one name by name (libtorch_cpu's is 5 MB, a CUDA
        build's more; issue 19)."""
        _kind, start, size = self._string_table(index)[:3]
        if size <= WHOLE_TABLE:
            table = self._strings(index)
            return lambda offset: self._str(table, offset)
        self._check_fits(start, size)

        def name(offset: int) -> str:
            chunk = 256
            while offset < size:
                data = self._read(start + offset, min(chunk, size - offset))
                end = data.find(b"\0")
                if end >= 0 or offset + len(data) == size:
                    return data[:end if end >= 0 else len(data)].decode("utf-8", "replace")
                chunk *= 16
            return ""

        return name

    @staticmethod
    def _str(table: bytes, offset: int) -> str:
        end = table.find(b"\0", offset)
        return table[offset:end if end >= 0 else len(table)].decode("utf-8", "replace")

    def dynamic(self) -> tuple[list[str], list[str], list[str]]:
        """(NEEDED, RUNPATH entries, RPATH entries) of the dynamic section."""
        needed: list[str] = []
        runpath: list[str] = []
        rpath: list[str] = []
        section = self._first(SHT_DYNAMIC)
        if section is None:
            return needed, runpath, rpath
        name = self._names(section[3])
        fmt = self._o + ("qQ" if self.elfclass == 64 else "iI")
        data = self._bytes(section)
        for tag, value in struct.iter_unpack(fmt, data[: len(data) // struct.calcsize(fmt) * struct.calcsize(fmt)]):
            if tag == 0:  # DT_NULL
                break
            if tag == DT_NEEDED:
                needed.append(name(value))
            elif tag == DT_RUNPATH:
                runpath.extend(p for p in name(value).split(":") if p)
            elif tag == DT_RPATH:
                rpath.extend(p for p in name(value).split(":") if p)
        return needed, runpath, rpath

    def version_needs(self) -> dict[str, list[str]]:
        """File name -> version names it needs (GLIBCXX_3.4.30 ...), from SHT_GNU_verneed."""
        out: dict[str, list[str]] = {}
        section = self._first(SHT_GNU_VERNEED)
        if section is None:
            return out
        name_at = self._names(section[3])
        need, aux = struct.Struct(self._o + "HHIII"), struct.Struct(self._o + "IHHII")
        data, offset = self._bytes(section), 0
        for _ in range(min(section[4], MAX_VERSIONS)):
            _version, count, file, aux_off, nxt = self._unpack(need, data, offset)
            names = out.setdefault(name_at(file), [])
            at = offset + aux_off
            for _ in range(min(count, MAX_VERSIONS)):
                _hash, _flags, _other, name, aux_next = self._unpack(aux, data, at)
                names.append(name_at(name))
                if not aux_next:
                    break
                at += aux_next
            if not nxt:
                break
            offset += nxt
        return out

    def version_definitions(self) -> list[str]:
        """Every name in SHT_GNU_verdef (each definition and the parents it names)."""
        out: list[str] = []
        section = self._first(SHT_GNU_VERDEF)
        if section is None:
            return out
        name_at = self._names(section[3])
        vdef, aux = struct.Struct(self._o + "HHHHIII"), struct.Struct(self._o + "II")
        data, offset = self._bytes(section), 0
        for _ in range(min(section[4], MAX_VERSIONS)):
            _version, _flags, _ndx, count, _hash, aux_off, nxt = self._unpack(vdef, data, offset)
            at = offset + aux_off
            for _ in range(min(count, MAX_VERSIONS)):
                name, aux_next = self._unpack(aux, data, at)
                out.append(name_at(name))
                if not aux_next:
                    break
                at += aux_next
            if not nxt:
                break
            offset += nxt
        return out

    def symbols(self):
        """(name, defined, weak) of each named entry of the dynamic symbol table."""
        section = self._first(SHT_DYNSYM)
        if section is None:
            return
        strings = self._strings(section[3])
        if self.elfclass == 64:
            fmt, name_at, info_at, shndx_at = self._o + "IBBHQQ", 0, 1, 3
        else:
            fmt, name_at, info_at, shndx_at = self._o + "IIIBBH", 0, 3, 5
        width = struct.calcsize(fmt)
        data = self._bytes(section)
        for entry in struct.iter_unpack(fmt, data[: len(data) // width * width]):
            if entry[name_at] == 0:
                continue
            yield self._str(strings, entry[name_at]), entry[shndx_at] != 0, entry[info_at] >> 4 == 2

    def defined_symbols(self):
        return (name for name, defined, _weak in self.symbols() if defined)

    def abi_counts(self) -> tuple[int, int]:
        """(defined torch-namespace symbols with std::__cxx11::string, with the old std::string),
        as _abi_counts(defined_symbols()) counts them, on the raw bytes: a libtorch library has
        ~10⁴–10⁵ dynamic symbols and a cache may hold dozens of trees (issue 19)."""
        section = self._first(SHT_DYNSYM)
        if section is None:
            return 0, 0
        strings = self._strings(section[3])
        # Only names that start a torch namespace and carry one of the two strings are visited;
        # the regular expression skips every other name in C. Offset of the name -> std::__cxx11.
        marked = {m.start(1) - 1: _CXX11_BYTES in m.group(1) for m in _MARKED_TORCH_NAME.finditer(b"\0" + strings)}
        if not marked:
            return 0, 0
        refs = self._defined_references(self._bytes(section), marked)
        cxx11 = sum(n for offset, n in refs.items() if marked[offset])
        return cxx11, sum(refs.values()) - cxx11

    def _defined_references(self, data: bytes, offsets) -> collections.Counter:
        """How many defined entries name each of `offsets` (string-table offsets). On a
        little-endian file and machine the table is read column-wise as 32-bit words, and only
        the entries naming one of `offsets` are looked at in Python (libc10: 74 of 1,532)."""
        if self._o == "<" and sys.byteorder == "little" and array.array("I").itemsize == 4:
            per_entry = 6 if self.elfclass == 64 else 4  # 32-bit words in Elf64_Sym / Elf32_Sym
            words = array.array("I", data[: len(data) // (4 * per_entry) * (4 * per_entry)])
            names = words[0::per_entry]
            # st_info, st_other, st_shndx share one word (the 2nd in Elf64_Sym, the 4th in
            # Elf32_Sym): st_shndx != 0 (defined) is that word being >= 2**16.
            packed = words[1::per_entry] if self.elfclass == 64 else words[3::per_entry]
            hits = itertools.compress(range(len(names)), map(offsets.__contains__, names))
            return collections.Counter(names[i] for i in hits if packed[i] >= 1 << 16)
        fmt, shndx_at = (self._o + "IBBHQQ", 3) if self.elfclass == 64 else (self._o + "IIIBBH", 5)
        width = struct.calcsize(fmt)
        return collections.Counter(e[0] for e in struct.iter_unpack(fmt, data[: len(data) // width * width])
                                   if e[shndx_at] != 0 and e[0] in offsets)


def _abi_counts(names) -> tuple[int, int]:
    cxx11 = old = 0
    for name in names:
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
