"""The runtime loader's view of the active libtorch: would a program find its libraries,
and do their own NEEDED entries resolve (RUNPATH/RPATH, LD_LIBRARY_PATH, ld.so.cache)?"""

from __future__ import annotations

import re
from dataclasses import field
from pathlib import PurePath

from doctor.catalog.platforms import loader_variable, separator
from doctor.errors import reraise_out_of_resources
from doctor.host import Host
from doctor.model import Evidence
from doctor.probe.elf import read_elf
from doctor.probe.ldcache import parse_ld_so_cache
from doctor.record import record

DEFAULT_DIRS = ("/lib", "/usr/lib", "/lib64", "/usr/lib64")
MULTIARCH = {"x86_64": "x86_64-linux-gnu", "aarch64": "aarch64-linux-gnu"}
# What `-ltorch` pulls in, and what a program then needs at run time.
MAIN_LIBRARIES = ("libc10.so", "libtorch.so", "libtorch_cpu.so", "libtorch_cuda.so", "libc10_cuda.so", "libtorch_hip.so")


@record
class Resolution:
    """Where the loader finds one library, and through which rule."""
    name: str
    path: str | None  # where the loader finds it, None when nowhere
    via: str  # "RUNPATH", "RPATH", "LD_LIBRARY_PATH", "ld.so.cache", "default dirs", "" (nowhere)


@record
class LibraryView:
    """One libtorch library seen by the loader: for a program, and its own NEEDED."""
    library: str  # a libtorch library, e.g. libc10.so
    for_programs: Resolution  # a program linked with -ltorch and no rpath
    needed: list[Resolution] = field(default_factory=list)  # its own NEEDED entries


@record
class LoaderFacts:
    """The loader's view of the active libtorch: search path and resolutions."""
    variable: str  # LD_LIBRARY_PATH or DYLD_LIBRARY_PATH or PATH
    search_path: list[str]
    lib_dir: str | None
    libraries: list[LibraryView] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)  # "libtorch_cuda.so → libcudart.so.12"
    unreadable: list[str] = field(default_factory=list)  # "libc10.so: empty file (0 bytes)"
    denied: list[str] = field(default_factory=list)  # of those, the ones this user may not read ("libtorch_cpu.so")
    evidence: list[Evidence] = field(default_factory=list)
    foreign: str | None = None  # "Darwin" / "Windows": a macOS or Windows tree, simulated in probe/platform_tree.py
    preload: list[Resolution] = field(default_factory=list)  # LD_PRELOAD's entries, where ld.so finds each (path None: nowhere)
    empty_entry: bool = False  # LD_LIBRARY_PATH has an empty entry (':/a', '/a:', '/a::b'): ld.so searches the cwd there
    relative_entries: dict[str, str] = field(default_factory=dict)  # "libtorch/lib" -> that folder from the cwd; "~/x" -> home/x
    elsewhere: list[Resolution] = field(default_factory=list)  # libtorch libraries a program gets from outside lib_dir


class LoaderCache(dict):
    """ld.so.cache (soname -> paths) and the loader directories indexed so far in this run.

    `check` reads it once and hands it to every probe that resolves libraries (loader, GPU
    builds, CUDA libraries, libstdc++), so each directory of a long LD_LIBRARY_PATH is listed
    once per run and each name is one dictionary lookup per search list, not a test per
    directory (issue 19: 2,000 directories × 23 libraries)."""

    def __init__(self, entries: dict[str, list[str]] | None = None) -> None:
        super().__init__(entries or {})
        self.listings: dict[str, frozenset[str] | None] = {}
        self.indexes: dict[tuple[str, ...], DirIndex] = {}


class DirIndex:
    """Which of a search list's directories list a name, in search order. Directories that exist
    but cannot be listed (execute-only) are kept aside and asked name by name, as the loader
    opens them."""

    def __init__(self, host: Host, dirs: tuple[str, ...], seen: dict[str, frozenset[str] | None]) -> None:
        self.holders: dict[str, list[int]] = {}
        self.unlistable: list[int] = []
        self.dirs = dirs
        # LD_LIBRARY_PATH entries already listed when the doctor's commands got their environment
        listed = host.library_dir_listings()
        for i, d in enumerate(dirs):
            if not d:  # an empty entry is the loader's own business (the cwd)
                continue
            names = listed[d] if d in listed else _listing(host, d, seen)
            if names is None:
                self.unlistable.append(i)
                continue
            for name in names:
                self.holders.setdefault(name, []).append(i)

    def holding(self, host: Host, name: str) -> list[str]:
        positions = self.holders.get(name, [])
        if self.unlistable:
            positions = sorted({*positions, *self.unlistable})
        # a listed name may be a dangling symlink: no library
        return [self.dirs[i] for i in positions if host.exists(PurePath(self.dirs[i]) / name)]


