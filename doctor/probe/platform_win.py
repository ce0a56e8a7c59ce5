"""The Windows DLL loader, simulated from facts: which c10.dll a program or Python would load.

Standard search order for a DLL imported by a program (SafeDllSearchMode, the default; see
"Dynamic-link library search order" in the Win32 docs): already loaded / KnownDLLs, the
program's folder, System32, the 16-bit system folder, the Windows folder, the current folder,
then PATH in order. The folder of the DLL that imports it is NOT searched: torch_cpu.dll's
c10.dll comes from the program's folder or PATH. Python 3.8+ loads extension modules with
LOAD_LIBRARY_SEARCH_DEFAULT_DIRS: the module's folder, the application folder, System32 and
the folders given to os.add_dll_directory (torch/__init__.py adds torch/lib) — not PATH.
"""

from __future__ import annotations

import os
import re
from dataclasses import field
from pathlib import PurePosixPath, PureWindowsPath

from doctor.host import Host
from doctor.probe.pe import PEInfo, PEProblem, read_pe
from doctor.record import record

# DLLs that ship with Windows (System32) or as the Universal CRT: never in a libtorch folder.
SYSTEM_DLLS = ("kernel32.dll", "advapi32.dll", "user32.dll", "ws2_32.dll", "dbghelp.dll", "psapi.dll", "iphlpapi.dll",
               "userenv.dll", "wintrust.dll", "imagehlp.dll", "shell32.dll", "ole32.dll", "oleaut32.dll", "ntdll.dll",
               "bcrypt.dll", "crypt32.dll", "secur32.dll", "version.dll", "setupapi.dll", "cfgmgr32.dll", "dxgi.dll",
               "d3d12.dll", "shlwapi.dll", "comctl32.dll", "gdi32.dll", "rpcrt4.dll", "nvcuda.dll", "nvml.dll")
VC_REDIST = ("vcruntime140.dll", "vcruntime140_1.dll", "msvcp140.dll", "msvcp140_1.dll", "msvcp140_2.dll", "concrt140.dll", "vcomp140.dll")
MAIN_DLLS = ("torch.dll", "torch_cpu.dll", "c10.dll", "torch_cuda.dll", "c10_cuda.dll")
CUDA_MARKERS = ("torch_cuda.dll", "c10_cuda.dll")
MAX_DLLS = 64


def win_path(host: Host, path: str) -> str:
    """A Windows path as Host sees it: itself on Windows; in a test root (or read from Linux),
    `C:\\x\\y` lives at /C/x/y. A POSIX path (a tree checked from Linux) stays as it is."""
    p = PureWindowsPath(path)
    if os.name == "nt" or len(p.drive) != 2:
        return path
    return "/" + "/".join([p.drive.rstrip(":"), *p.parts[1:]])


def win_exists(host: Host, path: str) -> bool:
    """Windows file names are case-insensitive (the import says MSVCP140.dll, the file is msvcp140.dll)."""
    mapped = win_path(host, path)
    if host.exists(mapped) or os.name == "nt":
        return host.exists(mapped)
    folder, _, leaf = mapped.replace("\\", "/").rpartition("/")
    return any(n.lower() == leaf.lower() for n in host.listdir(folder or "/"))


def _join(folder: str, name: str) -> str:
    return str(PureWindowsPath(folder) / name) if PureWindowsPath(folder).drive or "\\" in folder else str(PurePosixPath(folder) / name)


@record
class DllResolution:
    """Where Windows would find one DLL, and through which rule."""
    image: str  # the DLL that imports it
    name: str
    path: str | None
    via: str  # "program folder", "System32", "PATH[2]", "os.add_dll_directory", "system DLL (not this machine)", ""
    delay: bool = False


@record
class WinTreeFacts:
    """A Windows libtorch tree: its DLLs and how they resolve."""
    lib_dir: str
    images: dict[str, PEInfo] = field(default_factory=dict)
    unreadable: dict[str, str] = field(default_factory=dict)
    resolutions: list[DllResolution] = field(default_factory=list)
    machines: dict[str, str] = field(default_factory=dict)
    crt: dict[str, str | None] = field(default_factory=dict)  # dll -> release / debug / mixed / None
    cuda: bool = False  # torch_cuda.dll present: a CUDA build
    path: list[str] = field(default_factory=list)  # PATH in order (this machine, when Windows)
    on_this_machine: bool = False
    c10_candidates: list[str] = field(default_factory=list)  # every c10.dll in search order; the first loads

    @property
    def unresolved(self) -> list[DllResolution]:
        return [r for r in self.resolutions if r.path is None and not r.delay]

    @property
    def missing_redist(self) -> list[str]:
        return sorted({r.name.lower() for r in self.unresolved if r.name.lower() in VC_REDIST})


def search_dirs(program_dir: str | None, system32: str, path: list[str], dll_dirs: list[str], python: bool) -> list[tuple[str, str]]:
    """(folder, label) in the loader's order for a program (python=False) or a Python extension."""
    out: list[tuple[str, str]] = []
    if program_dir:
        out.append((program_dir, "program folder"))
    out.append((system32, "System32"))
    if python:
        out += [(d, "os.add_dll_directory") for d in dll_dirs]
    else:
        out += [(d, f"PATH[{i}]") for i, d in enumerate(path)]
    return out


