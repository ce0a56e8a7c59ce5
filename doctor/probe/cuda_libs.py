"""The CUDA libraries of the active build: which file the loader picks for each, its version,
and what the build expects. Facts only; diagnose/cuda_libs.py judges them.

- consumers: the active libtorch's libtorch_cuda.so, then (breadth first) the CUDA libraries it
  loads (libcusparse needs libnvJitLink, libcudnn needs libcublasLt …); each NEEDED entry is
  resolved in glibc's order (RPATH, LD_LIBRARY_PATH, RUNPATH, ld.so.cache, default dirs)
- versions: the soname, `cudnn_version.h` / `nccl.h` beside the library, the pip distribution
  that owns the directory, nvJitLink's versioned entry points (`__nvJitLinkComplete_12_4`)
- expected: the torch wheel's METADATA (`Requires-Dist: nvidia-cudnn-cu12==9.1.0.70; ...`)
- other copies of each soname: pip's nvidia/*/lib on sys.path, $CONDA_PREFIX/lib, ld.so.cache
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import field
from pathlib import PurePath

from doctor.catalog.toolkit import CUDA_LIBRARIES, cuda_library_for_soname, cuda_library_for_symbol, split_cuda_package
from doctor.errors import reraise_out_of_resources
from doctor.host import Host
from doctor.model import Evidence
from doctor.probe.binary import read_symbols
from doctor.probe.loader import dirs_holding, resolve_needed
from doctor.record import record

MAX_LIBS = 48


@record
class PipPackage:
    """An nvidia-* wheel installed in the environment."""
    name: str  # "nvidia-nccl-cu12"
    version: str
    package: str  # "nvidia-nccl"
    cuda_major: int | None
    location: str  # the .dist-info directory
    evidence: list[Evidence] = field(default_factory=list)


@record
class Expectation:
    """A pin on an nvidia-* package in torch's own metadata."""
    package: str  # "nvidia-nccl"
    cuda_major: int | None
    specifier: str  # "==2.21.5"
    evidence: list[Evidence] = field(default_factory=list)


@record
class CudaLib:
    """A CUDA library (cuDNN, NCCL, cuBLAS, …) as the loader resolves it for torch."""
    key: str  # "nccl"
    soname: str  # the NEEDED entry: "libnccl.so.2"
    consumer: str  # the library that needs it
    path: str | None
    via: str
    version: str | None = None
    version_source: str = ""  # "cudnn_version.h", "nccl.h", "nvidia-nccl-cu12 (pip)", "nvJitLink symbols"
    pip_copy: str | None = None  # the copy shipped for this build: pip's nvidia/<dir>/lib, or the libtorch's own lib/
    copies: list[str] = field(default_factory=list)  # every file with this soname found in the usual places
    missing_symbols: list[str] = field(default_factory=list)  # needed by a consumer, not defined by `path`
    evidence: list[Evidence] = field(default_factory=list)


@record
class CudaLibsFacts:
    """The CUDA libraries torch would load here, their copies and versions."""
    lib_dir: str | None
    libraries: list[CudaLib] = field(default_factory=list)
    pip_packages: list[PipPackage] = field(default_factory=list)
    expected: list[Expectation] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)


def parse_metadata(text: str) -> tuple[str | None, str | None, list[str]]:
    """(Name, Version, Requires-Dist lines) of a METADATA file (RFC 822 headers until the body)."""
    name = version = None
    requires = []
    for line in text.splitlines():
        if not line.strip():
            break
        key, _, value = line.partition(":")
        value = value.strip()
        if key == "Name":
            name = value
        elif key == "Version":
            version = value
        elif key == "Requires-Dist":
            requires.append(value)
    return name, version, requires


def expectations(requires: list[str], source: str) -> list[Expectation]:
    """The nvidia-* pins among Requires-Dist lines (markers are kept out: the wheel is installed here)."""
    out = []
    for line in requires:
        if line.lstrip()[:7].lower() not in ("nvidia-", "nvidia_", "nvidia."):
            continue  # torch's other requirements (sympy, jinja2, …): not even packaging is imported for them
        from packaging.requirements import InvalidRequirement, Requirement

        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        package, major = split_cuda_package(req.name)
        if package.startswith("nvidia-") and str(req.specifier):
            out.append(Expectation(package, major, str(req.specifier), [Evidence("file", source, f"Requires-Dist: {line}")]))
    return out


