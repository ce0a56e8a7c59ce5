"""Advice for the CUDA-stack ids (issue 13): what the log proved, made concrete with the catalog."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from doctor import fixes
from doctor.catalog.cuda import cuda_of_variant
from doctor.catalog.toolkit import HOST_COMPILER_LIMITS, NCCL_SYMBOL_SINCE, compute_capability, major_minor, nvcc_releases, pip_package
from doctor.explain.facts import Advice, MachineFacts

if TYPE_CHECKING:  # the engine calls the advisors; they only read the Match they are given
    from doctor.explain.engine import Match

NCCL_SINCE = NCCL_SYMBOL_SINCE


def _cuda_major(facts: MachineFacts) -> str | None:
    """The CUDA major of the active libtorch, when the facts give a cuXYZ variant."""
    install = facts.install
    cuda = cuda_of_variant(install.variant) if install is not None and install.variant else None
    return cuda.split(".")[0] if cuda else None


def _first(match: Match, name: str) -> str | None:
    values = match.values(name)
    return values[0] if values else None


def _host_compiler(match: Match, facts: MachineFacts) -> Advice:
    kind = "clang" if (_first(match, "kind") or "").lower() == "clang" else "gcc"
    top = _first(match, "max")
    detail = [match.rule.cause]
    headers = _first(match, "headers")
    if top is None and headers:
        return _host_headers(match, int(headers), detail)
    releases = []
    if top and top.split(".")[0].isdigit():
        limit = int(top.split(".")[0])
        releases = [r.cuda for r in HOST_COMPILER_LIMITS if (r.gcc_max if kind == "gcc" else r.clang_max) == limit]
        newer = next((r.cuda for r in HOST_COMPILER_LIMITS if (r.gcc_max if kind == "gcc" else r.clang_max) > limit), None)
        if releases:
            detail.append(f"This nvcc accepts {kind} ≤ {limit} (as CUDA {', '.join(releases)} do).")
        cxx, cc = ("g++", "gcc") if kind == "gcc" else ("clang++", "clang")
        fix = (f"install {kind} {limit} and export CUDAHOSTCXX=/usr/bin/{cxx}-{limit} NVCC_CCBIN=/usr/bin/{cc}-{limit} "
               f"(CMake: -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/{cxx}-{limit})")
        if newer:
            fix += f"; or use CUDA ≥ {newer}, whose nvcc accepts a newer {kind}"
        return Advice(f"nvcc accepts {kind} ≤ {limit}; the host compiler is newer", detail, fix, subject=f"{kind}>{limit}")
    return Advice(match.rule.title, detail, match.rule.fix)


def _host_headers(match: Match, gcc: int, detail: list[str]) -> Advice:
    """nvcc passed its own checks, then broke the host compiler's C++ library headers on the way."""
    nvcc = _first(match, "nvcc")
    detail.append(f"nvcc{' ' + nvcc if nvcc else ''} accepted the host compiler, then could not parse GCC {gcc}'s "
                  "C++ library headers (\"parameter packs not expanded\" inside them): this nvcc predates those headers.")
    older = gcc - 1
    fix = (f"build with an older host compiler: install g++-{older} and export CUDAHOSTCXX=/usr/bin/g++-{older} "
           f"NVCC_CCBIN=/usr/bin/g++-{older} (CMake: -DCMAKE_CUDA_HOST_COMPILER=/usr/bin/g++-{older}); or use a "
           "newer CUDA toolkit than this nvcc (Ubuntu 22.04's nvidia-cuda-toolkit package is CUDA 11.5; NVIDIA's "
           "12.x toolkits read GCC 11's headers)")
    return Advice(f"this nvcc cannot read GCC {gcc}'s C++ headers", detail, fix, subject=f"gcc{gcc}-headers")


def _toolkit_mismatch(match: Match, facts: MachineFacts) -> Advice:
    nvcc, torch = _first(match, "nvcc"), _first(match, "torch")
    detail = [match.rule.cause]
    a, b = major_minor(nvcc), major_minor(torch)
    if a and b:
        if a[0] != b[0]:
            detail.append(f"The majors differ (CUDA {a[0]} vs {b[0]}): PyTorch refuses to build the extension.")
        else:
            detail.append("Only the minor differs: recent PyTorch releases only warn about that; older ones raised this error.")
    if nvcc and torch:
        fix = (f"export CUDA_HOME=/usr/local/cuda-{torch} (a CUDA {torch} toolkit; `doctor check` lists the ones "
               f"installed), or install torch built for CUDA {nvcc}: {fixes.pip_torch(variant='cu' + nvcc.replace('.', ''))}")
        return Advice(f"nvcc is CUDA {nvcc}, torch was built with CUDA {torch}", detail, fix, subject=f"{nvcc}/{torch}")
    return Advice(match.rule.title, detail, match.rule.fix, subject=nvcc or "")


