"""Which libtorch variant fits this machine, and why (policy: docs/gpu.md) — a pure function
of facts: GPU facts, the torch release (or the Python torch's facts), the platform, and an
explicit backend the caller read. No Host, no probe: `check` and `fetch --variant auto`
gather the facts first and pass them in (the decision calls detection's results, never the
reverse; uv's crates/uv-torch is the model).

For a torch release (the given one, else the installed Python torch's, else the newest the
catalog knows): an explicit backend wins (`--backend`, DOCTOR_GPU_BACKEND); otherwise the
newest CUDA variant published for that release whose CUDA line the driver supports and whose
architectures cover EVERY visible NVIDIA GPU; for AMD the newest ROCm variant whose gfx list
has every GPU's target; `cpu` when no GPU is usable (macOS: `cpu` — the arm64 build has MPS).
Every step is written into `reasons`, and every variant looked at into `considered`.
"""

from __future__ import annotations

from dataclasses import field

from typing import Any

from doctor.catalog.cuda import (
    arch_list,
    cuda_of_variant,
    driver_verdict,
    gfx_list,
    release_of,
    uncovered,
    version_tuple,
)
from doctor.model import Evidence
from doctor.record import record

BACKEND_ENV = "DOCTOR_GPU_BACKEND"


def newest_release() -> str:
    """The newest torch version the release table knows, "2.13.0"."""
    from doctor.catalog import releases

    return releases.newest_version()


def known_releases() -> list[str]:
    """Every minor release in the table, newest first: "2.13", "2.12", ..."""
    from doctor.catalog import releases

    return sorted((s.series for s in releases.SERIES), key=version_tuple, reverse=True)


def published_variants(version: str, system: str = "Linux", machine: str = "x86_64") -> list[str] | None:
    """cpu, CUDA and ROCm variants published for a release on this OS (doctor.catalog.releases);
    None when the table does not know the release. Linux aarch64 has no libtorch zip, only
    wheels: judged with the x86_64 list (fetch-libtorch --from-wheel)."""
    from doctor.catalog import releases

    if releases.series_of(version) is None:
        return None
    if system == "Darwin":
        return ["cpu"]
    platform = releases.host_platform(system, machine) or "linux-x86_64"
    if platform == "linux-aarch64":
        platform = "linux-x86_64"
    return releases.variants(version, platform)


@record
class Considered:
    """A variant the recommendation weighed, and why it was or was not chosen."""
    variant: str
    ok: bool
    why: str


@record
class Recommendation:
    """The libtorch variant to install here, with the reasons."""
    variant: str  # "cu130", "rocm7.2", "cpu"
    version: str  # the torch release it is for, "2.13.0"
    reasons: list[str] = field(default_factory=list)
    source: str = "policy"  # "policy" | "override"
    considered: list[Considered] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)


def validate_backend(value: str, origin: str = BACKEND_ENV) -> str:
    from doctor.catalog import releases
    from doctor.errors import UsageError

    v = value.strip().lower()
    if not releases.VARIANT_RE.match(v):
        raise UsageError(f"{origin}={value!r} is not a backend: use cpu, cuXYZ (e.g. cu128) or rocmX.Y (e.g. rocm6.4)")
    return v


@record(frozen=True)
class Backend:
    """An explicit backend the caller read: the value and where it came from."""

    value: str
    origin: str  # "--backend" or BACKEND_ENV


def chosen_backend(option: str | None, env_value: str | None) -> Backend | None:
    """The explicit backend, if any: `--backend` beats DOCTOR_GPU_BACKEND (read by the caller)."""
    if option:
        return Backend(option, "--backend")
    return Backend(env_value, BACKEND_ENV) if env_value else None


