"""Every libtorch a build could pick up: where it is, which version and variant, which ABI.

Layered like uv's torch backend: each source is a tiny function returning candidate roots;
`inspect_tree` turns a root into facts; `detect_libtorch` merges duplicates and says which
one a build would use and why.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import field
from pathlib import Path, PurePath

from doctor.catalog.releases import PRE_CXX11_LAST, has_pre_cxx11
from doctor.errors import reraise_out_of_resources
from doctor.host import Host
from doctor.model import Evidence
from doctor.probe import hasktorch_cache
from doctor.probe.elf import ElfProblem, abi_from_counts, read_elf
from doctor.probe.python_torch import PythonTorch
from doctor.probe.versions import (
    parse_build_version,
    parse_config_version_cmake,
    parse_torch_config_cmake,
    parse_version_h,
    parse_version_py,
    pep440_release,
    split_local,
)
from doctor.record import record

VERSION_FILES = {
    "build-version": "build-version",
    "version.h": "include/torch/headeronly/version.h",
    "version.h (csrc)": "include/torch/csrc/api/include/torch/version.h",
    "TorchConfigVersion.cmake": "share/cmake/Torch/TorchConfigVersion.cmake",
    "version.py": "version.py",
}
INSTALL_RECORD = "torch-doctor.json"
# Where the ABI of a tree a build does not use comes from, when its version settles it: reading
# libc10's symbols costs ~0.4 ms a tree, and a Hasktorch cache holds dozens (issue 19).
ABI_FROM_VERSION = f"the version (no libtorch after {PRE_CXX11_LAST} was published with the pre-CXX11 ABI)"
# Hasktorch's cache layout lives in probe/hasktorch_cache.py; these names stay for old importers.
HASKTORCH_PLATFORMS = hasktorch_cache.PLATFORMS
libtorch_home = hasktorch_cache.libtorch_home

# The order a build looks in, with the reason shown to the user.
PRECEDENCE = [
    ("LIBTORCH", "LIBTORCH is set: tch-rs, the doctor's setenv and most scripts use it first"),
    ("LIBTORCH_INCLUDE/LIBTORCH_LIB", "LIBTORCH_INCLUDE / LIBTORCH_LIB are set: tch-rs takes its include and lib dirs "
     "from them (it still needs LIBTORCH, LIBTORCH_USE_PYTORCH or a /usr install to start)"),
    ("Torch_DIR", "Torch_DIR is set: CMake's find_package(Torch) uses it first"),
    ("CMAKE_PREFIX_PATH", "CMAKE_PREFIX_PATH names it: CMake's find_package(Torch) searches there"),
    ("LIBTORCH_HOME", "Hasktorch's libtorch cache (LIBTORCH_HOME, default ~/.cache/libtorch)"),
    ("./libtorch", "a libtorch folder in the current directory"),
    ("./deps/libtorch", "Hasktorch's classic deps/libtorch (get-deps.sh)"),
    ("python", "the Python torch wheel's bundled libtorch (LIBTORCH_USE_PYTORCH, torch.utils.cmake_prefix_path)"),
    ("CONDA_PREFIX", "the active conda environment"),
    ("/usr/local/libtorch", "a system-wide install"),
    ("/opt/libtorch", "a system-wide install"),
    ("/usr", "the distribution's libtorch"),
]
ORIGIN_RANK = {name: i for i, (name, _) in enumerate(PRECEDENCE)}


@record
class VersionSource:
    """Where a libtorch version was read from (build-version, version.py, …)."""
    file: str  # which version file
    path: str
    version: str


@record
class LibtorchInstall:
    """One libtorch tree: version, variant, ABI, paths and the evidence for each."""
    root: str
    origins: list[str]  # every way it is reachable ("LIBTORCH", "python", ...)
    include_dirs: list[str]
    lib_dir: str
    exists: bool  # the root is a directory
    complete: bool  # has headers and libc10
    version: str | None = None  # "2.13.0"
    variant: str | None = None  # "cpu", "cu130", "rocm6.4", "cuda"/"rocm" when the line is unknown
    version_sources: list[VersionSource] = field(default_factory=list)
    cxx_standard: int | None = None
    cxx_standard_source: str = ""
    abi: str | None = None  # "cxx11" | "pre-cxx11" | None (not a libstdc++ build, or unknown)
    abi_source: str = ""  # "TorchConfig.cmake" | "libc10 symbols" | ...
    elf_machine: str | None = None
    elf_class: int | None = None  # 32 | 64, from libc10's header
    elf_endian: str | None = None  # "little" | "big"
    broken_libraries: dict[str, str] = field(default_factory=dict)  # "libc10.so" -> "empty file (0 bytes)"
    bad_versions: list[VersionSource] = field(default_factory=list)  # version files holding no PEP 440 version
    libraries: list[str] = field(default_factory=list)  # the main libraries present
    glibc_needs: dict[str, list[str]] = field(default_factory=dict)  # from libc10/libtorch_cpu version needs
    record: dict | None = None  # torch-doctor.json written by fetch-libtorch
    hasktorch: dict | None = None  # {"home", "version", "platform", "flavour", "ok"} in that layout
    evidence: list[Evidence] = field(default_factory=list)
    root_kind: str = "directory"  # Host.path_kind of the root: "missing", "file", "loop", ... when not a directory
    denied: list[str] = field(default_factory=list)  # paths in the tree this user may not read (permissions)
    noexec: bool = False  # its lib dir is on a file system mounted noexec: no program can map its libraries
    nearby_root: str | None = None  # when incomplete: the complete tree one level off (its lib/, or the zip's parent)
    missing: dict[str, str] = field(default_factory=dict)  # when incomplete: include/torch or libc10's path -> Host.path_kind
    unexpanded_tilde: str | None = None  # LIBTORCH='~/lt' kept its ~ (quoted): the folder it names with ~ expanded

    @property
    def label(self) -> str:
        version = self.version or "unknown version"
        return f"{version}+{self.variant}" if self.variant else version


@record
class LibtorchFacts:
    """Every libtorch tree found, and the one a build would use."""
    candidates: list[LibtorchInstall]
    active: int | None  # index into candidates
    active_reason: str
    searched: list[str]  # every place looked at, in order

    @property
    def active_install(self) -> LibtorchInstall | None:
        return None if self.active is None else self.candidates[self.active]


# -- sources: each returns (origin, root, evidence) triples --


def _from_env(host: Host) -> list[tuple[str, str, Evidence]]:
    out = []
    if host.env.get("LIBTORCH"):
        out.append(("LIBTORCH", host.env["LIBTORCH"], Evidence("env", "LIBTORCH", host.env["LIBTORCH"])))
    elif host.env.get("LIBTORCH_LIB") or host.env.get("LIBTORCH_INCLUDE"):
        # tch-rs reads both as prefixes: $LIBTORCH_LIB/lib and $LIBTORCH_INCLUDE/include.
        name = "LIBTORCH_LIB" if host.env.get("LIBTORCH_LIB") else "LIBTORCH_INCLUDE"
        out.append(("LIBTORCH_INCLUDE/LIBTORCH_LIB", host.env[name], Evidence("env", name, host.env[name])))
    # CMake expands a leading ~ itself (kwsys ConvertToUnixSlashes), in these variables and in -D values:
    # `cmake -DCMAKE_PREFIX_PATH=~/libtorch` works although no shell expanded it. tch-rs, Hasktorch and
    # ld.so take ~ literally.
    torch_dir = host.env.get("Torch_DIR")
    if torch_dir:
        p = PurePath(host.tilde_expanded(torch_dir) or torch_dir)
        # not found: the tree it was meant to name, as written, so the libtorch area says what is wrong there
        root = _cmake_root(host, p) or (str(p.parents[2]) if p.parts[-3:] == ("share", "cmake", "Torch") else str(p))
        out.append(("Torch_DIR", root, Evidence("env", "Torch_DIR", torch_dir)))
    for entry in filter(None, host.env.get("CMAKE_PREFIX_PATH", "").split(":" if host.system != "Windows" else ";")):
        root = _cmake_root(host, PurePath(host.tilde_expanded(entry) or entry))
        if root:
            out.append(("CMAKE_PREFIX_PATH", root, Evidence("env", "CMAKE_PREFIX_PATH", entry)))
    return out


def _cmake_root(host: Host, prefix: PurePath) -> str | None:
    """The libtorch root whose share/cmake/Torch/TorchConfig.cmake CMake's find_package(Torch)
    finds from `prefix` (a CMAKE_PREFIX_PATH entry, or the environment's Torch_DIR, which CMake
    also searches as a prefix): <prefix>/share/cmake/Torch/, <prefix>/Torch/ and <prefix>/
    itself are among the forms of its config-mode search. So the tree's root, its share/cmake
    (torch.utils.cmake_prefix_path) and its share/cmake/Torch all name it."""
    for config_dir, depth in ((prefix / "share/cmake/Torch", 0), (prefix / "Torch", 2), (prefix, 3)):
        if config_dir.parts[-3:] == ("share", "cmake", "Torch") and host.exists(config_dir / "TorchConfig.cmake"):
            return str(prefix.parents[depth - 1]) if depth else str(prefix)
    return None


def _from_hasktorch_cache(host: Host) -> list[tuple[str, str, Evidence]]:
    return [("LIBTORCH_HOME", root, Evidence("file", root, "Hasktorch cache layout"))
            for root, _, _, _ in hasktorch_cache.cached_trees(host)]


def _from_places(host: Host, python: PythonTorch | None) -> list[tuple[str, str, Evidence]]:
    out = []
    for origin, rel in (("./libtorch", "libtorch"), ("./deps/libtorch", "deps/libtorch")):
        root = str(host.cwd / rel)
        if host.is_dir(root):
            out.append((origin, root, Evidence("file", root, "directory exists")))
    if python and python.libtorch_root:
        out.append(("python", python.libtorch_root, python.evidence[0]))
    conda = host.env.get("CONDA_PREFIX")
    if conda and _looks_like_libtorch(host, conda):
        out.append(("CONDA_PREFIX", conda, Evidence("env", "CONDA_PREFIX", conda)))
    for fixed in ("/usr/local/libtorch", "/opt/libtorch"):
        if host.is_dir(fixed):
            out.append((fixed, fixed, Evidence("file", fixed, "directory exists")))
    if _looks_like_libtorch(host, "/usr"):
        out.append(("/usr", "/usr", Evidence("file", "/usr/lib/libtorch.so", "exists")))
    return out


def _looks_like_libtorch(host: Host, root: str) -> bool:
    return any(host.exists(PurePath(root) / lib) for lib in ("lib/libtorch.so", "lib/libc10.so", "lib/libtorch.dylib"))


# -- one tree --


def _lib_name(host: Host, stem: str, system: str | None = None) -> str:
    return {"Darwin": f"lib{stem}.dylib", "Windows": f"{stem}.dll"}.get(system or host.system, f"lib{stem}.so")


def _absolute(host: Host, path: str) -> str:
    """A relative LIBTORCH (`libtorch`, `--libtorch ../lt`) as the folder it names from here: the
    paths check advises and emit writes must not depend on where a build or program starts."""
    return path if not path.strip() or PurePath(path).is_absolute() else str(host.cwd / path)


def _join(base: str, rel: str) -> str:
    """str(PurePath(base) / rel) for a `base` PurePath has already spelled: check builds a few
    dozen paths in each of dozens of trees, and pathlib parses every one again (issue 19)."""
    return os.path.join(base, *rel.split("/"))


def inspect_tree(host: Host, root: str, origins: list[str], evidence: list[Evidence],
                 abi_from_version: bool = False) -> LibtorchInstall:
    """The facts of the tree at `root`. With `abi_from_version`, a tree of a version only ever
    published with the CXX11 ABI takes it from there instead of from libc10's symbols."""
    given = root
    root = _absolute(host, root)
    p = PurePath(root)
    base = str(p)
    split = "LIBTORCH_INCLUDE/LIBTORCH_LIB" in origins
    lib_dir = _join(str(PurePath(_absolute(host, host.env.get("LIBTORCH_LIB") or root))) if split else base, "lib")
    include = _join(str(PurePath(_absolute(host, host.env.get("LIBTORCH_INCLUDE") or root))) if split else base, "include")
    install = LibtorchInstall(
        root=root,
        origins=origins,
        include_dirs=[include, _join(include, "torch/csrc/api/include")],
        lib_dir=lib_dir,
        exists=host.is_dir(root),
        complete=False,
        evidence=list(evidence),
    )
    if not install.exists:
        install.root_kind = host.path_kind(root)
        if root.strip() not in ("", root) and not split:  # `export LIBTORCH="$(cat f)"` keeping a space or a CR
            install.nearby_root = _nearby_root(host, PurePath(root.strip()), None, itself=True)
        elif not split and (expanded := host.tilde_expanded(given)):
            install.unexpanded_tilde = expanded
            install.nearby_root = _nearby_root(host, PurePath(expanded), None, itself=True)
        return install
    stems = ("c10", "torch", "torch_cpu", "torch_cuda", "c10_cuda", "torch_hip", "c10_hip")
    from doctor.probe.platform_tree import tree_system

    system = tree_system(host, lib_dir)  # a macOS or Windows tree checked from Linux (CI) has its own names
    names = (_lib_name(host, stem, system) for stem in stems)
    install.libraries = [name for name in names if host.exists(os.path.join(lib_dir, name))]
    c10 = os.path.join(lib_dir, _lib_name(host, "c10", system))
    headers = os.path.join(include, "torch")
    install.complete = host.is_dir(headers) and host.exists(c10)
    if not install.complete:
        kinds = {headers: ("directory",), c10: ("file", "directory", "fifo", "socket", "device")}
        install.missing = {path: kind for path, ok in kinds.items() if (kind := host.path_kind(path)) not in ok}
    install.denied = _denied(host, [base, include, lib_dir], [os.path.join(lib_dir, name) for name in install.libraries])
    install.noexec = bool(install.libraries) and host.noexec(lib_dir)
    if not install.complete and not split:
        install.nearby_root = _nearby_root(host, p, system)

    for label, rel in VERSION_FILES.items():
        path = _join(base, rel)
        text = host.read_text(path, limit=64 << 10)
        if text is None:
            continue
        version = {
            "build-version": parse_build_version,
            "version.h": parse_version_h,
            "version.h (csrc)": parse_version_h,
            "TorchConfigVersion.cmake": parse_config_version_cmake,
            "version.py": lambda t: parse_version_py(t).get("__version__"),
        }[label](text)
        if version is None and label == "build-version":  # the file is only a version: anything else in it is one gone wrong
            version = text.strip()[:100]
        if isinstance(version, str):
            source = VersionSource(label.split(" ")[0], path, version[:100])
            if pep440_release(version) is None:  # "2.13.0abc", a 5000-digit number: a finding, not a crash
                install.bad_versions.append(source)
                continue
            install.version_sources.append(source)
            install.evidence.append(Evidence("file", path, version))
    _settle_version(install)

    config_path = _join(base, "share/cmake/Torch/TorchConfig.cmake")
    config = host.read_text(config_path, limit=256 << 10)
    parsed = parse_torch_config_cmake(config) if config else {"abi_flag": None, "cxx_standard": None}
    if parsed["cxx_standard"]:
        install.cxx_standard = int(parsed["cxx_standard"])
        install.cxx_standard_source = "TorchConfig.cmake"
        install.evidence.append(Evidence("file", config_path, f"CXX_STANDARD {install.cxx_standard}"))
    elif install.version:
        from packaging.version import Version

        install.cxx_standard = 20 if Version(install.version) >= Version("2.13") else 17
        install.cxx_standard_source = "derived from the version"

    _read_libc10(host, install, c10, parsed["abi_flag"], config_path, abi_from_version)
    record_text = host.read_text(os.path.join(base, INSTALL_RECORD))
    if record_text:
        from doctor.bounded import json_depth_exceeds

        try:  # written by fetch-libtorch, but anyone can edit it: bounded, and a dict or nothing
            record = None if json_depth_exceeds(record_text) else json.loads(record_text)
        except (ValueError, RecursionError):
            record = None
        install.record = record if isinstance(record, dict) else None
    parts = p.parts
    if "LIBTORCH_HOME" in origins and len(parts) >= 3:
        install.hasktorch = {
            "home": str(p.parents[2]),
            "version": parts[-3],
            "platform": parts[-2],
            "flavour": parts[-1],
            "ok": host.exists(os.path.join(base, ".ok")),
        }
    return install


