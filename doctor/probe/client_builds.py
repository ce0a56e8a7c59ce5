"""Build folders in the current directory that were built against some libtorch: Cargo's
`target/` (build-script output files record the lib dir they linked and whether torch_cuda
was linked). A stale one is a fact; diagnose decides it is a problem.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePath

from doctor.host import Host

SEARCH = re.compile(r"^cargo::?rustc-link-search=(?:native=)?(.+)$", re.M)
CUDA = re.compile(r"^cargo::?rustc-link-lib=(?:[a-z:+,-]*=)?torch_cuda$", re.M)
MAX_OUTPUTS = 200


@dataclass
class StaleBuild:
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


def _canon(host: Host, path: str) -> str:
    try:
        return str(host.real(path).resolve())
    except (OSError, RuntimeError, ValueError):
        return path