def _library_too_old(match: Match, facts: MachineFacts) -> Advice:
    detail = [match.rule.cause]
    symbol = _first(match, "symbol")
    shadow = _first(match, "path")
    if symbol and symbol.startswith("__nvJitLink"):
        need = f"{_first(match, 'major')}.{_first(match, 'minor')}"
        consumer = _first(match, "consumer") or "a CUDA library"
        detail.append(f"{consumer} needs nvJitLink ≥ {need} ({symbol}); an older libnvJitLink was loaded"
                      + (f": {shadow}." if shadow else "."))
        fix = (f"pip install 'nvidia-nvjitlink-cu{need.split('.')[0]}>={need}'"
               + (f", and remove {shadow.rsplit('/', 1)[0]} from LD_LIBRARY_PATH" if shadow else
                  "; and check LD_LIBRARY_PATH for an older CUDA's lib64"))
        return Advice(f"libnvJitLink older than {need} was loaded", detail, fix, subject="nvJitLink")
    if symbol and symbol.startswith("nccl"):
        since = NCCL_SINCE.get(symbol)
        detail.append(f"libtorch_cuda calls {symbol}" + (f", added in NCCL {since}" if since else "")
                      + "; the libnccl.so.2 loaded is older (another package's NCCL, or one on LD_LIBRARY_PATH).")
        fix = (f"pip install --force-reinstall the {pip_package('nccl', _cuda_major(facts))} version torch pins "
               "(pip show torch lists it), and "
               "remove other NCCL copies from LD_LIBRARY_PATH; `doctor check` shows which libnccl.so.2 loads")
        return Advice(f"libnccl.so.2 is older than torch needs ({symbol})", detail, fix, subject="nccl")
    compiled, runtime = _first(match, "compiled"), _first(match, "runtime")
    if compiled and runtime:
        detail.append(f"torch was compiled against cuDNN {compiled}, the loader found {runtime}.")
        fix = ("remove the other cuDNN from LD_LIBRARY_PATH so torch finds the one it ships with (pip's "
               f"{pip_package('cudnn', _cuda_major(facts))}), or reinstall torch; `doctor check` shows which libcudnn loads")
        return Advice(f"cuDNN {runtime} loaded, torch was compiled against {compiled}", detail, fix, subject="cudnn")
    return Advice(match.rule.title, detail, match.rule.fix)


def _toolkit_not_found(match: Match, facts: MachineFacts) -> Advice:
    detail = [match.rule.cause]
    header = _first(match, "header")
    if header:
        detail.append(f"The compiler found no {header}: that header is the CUDA toolkit's (its include/ folder), "
                      "which torch's CUDA headers include; a build that found no toolkit compiles without it.")
    home = facts.env.get("CUDA_HOME") or facts.env.get("CUDA_PATH")
    if home:
        detail.append(f"On this machine CUDA_HOME/CUDA_PATH is {home}" + (
            ", which has no bin/nvcc" if facts.lacks(f"{home}/bin/nvcc") else "") + ".")
    if facts.has("/usr/local/cuda/bin/nvcc"):
        fix = "export CUDA_HOME=/usr/local/cuda PATH=/usr/local/cuda/bin:$PATH (a toolkit is installed there)"
    else:
        fix = ("install the CUDA toolkit of torch's CUDA release (or pip install nvidia-cuda-nvcc-cu12 in this "
               "environment) and export CUDA_HOME to it; `doctor check` shows what torch would find")
    return Advice(match.rule.title, detail, fix, subject=home or "CUDA_HOME")


def _nvcc_arch(match: Match, facts: MachineFacts) -> Advice:
    arch, code, nvcc = _first(match, "arch"), _first(match, "code"), _first(match, "nvcc")
    cc = compute_capability(f"compute_{code}") if code else None
    detail = [match.rule.cause]
    if cc is None:
        return Advice(match.rule.title, detail, match.rule.fix, subject=arch or "")
    span, releases = fixes.nvcc_span(cc), nvcc_releases(cc)
    if span:
        detail.append(f"{arch} (compute capability {cc}) needs {span}.")
    if nvcc and releases:
        first, last = releases
        side = ("older than" if major_minor(nvcc) < major_minor(first) else
                "newer than" if last and major_minor(nvcc) > major_minor(last) else "")
        detail.append(f"The nvcc in the log is CUDA {nvcc}" + (f", {side} that range." if side else "."))
    if _first(match, "triton"):
        detail.append("The ptxas that failed is the one Triton bundles (torch.compile's GPU code), not the toolkit's.")
        fix = (f"export TRITON_PTXAS_PATH=/usr/local/cuda/bin/ptxas (a toolkit's ptxas that builds {arch}"
               + (f": {span}" if span else "") + "), or a Triton release that bundles a newer one")
        return Advice(f"Triton's ptxas cannot build for {arch} (compute capability {cc})", detail, fix, subject=arch or "")
    return Advice(f"this nvcc cannot build for {arch} (compute capability {cc})", detail, fixes.nvcc_for_arch(cc),
                  subject=arch or "")


CUDA_ADVISORS: dict[str, Callable[[Match, MachineFacts], Advice]] = {
    "cuda.host-compiler-unsupported": _host_compiler,
    "cuda.toolkit-mismatch": _toolkit_mismatch,
    "cuda.library-too-old": _library_too_old,
    "cuda.toolkit-not-found": _toolkit_not_found,
    "cuda.arch-list-invalid": _nvcc_arch,
}