def _settle_version(install: LibtorchInstall) -> None:
    # build-version and version.py carry the variant; the others only the number.
    ranked = sorted(install.version_sources, key=lambda s: ["build-version", "version.py", "version.h", "TorchConfigVersion.cmake"].index(s.file))
    if ranked:
        _, local = split_local(ranked[0].version)
        install.version = pep440_release(ranked[0].version)
        install.variant = local if local and re.fullmatch(r"[a-z0-9.]{1,32}", local) else None
    if install.variant is None and install.exists:
        names = set(install.libraries)
        if any("cuda" in n for n in names):
            install.variant = "cuda"
        elif any("hip" in n for n in names):
            install.variant = "rocm"
        elif install.libraries:
            install.variant = "cpu"


def _nearby_root(host: Host, root: PurePath, system: str | None, itself: bool = False) -> str | None:
    """The libtorch root one level off `root`: a variable naming the tree's lib/, include/ or
    share/cmake/Torch, or the folder the zip was unpacked into (it holds libtorch/); with
    `itself`, `root` too (a value that had blanks around it)."""
    c10 = _lib_name(host, "c10", system)
    tries = [root, root / "libtorch"] if itself else [root / "libtorch"]
    if root.name in ("lib", "include"):
        tries.append(root.parent)
    if root.name == "Torch" and root.parent.name == "cmake":
        tries.append(root.parent.parent.parent)
    for candidate in tries:
        if host.is_dir(candidate / "include" / "torch") and host.exists(candidate / "lib" / c10):
            return str(candidate)
    return None


