"""Every GPU of the machine, from every vendor, and what the disk says about each torch build's
GPU libraries.

`detect_gpus` reads files first (PCI devices, the NVIDIA module, the KFD topology) and spawns
commands only where a driver shows itself; the vendor probes run side by side, so the whole
costs one probe timeout at worst. `detect_gpu_builds` reads, once, what the GPU verdicts need
from each build's tree (where its CUDA/ROCm libraries resolve, its rocBLAS gfx kernels).
Facts only: the recommended variant is doctor/catalog/recommend.py, the verdicts
doctor/diagnose/gpu.py; neither is imported here.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import field
from pathlib import PurePath
from typing import Any

from doctor.catalog.cuda import GPU_LIBRARY_PREFIXES, GPU_MAIN_LIBRARY
from doctor.errors import reraise_out_of_resources
from doctor.host import Host
from doctor.model import Evidence
from doctor.probe.apple import AppleFacts, detect_apple
from doctor.probe.devices import PciDevice, ProbeProblem, probe_timeout, scan_pci
from doctor.probe.loader import Resolution
from doctor.probe.nvidia import NvidiaFacts, detect_nvidia
from doctor.probe.rocm import RocmFacts, build_gfx_targets, detect_rocm
from doctor.record import record


@record
class XpuFacts:
    """Intel GPUs: reported, never judged (torch has an `xpu` wheel; libtorch zips have none)."""

    present: bool = False
    devices: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)


@record
class BuildGpuLibraries:
    """One torch build's GPU libraries as the disk shows them (diagnose judges them)."""

    lib_dir: str
    main: str | None = None  # "libtorch_cuda.so" | "libtorch_hip.so" when the tree has it
    needed: list[Resolution] = field(default_factory=list)  # its CUDA/ROCm NEEDED entries, resolved in glibc's order
    needed_evidence: Evidence | None = None
    gfx_targets: list[str] = field(default_factory=list)  # from the bundled rocBLAS kernel files
    gfx_evidence: Evidence | None = None


@record
class GpuFacts:
    """The GPUs of every vendor found here, the torch builds, and the recommendation."""
    nvidia: NvidiaFacts
    amd: RocmFacts
    apple: AppleFacts | None
    intel: XpuFacts
    # The variant that fits: computed by `check` (doctor/catalog/recommend.py) after every fact is
    # in, and kept here so the JSON report keeps `facts.gpu.recommended`. Probes never set it.
    recommended: Any = None
    builds: list[BuildGpuLibraries] = field(default_factory=list)  # per torch build (detect_gpu_builds)
    timeout_s: float = 5.0  # each subprocess's limit (DOCTOR_PROBE_TIMEOUT)
    seconds: float = 0.0  # how long detection took
    problems: list[ProbeProblem] = field(default_factory=list)

    @property
    def usable_nvidia(self) -> bool:
        return self.nvidia.reachable and bool(self.nvidia.visible_gpus)

    @property
    def usable(self) -> bool:
        return self.usable_nvidia or self.amd.usable or bool(self.apple and self.apple.mps_eligible)


def detect_xpu(pci: list[PciDevice]) -> XpuFacts:
    """Intel display devices on the PCI bus."""
    facts = XpuFacts()
    for dev in pci:
        if dev.vendor == "intel":
            facts.present = True
            facts.devices.append(dev.label)
            facts.evidence.append(Evidence("file", f"/sys/bus/pci/devices/{dev.address}", dev.label))
    return facts


def detect_gpus(host: Host, ld_cache: dict[str, list[str]] | None = None) -> GpuFacts:
    """Every vendor's GPUs, probed side by side. `ld_cache` is the parsed /etc/ld.so.cache when
    the caller has already read it."""
    from doctor.probe.loader import read_ld_cache

    start = time.monotonic()
    timeout = probe_timeout(host)
    pci = scan_pci(host)
    if ld_cache is None:
        ld_cache = read_ld_cache(host) if host.system == "Linux" else {}
    with ThreadPoolExecutor(max_workers=3) as pool:
        nvidia = pool.submit(detect_nvidia, host, pci, timeout, ld_cache)
        amd = pool.submit(detect_rocm, host, pci, timeout)
        apple = pool.submit(detect_apple, host, timeout)
        facts = GpuFacts(nvidia.result(), amd.result(), apple.result(), detect_xpu(pci), timeout_s=timeout)
    facts.problems = [*facts.nvidia.problems, *facts.amd.problems, *(facts.apple.problems if facts.apple else [])]
    facts.seconds = round(time.monotonic() - start, 3)
    return facts


def detect_gpu_builds(host: Host, libtorch: Any, python: Any, ld_cache: dict[str, list[str]]) -> list[BuildGpuLibraries]:
    """For each torch build on disk (libtorch candidates, the Python torch's tree): where the
    loader finds the CUDA/ROCm libraries of libtorch_cuda / libtorch_hip (skipped for the active
    install: the loader probe resolves it), and the gfx targets of a ROCm build's rocBLAS."""
    out: list[BuildGpuLibraries] = []
    seen: set[str] = set()
    active = libtorch.active_install if libtorch is not None else None
    for install in (libtorch.candidates if libtorch is not None else []):
        if not install.exists or not install.lib_dir or str(install.lib_dir) in seen:
            continue
        seen.add(str(install.lib_dir))
        libraries = list(install.libraries)
        main = next((m for m in GPU_MAIN_LIBRARY.values() if m in libraries), None)
        facts = BuildGpuLibraries(str(install.lib_dir), main)
        if main and install is not active:
            facts.needed, facts.needed_evidence = gpu_library_needs(host, str(install.lib_dir), main, ld_cache)
        rocm = (install.variant or "").startswith("rocm") or main == GPU_MAIN_LIBRARY["rocm"]
        if rocm:
            facts.gfx_targets, facts.gfx_evidence = build_gfx_targets(host, str(install.lib_dir))
        if main or rocm:
            out.append(facts)
    if python is not None and python.libtorch_root and (python.variant or "").startswith("rocm"):
        lib_dir = str(PurePath(python.location) / "lib")
        if lib_dir not in seen:
            targets, ev = build_gfx_targets(host, lib_dir)
            out.append(BuildGpuLibraries(lib_dir, None, gfx_targets=targets, gfx_evidence=ev))
    return out


def gpu_library_needs(host: Host, lib_dir: str, library: str, ld_cache: dict[str, list[str]],
                      prefixes: tuple[str, ...] = GPU_LIBRARY_PREFIXES) -> tuple[list[Resolution], Evidence | None]:
    """Where the loader finds the CUDA/ROCm libraries (NEEDED entries starting with `prefixes`) of
    libtorch_cuda.so / libtorch_hip.so, in glibc's order. Reads only the dynamic section."""
    from doctor.probe.loader import resolve_needed

    path = PurePath(lib_dir) / library
    try:
        out, elf = resolve_needed(host, path, ld_cache, prefixes)
    except Exception as exc:  # an empty or foreign file: nothing to resolve
        reraise_out_of_resources(exc)
        return [], Evidence("elf", str(path), f"unreadable: {exc}")
    wanted = [r.name for r in out]
    ev = Evidence("elf", str(path), f"NEEDED {', '.join(wanted) or '(no CUDA/ROCm libraries)'}; "
                  f"RUNPATH {':'.join(elf.runpath) or '-'}; RPATH {':'.join(elf.rpath) or '-'}")
    return out, ev
