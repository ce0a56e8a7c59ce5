"""dyld, simulated from facts: how a program linked with -ltorch finds libtorch.dylib and
how each `@rpath/…` of its dependency graph resolves.

dyld's order for an install name N needed by image X (man dyld, "Searching"):
1. DYLD_LIBRARY_PATH: each folder + the leaf name of N (any N, @rpath ones included);
2. N itself: `@rpath/` tries every LC_RPATH of X, then of the images that loaded X up to the
   program (`@loader_path` = X's folder, `@executable_path` = the program's folder, unknown here);
   `@loader_path/` is X's folder; an absolute path is used as is (system libraries in
   /usr/lib and /System live in the dyld shared cache on macOS 11+, not on disk);
3. DYLD_FALLBACK_LIBRARY_PATH (default $HOME/lib:/usr/local/lib:/usr/lib) + the leaf name.
SIP strips DYLD_* from programs under /usr/bin, /bin, /sbin (make, bash, env, clang's driver
started by make): a DYLD_LIBRARY_PATH set in a shell does not reach them.
"""

from __future__ import annotations

import re
from dataclasses import field
from pathlib import PurePosixPath

from doctor.host import Host
from doctor.probe.macho import MachOInfo, MachOProblem, read_macho
from doctor.record import record

SYSTEM_PREFIXES = ("/usr/lib/", "/System/Library/")
MAX_IMAGES = 64  # libtorch's graph holds 4-6 of its own dylibs


@record
class DyldResolution:
    image: str  # the library that needs it (leaf name)
    name: str  # the install name as written: "@rpath/libc10.dylib"
    path: str | None  # where dyld finds it, None when nowhere
    via: str  # "LC_RPATH @loader_path", "DYLD_LIBRARY_PATH", "dyld shared cache", "" ...
    weak: bool = False
    tried: list[str] = field(default_factory=list)


@record
class MacTreeFacts:
    lib_dir: str
    images: dict[str, MachOInfo] = field(default_factory=dict)  # leaf name -> parsed file
    unreadable: dict[str, str] = field(default_factory=dict)
    resolutions: list[DyldResolution] = field(default_factory=list)
    archs: dict[str, list[str]] = field(default_factory=dict)  # leaf -> architectures
    min_macos: dict[str, str] = field(default_factory=dict)  # leaf -> minimum macOS
    install_names: dict[str, str] = field(default_factory=dict)
    cxx_stdlib: str | None = None  # "libc++" on every official build
    dyld_library_path: list[str] = field(default_factory=list)
    dyld_fallback: list[str] = field(default_factory=list)
    on_this_machine: bool = False  # the host is a Mac: DYLD_* and /usr/lib checks are real

    @property
    def unresolved(self) -> list[DyldResolution]:
        return [r for r in self.resolutions if r.path is None and not r.weak]


def _expand(entry: str, loader_dir: str) -> str | None:
    """An LC_RPATH or load path with @loader_path expanded; None when it needs the program's folder."""
    if entry.startswith("@loader_path"):
        return str(PurePosixPath(loader_dir) / entry[len("@loader_path"):].lstrip("/"))
    if entry.startswith("@executable_path"):
        return None
    return entry


def resolve_install_name(host: Host, name: str, loader_dir: str, rpath_stack: list[tuple[str, str]],
                         dyld_library_path: list[str], fallback: list[str], on_mac: bool) -> tuple[str | None, str, list[str]]:
    """(path, via, tried) for one install name; rpath_stack holds (rpath entry, folder of the image that declared it)."""
    leaf = name.rsplit("/", 1)[-1]
    tried: list[str] = []
    for d in dyld_library_path:
        candidate = str(PurePosixPath(d) / leaf)
        tried.append(candidate)
        if host.exists(candidate):
            return candidate, "DYLD_LIBRARY_PATH", tried
    if name.startswith("@rpath/"):
        rest = name[len("@rpath/"):]
        for entry, declared_in in rpath_stack:
            base = _expand(entry, declared_in)
            if base is None:
                tried.append(f"{entry}/{rest} (the program's folder: not known here)")
                continue
            candidate = str(PurePosixPath(base) / rest)
            tried.append(candidate)
            if host.exists(candidate):
                return candidate, f"LC_RPATH {entry}", tried
    elif name.startswith(("@loader_path/", "@executable_path/")):
        candidate = _expand(name, loader_dir)
        if candidate:
            tried.append(candidate)
            if host.exists(candidate):
                return candidate, name.split("/", 1)[0], tried
    elif name.startswith(SYSTEM_PREFIXES):
        # macOS 11+: system libraries exist only inside the dyld shared cache.
        return name, "dyld shared cache" if on_mac else "system library (not this machine)", tried
    elif name.startswith("/"):
        tried.append(name)
        if host.exists(name):
            return name, "absolute path", tried
    for d in fallback:
        candidate = str(PurePosixPath(d) / leaf)
        tried.append(candidate)
        if host.exists(candidate):
            return candidate, "DYLD_FALLBACK_LIBRARY_PATH", tried
    return None, "", tried