def _denied(host: Host, dirs: list[str], files: list[str]) -> list[str]:
    """The folders this user cannot list or enter and the libraries it cannot read: a tree unpacked
    by root under umask 077 is complete on disk and useless to everyone else."""
    return [path for path, mode in [*((d, os.R_OK | os.X_OK) for d in dirs), *((f, os.R_OK) for f in files)]
            if host.exists(path) and not host.access(path, mode)]


def _read_libc10(host: Host, install: LibtorchInstall, c10: str, abi_flag: str | None, config_path: str,
                 abi_from_version: bool = False) -> None:
    if abi_flag is not None:
        install.abi = "cxx11" if abi_flag == "1" else "pre-cxx11"
        install.abi_source = "TorchConfig.cmake"
        install.evidence.append(Evidence("file", config_path, f"-D_GLIBCXX_USE_CXX11_ABI={abi_flag}"))
    if host.system != "Linux" or not c10.endswith(".so") or not host.exists(c10):  # ELF only; Mach-O/PE: probe/platform_tree
        return
    if c10 in install.denied:  # not a broken library: diagnose names the permissions
        return
    if install.abi is None and abi_from_version and install.version and not has_pre_cxx11(install.version):
        install.abi, install.abi_source = "cxx11", ABI_FROM_VERSION
    name = os.path.basename(c10)
    try:
        info = read_elf(c10, str(host.real(c10)), count_abi_symbols=install.abi is None)
    except Exception as exc:  # empty, truncated, not ELF, a FIFO: a fact for diagnose, never a crash
        reraise_out_of_resources(exc)
        reason = str(exc) if isinstance(exc, (ElfProblem, OSError)) else f"unreadable ({type(exc).__name__}: {exc})"
        install.broken_libraries[name] = reason[:300]
        install.evidence.append(Evidence("elf", c10, reason[:300]))
        return
    install.elf_machine = info.machine
    install.elf_class = info.elfclass
    install.elf_endian = info.endian
    install.glibc_needs = {k: v for k, v in info.version_needs.items() if k.startswith(("libc.so", "libstdc++"))}
    if install.abi is None and info.cxx11_symbols is not None:
        install.abi = abi_from_counts(info.cxx11_symbols, info.old_abi_symbols or 0)
        install.abi_source = "libc10 symbols"
        install.evidence.append(
            Evidence(
                "elf",
                c10,
                f"{info.cxx11_symbols} c10/at/torch symbols with std::__cxx11::string, {info.old_abi_symbols} with the old std::string",
            )
        )


