"""The CUDA stack area: toolkit vs the CUDA of torch/libtorch, and nvcc's host compiler.

Pure: facts in, findings out. PyTorch's own rule (torch/utils/cpp_extension.py,
`_check_cuda_version`): the `release X.Y` of `$CUDA_HOME/bin/nvcc --version` is compared with
`torch.version.cuda`; a different major raises "The detected CUDA version (X) mismatches the
version that was used to compile PyTorch (Y)", a different minor only logs a warning.
"""

from __future__ import annotations

from doctor import fixes
from doctor.catalog.toolkit import host_compiler_limit, major_minor, newest_cuda_for
from doctor.diagnose.common import not_a_directory
from doctor.model import Area, Evidence, Finding, Level
from doctor.probe.cuda_toolkit import CudaToolkitFacts
from doctor.quoting import sh_paste


def cuda_of_variant(variant: str | None) -> str | None:
    """"12.8" from "cu128", "11.8" from "cu118", "13.0" from "cu130"; None for cpu/rocm/"cuda"."""
    if not variant or not variant.startswith("cu") or not variant[2:].isdigit() or len(variant) < 5:
        return None
    digits = variant[2:]
    return f"{digits[:-1]}.{digits[-1]}"


def compare_cuda(nvcc: str | None, build: str | None) -> Level | None:
    """PyTorch's rule: None when equal or unknown, ERROR when majors differ, WARNING for minors."""
    a, b = major_minor(nvcc), major_minor(build)
    if a is None or b is None or a == b:
        return None
    return Level.ERROR if a[0] != b[0] else Level.WARNING


def builds_with_cuda(python_cuda: str | None, libtorch_cuda: str | None) -> list[tuple[str, str]]:
    return [(who, v) for who, v in (("Python torch", python_cuda), ("libtorch", libtorch_cuda)) if v]


def _not_a_toolkit(t: CudaToolkitFacts) -> str:
    """What the CUDA_HOME that was set names, when it is no toolkit: "does not exist", "is a file,
    not a directory", … or, for a directory, that it lacks nvcc."""
    if t.cuda_home_kind in (None, "directory"):
        return "has no bin/nvcc"
    return not_a_directory(t.cuda_home_kind) + (": its ~ was not expanded" if t.cuda_home_tilde else "")


def _tilde_note(t: CudaToolkitFacts) -> str:
    if not t.cuda_home_tilde:
        return ""
    return (f" torch.utils.cpp_extension takes {t.cuda_home_via} as written, and {fixes.TILDE_RULE}: expanded, "
            f"it would be {t.cuda_home_tilde}.")