def read_ld_cache(host: Host) -> LoaderCache:
    data = host.read_bytes("/etc/ld.so.cache")
    return LoaderCache(parse_ld_so_cache(data) if data else {})


def _listing(host: Host, directory: str, seen: dict[str, frozenset[str] | None]) -> frozenset[str] | None:
    """The directory's names, listed once per run into `seen`; None when it exists but cannot be
    listed (then the loader is followed name by name); a missing directory holds nothing."""
    if directory not in seen:
        names = host.list_names(directory)
        seen[directory] = None if names is None and host.is_dir(directory) else frozenset(names or ())
    return seen[directory]


def dirs_holding(host: Host, dirs: list[str], name: str, ld_cache: dict) -> list[str]:
    """The directories among `dirs` (in order) that hold `name`, each directory listed once per run."""
    if "/" in name:
        return [d for d in dirs if d and host.exists(PurePath(d) / name)]
    dirs_key = tuple(dirs)
    if isinstance(ld_cache, LoaderCache):
        index = ld_cache.indexes.get(dirs_key)
        if index is None:
            index = ld_cache.indexes[dirs_key] = DirIndex(host, dirs_key, ld_cache.listings)
    else:
        index = DirIndex(host, dirs_key, {})
    return index.holding(host, name)


def detect_loader(host: Host, lib_dir: str | None, ld_cache: dict[str, list[str]]) -> LoaderFacts:
    variable = loader_variable(host.system)
    search = [p for p in host.env.get(variable, "").split(separator(host.system)) if p]
    facts = LoaderFacts(variable, search, lib_dir)
    if host.env.get(variable) is not None:
        facts.evidence.append(Evidence("env", variable, host.env[variable]))
    from doctor.probe.platform_tree import tree_system  # issue 14: dispatch, the macOS/Windows loaders live there

    if lib_dir is not None and tree_system(host, lib_dir) in ("Darwin", "Windows"):
        facts.foreign = tree_system(host, lib_dir)
        return facts
    if host.system != "Linux":
        return facts
    defaults = default_dirs(host)
    ld_cache = ld_cache if isinstance(ld_cache, LoaderCache) else LoaderCache(ld_cache)
    facts.preload = _preloaded(host, search, ld_cache, defaults)
    value = host.env.get(variable)
    facts.empty_entry = bool(value) and "" in value.split(":")
    # ld.so takes a relative entry from the folder a program starts in ($ORIGIN: from the program's own)
    relative = [e for e in search if not e.startswith(("/", "$ORIGIN", "${ORIGIN}"))][:16]
    facts.relative_entries = {e: host.tilde_expanded(e) or str(host.cwd / e) for e in relative}
    if lib_dir is None:
        return facts
    # ld.so loads LD_PRELOAD's libraries first and then takes them for every NEEDED entry of
    # their name, before any search: a preloaded libc10.so is the one every program gets.
    preloaded = {PurePath(r.path).name: r.path for r in facts.preload if r.path}

    def as_loaded(r: Resolution) -> Resolution:
        return Resolution(r.name, preloaded[r.name], "LD_PRELOAD") if r.name in preloaded else r

    for name in MAIN_LIBRARIES:
        path = PurePath(lib_dir) / name
        if not host.exists(path):
            continue
        view = LibraryView(name, as_loaded(_resolve(host, name, [], [], search, ld_cache, defaults)))
        found = view.for_programs
        if found.path and found.via != "LD_PRELOAD" and not _same_file(host, found.path, path):
            facts.elsewhere.append(found)  # an earlier entry, or the ld.so cache, holds another libtorch's copy
        try:
            view.needed, elf = resolve_needed(host, path, ld_cache)
            view.needed = [as_loaded(r) for r in view.needed]
        except Exception as exc:  # empty, truncated, not ELF, a FIFO: its NEEDED are unknown, not "resolved"
            reraise_out_of_resources(exc)
            if isinstance(exc, PermissionError):  # the libtorch area names the permissions
                facts.denied.append(name)
            facts.unreadable.append(f"{name}: {str(exc)[:300]}")
            facts.evidence.append(Evidence("elf", str(path), f"unreadable: {str(exc)[:300]}"))
            facts.libraries.append(view)
            continue
        if host.machine in MULTIARCH and (elf.elfclass, elf.endian) != (64, "little"):
            # glibc skips it as "incompatible": for a program it is as good as absent.
            facts.unreadable.append(f"{name}: a {elf.elfclass}-bit {elf.endian}-endian ELF file; "
                                    f"{host.machine} loads 64-bit little-endian ones")
        facts.unresolved.extend(f"{name} → {res.name}" for res in view.needed if res.path is None)
        facts.evidence.append(Evidence("elf", str(path), f"NEEDED {', '.join(elf.needed)}; RUNPATH {':'.join(elf.runpath) or '-'}"))
        facts.libraries.append(view)
    return facts