def parse_header_version(text: str, prefix: str) -> str | None:
    """"9.1.0" from `#define CUDNN_MAJOR 9` / `_MINOR` / `_PATCHLEVEL` (or NCCL_MAJOR/MINOR/PATCH)."""
    parts = []
    for suffix in ("MAJOR", "MINOR", ("PATCHLEVEL", "PATCH")):
        names = suffix if isinstance(suffix, tuple) else (suffix,)
        m = None
        for n in names:
            m = re.search(rf"#define\s+{prefix}_{n}\s+(\d+)", text)
            if m:
                break
        if m is None:
            return None
        parts.append(m.group(1))
    return ".".join(parts)


def nvjitlink_version(defined: set[str]) -> str | None:
    """"12.4" from the newest `__nvJitLink*_12_4` entry point a libnvJitLink defines."""
    found = [(int(m.group(1)), int(m.group(2))) for n in defined if (m := re.match(r"__nvJitLink\w+?_(\d+)_(\d+)$", n))]
    return "%d.%d" % max(found) if found else None


def _site_dirs(host: Host, python_location: str | None) -> list[str]:
    dirs = [e for e in host.sys_path if e]
    if python_location:
        parent = str(PurePath(python_location).parent)
        if parent not in dirs:
            dirs.insert(0, parent)
    return dirs


def pip_packages(host: Host, site_dirs: list[str]) -> list[PipPackage]:
    out = []
    for site in site_dirs:
        for entry in host.listdir(site):
            if not (entry.startswith("nvidia_") and entry.endswith(".dist-info")):
                continue
            meta = PurePath(site) / entry / "METADATA"
            text = host.read_text(meta, limit=1 << 16)
            if text is None:
                continue
            name, version, _ = parse_metadata(text)
            if name and version:
                package, major = split_cuda_package(name)
                out.append(PipPackage(name, version, package, major, str(PurePath(site) / entry),
                                      [Evidence("file", str(meta), f"Name: {name}, Version: {version}")]))
    return out


def torch_expectations(host: Host, site_dirs: list[str]) -> list[Expectation]:
    for site in site_dirs:
        for entry in host.listdir(site):
            if entry.startswith("torch-") and entry.endswith(".dist-info"):
                meta = str(PurePath(site) / entry / "METADATA")
                text = host.read_text(meta, limit=1 << 20)
                if text is not None:
                    return expectations(parse_metadata(text)[2], meta)
    return []


def _copies(host: Host, soname: str, site_dirs: list[str], ld_cache: dict[str, list[str]]) -> list[str]:
    found = []
    for site in site_dirs:
        nvidia = PurePath(site) / "nvidia"
        for sub in host.listdir(nvidia):
            candidate = nvidia / sub / "lib" / soname
            if host.exists(candidate):
                found.append(str(candidate))
    prefix = host.env.get("CONDA_PREFIX")
    if prefix and host.exists(PurePath(prefix) / "lib" / soname):
        found.append(str(PurePath(prefix) / "lib" / soname))
    found.extend(ld_cache.get(soname, []))
    search = host.env.get("LD_LIBRARY_PATH", "").split(":")
    found.extend(str(PurePath(d) / soname) for d in dirs_holding(host, search, soname, ld_cache))
    seen: set[str] = set()
    return [p for p in found if not (p in seen or seen.add(p))]