def cuda_stack_area(t: CudaToolkitFacts, python_cuda: str | None, libtorch_cuda: str | None,
                    libtorch_label: str = "") -> Area:
    """`python_cuda` is torch.version.cuda read from version.py; `libtorch_cuda` from the active
    libtorch's variant (cu128 → 12.8)."""
    findings: list[Finding] = []
    details = [f"CUDA_HOME (as torch.utils.cpp_extension finds it): {t.cuda_home or 'none'}"
               + (f" (from {t.cuda_home_via})" if t.cuda_home_via else "")]
    for c in t.candidates:
        details.append(f"{c.origin}: {c.root}: nvcc {c.nvcc_version or c.release or ('missing' if not c.nvcc else 'unusable')}"
                       + (f", version file {c.file_version}" if c.file_version else ""))
    hc = t.host_compiler
    if hc:
        details.append(f"host compiler ({hc.chosen_by}): {hc.path or 'not found'} {hc.kind or ''} {hc.version or ''}".rstrip())
    wants = builds_with_cuda(python_cuda, libtorch_cuda)
    active = t.active
    if wants and (t.cuda_home is None or active is None or active.nvcc is None):
        missing_nvcc = t.cuda_home is not None
        findings.append(Finding(
            "cuda.toolkit-not-found", Level.WARNING,
            (f"{t.cuda_home_via}={t.cuda_home} {_not_a_toolkit(t)}" if missing_nvcc else
             "no CUDA toolkit found: CUDA_HOME is not set and no nvcc on PATH"),
            detail=f"{wants[0][0]} is built for CUDA {wants[0][1]}; compiling CUDA extensions or .cu files needs a "
                   "toolkit (torch.utils.cpp_extension: \"CUDA was not found on the system, please set the CUDA_HOME ...\")."
                   + _tilde_note(t),
            fix=f"install the CUDA {wants[0][1]} toolkit (or `pip install nvidia-cuda-nvcc-cu{wants[0][1].split('.')[0]}`) "
                f"and export CUDA_HOME=/usr/local/cuda-{wants[0][1]}",
            area="cuda", evidence=list(t.evidence) + (active.evidence if active else []), subject=t.cuda_home or "CUDA_HOME"))
    if active and active.release:
        for who, version in wants:
            level = compare_cuda(active.release, version)
            if level is None:
                continue
            findings.append(Finding(
                "cuda.toolkit-mismatch", level,
                f"nvcc at {active.root} is CUDA {active.release}, {who} is built with CUDA {version}"
                + ("" if level is Level.ERROR else " (minor versions differ)"),
                detail="PyTorch refuses to build extensions when the majors differ (\"The detected CUDA version "
                       f"({active.release}) mismatches the version that was used to compile PyTorch ({version})\") and "
                       "warns when only the minor differs.",
                fix=f"point CUDA_HOME at a CUDA {version} toolkit (export CUDA_HOME=/usr/local/cuda-{version}), or use "
                    f"the {who} build for CUDA {active.release} (cu{active.release.replace('.', '')})",
                area="cuda", evidence=list(active.evidence) + [Evidence("derived", who, f"CUDA {version}")],
                subject=f"{active.root}:{who}"))
    if wants and active and active.nvcc and not active.headers:
        better = next((c for c in t.candidates if c.headers and c.release == active.release), None)
        findings.append(Finding(
            "cuda.toolkit-not-found", Level.WARNING,
            f"CUDA_HOME resolves to {active.root} ({t.cuda_home_via}), which has no include/cuda_runtime.h",
            detail="torch.utils.cpp_extension and CMake's FindCUDAToolkit take headers and libraries from "
                   "$CUDA_HOME/include and $CUDA_HOME/lib64; an nvcc symlinked into another bin/ directory points "
                   "them at the wrong tree.",
            fix=f"export CUDA_HOME={better.root if better else '<the toolkit directory>'}",
            area="cuda", evidence=list(t.evidence) + active.evidence, subject=f"{active.root}:headers"))
    others = {c.release for c in t.candidates if c.release and c is not active}
    if active and active.release and others - {active.release} and t.cuda_home_via in ("CUDA_HOME", "CUDA_PATH"):
        nvcc_path = next((c for c in t.candidates if c.origin == "nvcc on PATH"), None)
        if nvcc_path and nvcc_path.release and nvcc_path.release != active.release:
            findings.append(Finding(
                "cuda.toolkit-mismatch", Level.WARNING,
                f"nvcc on PATH is CUDA {nvcc_path.release} but {t.cuda_home_via} names CUDA {active.release}",
                detail="Make-based and CMake builds call the nvcc on PATH, torch extensions the one in CUDA_HOME.",
                fix=f"export PATH={active.root}/bin:$PATH", area="cuda",
                evidence=active.evidence + nvcc_path.evidence, subject="PATH"))
    if active and active.nvcc and hc and hc.path and hc.problem:
        findings.append(Finding(
            "probe.failed", Level.WARNING, f"could not determine nvcc's host compiler: {hc.problem}",
            detail=f"nvcc runs the host compiler ({hc.chosen_by}) for every .cu file: one that hangs or fails here "
                   "stops CUDA builds too.",
            fix=f"run `{sh_paste(hc.path)} --version` yourself and repair or replace that compiler (nvcc takes "
                "another one from CUDAHOSTCXX or NVCC_CCBIN)",
            area="cuda", evidence=hc.evidence, subject=hc.path))
    limit = host_compiler_limit(active.release if active else None)
    if limit and hc and hc.kind and hc.version:
        major = int(hc.version.split(".")[0])
        top = limit.gcc_max if hc.kind == "gcc" else limit.clang_max
        if major > top:
            newer = newest_cuda_for(hc.kind, major)
            findings.append(Finding(
                "cuda.host-compiler-unsupported", Level.WARNING if t.allow_unsupported_compiler else Level.ERROR,
                f"nvcc {active.release} accepts {hc.kind} ≤ {top}; the host compiler ({hc.chosen_by}) is {hc.kind} {hc.version}",
                detail=f"nvcc stops with \"unsupported {'GNU' if hc.kind == 'gcc' else 'clang'} version\" "
                       f"(crt/host_config.h); source: {limit.source}"
                       + ("; -allow-unsupported-compiler is set, so it compiles at your own risk" if t.allow_unsupported_compiler else ""),
                fix=f"install {hc.kind} {top} and export CUDAHOSTCXX=/usr/bin/{'g++' if hc.kind == 'gcc' else 'clang++'}-{top} "
                    f"NVCC_CCBIN=/usr/bin/{'gcc' if hc.kind == 'gcc' else 'clang'}-{top}"
                    + (f", or use CUDA ≥ {newer}" if newer else ""),
                area="cuda", evidence=hc.evidence + active.evidence, subject=hc.path or hc.chosen_by))
    if active and active.release:
        summary = f"nvcc {active.nvcc_version or active.release} at {active.root}"
    elif active and active.nvcc:  # hung or broken: the toolchain area's probe.failed says how
        summary = f"nvcc at {active.root} gave no version"
    elif wants:
        summary = "no CUDA toolkit"
    else:
        summary = "no CUDA toolkit (not needed: no CUDA build of torch)" if not t.candidates else \
            f"CUDA_HOME {t.cuda_home or 'unset'}"
        if t.cuda_home_kind not in (None, "directory"):  # a stale variable, harmless until a CUDA build comes
            summary = f"{t.cuda_home_via}={t.cuda_home} {_not_a_toolkit(t)} (not needed: no CUDA build of torch)"
    if wants:
        summary += "; builds: " + ", ".join(f"{w} CUDA {v}" for w, v in wants)
    return Area("cuda", "CUDA toolkit", summary, details, findings)