def _read_abi_symbols(host: Host, install: LibtorchInstall) -> None:
    """The tree a build uses has its ABI from libc10's symbols, as evidence, even where its version
    settles it: a tree can be mislabelled. Only a Linux tree's libc10.so has an ABI from its version."""
    if install.abi_source == ABI_FROM_VERSION:
        install.abi = install.abi_source = None
        _read_libc10(host, install, os.path.join(install.lib_dir, "libc10.so"), None, "")


# -- all of them --


def detect_libtorch(host: Host, python: PythonTorch | None) -> LibtorchFacts:
    found = _from_env(host) + _from_hasktorch_cache(host) + _from_places(host, python)
    # Each root is resolved once: the key and the first spelling that reached it (not a
    # re-resolution of every root per candidate, which grew as N² with a big cache).
    merged: dict[str, tuple[str, list[str], list[Evidence]]] = {}
    for origin, root, ev in found:
        _first, origins, evidence = merged.setdefault(_canonical(host, root), (root, [], []))
        if origin not in origins:
            origins.append(origin)
        evidence.append(ev)
    candidates = []
    for root, origins, evidence in merged.values():
        candidates.append(inspect_tree(host, root, origins, evidence, abi_from_version=True))
    candidates.sort(key=lambda c: min(ORIGIN_RANK[o] for o in c.origins))
    active, reason = _choose(host, candidates, {root: key for key, (root, _, _) in merged.items()})
    if active is not None:
        _read_abi_symbols(host, candidates[active])
    searched = [name for name, _ in PRECEDENCE]
    return LibtorchFacts(candidates, active, reason, searched)


