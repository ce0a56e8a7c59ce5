"""The GPU area: which GPUs exist, whether the driver can be reached, and whether each libtorch
(and the Python torch) can use them. Also the `--require gpu` / `--require cuda` rules.

Findings: cuda.no-device, cuda.driver-too-old, cuda.ptx-jit, cuda.arch-unsupported,
gpu.cpu-build, loader.library-not-found (CUDA/ROCm libraries of libtorch_cuda/libtorch_hip),
rocm.arch-unsupported, rocm.no-device, apple.rosetta, probe.failed.

Pure: facts in (GPU facts with their per-build library facts, the libtorch and Python torch
facts, the platform), findings out. No Host, no file read; words for the probes' raw states
come from doctor/diagnose/gpu_states.py.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import field
from pathlib import PurePath
from typing import Any

from doctor import fixes
from doctor.catalog.cuda import (
    GPU_MAIN_LIBRARY,
    arch_list,
    covers,
    cuda_of_variant,
    driver_verdict,
    gfx_list,
    release_of,
    uncovered,
    version_tuple,
)
from doctor.catalog.recommend import cuda_sorted, known_releases, published_variants, recommend, rocm_sorted
from doctor.diagnose.gpu_states import (
    AMD_UNUSABLE_FIX,
    amd_unusable_why,
    mps_blocker_texts,
    nvidia_unreachable_fix,
    nvidia_unreachable_why,
)
from doctor.model import Area, Evidence, Finding, Level
from doctor.record import record

AREA = "gpu"
# GpuFacts, LibtorchFacts, LibtorchInstall and PythonTorch (doctor.probe.*) are read by attribute:
# this layer imports no probe module.
GpuFacts = Any


@record(frozen=True)
class Platform:
    """The machine the builds are judged for."""

    system: str  # "Linux", "Darwin", "Windows"
    machine: str  # "x86_64", "aarch64", "arm64"


@record
class Build:
    """One torch build to judge: a libtorch tree, the Python torch, or both when they are one tree."""

    label: str
    variant: str | None
    version: str | None
    lib_dir: str | None
    libraries: list[str] = field(default_factory=list)
    python: bool = False  # pip can replace it
    libtorch: bool = True  # fetch-libtorch can replace it
    active: bool = False  # the loader area already checks its libraries
    evidence: list[Evidence] = field(default_factory=list)

    @property
    def cuda(self) -> str | None:
        return cuda_of_variant(self.variant or "")

    @property
    def rocm(self) -> bool:
        return (self.variant or "").startswith("rocm")


def builds_of(libtorch: Any, python: Any) -> list[Build]:
    out: list[Build] = []
    roots = set()
    active = libtorch.active_install if libtorch else None
    for install in (libtorch.candidates if libtorch else []):
        if not install.exists:
            continue
        is_python = "python" in install.origins
        where = "the Python torch's libtorch" if is_python else f"libtorch at {install.root}"
        out.append(Build(f"{where} ({install.label})", install.variant, install.version, install.lib_dir, list(install.libraries),
                         python=is_python, active=install is active, evidence=install.evidence[:2]))
        roots.add(install.root)
    if python is not None and python.libtorch_root not in roots:
        out.append(Build(f"the Python torch ({python.version})", python.variant, python.base_version,
                         str(PurePath(python.location) / "lib") if python.libtorch_root else None,
                         python=True, libtorch=False, evidence=python.evidence[:1]))
    return out


# -- the area --


def gpu_area(gpu: GpuFacts | None, libtorch: Any, python: Any, platform: Platform) -> Area:
    """The GPU area: facts in (gpu.recommended and gpu.builds filled by `check`), findings out."""
    if gpu is None:
        return Area(AREA, "GPU", "not checked")
    builds = builds_of(libtorch, python)
    disk = {b.lib_dir: b for b in gpu.builds}
    findings: list[Finding] = []
    details = _machine_details(gpu)
    findings += _machine_findings(gpu, builds)
    for build in builds:
        lines, found = _judge_build(gpu, build, platform, disk.get(build.lib_dir or ""))
        details += lines
        findings += found
        if not build.active and build.lib_dir and (build.cuda or build.rocm):
            findings += _library_findings(build, disk.get(build.lib_dir))
    rec = gpu.recommended
    if rec is not None:
        details.append(f"recommended variant for torch {rec.version}: {rec.variant}")
        details += [f"    because {r}" for r in rec.reasons]
        details += [f"    {'✓' if c.ok else '✗'} {c.variant}: {c.why}" for c in rec.considered if c.variant != "cpu"]
    details.append(f"GPU probes took {gpu.seconds * 1000:.0f} ms (timeout {gpu.timeout_s:g} s per command)")
    return Area(AREA, "GPU", _summary(gpu), details, _dedupe(findings))


def _dedupe(findings: list[Finding]) -> list[Finding]:
    seen, out = set(), []
    for f in findings:
        key = (f.id, f.subject, f.title)
        if key not in seen:
            seen.add(key)
            out.append(f)
    return out


def _count(names: list[str]) -> str:
    return ", ".join(f"{n} ×{c}" if c > 1 else n for n, c in Counter(names).items())


def _summary(gpu) -> str:
    nv, amd = gpu.nvidia, gpu.amd
    parts = []
    rec = gpu.recommended
    if nv.gpus:
        shown = nv.visible_gpus if nv.reachable else nv.gpus
        head = f"{len(nv.gpus)} NVIDIA GPU{'s' * (len(nv.gpus) != 1)} ({_count([g.name for g in shown or nv.gpus])})"
        if nv.reachable and len(nv.visible_gpus) != len(nv.gpus):
            head += f", {len(nv.visible_gpus)} visible"
        parts.append(head)
    elif nv.present:
        parts.append("NVIDIA driver or device present")
    if nv.driver_version or nv.driver_cuda_version:
        parts.append(f"driver {nv.driver_version or 'unknown'}" + (f" (CUDA {nv.driver_cuda_version})" if nv.driver_cuda_version else ""))
    if nv.present and not nv.reachable and nv.unreachable:
        parts.append("unreachable")
    if amd.gpus:
        parts.append(f"{len(amd.gpus)} AMD GPU{'s' * (len(amd.gpus) != 1)} ({_count([g.gfx for g in amd.gpus])})")
    elif amd.present:
        parts.append("AMD GPU present")
    if gpu.apple is not None:
        a = gpu.apple
        chip = "Apple silicon" if a.apple_silicon else "Intel Mac" if a.apple_silicon is False else "Mac"
        parts.append(f"{chip}{' under Rosetta' if a.rosetta else ''}, macOS {a.macos_version or '?'}: MPS "
                     + ("available" if a.mps_eligible else "unavailable"))
    if gpu.intel.present and not parts:
        parts.append(f"Intel GPU ({len(gpu.intel.devices)}) — reported only")
    if not parts:
        parts.append("no GPU found (CPU only)")
    if rec is not None:
        parts.append(f"recommended: {rec.variant}")
    return "; ".join(parts)


def _machine_details(gpu) -> list[str]:
    nv, amd = gpu.nvidia, gpu.amd
    out = []
    if nv.driver_version:
        module = f", {nv.kernel_module} kernel module" if nv.kernel_module else ""
        out.append(f"NVIDIA driver {nv.driver_version} (from {nv.driver_version_source}{module})")
    if nv.driver_cuda_version:
        out.append(f"the driver supports CUDA {nv.driver_cuda_version} (from {nv.driver_cuda_source})")
    for g in nv.gpus:
        mem = f", {g.memory_mib / 1024:.0f} GiB" if g.memory_mib else ""
        hidden = "" if g.visible else " — hidden by CUDA_VISIBLE_DEVICES"
        cc = g.compute_capability or "unknown compute capability"
        out.append(f"GPU {g.index}: {g.name}{mem}, {cc}{hidden} (from {g.source})")
    if nv.visible_note:
        out.append(nv.visible_note)
    if nv.smi_message and nv.smi_status == "ok":
        out.append(f"nvidia-smi: {nv.smi_message}")
    if nv.cuda_init:
        out.append(f"cuInit: {nv.cuda_init}")
    if nv.wsl:
        out.append("WSL: the Windows NVIDIA driver serves this Linux (/usr/lib/wsl/lib); Windows driver floors apply")
    if nv.nixos and nv.present:
        out.append("NixOS: the driver libraries live in /run/opengl-driver/lib")
    if nv.override:
        out.append(f"DOCTOR_CUDA_DRIVER_VERSION={nv.override} overrides the detected driver")
    for d in nv.pci_devices:
        out.append(f"PCI NVIDIA device {d}")
    for g in amd.gpus:
        out.append(f"AMD GPU {g.label}")
    if amd.present:
        kfd = "/dev/kfd read-write" if amd.kfd_writable else "/dev/kfd not writable" if amd.kfd else "no /dev/kfd"
        out.append(f"ROCm: {kfd}; installed ROCm {amd.rocm_version or 'none'} (wheels and libtorch bundle their own)")
    for d in gpu.intel.devices:
        out.append(f"Intel GPU {d} (torch's xpu wheels only; reported, not judged)")
    if gpu.apple is not None:
        out += [f"MPS: {r}" for r in mps_blocker_texts(gpu.apple)]
    return out


def _level_for(builds: list[Build], kind: str) -> Level:
    wanted = any((b.cuda if kind == "cuda" else b.rocm) for b in builds)
    return Level.ERROR if wanted else Level.WARNING


def _machine_findings(gpu, builds: list[Build]) -> list[Finding]:
    nv, amd = gpu.nvidia, gpu.amd
    out: list[Finding] = []
    if nv.present and not nv.reachable and nv.unreachable:
        out.append(Finding(
            "cuda.no-device", _level_for(builds, "cuda"), "an NVIDIA GPU or driver is present, but no GPU can be reached",
            detail=nvidia_unreachable_why(nv),
            fix=nvidia_unreachable_fix(nv),
            area=AREA, evidence=nv.evidence[:6], subject="nvidia",
        ))
    elif nv.reachable and not nv.visible_gpus:
        out.append(Finding(
            "cuda.no-device", _level_for(builds, "cuda"), "CUDA_VISIBLE_DEVICES hides every GPU",
            detail=nv.visible_note, fix="unset CUDA_VISIBLE_DEVICES, or set it to the index of a GPU (nvidia-smi -L lists them)",
            area=AREA, evidence=[Evidence("env", "CUDA_VISIBLE_DEVICES", nv.visible_devices or "")], subject="CUDA_VISIBLE_DEVICES",
        ))
    if amd.present and not amd.usable and amd.unusable:
        out.append(Finding(
            "rocm.no-device", _level_for(builds, "rocm"), "an AMD GPU is present, but ROCm cannot use it",
            detail=amd_unusable_why(amd),
            fix=AMD_UNUSABLE_FIX,
            area=AREA, evidence=amd.evidence[:6], subject="amd",
        ))
    if gpu.apple is not None and gpu.apple.rosetta:
        out.append(Finding(
            "apple.rosetta", Level.WARNING, "this Python runs under Rosetta (x86_64 on Apple silicon)",
            detail="An x86_64 process cannot load the arm64 libtorch and has no MPS; libtorch for macOS ≥ 2.3 is arm64 only.",
            fix="use a native arm64 Python (e.g. `arch -arm64 /usr/bin/python3`, or an arm64 Homebrew/conda), then "
                "doctor fetch-libtorch",
            area=AREA, evidence=gpu.apple.evidence, subject="rosetta",
        ))
    for p in gpu.problems:
        out.append(Finding(
            "probe.failed", Level.WARNING, f"could not determine {p.what}: {p.probe} {p.error}",
            detail=f"The check went on without it ({p.seconds:.1f} s spent). Set DOCTOR_PROBE_TIMEOUT to allow longer.",
            fix="run the command by hand to see why it hangs or fails (a stuck driver often needs `nvidia-smi -pm 1` or a reboot)"
            if p.probe == "nvidia-smi" else "",
            area=AREA, evidence=p.evidence, subject=p.probe,
        ))
    return out


# -- one build --


def _fetch_fix(build: Build, variant: str, version: str | None) -> str:
    version = version or build.version or ""
    lines = []
    if build.libtorch:
        lines.append(fixes.fetch(version, variant))
    if build.python:
        lines.append(fixes.pip_torch(version, variant, force=True))
    return "\n".join(lines)


def _judge_build(gpu, build: Build, platform: Platform, disk) -> tuple[list[str], list[Finding]]:
    variant = build.variant or "unknown"
    if build.cuda:
        return _judge_cuda(gpu, build, platform)
    if build.rocm:
        return _judge_rocm(gpu, build, platform, disk)
    if variant == "cpu" or variant == "unknown" and not build.libraries:
        return _judge_cpu(gpu, build, platform)
    if variant in ("cuda", "rocm"):
        return [f"{build.label}: a {variant.upper()} build of unknown version; its driver and architecture needs are not checked"], []
    return [f"{build.label}: variant {variant} (not judged)"], []


def _judge_cpu(gpu, build: Build, platform: Platform) -> tuple[list[str], list[Finding]]:
    if not build.version:
        return [f"{build.label}: CPU build"], []
    rec = recommend(gpu, platform.system, platform.machine, version=build.version)
    darwin = platform.system == "Darwin"
    if rec.variant == "cpu" or not gpu.usable or darwin:
        return [f"{build.label}: CPU build" + (" (fits: no usable GPU)" if not gpu.usable and not darwin else "")], []
    what = "NVIDIA" if rec.variant.startswith("cu") else "AMD"
    return [f"{build.label}: CPU build on a machine with a usable {what} GPU"], [Finding(
        "gpu.cpu-build", Level.WARNING, f"{build.label} is a CPU build, but this machine has a usable {what} GPU",
        detail=f"It will never use the GPU ('Torch not compiled with CUDA enabled'). {rec.variant} fits: " + "; ".join(rec.reasons[-2:]),
        fix=_fetch_fix(build, rec.variant, build.version),
        area=AREA, evidence=build.evidence + gpu.nvidia.evidence[:2], subject=build.label,
    )]


def _judge_cuda(gpu, build: Build, platform: Platform) -> tuple[list[str], list[Finding]]:
    nv = gpu.nvidia
    cuda = build.cuda or ""
    lines = [f"{build.label}: CUDA {cuda} build"]
    findings: list[Finding] = []
    if not nv.present and not nv.override:
        lines.append("    no NVIDIA GPU here: it will run on the CPU only")
        return lines, findings
    verdict = driver_verdict(cuda, nv.driver_version, nv.driver_cuda_version, nv.driver_platform)
    lines.append(f"    driver: {verdict.status} — {verdict.why}")
    if verdict.status == "too-old":
        alt = _older_variant_for_driver(build, nv, platform)
        alt_text = f"or fetch {alt} (the newest torch {release_of(build.version or '')} variant this driver runs)" if alt else \
            "no variant of this release runs on this driver"
        fix_lines = [f"upgrade the NVIDIA driver to ≥ {verdict.floor}"]
        if alt:
            fix_lines.append(_fetch_fix(build, alt, build.version))
        findings.append(Finding(
            "cuda.driver-too-old", Level.ERROR, f"{build.label} needs a newer NVIDIA driver",
            detail=f"{verdict.why}. Running it fails with 'The NVIDIA driver on your system is too old' / "
                   f"'CUDA driver version is insufficient for CUDA runtime version'; {alt_text}.",
            fix="\n".join(fix_lines), area=AREA,
            evidence=[e for e in nv.evidence if "version" in e.source or "nvidia-smi" in e.source][:3] + build.evidence[:1],
            subject=build.label,
        ))
    elif verdict.status == "ptx-jit":
        findings.append(Finding(
            "cuda.ptx-jit", Level.WARNING, f"{build.label}: the driver is older than CUDA {cuda}'s own driver",
            detail=f"{verdict.why} (PTX of CUDA {cuda} needs driver ≥ {verdict.toolkit}). Precompiled kernels run; "
                   "JIT-compiled code (+PTX targets, torch.compile/Triton, extensions) can fail with "
                   "'the provided PTX was compiled with an unsupported toolchain'.",
            fix=fixes.driver_upgrade(verdict.toolkit),
            area=AREA, evidence=[e for e in nv.evidence if "version" in e.source][:2] + build.evidence[:1], subject=build.label,
        ))
    archs = arch_list(build.variant or "", build.version, platform.machine)
    if archs is None:
        lines.append(f"    architectures of {build.variant} are not in the catalog: not checked")
        return lines, findings
    lines.append(f"    architectures: {archs.label}" + (f" (assumed: {archs.note})" if archs.assumed else ""))
    for g in nv.visible_gpus:
        if not g.compute_capability:
            lines.append(f"    GPU {g.index} ({g.name}): compute capability unknown, not checked")
            continue
        cover = covers(archs, g.compute_capability)
        lines.append(f"    GPU {g.index} ({g.name}, {g.compute_capability}): {'runs via ' + cover.how if cover.ok else cover.how}")
        if not cover.ok:
            alt = _variant_with_arch(build, gpu, platform)
            sm = "sm_" + g.compute_capability.replace(".", "")
            fix = _fetch_fix(build, alt[0], alt[1]) if alt else "no published variant has this architecture: build libtorch from source"
            findings.append(Finding(
                "cuda.arch-unsupported", Level.ERROR,
                f"{build.label} has no code for GPU {g.index} ({g.name}, compute capability {g.compute_capability})",
                detail=f"It carries {archs.label}; {cover.how}. CUDA fails with 'no kernel image is available for execution on "
                       f"the device' (torch warns: '{sm} is not compatible with the current PyTorch installation')."
                       + (f" {alt[2]}" if alt else ""),
                fix=fix, area=AREA, evidence=g.evidence[:1] + build.evidence[:1], subject=f"{build.label} / GPU {g.index}",
            ))
    return lines, findings


def _driver_runs(variant: str, nv) -> bool:
    """Whether this driver meets the floor of the variant's CUDA line."""
    v = driver_verdict(cuda_of_variant(variant) or "", nv.driver_version, nv.driver_cuda_version, nv.driver_platform)
    return v.status != "too-old"