def recommend(gpu: Any, system: str, machine: str, *, version: str | None = None, python: Any = None,
              backend: Backend | None = None) -> Recommendation:
    """The variant to fetch for torch `version` (else the Python torch's, else the newest the
    catalog knows) on a machine with these GPU facts (doctor.probe.gpu.GpuFacts: read, never
    probed). `python` is the Python torch's facts (PythonTorch) or None."""
    reasons: list[str] = []
    evidence: list[Evidence] = []
    if version is None:
        if python is not None and python.base_version:  # None: version.py holds no PEP 440 version
            version = python.base_version
            reasons.append(f"torch {version}: the installed Python torch's version")
            evidence.extend(python.evidence)
        else:
            version = newest_release()
            reasons.append(f"torch {version}: no Python torch installed, so the newest release the catalog knows")
    published = published_variants(version, system, machine)
    if published is None:
        fallback = newest_release()
        published = published_variants(fallback, system, machine) or ["cpu"]
        reasons.append(f"torch {release_of(version)} is not in the catalog; judged with {release_of(fallback)}'s variants")

    if backend is not None and backend.value:
        variant = validate_backend(backend.value, backend.origin)
        reasons.append(f"{backend.origin}={backend.value}: an explicit backend overrides detection")
        if variant not in published:
            reasons.append(f"{variant} is not published for torch {release_of(version)} per the catalog "
                           f"(published: {', '.join(published)}); honoured as given")
        if backend.origin == BACKEND_ENV:
            evidence.append(Evidence("env", BACKEND_ENV, backend.value))
        return Recommendation(variant, version, reasons, "override", [], evidence)

    if system == "Linux" and machine.lower() in ("aarch64", "arm64"):
        reasons.append("Linux aarch64 has no libtorch zip, only wheels (fetch-libtorch --from-wheel): "
                       "their variants are assumed to be the x86_64 list")
    if system == "Darwin":
        reasons.append("macOS: libtorch-macos-arm64 is the one build; it includes MPS (Apple GPU) support")
        if gpu.apple and gpu.apple.rosetta:
            reasons.append("this Python runs under Rosetta: use a native arm64 Python and libtorch")
        return Recommendation("cpu", version, reasons, "policy", [Considered("cpu", True, "the only macOS build")], evidence)

    nv = gpu.nvidia
    considered: list[Considered] = []
    wants_cuda = gpu.usable_nvidia or (nv.override is not None and not nv.gpus)
    if wants_cuda:
        pick = _pick_cuda(machine, version, gpu, published, reasons, considered)
        evidence.extend(nv.evidence[:3])
        if pick:
            return Recommendation(pick, version, reasons, "policy", considered, evidence)
    elif nv.present and nv.unreachable:
        reasons.append(f"an NVIDIA GPU seems present but cannot be used ({nv.unreachable}: see the findings)")
    elif nv.present and nv.problems:
        reasons.append("the NVIDIA GPUs could not be determined: "
                       + "; ".join(f"{p.probe} {p.error}" for p in nv.problems))
    elif nv.reachable and not nv.visible_gpus:
        reasons.append(f"NVIDIA GPUs exist but none is visible: {nv.visible_note}")

    if gpu.amd.usable and system == "Linux":
        pick = _pick_rocm(version, gpu, published, reasons, considered)
        evidence.extend(gpu.amd.evidence[:3])
        if pick:
            return Recommendation(pick, version, reasons, "policy", considered, evidence)
    elif gpu.amd.present and gpu.amd.unusable:
        reasons.append(f"an AMD GPU seems present but cannot be used ({gpu.amd.unusable}: see the findings)")

    if not wants_cuda and not gpu.amd.usable:
        reasons.append("no usable GPU: the CPU build")
    considered.append(Considered("cpu", True, "always works"))
    return Recommendation("cpu", version, reasons, "policy", considered, evidence)


def cuda_sorted(variants: list[str]) -> list[str]:
    """The CUDA variants among `variants`, newest CUDA first."""
    cuda = [v for v in variants if cuda_of_variant(v)]
    return sorted(cuda, key=lambda v: version_tuple(cuda_of_variant(v) or "0"), reverse=True)