def _same_file(host: Host, a: str | PurePath, b: str | PurePath) -> bool:
    try:
        return host.real(a).resolve() == host.real(b).resolve()
    except (OSError, RuntimeError):  # a symlink loop: not the tree's file
        return False


def default_dirs(host: Host) -> list[str]:
    if host.machine in MULTIARCH:
        return [f"/lib/{MULTIARCH[host.machine]}", f"/usr/lib/{MULTIARCH[host.machine]}", *DEFAULT_DIRS]
    return list(DEFAULT_DIRS)


def resolve_needed(host: Host, path: PurePath, ld_cache: dict[str, list[str]], prefixes: tuple[str, ...] = ("",)):
    """Where the loader finds each NEEDED entry (starting with one of `prefixes`) of the library
    at `path`, in glibc's order. Returns (resolutions, ElfInfo); raises when the file is unreadable."""
    ld_cache = ld_cache if isinstance(ld_cache, LoaderCache) else LoaderCache(ld_cache)
    elf = read_elf(str(path), str(host.real(path)))
    origin = str(path.parent)
    runpath = [p.replace("${ORIGIN}", origin).replace("$ORIGIN", origin) for p in elf.runpath]
    rpath = [p.replace("${ORIGIN}", origin).replace("$ORIGIN", origin) for p in elf.rpath]
    search = [p for p in host.env.get(loader_variable(host.system), "").split(separator(host.system)) if p]
    defaults = default_dirs(host)
    wanted = [n for n in elf.needed if n.startswith(prefixes)]
    return [_resolve(host, n, rpath if not runpath else [], runpath, search, ld_cache, defaults) for n in wanted], elf


MAX_PRELOAD = 64


def _preloaded(host: Host, search: list[str], ld_cache, defaults: list[str]) -> list[Resolution]:
    """LD_PRELOAD as ld.so reads it (entries split at spaces and colons): a path is taken as it
    is, a bare name is searched as a NEEDED library is."""
    value = host.env.get("LD_PRELOAD", "")
    out = []
    for entry in [e for e in re.split(r"[ :]", value) if e][:MAX_PRELOAD]:
        if "/" in entry:
            out.append(Resolution(entry, entry if host.is_file(entry) else None, "LD_PRELOAD"))
        else:
            out.append(_resolve(host, entry, [], [], search, ld_cache, defaults))
    return out


def _resolve(host, name, rpath, runpath, search, ld_cache, defaults) -> Resolution:
    """glibc's order: RPATH (only without RUNPATH), LD_LIBRARY_PATH, RUNPATH, ld.so.cache, default dirs."""
    for via, dirs in (("RPATH", rpath), ("LD_LIBRARY_PATH", search), ("RUNPATH", runpath)):
        if dirs and (found := dirs_holding(host, dirs, name, ld_cache)):
            return Resolution(name, str(PurePath(found[0]) / name), via)
    if name in ld_cache:
        return Resolution(name, ld_cache[name][0], "ld.so.cache")
    if found := dirs_holding(host, defaults, name, ld_cache):
        return Resolution(name, str(PurePath(found[0]) / name), "default dirs")
    return Resolution(name, None, "")