def resolve_dll(host: Host, name: str, order: list[tuple[str, str]], on_windows: bool) -> tuple[str | None, str]:
    low = name.lower()
    if low.startswith(("api-ms-win-", "ext-ms-win-")):
        return name, "API set (Windows 10+)"
    for folder, label in order:
        candidate = _join(folder, name)
        if win_exists(host, candidate):
            return candidate, label
    if low in SYSTEM_DLLS and not on_windows:
        return name, "system DLL (not this machine)"
    if low in VC_REDIST and not on_windows:
        # The wheels and zips do not ship it: it comes from the VC++ redistributable in System32.
        return name, "VC++ redistributable in System32 (not this machine)"
    return None, ""


def detect_win_tree(host: Host, lib_dir: str, program_dir: str | None = None, python: bool = False,
                    dll_dirs: tuple[str, ...] = ()) -> WinTreeFacts:
    """Read the tree's DLLs and resolve their imports as a program in `program_dir` would
    (default: a program with the DLLs copied beside it, as PyTorch's CMake docs advise)."""
    on_windows = host.system == "Windows"
    facts = WinTreeFacts(lib_dir, on_this_machine=on_windows)
    if on_windows:
        facts.path = [p for p in host.env.get("PATH", "").split(";") if p]
    system32 = _join(host.env.get("SystemRoot", "C:\\Windows"), "System32")
    # From another system the program's folder is unknown: assume the DLLs were copied beside it, as
    # PyTorch's CMake example does. On Windows the real PATH decides, so no folder is assumed.
    program_dir = program_dir if program_dir or on_windows else lib_dir
    order = search_dirs(program_dir, system32, facts.path, [lib_dir, *dll_dirs], python)
    facts.c10_candidates = [_join(f, "c10.dll") for f, _ in order if win_exists(host, _join(f, "c10.dll"))]
    names = sorted(n for n in host.listdir(win_path(host, lib_dir)) if n.lower().endswith(".dll"))[:MAX_DLLS]
    facts.cuda = any(n.lower() in CUDA_MARKERS for n in names)
    for name in names:
        if name.lower() not in MAIN_DLLS:
            continue
        full = _join(lib_dir, name)
        try:
            info = read_pe(full, str(host.real(win_path(host, full))))
        except (PEProblem, OSError) as exc:
            facts.unreadable[name] = str(exc)[:300]
            continue
        facts.images[name] = info
        facts.machines[name] = info.machine
        facts.crt[name] = info.crt_flavour
        for dep, delay in [(d, False) for d in info.imports] + [(d, True) for d in info.delay_imports]:
            found, via = resolve_dll(host, dep, order, on_windows)
            facts.resolutions.append(DllResolution(name, dep, found, via, delay))
    return facts


# -- the running Windows machine's tools (through Host; tests drive them with recorded outputs) --

CL_BANNER = re.compile(r"Microsoft \(R\) C/C\+\+ Optimizing Compiler Version (\d+\.\d+\.\d+(?:\.\d+)?) for (\w+)")
VSWHERE = r"C:\Program Files (x86)\Microsoft Visual Studio\Installer\vswhere.exe"


@record
class WinTools:
    """The Windows build tools found: Visual Studio instances and cl.exe."""
    visual_studio: list[dict] = field(default_factory=list)  # {"name", "version", "path"} per instance
    cl_version: str | None = None  # "19.38.33134"
    cl_target: str | None = None  # "x64"
    missing: list[str] = field(default_factory=list)


def parse_cl_banner(text: str) -> tuple[str | None, str | None]:
    """cl.exe prints its banner on stderr: (version, target) or (None, None)."""
    m = CL_BANNER.search(text[:4096])
    return (m.group(1), m.group(2)) if m else (None, None)


def parse_vswhere_json(text: str) -> list[dict]:
    """The instances `vswhere -products * -format json` lists; malformed output gives []."""
    import json

    from doctor.bounded import json_depth_exceeds

    if len(text) > 1 << 20 or json_depth_exceeds(text):
        return []
    try:
        data = json.loads(text)
    except ValueError:
        return []
    out = []
    for item in data if isinstance(data, list) else []:
        if isinstance(item, dict) and isinstance(item.get("installationPath"), str):
            out.append({"name": str(item.get("displayName", ""))[:100], "version": str(item.get("installationVersion", ""))[:40],
                        "path": item["installationPath"][:400]})
    return out[:16]


def detect_win_tools(host: Host, timeout: float = 10.0) -> WinTools:
    tools = WinTools()
    where = host.run([VSWHERE if win_exists(host, VSWHERE) else "vswhere", "-products", "*", "-format", "json"], timeout)
    if where.ok:
        tools.visual_studio = parse_vswhere_json(where.stdout)
    else:
        tools.missing.append("vswhere (comes with Visual Studio 2017+ and its Build Tools)")
    cl = host.run(["cl.exe"], timeout)
    if cl.returncode is not None:
        tools.cl_version, tools.cl_target = parse_cl_banner(cl.stderr + cl.stdout)
    else:
        tools.missing.append("cl.exe on PATH (open a 'x64 Native Tools Command Prompt' or run vcvars64.bat)")
    return tools
