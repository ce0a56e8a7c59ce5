"""The machine: OS, kernel, CPU and SIMD, memory, glibc and libstdc++, free disk."""

from __future__ import annotations

import re
from dataclasses import field

from doctor.host import Host
from doctor.model import Evidence
from doctor.probe.versions import parse_os_release
from doctor.record import record

SIMD_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512bw", "avx512_vnni", "avx512_bf16", "amx_tile", "neon", "asimd", "sve")


@record
class SystemFacts:
    """The operating system, libc, CPU and memory."""
    os: str  # "Linux", "Darwin", "Windows"
    distribution: str | None
    kernel: str | None
    machine: str
    cpu_model: str | None
    logical_cores: int | None
    physical_cores: int | None
    simd: list[str]
    memory_bytes: int | None
    glibc: str | None
    libstdcxx: str | None  # path of the system libstdc++.so.6
    glibcxx_max: str | None  # newest GLIBCXX_3.4.N it provides
    cxxabi_max: str | None
    cache_dir: str  # where libtorch would be cached (LIBTORCH_HOME)
    cache_free_bytes: int | None
    evidence: list[Evidence] = field(default_factory=list)
    sudo_user: str | None = None  # SUDO_USER when running as root through sudo: this is root's environment
    libc: str | None = None  # "glibc", "musl" (Linux); None elsewhere or when neither answered


@record(frozen=True)
class CpuInfo:
    """The CPU's model and the instruction sets torch's kernels use."""
    model: str
    logical: int  # processor entries
    physical_cores: int | None  # distinct (physical id, core id), when the kernel says
    mhz: float | None  # the highest "cpu MHz" line (x86 only)
    flags: frozenset[str] = field(default_factory=frozenset)
    arch: str = "unknown"  # "x86" | "arm" | "unknown"


def parse_cpuinfo(text: str) -> CpuInfo:
    """/proc/cpuinfo (x86 or aarch64) to the few facts a peak estimate needs."""
    blocks = [b for b in re.split(r"\n\s*\n", text) if b.strip()]
    model = ""
    flags: frozenset[str] = frozenset()
    mhz: list[float] = []
    cores: set[tuple[str, str]] = set()
    logical = 0
    arch = "unknown"
    for block in blocks:
        fields: dict[str, str] = {}
        for line in block.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip().lower()] = value.strip()
        if "processor" in fields and fields["processor"].isdigit():
            logical += 1
        if not model:
            model = fields.get("model name") or fields.get("hardware") or ""
        if not flags:
            if "flags" in fields:
                flags, arch = frozenset(fields["flags"].split()), "x86"
            elif "features" in fields:
                flags, arch = frozenset(fields["features"].split()), "arm"
        try:
            mhz.append(float(fields["cpu mhz"]))
        except (KeyError, ValueError):
            pass
        if "core id" in fields:
            cores.add((fields.get("physical id", "0"), fields["core id"]))
    if not model and arch == "arm":
        model = "aarch64"
    return CpuInfo(model or "unknown", logical, len(cores) or None, max(mhz) if mhz else None, flags, arch)


def parse_meminfo(text: str) -> int | None:
    m = re.search(r"^MemTotal:\s+(\d{1,18})\s+kB", text, re.M)
    return int(m.group(1)) * 1024 if m else None


_GLIBCXX = re.compile(rb"GLIBCXX_3\.4(?:\.(\d{1,9}))?\x00")
_CXXABI = re.compile(rb"CXXABI_1\.3(?:\.(\d{1,9}))?\x00")


def newest_symbol_versions(data: bytes) -> tuple[str | None, str | None]:
    """Newest GLIBCXX_3.4.N and CXXABI_1.3.N a libstdc++ defines (its version strings)."""
    def newest(pattern: re.Pattern, prefix: str) -> str | None:
        found = [int(m.group(1) or 0) for m in pattern.finditer(data)]
        if not found:
            return None
        n = max(found)
        return f"{prefix}.{n}" if n else prefix
    return newest(_GLIBCXX, "GLIBCXX_3.4"), newest(_CXXABI, "CXXABI_1.3")


def detect_system(host: Host, ld_cache: dict[str, list[str]], cache_dir: str) -> SystemFacts:
    evidence = []
    distro = kernel = None
    os_release = host.read_text("/etc/os-release")
    if os_release:
        info = parse_os_release(os_release)
        distro = info.get("PRETTY_NAME") or info.get("NAME")
        evidence.append(Evidence("file", "/etc/os-release", f"PRETTY_NAME={distro}"))
    kernel_text = host.read_text("/proc/sys/kernel/osrelease")
    if kernel_text:
        kernel = kernel_text.strip()
    cpu = parse_cpuinfo(host.read_text("/proc/cpuinfo") or "")
    simd = [f for f in SIMD_FLAGS if f in cpu.flags]
    model = cpu.model if cpu.model != "unknown" else None
    logical, physical = cpu.logical or None, cpu.physical_cores
    if model:
        evidence.append(Evidence("file", "/proc/cpuinfo", f"{model}; {' '.join(simd)}"))
    memory = parse_meminfo(host.read_text("/proc/meminfo") or "")
    libstdcxx = next(iter(ld_cache.get("libstdc++.so.6", [])), None)
    glibcxx = cxxabi = None
    if libstdcxx:
        data = host.read_bytes(libstdcxx)
        if data:
            glibcxx, cxxabi = newest_symbol_versions(data)
            evidence.append(Evidence("elf", libstdcxx, f"newest {glibcxx}, {cxxabi}"))
    if host.glibc:
        evidence.append(Evidence("derived", "confstr(CS_GNU_LIBC_VERSION)", f"glibc {host.glibc}"))
    if host.system != "Linux" and host.root.as_posix() == "/":
        # psutil knows macOS and Windows; /proc is Linux-only.
        import psutil

        memory = memory or psutil.virtual_memory().total
        logical = logical or psutil.cpu_count()
        physical = physical or psutil.cpu_count(logical=False)
    return SystemFacts(
        os=host.system,
        distribution=distro,
        kernel=kernel,
        machine=host.machine,
        cpu_model=model,
        logical_cores=logical,
        physical_cores=physical,
        simd=simd,
        memory_bytes=memory,
        glibc=host.glibc,
        libstdcxx=libstdcxx,
        glibcxx_max=glibcxx,
        cxxabi_max=cxxabi,
        cache_dir=cache_dir,
        cache_free_bytes=host.disk_free(cache_dir),
        evidence=evidence,
        sudo_user=(host.sudo_user() or (None,))[0],
        libc="glibc" if host.glibc else "musl" if host.musl() else None,
    )