def _older_variant_for_driver(build: Build, nv, platform: Platform) -> str | None:
    variants = cuda_sorted(published_variants(build.version or "", platform.system, platform.machine) or [])
    return next((v for v in variants if _driver_runs(v, nv)), None)


def _variant_with_arch(build: Build, gpu, platform: Platform) -> tuple[str, str, str] | None:
    """A variant whose architectures cover every visible GPU: this release first (one the driver
    runs, then any), else the newest release that has one. (variant, version, note)."""
    nv = gpu.nvidia

    def fits(variant: str, version: str) -> bool:
        archs = arch_list(variant, version, platform.machine)
        return archs is not None and not uncovered(archs, nv.visible_gpus)

    version = build.version or ""
    same = [v for v in cuda_sorted(published_variants(version, platform.system, platform.machine) or []) if fits(v, version)]
    for v in same:
        if _driver_runs(v, nv):
            return v, version, f"{v} of torch {release_of(version)} has it."
    if same:
        return same[0], version, f"{same[0]} of torch {release_of(version)} has it (and needs a newer driver)."
    for release in known_releases():
        for v in cuda_sorted(published_variants(release, platform.system, platform.machine) or []):
            if fits(v, release):
                newer = version_tuple(release) > version_tuple(release_of(version) or "0")
                return v, f"{release}.0", (f"Torch {release_of(version)} has no variant for it; {v} of torch {release} has it"
                                           + ("" if newer else " (an older release)") + ".")
    return None


