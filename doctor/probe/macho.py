"""Mach-O files (macOS dylibs and programs): what dyld reads from them.

macholib (pure Python, ~350 KB with altgraph, ~5 ms to import, maintained with py2app) does the
parsing; LIEF would do it too but is a 20 MB native wheel for what is a few load commands. A
hostile file is checked first against bounds macholib does not enforce (fat slice count, load
command sizes), and every failure becomes a MachOProblem, never a crash.

A macOS libtorch links libc++ (`/usr/lib/libc++.1.dylib`), not libstdc++: there is no
`_GLIBCXX_USE_CXX11_ABI` question on macOS, and the doctor says so instead of guessing one.
"""

from __future__ import annotations

import struct
from dataclasses import field

from doctor.errors import reraise_out_of_resources
from doctor.record import record

# Mach-O magic numbers (as read big-endian from the first 4 bytes).
FAT = {0xCAFEBABE: 8, 0xCAFEBABF: 16}  # fat header; entry size of 32- and 64-bit fat_arch is 20/32
THIN = {0xFEEDFACE, 0xFEEDFACF, 0xCEFAEDFE, 0xCFFAEDFE}
CPU = {0x01000007: "x86_64", 0x0100000C: "arm64", 0x7: "i386", 0xC: "arm", 0x0200000C: "arm64_32"}
FILETYPES = {1: "object", 2: "executable", 6: "dylib", 8: "bundle"}
PLATFORMS = {1: "macos", 2: "ios", 3: "tvos", 4: "watchos", 6: "maccatalyst", 11: "visionos"}
MAX_SLICES = 16  # real fat files hold 2-4 slices
MAX_COMMANDS_SIZE = 16 << 20  # sizeofcmds of libtorch_cpu.dylib is ~10 KB


class MachOProblem(ValueError):
    """Not a Mach-O file, or one that cannot be read."""


@record(frozen=True)
class DylibRef:
    name: str  # "@rpath/libc10.dylib", "/usr/lib/libc++.1.dylib"
    weak: bool = False  # LC_LOAD_WEAK_DYLIB: a missing one is not fatal
    kind: str = "load"  # "load" | "weak" | "reexport" | "lazy" | "upward"


@record
class MachOSlice:
    arch: str  # "arm64", "x86_64", ...
    filetype: str  # "dylib", "executable", "bundle"
    install_name: str | None = None  # LC_ID_DYLIB
    dylibs: list[DylibRef] = field(default_factory=list)  # LC_LOAD_DYLIB and friends, in order
    rpaths: list[str] = field(default_factory=list)  # LC_RPATH, in order
    min_macos: str | None = None  # LC_BUILD_VERSION minos, or LC_VERSION_MIN_MACOSX
    sdk: str | None = None
    platform: str | None = None  # "macos", "ios", ...

    @property
    def cxx_stdlib(self) -> str | None:
        names = [d.name.rsplit("/", 1)[-1] for d in self.dylibs]
        if any(n.startswith("libc++.") for n in names):
            return "libc++"
        if any(n.startswith("libstdc++.") for n in names):
            return "libstdc++"
        return None


@record
class MachOInfo:
    path: str
    fat: bool
    slices: list[MachOSlice]

    @property
    def archs(self) -> list[str]:
        return [s.arch for s in self.slices]

    def slice_for(self, arch: str) -> MachOSlice | None:
        return next((s for s in self.slices if s.arch == arch), None)


def decode_version(value: int) -> str:
    """Mach-O's packed xxxx.yy.zz: 0x000E0000 → '14.0', 0x000B0300 → '11.3'."""
    major, minor, patch = value >> 16, (value >> 8) & 0xFF, value & 0xFF
    return f"{major}.{minor}.{patch}" if patch else f"{major}.{minor}"


