"""Every GPU of the machine, from every vendor, and the libtorch variant that fits it.

`detect_gpus` reads files first (PCI devices, the NVIDIA module, the KFD topology) and spawns
commands only where a driver shows itself; the vendor probes run side by side, so the whole
costs one probe timeout at worst. Facts only: the verdicts live in doctor/diagnose/gpu.py.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import TYPE_CHECKING

from doctor.host import Host
from doctor.model import Evidence
from doctor.probe.apple import AppleFacts, detect_apple
from doctor.probe.devices import PciDevice, ProbeProblem, probe_timeout, scan_pci
from doctor.probe.nvidia import NvidiaFacts, detect_nvidia
from doctor.probe.rocm import RocmFacts, detect_rocm

if TYPE_CHECKING:
    from doctor.recommend import Recommendation


@dataclass
class XpuFacts:
    """Intel GPUs: reported, never judged (torch has an `xpu` wheel; libtorch zips have none)."""

    present: bool = False
    devices: list[str] = field(default_factory=list)
    evidence: list[Evidence] = field(default_factory=list)


@dataclass
class GpuFacts:
    nvidia: NvidiaFacts
    amd: RocmFacts
    apple: AppleFacts | None
    intel: XpuFacts
    recommended: Recommendation | None = None  # the newest variant that fits (doctor/recommend.py)
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


def detect_gpus(host: Host, recommend: bool = True, backend: str | None = None,
                ld_cache: dict[str, list[str]] | None = None) -> GpuFacts:
    """Every vendor's GPUs, probed side by side, and (unless `recommend` is False) the variant that fits.
    `ld_cache` is the parsed /etc/ld.so.cache when the caller has already read it."""
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
    if recommend:
        from doctor.recommend import recommend_variant

        facts.recommended = recommend_variant(host, None, facts, backend=backend)
    facts.seconds = round(time.monotonic() - start, 3)
    return facts


def gpu_library_needs(host: Host, lib_dir: str, library: str, ld_cache: dict[str, list[str]],
                      prefixes: tuple[str, ...]) -> tuple[list, Evidence | None]:
    """Where the loader finds the CUDA/ROCm libraries (NEEDED entries starting with `prefixes`) of
    libtorch_cuda.so / libtorch_hip.so, in glibc's order. Reads only the dynamic section."""
    from doctor.probe.loader import resolve_needed

    path = PurePath(lib_dir) / library
    try:
        out, elf = resolve_needed(host, path, ld_cache, prefixes)
    except Exception as exc:  # an empty or foreign file: nothing to resolve
        return [], Evidence("elf", str(path), f"unreadable: {exc}")
    wanted = [r.name for r in out]
    ev = Evidence("elf", str(path), f"NEEDED {', '.join(wanted) or '(no CUDA/ROCm libraries)'}; "
                  f"RUNPATH {':'.join(elf.runpath) or '-'}; RPATH {':'.join(elf.rpath) or '-'}")
    return out, ev