def _version(host: Host, lib: CudaLib, defined: set[str], pip: list[PipPackage]) -> None:
    where = PurePath(lib.path)
    headers = {"cudnn": ("cudnn_version.h", "CUDNN"), "nccl": ("nccl.h", "NCCL")}
    if lib.key in headers:
        name, prefix = headers[lib.key]
        for inc in (where.parent.parent / "include", where.parent / "include"):
            text = host.read_text(inc / name, limit=1 << 18)
            if text and (v := parse_header_version(text, prefix)):
                lib.version, lib.version_source = v, name
                lib.evidence.append(Evidence("file", str(inc / name), f"{prefix}_MAJOR/MINOR/PATCH → {v}"))
                return
    if lib.key == "nvJitLink" and (v := nvjitlink_version(defined)):
        lib.version, lib.version_source = v, "nvJitLink symbols"
        lib.evidence.append(Evidence("elf", lib.path, f"newest entry point __nvJitLink…_{v.replace('.', '_')}"))
        return
    # A pip wheel's directory: site-packages/nvidia/<dir>/lib/<soname> → the distribution owning <dir>.
    if len(where.parts) >= 4 and where.parts[-4] == "nvidia":
        site = str(where.parent.parent.parent.parent)
        row = next((r for r in CUDA_LIBRARIES if r.key == lib.key), None)
        owner = [p for p in pip if row and p.package == row.package and str(PurePath(p.location).parent) == site]
        if len(owner) == 1:
            lib.version, lib.version_source = owner[0].version, f"{owner[0].name} (pip)"
            lib.evidence.extend(owner[0].evidence)


def detect_cuda_libs(host: Host, lib_dir: str | None, python_location: str | None,
                     ld_cache: dict[str, list[str]]) -> CudaLibsFacts:
    site_dirs = _site_dirs(host, python_location)
    facts = CudaLibsFacts(lib_dir, pip_packages=pip_packages(host, site_dirs),
                          expected=torch_expectations(host, site_dirs))
    if lib_dir is None or host.system != "Linux":
        return facts
    root = PurePath(lib_dir) / "libtorch_cuda.so"
    if not host.exists(root):
        return facts
    queue: list[str] = [str(root)]
    seen: set[str] = set()
    needs: list[tuple[str, set[str]]] = []  # (consumer, its undefined non-weak symbols)
    defined_by: dict[str, set[str]] = {}
    while queue and len(seen) < MAX_LIBS:
        consumer = queue.pop(0)
        if consumer in seen:
            continue
        seen.add(consumer)
        try:
            resolved, _elf = resolve_needed(host, PurePath(consumer), ld_cache)
            undefined, defined, _ = read_symbols(str(host.real(consumer)))
        except Exception as exc:
            reraise_out_of_resources(exc)
            facts.evidence.append(Evidence("elf", consumer, f"unreadable: {exc}"[:200]))
            continue
        defined_by[consumer] = defined
        needs.append((consumer, {n for n, weak in undefined if not weak}))
        for res in resolved:
            row = cuda_library_for_soname(res.name)
            if row is None or any(lib.soname == res.name for lib in facts.libraries):
                continue
            path = posixpath.normpath(res.path) if res.path else None  # "$ORIGIN/../../nvidia/…" spelled out
            lib = CudaLib(row.key, res.name, PurePath(consumer).name, path, res.via)
            lib.copies = _copies(host, res.name, site_dirs, ld_cache)
            lib.pip_copy = next((c for c in lib.copies if f"/nvidia/{row.pip_dir}/lib/" in c or "/nvidia/cu1" in c), None)
            bundled = PurePath(lib_dir) / res.name  # a libtorch zip ships its CUDA libraries in lib/
            if lib.pip_copy is None and host.exists(bundled):
                lib.pip_copy = str(bundled)
                lib.copies.insert(0, str(bundled))
            lib.evidence.append(Evidence("elf", consumer, f"NEEDED {res.name} → {res.path or 'not found'}"
                                         + (f" (via {res.via})" if res.via else "")))
            facts.libraries.append(lib)
            if path:
                queue.append(path)
    for lib in facts.libraries:
        if lib.path is None:
            continue
        if lib.path not in defined_by:
            try:
                defined_by[lib.path] = read_symbols(str(host.real(lib.path)))[1]
            except Exception as exc:
                reraise_out_of_resources(exc)
                defined_by[lib.path] = set()
        defined = defined_by[lib.path]
        _version(host, lib, defined, facts.pip_packages)
        missing = sorted({n for consumer, undefined in needs for n in undefined
                          if n not in defined and (row := cuda_library_for_symbol(n)) and row.key == lib.key})
        lib.missing_symbols = missing[:20]
    return facts