def _canonical(host: Host, root: str) -> str:
    try:
        return str(host.real(root).resolve())
    except (OSError, RuntimeError, ValueError):  # RuntimeError: a symlink loop (Python < 3.13)
        return root


def _choose(host: Host, candidates: list[LibtorchInstall], canonical: dict[str, str]) -> tuple[int | None, str]:
    """The candidate a build would take, and why. `canonical`: each candidate's root resolved."""
    if not candidates:
        return None, "no libtorch found in any of the places a build looks"
    reasons = dict(PRECEDENCE)
    if "LIBTORCH_USE_PYTORCH" in host.env:
        # tch-rs asks Python first and then ignores LIBTORCH (torch-sys/build.rs, probe/tchrs.py).
        for i, c in enumerate(candidates):
            if "python" in c.origins:
                return i, "LIBTORCH_USE_PYTORCH is set: tch-rs takes the Python torch's libtorch, over LIBTORCH"
    first = candidates[0]
    origin = min(first.origins, key=ORIGIN_RANK.__getitem__)
    if origin == "LIBTORCH_HOME":
        # Setup.hs builds against exactly $LIBTORCH_HOME/<LIBTORCH_VERSION>/<platform>/<LIBTORCH_CUDA_VERSION>.
        req = hasktorch_cache.hasktorch_request(host)
        wanted = _canonical(host, req.tree) if req.tree else None
        for i, c in enumerate(candidates):
            if "LIBTORCH_HOME" in c.origins and wanted and canonical[c.root] == wanted:
                asked = (f"LIBTORCH_VERSION={req.version}" + ("" if req.version_from_env else " (Setup.hs default)")
                         + f", LIBTORCH_CUDA_VERSION={req.flavour}" + ("" if req.flavour_from_env else " (default)"))
                return i, reasons[origin] + f", matching {asked}"
        if req.version_from_env or req.flavour_from_env:
            # Not cached: Hasktorch would download it; say so rather than name another tree as its choice.
            return 0, (reasons[origin] + f"; LIBTORCH_VERSION={req.version} / LIBTORCH_CUDA_VERSION={req.flavour} "
                       "is NOT cached (a Hasktorch build would download it): this is only the first cached tree")
    return 0, reasons[origin]