def _judge_rocm(gpu, build: Build, platform: Platform, disk) -> tuple[list[str], list[Finding]]:
    amd = gpu.amd
    lines = [f"{build.label}: ROCm build ({build.variant})"]
    if not amd.gpus:
        lines.append("    no AMD GPU here: it will run on the CPU only")
        return lines, []
    targets, ev = (list(disk.gfx_targets), disk.gfx_evidence) if disk is not None else ([], None)
    source = f"its rocBLAS kernels ({ev.source})" if ev else ""
    if not targets:
        row = gfx_list(build.variant or "")
        if row is None:
            lines.append("    gfx targets: not in the tree nor the catalog; not checked")
            return lines, []
        targets, source = list(row.targets), row.source
    lines.append(f"    gfx targets: {' '.join(targets)} (from {source})")
    findings = []
    for g in amd.gpus:
        if g.gfx in targets:
            continue
        alt = _rocm_variant_with(g.gfx, platform)
        findings.append(Finding(
            "rocm.arch-unsupported", Level.ERROR, f"{build.label} has no code for AMD GPU {g.label}",
            detail=f"It carries {' '.join(targets)} (from {source}); ROCm has no forward compatibility, so {g.gfx} fails with "
                   "'HIP error: invalid device function'." + (f" {alt[0]} of torch {alt[1]} has {g.gfx}." if alt else ""),
            fix=_fetch_fix(build, alt[0], alt[1] + ".0") if alt else "build libtorch from source with PYTORCH_ROCM_ARCH=" + g.gfx,
            area=AREA, evidence=g.evidence[:1] + ([ev] if ev else []) + build.evidence[:1], subject=f"{build.label} / node {g.node}",
        ))
    return lines, findings