def detect_mac_tree(host: Host, lib_dir: str, start: str = "libtorch.dylib", program_rpaths: tuple[str, ...] = ()) -> MacTreeFacts:
    """Walk libtorch.dylib's dependency graph the way dyld would, from the files alone."""
    on_mac = host.system == "Darwin"
    facts = MacTreeFacts(lib_dir, on_this_machine=on_mac)
    if on_mac:
        facts.dyld_library_path = [p for p in host.env.get("DYLD_LIBRARY_PATH", "").split(":") if p]
        default_fallback = f"{host.env.get('HOME', '~')}/lib:/usr/local/lib:/usr/lib"
        facts.dyld_fallback = [p for p in host.env.get("DYLD_FALLBACK_LIBRARY_PATH", default_fallback).split(":") if p]
    queue: list[tuple[str, list[tuple[str, str]]]] = [(str(PurePosixPath(lib_dir) / start), [(r, "") for r in program_rpaths])]
    seen: set[str] = set()
    while queue and len(seen) < MAX_IMAGES:
        path, inherited = queue.pop(0)
        leaf = PurePosixPath(path).name
        if path in seen:
            continue
        seen.add(path)
        try:
            info = read_macho(path, str(host.real(path)))
        except (MachOProblem, OSError) as exc:
            facts.unreadable[leaf] = str(exc)[:300]
            continue
        facts.images[leaf] = info
        facts.archs[leaf] = info.archs
        first = info.slices[0]
        if first.min_macos:
            facts.min_macos[leaf] = first.min_macos
        if first.install_name:
            facts.install_names[leaf] = first.install_name
        if first.cxx_stdlib and facts.cxx_stdlib is None:
            facts.cxx_stdlib = first.cxx_stdlib
        folder = str(PurePosixPath(path).parent)
        # dyld searches the image's own LC_RPATHs first, then those of the images that loaded it.
        stack = [(r, folder) for r in first.rpaths] + inherited
        for dep in first.dylibs:
            found, via, tried = resolve_install_name(host, dep.name, folder, stack, facts.dyld_library_path, facts.dyld_fallback, on_mac)
            facts.resolutions.append(DyldResolution(leaf, dep.name, found, via, dep.weak, tried))
            if found and not dep.name.startswith(SYSTEM_PREFIXES):
                queue.append((found, stack))
    return facts


# -- the running Mac's tools (through Host; tests drive them with recorded outputs) --

APPLE_CLANG = re.compile(r"^Apple (?:clang|LLVM) version (\d+(?:\.\d+)*)(?: \((clang-[\d.]+)\))?", re.M)
TARGET = re.compile(r"^Target: (\S+)", re.M)


@record
class MacTools:
    cpu: str | None = None  # "Apple M1"
    sdk_version: str | None = None  # xcrun --show-sdk-version
    clang: str | None = None  # "15.0.0"
    clang_build: str | None = None  # "clang-1500.0.40.1"
    clang_target: str | None = None  # "arm64-apple-darwin23.1.0"
    missing: list[str] = field(default_factory=list)


def parse_apple_clang(text: str) -> tuple[str | None, str | None, str | None]:
    """(version, build, target) from `clang --version`; None for a non-Apple clang."""
    m = APPLE_CLANG.search(text[:4096])
    t = TARGET.search(text[:4096])
    return (m.group(1), m.group(2), t.group(1) if t else None) if m else (None, None, t.group(1) if t else None)


def detect_mac_tools(host: Host, timeout: float = 5.0) -> MacTools:
    tools = MacTools()
    cpu = host.run(["sysctl", "-n", "machdep.cpu.brand_string"], timeout)
    tools.cpu = cpu.stdout.strip()[:100] or None if cpu.ok else None
    sdk = host.run(["xcrun", "--show-sdk-version"], timeout)
    if sdk.ok and re.fullmatch(r"\d+(\.\d+)*", sdk.stdout.strip()):
        tools.sdk_version = sdk.stdout.strip()
    elif sdk.returncode is None:
        tools.missing.append("xcrun (install the Command Line Tools: xcode-select --install)")
    clang = host.run(["clang", "--version"], timeout)
    if clang.ok:
        tools.clang, tools.clang_build, tools.clang_target = parse_apple_clang(clang.stdout)
    return tools
