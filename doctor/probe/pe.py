"""PE files (Windows DLLs and programs): what the Windows loader reads from them.

pefile (pure Python, one 300 KB module, maintained since 2004, used by capa, Volatility and
malware tooling) parses them; only the import, delay-import and resource directories are read
(fast_load), so torch_cpu.dll (300 MB) costs ~10 ms. Failures become PEProblem, never a crash.

The C runtime a DLL needs follows from its imports: VCRUNTIME140.dll / MSVCP140.dll (the VC++
2015-2022 redistributable, Release), VCRUNTIME140D.dll / MSVCP140D.dll / ucrtbased.dll (Debug,
only on machines with Visual Studio), api-ms-win-crt-* (the Universal CRT, part of Windows 10+).
"""

from __future__ import annotations

import struct
from dataclasses import field

from doctor.record import record

MACHINES = {0x8664: "x86_64", 0xAA64: "arm64", 0x14C: "x86", 0x1C4: "arm"}
MAX_SIZE = 4 << 30  # torch_cuda.dll is ~1 GB; anything far above is not a DLL we should map
RELEASE_CRT = ("vcruntime140.dll", "vcruntime140_1.dll", "msvcp140.dll", "msvcp140_1.dll", "msvcp140_2.dll",
               "msvcp140_atomic_wait.dll", "msvcp140_codecvt_ids.dll", "concrt140.dll", "vcomp140.dll", "ucrtbase.dll")
DEBUG_CRT = ("vcruntime140d.dll", "vcruntime140_1d.dll", "msvcp140d.dll", "msvcp140_1d.dll", "msvcp140_2d.dll",
             "concrt140d.dll", "vcomp140d.dll", "ucrtbased.dll")


class PEProblem(ValueError):
    """Not a PE file, or one that cannot be read."""


@record
class PEInfo:
    """One Windows PE file: machine, DLL or not, its imports and delay-load imports."""
    path: str
    machine: str  # "x86_64", "arm64", ...
    is_dll: bool
    imports: list[str] = field(default_factory=list)  # as written in the file
    delay_imports: list[str] = field(default_factory=list)
    version: dict[str, str] = field(default_factory=dict)  # VS_VERSIONINFO strings: FileVersion, ProductName, ...

    @property
    def all_imports(self) -> list[str]:
        return [*self.imports, *self.delay_imports]

    @property
    def crt(self) -> list[str]:
        """The VC++ runtime DLLs it imports (Release or Debug), lower-cased."""
        return [n.lower() for n in self.all_imports if n.lower() in RELEASE_CRT + DEBUG_CRT]

    @property
    def crt_flavour(self) -> str | None:
        """'release', 'debug', 'mixed' (both: a broken build), or None (no VC++ runtime import)."""
        names = set(self.crt)
        debug, release = bool(names & set(DEBUG_CRT)), bool(names & set(RELEASE_CRT))
        return "mixed" if debug and release else "debug" if debug else "release" if release else None

    @property
    def ucrt(self) -> bool:
        return any(n.lower().startswith("api-ms-win-crt-") for n in self.all_imports)


def is_pe(head: bytes) -> bool:
    if len(head) < 64 or head[:2] != b"MZ":
        return False
    offset = int.from_bytes(head[60:64], "little")
    return offset + 4 <= len(head) and head[offset:offset + 4] == b"PE\0\0"


def read_pe(display: str, real: str, resources: bool = True) -> PEInfo:
    """Machine, imports (plain and delay-load) and version strings. Raises PEProblem or OSError."""
    import os

    size = os.path.getsize(real)
    if size == 0:
        raise PEProblem("empty file (0 bytes)")
    if size > MAX_SIZE:
        raise PEProblem(f"{size} bytes: larger than any DLL the doctor reads")
    with open(real, "rb") as f:
        if not is_pe(f.read(4096)):
            raise PEProblem("not a PE file")
    import pefile

    names = ["IMAGE_DIRECTORY_ENTRY_IMPORT", "IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"] + (["IMAGE_DIRECTORY_ENTRY_RESOURCE"] if resources else [])
    try:
        pe = pefile.PE(real, fast_load=True)
        try:
            pe.parse_data_directories(directories=[pefile.DIRECTORY_ENTRY[n] for n in names], import_dllnames_only=True)
            info = PEInfo(display, MACHINES.get(pe.FILE_HEADER.Machine, f"machine {pe.FILE_HEADER.Machine:#x}"), pe.is_dll())
            info.imports = [_text(e.dll) for e in getattr(pe, "DIRECTORY_ENTRY_IMPORT", [])][:4096]
            info.delay_imports = [_text(e.dll) for e in getattr(pe, "DIRECTORY_ENTRY_DELAY_IMPORT", [])][:4096]
            for group in getattr(pe, "FileInfo", None) or []:
                for entry in group:
                    for table in getattr(entry, "StringTable", []):
                        for k, v in list(table.entries.items())[:64]:
                            info.version.setdefault(_text(k)[:64], _text(v)[:256])
        finally:
            pe.close()
    except pefile.PEFormatError as exc:
        raise PEProblem(f"damaged PE file ({str(exc)[:200]})") from exc
    except (struct.error, IndexError, ValueError, AttributeError) as exc:
        raise PEProblem(f"damaged PE file ({type(exc).__name__}: {str(exc)[:200]})") from exc
    return info


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)