def _rocm_variant_with(gfx: str, platform: Platform) -> tuple[str, str] | None:
    for release in known_releases():
        for v in rocm_sorted(published_variants(release, platform.system, platform.machine) or []):
            row = gfx_list(v)
            if row and gfx in row.targets:
                return v, release
    return None


def _library_findings(build: Build, disk) -> list[Finding]:
    main = GPU_MAIN_LIBRARY["cuda" if build.cuda else "rocm"]
    if not build.lib_dir or main not in build.libraries or disk is None or disk.main != main:
        return []
    resolutions, ev = disk.needed, disk.needed_evidence
    missing = [r.name for r in resolutions if r.path is None]
    if not missing:
        return []
    is_driver = all(n.startswith("libcuda.so") for n in missing)
    return [Finding(
        "loader.library-not-found", Level.ERROR,
        f"{build.label}: {main} needs {', '.join(missing)}, found nowhere",
        detail="Neither its RUNPATH/RPATH, LD_LIBRARY_PATH, the ld.so cache nor the default folders hold "
               + ("them." if len(missing) > 1 else "it.") + " Loading it fails with 'cannot open shared object file'.",
        fix=("install the NVIDIA driver (libcuda.so.1 comes with it; NixOS: /run/opengl-driver/lib)" if is_driver else
             "fetch the complete libtorch (the zip bundles the CUDA libraries), or install the matching CUDA runtime "
             "(pip nvidia-* wheels / the toolkit) and add its lib folder to LD_LIBRARY_PATH"),
        area=AREA, evidence=[ev] if ev else [], subject=f"{build.lib_dir}/{main}",
    )]