def libstdcxx_findings(f) -> list[Finding]:
    """glibc.too-old when the libstdc++ libtorch actually gets lacks versions libtorch needs."""
    from doctor.formats import symbol_version_key as version_key

    if f is None or f.path is None or not f.versions:
        return []
    have = set(f.versions)
    lacking = sorted({v for names in f.needs.values() for v in names if v not in have}, key=version_key)
    if not lacking:
        return []
    return [Finding(
        "glibc.too-old", Level.ERROR,
        f"libtorch needs {', '.join(lacking)}; the libstdc++ it gets ({f.path}, via {f.via}) lacks them",
        detail="Loading fails with \"version `" + lacking[-1] + "' not found\". An older conda libstdc++ "
               "shadowing the system's is the usual cause.",
        fix="conda install -c conda-forge 'libstdcxx-ng>=13' (newer runtime in the environment), or take "
            f"{f.path.rsplit('/', 1)[0]} out of LD_LIBRARY_PATH",
        area="cuda", evidence=f.evidence, subject=f.path)]


def _torch_shadowed(p, torch) -> Finding:
    what = f"torch {p.torch_import_version}" if p.torch_import_version else "a source tree: no version.py"
    where = {"current folder": "A torch/ folder in the current folder comes first for python -c, -m, the REPL and "
                               "scripts started here",
             "PYTHONPATH": "PYTHONPATH puts it before site-packages",
             "sys.path": "it is earlier on sys.path (a .pth file, or site-packages order)"}[p.torch_import_via]
    return Finding(
        "python.torch-shadowed", Level.WARNING,
        f"`import torch` takes {p.torch_import} ({what}), not the installed torch {torch.version} in {torch.location}",
        detail=f"{where}. A PyTorch source checkout fails with \"No module named 'torch._C'\"; another copy runs "
               "another version than pip reports, with its own libtorch.",
        fix=fixes.unshadow_torch(p.torch_import, p.torch_import_via),
        area="python-env", evidence=[Evidence("file", f"{p.torch_import}/__init__.py", p.torch_import_via)],
        subject=p.torch_import)


