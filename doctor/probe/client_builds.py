"""Build folders in the current directory that were built against some libtorch: Cargo's
`target/` (build-script output files record the lib dir they linked and whether torch_cuda
was linked), cabal's `dist-newstyle/` and stack's `.stack-work/` (each component's Cabal
`setup-config` records its configured extra-lib-dirs). A stale one is a fact; diagnose decides
it is a problem.
"""

from __future__ import annotations

import re
from pathlib import PurePath

from doctor.host import Host
from doctor.record import record

SEARCH = re.compile(r"^cargo::?rustc-link-search=(?:native=)?(.+)$", re.M)
CUDA = re.compile(r"^cargo::?rustc-link-lib=(?:[a-z:+,-]*=)?torch_cuda$", re.M)
MAX_OUTPUTS = 200
# In Cabal's binary setup-config a FilePath is a length-prefixed run of characters, followed by
# the next field's (zero-led) length: an absolute path ending in /lib, then a byte below 0x20.
CABAL_LIB_DIR = re.compile(rb"(/[\x20-\x7e]{1,4000}?/lib)(?=[\x00-\x1f])")


@record
class StaleBuild:
    """A build folder (target/, dist-newstyle/, .stack-work/) linked against another libtorch than today's."""
    tool: str  # "cargo", "cabal", "stack"
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


def _stack_setup_configs(host: Host) -> list[PurePath]:
    """.stack-work/dist/<platform>/<Cabal-x.y | ghc-x.y>/setup-config of the package here and, in a
    stack project (a stack.yaml here), of its package subfolders, each with its own .stack-work; bounded."""
    out: list[PurePath] = []
    here = PurePath(host.cwd)
    packages = [here / name for name in host.listdir(here)[:256]] if host.is_file(here / "stack.yaml") else []
    for base in [here, *packages]:
        dist = base / ".stack-work" / "dist"
        for platform in host.listdir(dist):
            out += [dist / platform / version / "setup-config" for version in host.listdir(dist / platform)]
        if len(out) >= MAX_OUTPUTS:
            return out[:MAX_OUTPUTS]
    return out


def _stale_setup_config(host: Host, configs: list[PurePath], lib_dir: str) -> tuple[PurePath, str, bool] | None:
    """The first Cabal setup-config (cabal's and stack's alike) configured with a libtorch lib dir
    other than `lib_dir`: (the file, that dir, whether it holds libtorch_cuda)."""
    now_real = _canon(host, lib_dir)
    for config in configs:
        data = host.read_bytes(config, limit=16 << 20)
        if not data:
            continue
        for raw in dict.fromkeys(CABAL_LIB_DIR.findall(data)):
            d = raw.decode("ascii")
            if not any(host.exists(PurePath(d) / f) for f in ("libc10.so", "libc10.dylib")):
                continue  # not a libtorch lib dir (or gone: nothing to compare)
            if _canon(host, d) != now_real:
                return config, d, host.exists(PurePath(d) / "libtorch_cuda.so")
    return None


def stale_cabal_builds(host: Host, lib_dir: str | None, lib_has_cuda: bool) -> list[StaleBuild]:
    """Components under ./dist-newstyle (cabal) or .stack-work (stack) configured with a libtorch
    lib dir other than `lib_dir`: one finding per tool."""
    if not lib_dir:
        return []
    now = f"{lib_dir} ({'CUDA' if lib_has_cuda else 'CPU'})"
    out = []
    for tool, folder, configs, clean in (
            ("cabal", host.cwd / "dist-newstyle", _setup_configs(host, PurePath(host.cwd) / "dist-newstyle" / "build"),
             "rm -rf dist-newstyle  (or: cabal clean)"),
            ("stack", host.cwd / ".stack-work", _stack_setup_configs(host), "stack clean")):
        if stale := _stale_setup_config(host, configs, lib_dir):
            config, d, cuda = stale
            if tool == "stack":  # a package's own .stack-work, or the project's
                folder = next(p for p in config.parents if p.name == ".stack-work")
            out.append(StaleBuild(tool, str(folder), str(config), f"{d} ({'CUDA' if cuda else 'CPU'})", now, clean))
    return out


def _canon(host: Host, path: str) -> str:
    try:
        return str(host.real(path).resolve())
    except (OSError, RuntimeError, ValueError):
        return path
