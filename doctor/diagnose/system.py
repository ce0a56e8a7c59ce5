"""The System and Python torch areas."""

from __future__ import annotations

from doctor.formats import human_bytes
from doctor.model import Area, Evidence, Finding, Level
from doctor.probe.python_torch import PythonTorch
from doctor.probe.system import SystemFacts

# Unpacked CUDA libtorch trees are 2–4 GiB; warn when the cache cannot hold one.
MIN_FREE = 5 * 1024**3


def system_area(s: SystemFacts) -> Area:
    cores = f"{s.logical_cores} cores" if s.logical_cores else "cores unknown"
    simd = ", ".join(s.simd[:4]) or "no SIMD flags seen"
    glibc = f"glibc {s.glibc}" if s.glibc else s.os
    summary = f"{s.distribution or s.os}, {s.machine}, {cores} ({simd}), {human_bytes(s.memory_bytes)}, {glibc}"
    details = [
        f"OS: {s.distribution or s.os}; kernel {s.kernel or 'unknown'}; {s.machine}",
        f"CPU: {s.cpu_model or 'unknown'}; {s.logical_cores} logical / {s.physical_cores} physical cores",
        f"SIMD: {' '.join(s.simd) or 'none seen'}",
        f"memory: {human_bytes(s.memory_bytes)}",
        f"glibc {s.glibc or 'n/a'}; libstdc++ {s.libstdcxx or 'not found'} provides up to {s.glibcxx_max or '?'} / {s.cxxabi_max or '?'}",
        f"libtorch cache {s.cache_dir}: {human_bytes(s.cache_free_bytes)} free",
    ]
    findings = []
    if s.cache_free_bytes is not None and s.cache_free_bytes < MIN_FREE:
        findings.append(
            Finding(
                "disk.low",
                Level.WARNING,
                f"only {human_bytes(s.cache_free_bytes)} free where libtorch is cached",
                detail=f"{s.cache_dir} — a CUDA libtorch needs 2–4 GiB unpacked plus the download.",
                fix="free some space, or set LIBTORCH_HOME to a larger disk",
                area="system",
                subject=s.cache_dir,
            )
        )
    if s.sudo_user:
        findings.append(
            Finding(
                "system.sudo",
                Level.WARNING,
                f"running as root through sudo: this is root's environment, not {s.sudo_user}'s",
                detail="sudo resets the environment (PATH, LD_LIBRARY_PATH, LIBTORCH, CUDA_HOME, CONDA_PREFIX …) and "
                f"HOME: what this report finds is what root's builds would find, while {s.sudo_user}'s builds see "
                "their own variables, caches and Python.",
                fix=f"run `doctor check` as {s.sudo_user}, without sudo (a system-wide install is found from there too)",
                area="system",
                evidence=[Evidence("env", "SUDO_USER", s.sudo_user)],
                subject="sudo",
            )
        )
    return Area("system", "System", summary, details, findings)


def python_torch_area(t: PythonTorch | None, python: str) -> Area:
    if t is None:
        return Area(
            "python_torch",
            "Python torch",
            f"not installed for {python} (only needed for Python work, torchfn, smoke and bench)",
            [f"searched sys.path of {python}"],
        )
    accel = f"CUDA {t.cuda}" if t.cuda else f"HIP {t.hip}" if t.hip else "no GPU support"
    details = [f"location: {t.location}", f"version: {t.version} ({accel})", f"git: {t.git_version or '?'}"]
    if t.libtorch_root:
        details.append(f"bundled libtorch tree: {t.libtorch_root}/{{lib,include,share}}")
    findings = []
    if t.base_version is None:
        findings.append(Finding(
            "probe.failed", Level.WARNING, f"could not read the Python torch version: {t.version[:100]!r} is not a version",
            detail=f"{t.location}/version.py holds no PEP 440 __version__: a hand-edited or damaged install.",
            fix="pip install --force-reinstall torch   (CPU wheels: --index-url https://download.pytorch.org/whl/cpu)",
            area="python_torch", evidence=t.evidence, subject=t.location))
    return Area("python_torch", "Python torch", f"{t.version[:100]} ({t.variant}) at {t.location}", details, findings)
