"""Build folders in the current directory that were built against some libtorch: Cargo's
`target/` (build-script output files record the lib dir they linked and whether torch_cuda
was linked) and cabal's `dist-newstyle/` (each component's `setup-config` records its
configured extra-lib-dirs). A stale one is a fact; diagnose decides it is a problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

from doctor.host import Host

SEARCH = re.compile(r"^cargo::?rustc-link-search=(?:native=)?(.+)$", re.M)
CUDA = re.compile(r"^cargo::?rustc-link-lib=(?:[a-z:+,-]*=)?torch_cuda$", re.M)
MAX_OUTPUTS = 200
# In Cabal's binary setup-config a FilePath is a length-prefixed run of characters, followed by
# the next field's (zero-led) length: an absolute path ending in /lib, then a byte below 0x20.
CABAL_LIB_DIR = re.compile(rb"(/[\x20-\x7e]{1,4000}?/lib)(?=[\x00-\x1f])")


@dataclass
class StaleBuild:
    """A build folder (target/, dist-newstyle/) linked against another libtorch than today's."""
    tool: str  # "cargo"
    build_dir: str
    evidence_file: str
    built_against: str  # "/x/lib (CUDA)"
    now: str
    clean: str  # the command that removes it


def _cargo_outputs(host: Host, target: PurePath) -> list[PurePath]:
    out: list[PurePath] = []
    profiles = [target / p for p in ("debug", "release")]
    for triple in host.listdir(target):  # target/<triple>/<profile> for cross builds
        if "-" in triple:
            profiles += [target / triple / p for p in ("debug", "release")]
    for profile in profiles:
        for name in host.listdir(profile / "build"):
            out.append(profile / "build" / name / "output")
            if len(out) >= MAX_OUTPUTS:
                return out
    return out


def stale_builds(host: Host, lib_dir: str | None, lib_has_cuda: bool) -> list[StaleBuild]:
    """Cargo build-script outputs under ./target that linked a libtorch other than `lib_dir`
    or with the other CPU/CUDA choice."""
    if not lib_dir:
        return []
    target = host.cwd / "target"
    now_real = _canon(host, lib_dir)
    now = f"{lib_dir} ({'CUDA' if lib_has_cuda else 'CPU'})"
    out = []
    for output in _cargo_outputs(host, PurePath(target)):
        text = host.read_text(output, limit=256 << 10)
        if not text:
            continue
        dirs = [d.strip() for d in SEARCH.findall(text)]
        torch_dirs = [d for d in dirs if any(host.exists(PurePath(d) / f) for f in ("libc10.so", "libc10.dylib"))
                      or "torch" in d]
        if not torch_dirs:
            continue
        cuda = bool(CUDA.search(text))
        same_dir = any(_canon(host, d) == now_real for d in torch_dirs)
        if same_dir and cuda == lib_has_cuda:
            continue
        out.append(StaleBuild("cargo", str(target), str(output),
                              f"{torch_dirs[0]} ({'CUDA' if cuda else 'CPU'})", now, "cargo clean"))
        break  # one finding per build folder
    return out


def _setup_configs(host: Host, build: PurePath) -> list[PurePath]:
    """dist-newstyle/build/<arch>/<ghc>/<pkg>/[{x,t,b,l}/<component>/]setup-config, bounded."""
    out: list[PurePath] = []
    for arch in host.listdir(build):
        for ghc in host.listdir(build / arch):
            for pkg in host.listdir(build / arch / ghc):
                base = build / arch / ghc / pkg
                out.append(base / "setup-config")
                for kind in ("x", "t", "b", "l"):
                    out += [base / kind / comp / "setup-config" for comp in host.listdir(base / kind)]
                if len(out) >= MAX_OUTPUTS:
                    return out[:MAX_OUTPUTS]
    return out


def stale_cabal_builds(host: Host, lib_dir: str | None, lib_has_cuda: bool) -> list[StaleBuild]:
    """Components under ./dist-newstyle configured with a libtorch lib dir other than `lib_dir`."""
    if not lib_dir:
        return []
    dist = host.cwd / "dist-newstyle"
    now_real = _canon(host, lib_dir)
    now = f"{lib_dir} ({'CUDA' if lib_has_cuda else 'CPU'})"
    for config in _setup_configs(host, PurePath(dist) / "build"):
        data = host.read_bytes(config, limit=16 << 20)
        if not data:
            continue
        for raw in dict.fromkeys(CABAL_LIB_DIR.findall(data)):
            d = raw.decode("ascii")
            if not any(host.exists(PurePath(d) / f) for f in ("libc10.so", "libc10.dylib")):
                continue  # not a libtorch lib dir (or gone: nothing to compare)
            if _canon(host, d) == now_real:
                continue
            cuda = host.exists(PurePath(d) / "libtorch_cuda.so")
            return [StaleBuild("cabal", str(dist), str(config), f"{d} ({'CUDA' if cuda else 'CPU'})", now,
                               "rm -rf dist-newstyle  (or: cabal clean)")]
    return []


def _canon(host: Host, path: str) -> str:
    try:
        return str(host.real(path).resolve())
    except (OSError, RuntimeError, ValueError):
        return path