# -- requirements --


def meets_gpu(gpu: GpuFacts | None) -> tuple[bool, str]:
    """`--require gpu`: at least one GPU a torch build could use."""
    if gpu is None:
        return False, "GPUs were not checked"
    nv = gpu.nvidia
    if gpu.usable_nvidia:
        return True, f"{len(nv.visible_gpus)} NVIDIA GPU(s): {_count([g.name for g in nv.visible_gpus])}"
    if gpu.amd.usable:
        return True, f"{len(gpu.amd.gpus)} AMD GPU(s): {_count([g.gfx for g in gpu.amd.gpus])}"
    if gpu.apple is not None and gpu.apple.mps_eligible:
        return True, "Apple silicon with MPS"
    why = nvidia_unreachable_why(nv) or (nv.visible_note if nv.reachable else "") or amd_unusable_why(gpu.amd)
    if gpu.apple is not None and gpu.apple.mps_blockers:
        why = why or "; ".join(mps_blocker_texts(gpu.apple))
    return False, why or "no GPU found"


def meets_cuda(gpu: GpuFacts | None, install: Any) -> tuple[bool, str]:
    """`--require cuda`: a reachable NVIDIA GPU, and (given a build) a CUDA build whose driver
    floor is met and whose architectures cover every visible GPU."""
    if gpu is None:
        return False, "GPUs were not checked"
    nv = gpu.nvidia
    if not gpu.usable_nvidia:
        return False, nvidia_unreachable_why(nv) or (nv.visible_note if nv.reachable else "") or "no NVIDIA GPU found"
    if install is None:
        return True, f"{len(nv.visible_gpus)} NVIDIA GPU(s), driver {nv.driver_version or 'unknown'}"
    variant = install.variant or ""
    # a PythonTorch says "2.13.0+cu130" in `version` and the release in `base_version`
    version = getattr(install, "base_version", None) or install.version
    cuda = cuda_of_variant(variant)
    if cuda is None:
        return False, f"the build is {variant or 'of unknown variant'}, not a CUDA build"
    verdict = driver_verdict(cuda, nv.driver_version, nv.driver_cuda_version, nv.driver_platform)
    if verdict.status == "too-old":
        return False, verdict.why
    archs = arch_list(variant, version, gpu_machine(install))
    lacking = uncovered(archs, nv.visible_gpus) if archs is not None else []
    if lacking:
        return False, f"{variant} has no code for {lacking[0].name} ({lacking[0].compute_capability})"
    return True, f"{variant} runs on {_count([g.name for g in nv.visible_gpus])} (driver {nv.driver_version or nv.driver_cuda_version})"


def gpu_machine(install: Any) -> str:
    """The CPU architecture the build is for (its ELF machine), x86_64 when unknown."""
    return getattr(install, "elf_machine", None) or "x86_64"