def is_macho(head: bytes) -> bool:
    if len(head) < 8:
        return False
    magic = struct.unpack(">I", head[:4])[0]
    # 0xCAFEBABE is also a Java class file: a fat header has a small slice count there.
    return magic in THIN or (magic in FAT and 0 < struct.unpack(">I", head[4:8])[0] <= MAX_SLICES)


def _precheck(real: str) -> None:
    with open(real, "rb") as f:
        head = f.read(4096)
        if not is_macho(head):
            raise MachOProblem("not a Mach-O file" if head else "empty file (0 bytes)")
        magic = struct.unpack(">I", head[:4])[0]
        offsets = [0]
        if magic in FAT:
            count = struct.unpack(">I", head[4:8])[0]
            size = 20 if magic == 0xCAFEBABE else 32
            offsets = []
            for i in range(count):
                entry = head[8 + i * size: 8 + (i + 1) * size]
                if len(entry) < size:
                    raise MachOProblem("truncated fat header")
                offsets.append(struct.unpack(">I", entry[8:12])[0] if size == 20 else struct.unpack(">Q", entry[8:16])[0])
        for offset in offsets:
            f.seek(offset)
            header = f.read(28)
            if len(header) < 28:
                raise MachOProblem(f"truncated Mach-O header at offset {offset}")
            endian = ">" if header[:4] in (b"\xfe\xed\xfa\xce", b"\xfe\xed\xfa\xcf") else "<"
            ncmds, sizeofcmds = struct.unpack(endian + "II", header[16:24])
            if ncmds > 100_000 or sizeofcmds > MAX_COMMANDS_SIZE or ncmds * 8 > sizeofcmds:
                raise MachOProblem(f"implausible load commands ({ncmds} commands in {sizeofcmds} bytes)")


def read_macho(display: str, real: str) -> MachOInfo:
    """Every slice's architecture, install name, dependencies, rpaths and minimum OS.
    Raises MachOProblem (or OSError) for a file that is not a readable Mach-O."""
    _precheck(real)
    from macholib import mach_o
    from macholib.MachO import MachO

    try:
        parsed = MachO(real)
    except Exception as exc:  # macholib raises ValueError, struct.error, ... on damaged files
        reraise_out_of_resources(exc)
        raise MachOProblem(f"damaged Mach-O file ({type(exc).__name__}: {str(exc)[:200]})") from exc
    kinds = {mach_o.LC_LOAD_DYLIB: "load", mach_o.LC_LOAD_WEAK_DYLIB: "weak", mach_o.LC_REEXPORT_DYLIB: "reexport",
             mach_o.LC_LAZY_LOAD_DYLIB: "lazy", mach_o.LC_LOAD_UPWARD_DYLIB: "upward"}
    slices = []
    for header in parsed.headers:
        h = header.header
        s = MachOSlice(CPU.get(h.cputype, f"cputype {h.cputype:#x}"), FILETYPES.get(h.filetype, f"filetype {h.filetype}"))
        for lc, cmd, data in header.commands:
            text = data.split(b"\0", 1)[0].decode("utf-8", "replace")[:1024] if isinstance(data, bytes) else ""
            if lc.cmd == mach_o.LC_ID_DYLIB:
                s.install_name = text
            elif lc.cmd in kinds:
                s.dylibs.append(DylibRef(text, kinds[lc.cmd] == "weak", kinds[lc.cmd]))
            elif lc.cmd == mach_o.LC_RPATH:
                s.rpaths.append(text)
            elif lc.cmd == mach_o.LC_BUILD_VERSION:
                s.platform = PLATFORMS.get(cmd.platform, f"platform {cmd.platform}")
                s.min_macos, s.sdk = decode_version(cmd.minos), decode_version(cmd.sdk)
            elif lc.cmd == mach_o.LC_VERSION_MIN_MACOSX:
                s.platform = "macos"
                s.min_macos, s.sdk = decode_version(cmd.version), decode_version(cmd.sdk)
        slices.append(s)
    return MachOInfo(display, len(slices) > 1 or parsed.fat is not None, slices)