def _pick_cuda(machine: str, version: str, gpu, published: list[str], reasons: list[str], considered: list[Considered]) -> str | None:
    nv = gpu.nvidia
    visible = nv.visible_gpus
    if visible:
        names = "; ".join(f"{g.name} ({g.compute_capability or 'compute capability unknown'})" for g in visible)
        reasons.append(f"{len(visible)} visible NVIDIA GPU{'s' * (len(visible) != 1)}: {names}")
    else:
        reasons.append(f"no GPU visible here; {nv.override and 'DOCTOR_CUDA_DRIVER_VERSION=' + nv.override} "
                       "stands for the target machine (architectures not checked)")
    if nv.driver_version or nv.driver_cuda_version:
        what = f"driver {nv.driver_version}" if nv.driver_version else "the driver"
        cuda = f", supports CUDA {nv.driver_cuda_version} ({nv.driver_cuda_source})" if nv.driver_cuda_version else ""
        reasons.append(f"{what} ({nv.driver_version_source or 'version unknown'}){cuda}")
    fitting: list[tuple[str, object, object]] = []  # (variant, driver verdict, arch list), newest first
    for variant in cuda_sorted(published):
        cuda = cuda_of_variant(variant) or ""
        verdict = driver_verdict(cuda, nv.driver_version, nv.driver_cuda_version, nv.driver_platform)
        if verdict.status == "too-old":
            considered.append(Considered(variant, False, verdict.why))
            continue
        archs = arch_list(variant, version, machine)
        missing = [f"{g.name} ({g.compute_capability})" for g in uncovered(archs, visible)] if archs else []
        if missing:
            considered.append(Considered(variant, False, f"its architectures ({archs.label}) lack {', '.join(missing)}"))
            continue
        arch_text = (f"its architectures ({archs.label}{', assumed' if archs.assumed else ''}) cover every visible GPU"
                     if archs else "its architecture list is not in the catalog (not checked)")
        driver_text = {"ok": "the driver supports it", "ptx-jit": "the driver meets its floor, not its toolkit's driver",
                       "unknown": "the driver version is unknown (not checked)"}[verdict.status]
        considered.append(Considered(variant, True, f"{driver_text}; {arch_text}"))
        fitting.append((variant, verdict, archs))
    # Among the fitting variants, one the driver fully supports beats a newer one that would
    # draw the cuda.ptx-jit warning; only when every fitting variant needs PTX leniency, take it.
    clean = [f for f in fitting if f[1].status != "ptx-jit"]
    if fitting:
        variant, verdict, archs = (clean or fitting)[0]
        cuda = cuda_of_variant(variant) or ""
        reasons.append(f"{variant}: the newest torch {release_of(version)} variant whose CUDA {cuda} line the driver runs "
                       f"and whose architectures cover every visible GPU")
        if clean and fitting[0][0] != variant:
            reasons.append(f"preferred to the newer {fitting[0][0]}: {fitting[0][1].why}")
        if verdict.status == "ptx-jit":
            reasons.append(verdict.why)
        if archs is not None and archs.assumed:
            reasons.append(archs.note)
        return variant
    if not any(c.variant.startswith("cu") for c in considered):
        reasons.append(f"torch {release_of(version)} has no CUDA variant for this platform")
    else:
        reasons.append(f"no CUDA variant of torch {release_of(version)} fits: "
                       + "; ".join(f"{c.variant}: {c.why}" for c in considered if not c.ok))
        reasons.append("so the CPU build — or upgrade the driver / pick another torch release (see the findings)")
    return None


def rocm_sorted(variants: list[str]) -> list[str]:
    """The ROCm variants among `variants`, newest ROCm first."""
    rocm = [v for v in variants if v.startswith("rocm")]
    return sorted(rocm, key=lambda v: version_tuple(v[4:]), reverse=True)


def _pick_rocm(version: str, gpu, published: list[str], reasons: list[str], considered: list[Considered]) -> str | None:
    targets = sorted({g.gfx for g in gpu.amd.gpus})
    reasons.append(f"{len(gpu.amd.gpus)} AMD GPU{'s' * (len(gpu.amd.gpus) != 1)} ({', '.join(targets)}) with /dev/kfd access")
    unknown: str | None = None
    for variant in rocm_sorted(published):
        row = gfx_list(variant)
        if row is None:
            considered.append(Considered(variant, True, "its gfx list is not in the catalog (not checked)"))
            unknown = unknown or variant
            continue
        missing = [t for t in targets if t not in row.targets]
        if missing:
            considered.append(Considered(variant, False, f"its gfx targets lack {', '.join(missing)}"))
            continue
        considered.append(Considered(variant, True, f"its gfx targets include {', '.join(targets)}"))
        reasons.append(f"{variant}: the newest torch {release_of(version)} ROCm variant whose gfx targets include "
                       f"{', '.join(targets)} ({row.source})")
        return variant
    if unknown:
        reasons.append(f"{unknown}: the newest torch {release_of(version)} ROCm variant; its gfx list is not in the "
                       "catalog, so the GPU targets are not confirmed")
        return unknown
    reasons.append(f"no ROCm variant of torch {release_of(version)} has {', '.join(targets)}")
    return None