def _torch_extension_missing(p, torch) -> Finding:
    package = p.torch_import
    held = (f"it holds {', '.join(p.torch_extensions)}: built for another Python" if p.torch_extensions
            else "it holds no _C.* file: an interrupted or damaged install")
    return Finding(
        "python.torch-extension-missing", Level.ERROR,
        f"`import torch` fails: the installed torch {torch.version} has no _C extension for {p.implementation} "
        f"{p.version} ({held})",
        detail=f"{p.python} loads extension modules named _C{{{', '.join(p.extension_suffixes)}}}; without one, Python "
               "takes the torch/_C/ folder of type stubs and torch raises \"Failed to load PyTorch C extensions\".",
        fix=fixes.reinstall_torch(torch.version, p.python),
        area="python-env",
        evidence=[Evidence("file", package, ", ".join(p.torch_extensions) or "no _C.* file"),
                  Evidence("derived", "extension suffixes", ", ".join(p.extension_suffixes))],
        subject=package)


def pyenv_area(p) -> Area | None:
    """The Python environment as collect_env reports it, and a `python` on PATH that is another one."""
    if p is None:
        return None
    details = [f"{p.implementation} {p.version} at {p.python}" + (" (venv)" if p.venv else "") + (" (conda)" if p.conda else "")]
    details += [f"{pkg.name} {pkg.version}" + (f" [{pkg.installer}]" if pkg.installer else "") for pkg in p.packages]
    details += [f"{k}={v}" for k, v in sorted(p.variables.items())]
    findings: list[Finding] = []
    if p.python_on_path and p.python_on_path_prefix and p.python_on_path_prefix != p.prefix:
        findings.append(Finding(
            "python.path-differs", Level.WARNING,
            f"`python` on PATH is {p.python_on_path} ({p.python_on_path_prefix}), not the interpreter inspected "
            f"({p.python}, {p.prefix})",
            detail="Commands you type (pip install, python setup.py, torch extension builds) use the `python` on PATH, "
                   "so they see other packages than this report.",
            fix=f"activate the environment of {p.python} (source <venv>/bin/activate, conda activate), or run "
                f"`doctor check --python {p.python_on_path}` to inspect that one",
            area="python-env", evidence=p.evidence, subject=p.python_on_path))
    if p.python_on_path and p.python_on_path_problem:
        findings.append(Finding(
            "probe.failed", Level.WARNING, f"`python` on PATH does not work: {p.python_on_path_problem}",
            detail="Commands you type (python, pip, setup.py, CMake's find_package(Python)) start this one, not the "
                   "interpreter inspected, and this report cannot say what they see.",
            fix=f"run `{sh_paste(p.python_on_path)} -c 'import sys; print(sys.executable)'` yourself, then repair it or "
                "put a working interpreter first on PATH (`doctor check --python <interpreter>` inspects another one)",
            area="python-env", evidence=p.evidence, subject=p.python_on_path))
    torch = next((pkg for pkg in p.packages if pkg.name == "torch"), None)
    if torch and p.torch_import and not p.torch_import_installed:
        findings.append(_torch_shadowed(p, torch))
    if torch and p.torch_extension_loadable is False:
        findings.append(_torch_extension_missing(p, torch))
    summary = f"Python {p.version}" + (f", torch {torch.version}" if torch else ", no torch") + \
        f", {sum(1 for pkg in p.packages if pkg.name.startswith('nvidia-'))} nvidia-* packages"
    return Area("python-env", "Python environment", summary, details, findings)
