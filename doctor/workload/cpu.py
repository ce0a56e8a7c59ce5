"""What a CPU could do at best, and which BLAS torch uses: pure functions of text.

A GEMM figure means little alone (field-notes: a laptop's BLAS ran at ~4 GFLOP/s and only
a comparison with what the chip could do showed it was broken). The peak estimate is
cores × frequency × FLOPs per cycle, the last from the SIMD width in /proc/cpuinfo's
flags, assuming two FMA pipes per core as server and desktop cores since Haswell / Zen
have — and the datapath width where it is narrower than the instruction set: AMD Zen 4
(family 25 with AVX-512) executes AVX-512 on 256-bit units, so it counts as 8 float32 lanes,
not 16; the basis line says so. It is an upper bound (turbo clocks vary), good for "far
below" and not for "exactly at".
"""

from __future__ import annotations

import math
import re

from doctor.probe.system import CpuInfo
from doctor.record import record


def parse_max_freq_khz(text: str | None) -> float | None:
    """/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq (kHz) in MHz."""
    try:
        khz = float((text or "").strip())
    except ValueError:
        return None
    return khz / 1000 if khz > 0 else None


@record(frozen=True)
class Peak:
    gflops: dict[str, float]  # dtype -> estimated peak GFLOP/s
    cores: int
    mhz: float
    simd: str
    flops_per_cycle: int  # float32, per core
    basis: str  # the arithmetic, for the report


def x86_family(text: str | None) -> tuple[str, int | None]:
    """(vendor_id, cpu family) from /proc/cpuinfo's first processor ("", None when absent)."""
    vendor, family = "", None
    for line in (text or "").splitlines()[:64]:
        key, _, value = line.partition(":")
        key, value = key.strip(), value.strip()
        if key == "vendor_id" and not vendor:
            vendor = value[:32]
        elif key == "cpu family" and family is None and value.isdigit() and len(value) < 5:
            family = int(value)
        if not line.strip() and (vendor or family is not None):
            break
    return vendor, family


def simd_of(info: CpuInfo, vendor: str = "", family: int | None = None) -> tuple[str, int]:
    """(name, float32 FLOPs per cycle per core): lanes of the DATAPATH × 2 (FMA) × 2 pipes."""
    f = info.flags
    if info.arch == "x86":
        if "avx512f" in f:
            if vendor == "AuthenticAMD" and family == 25:
                # Zen 4 decodes AVX-512 but runs it as two halves on its 256-bit FMA units.
                return "AVX-512 on 256-bit units (AMD Zen 4, family 25)", 8 * 2 * 2
            return "AVX-512", 16 * 2 * 2
        if "avx2" in f and "fma" in f:
            return "AVX2+FMA", 8 * 2 * 2
        if "avx" in f:
            return "AVX", 8 * 2  # separate add and multiply ports, no FMA
        if "sse2" in f:
            return "SSE2", 4 * 2
        return "scalar", 2
    if info.arch == "arm":
        # SVE's vector length is not in cpuinfo; count it as 128-bit (an underestimate on 256-bit parts).
        if "sve" in f or "asimd" in f:
            return ("SVE" if "sve" in f else "NEON"), 4 * 2 * 2
        return "scalar", 2
    return "unknown", 0


def usable_cores(info: CpuInfo, usable_cpus: int) -> int:
    """Physical cores this process may use: SMT siblings share one core's FMA pipes."""
    logical = max(info.logical, 1)
    physical = info.physical_cores or logical
    per_core = max(1, round(logical / physical))
    return max(1, min(physical, math.ceil(usable_cpus / per_core)))


def estimate_peak(info: CpuInfo, usable_cpus: int, max_mhz: float | None = None, *, vendor: str = "",
                  family: int | None = None) -> Peak | None:
    """The CPU's float32 (and bf16, where native) GEMM peak, or None when it cannot be estimated.

    `vendor` and `family` (see `x86_family`) let it use the datapath width of CPU families
    whose units are narrower than their instruction set.
    """
    simd, per_cycle = simd_of(info, vendor, family)
    mhz = max_mhz or info.mhz
    if not per_cycle or not mhz:
        return None
    cores = usable_cores(info, usable_cpus)
    fp32 = cores * mhz * per_cycle / 1000
    gflops = {"float32": round(fp32, 1)}
    if bf16_native(info):
        gflops["bfloat16"] = round(2 * fp32, 1)  # a bf16 dot instruction does 2 products per fp32 lane
    source = "cpufreq max" if max_mhz else "cpuinfo MHz"
    basis = (f"{cores} core{'s' * (cores != 1)} × {mhz:.0f} MHz ({source}) × {per_cycle} float32 FLOP/cycle "
             f"({simd}, FMA, 2 pipes)")
    return Peak(gflops, cores, mhz, simd, per_cycle, basis)


def bf16_native(info: CpuInfo) -> bool:
    """True when the CPU has bf16 dot-product instructions (else bf16 GEMM is emulated)."""
    f = info.flags
    return bool({"avx512_bf16", "amx_bf16"} & f) if info.arch == "x86" else ("bf16" in f if info.arch == "arm" else False)


# -- torch's build and thread settings ---------------------------------------------------


def parse_torch_config(text: str) -> dict[str, str]:
    """torch.__config__.show(): the BLAS (and its version), LAPACK, CPU capability."""
    out: dict[str, str] = {}
    m = re.search(r"BLAS_INFO=([^,\s]+)", text)
    if m:
        out["blas"] = m.group(1)
    m = re.search(r"LAPACK_INFO=([^,\s]+)", text)
    if m:
        out["lapack"] = m.group(1)
    m = re.search(r"Math Kernel Library Version ([\w.\-]+)", text)
    if m:
        out["blas_version"] = "MKL " + m.group(1).split("-")[0]
    m = re.search(r"OpenBLAS[ -]?([\d.]+)", text)
    if m and "blas_version" not in out:
        out["blas_version"] = "OpenBLAS " + m.group(1)
    m = re.search(r"CPU capability usage:\s*(\S+)", text)
    if m:
        out["cpu_capability"] = m.group(1)
    m = re.search(r"TORCH_VERSION=([^,\s]+)", text)
    if m:
        out["torch_version"] = m.group(1)
    return out


def parse_parallel_info(text: str) -> dict[str, str]:
    """torch.__config__.parallel_info(): each backend's thread count and the env vars it read."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition(" : ")
        if not sep:
            m = re.match(r"ATen parallel backend:\s*(.+)", line.strip())
            if m:
                out["backend"] = m.group(1)
            continue
        key = key.strip()
        m = re.search(r"(\w+)\(\)$", key)
        out[m.group(1) if m else key] = value.strip()
    return out
