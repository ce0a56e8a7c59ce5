"""CUDA and ROCm data: driver floors per CUDA line, the driver each toolkit ships with, and
the GPU architectures each PyTorch build carries. Data first, small lookups after; every row
is tested (tests/catalog/test_catalog_cuda.py), and the floor tests are generated from these rows.

Sources: shared/reference/gpu.md (NVIDIA's minor-version compatibility table, the toolkit
release notes, PyTorch's .ci/manywheel/build_cuda.sh) and PyTorch's
.ci/docker/manywheel/build.sh for the ROCm targets.
"""

from __future__ import annotations

import re

from doctor.formats import version_tuple  # noqa: F401  (re-exported: callers compare versions with it)
from doctor.record import record

# -- driver floors: the oldest driver that runs any toolkit of a CUDA line --


@record(frozen=True)
class DriverFloor:
    """The oldest NVIDIA driver a CUDA line runs on, per platform."""
    first: str  # first CUDA version of the line, "12.0"
    last: str  # last CUDA version of the line, "12.9"
    linux: str
    windows: str


DRIVER_FLOORS: tuple[DriverFloor, ...] = (
    DriverFloor("13.0", "13.9", linux="580", windows="580"),
    DriverFloor("12.0", "12.9", linux="525.60.13", windows="528.33"),
    DriverFloor("11.1", "11.8", linux="450.80.02", windows="452.39"),
    DriverFloor("11.0", "11.0", linux="450.36.06", windows="451.22"),
)

# The driver bundled with each toolkit's GA release: at or above it, PTX from that toolkit
# JIT-compiles; between the floor and this, the runtime works but PTX JIT of newer code can fail.
# Source: NVIDIA CUDA Toolkit release notes, table "CUDA Toolkit and Corresponding Driver
# Versions" (the "CUDA X.Y GA" rows; docs/gpu.md quotes each). Every row is tested.
TOOLKIT_DRIVERS: dict[str, tuple[str, str | None]] = {
    "11.8": ("520.61.05", "520.06"),
    "12.0": ("525.60.13", "527.41"),
    "12.1": ("530.30.02", "531.14"),
    "12.2": ("535.54.03", "536.25"),
    "12.3": ("545.23.06", "545.84"),
    "12.4": ("550.54.14", "551.61"),
    "12.5": ("555.42.02", "555.85"),
    "12.6": ("560.28.03", "560.76"),
    "12.8": ("570.26", "570.65"),
    "12.9": ("575.51.03", "576.02"),
    "13.0": ("580.65.06", None),
    "13.1": ("590.44.01", None),
}


# -- library names: the one list of CUDA / ROCm shared-library names the doctor knows --

# The driver's own libraries (installed with the driver, never bundled by a torch build).
DRIVER_LIBRARIES: tuple[str, ...] = ("libcuda.so.1", "libcuda.so")
NVML_LIBRARIES: tuple[str, ...] = ("libnvidia-ml.so.1",)
# NEEDED entries of libtorch_cuda / libtorch_hip that come from CUDA or ROCm rather than from
# libtorch itself or the C library (prefixes of the soname).
CUDA_LIBRARY_PREFIXES: tuple[str, ...] = ("libcu", "libnv", "libnccl", "libcudnn")
ROCM_LIBRARY_PREFIXES: tuple[str, ...] = (
    "libamdhip", "libhip", "libroc", "libMIOpen", "librccl", "libhsa", "libamd_comgr", "libaotriton", "libmagma",
)
GPU_LIBRARY_PREFIXES: tuple[str, ...] = CUDA_LIBRARY_PREFIXES + ROCM_LIBRARY_PREFIXES
# The torch library that pulls each stack in.
GPU_MAIN_LIBRARY = {"cuda": "libtorch_cuda.so", "rocm": "libtorch_hip.so"}
# libtorch's own libraries that only a CUDA build ships (file-name stems, without lib and the
# extension; torch_cuda also covers 1.x's torch_cuda_cpp / torch_cuda_cu split and torch_cuda_linalg).
CUDA_ONLY_LIBRARIES: tuple[str, ...] = ("c10_cuda", "torch_cuda", "caffe2_nvrtc")


def cuda_only_library(name: str) -> bool:
    """Is `name` (libc10_cuda.so, torch_cuda.dll, libtorch_cuda_linalg.so) a library only a CUDA libtorch has?"""
    stem = name.removeprefix("lib").split(".")[0]
    return stem.startswith(CUDA_ONLY_LIBRARIES)


# -- GPU architectures per PyTorch CUDA build (compute capabilities) --


@record(frozen=True)
class ArchList:
    """The GPU architectures one CUDA variant of a range of torch releases is built for."""
    variant: str  # "cu128"
    first: str  # first torch release (major.minor) the row describes, "2.8"
    last: str  # last one, "2.10"
    archs: tuple[str, ...]  # SASS targets, "7.5", "12.0"
    ptx: str | None = None  # the target also shipped as PTX ("12.0+PTX"), JIT-able on newer GPUs
    machine: str = "x86_64"
    assumed: bool = False  # not in the reference table: a stated assumption, shown to the user
    note: str = ""

    @property
    def label(self) -> str:
        return " ".join(a + ("+PTX" if a == self.ptx else "") for a in self.archs)


_MAXWELL_TO_HOPPER = ("5.0", "6.0", "7.0", "7.5", "8.0", "8.6", "9.0")

ARCH_LISTS: tuple[ArchList, ...] = (
    ArchList("cu118", "2.1", "2.7", ("3.7", *_MAXWELL_TO_HOPPER)),
    ArchList("cu121", "2.1", "2.5", _MAXWELL_TO_HOPPER),
    ArchList("cu124", "2.4", "2.6", _MAXWELL_TO_HOPPER),
    ArchList("cu126", "2.6", "2.13", _MAXWELL_TO_HOPPER),
    ArchList("cu128", "2.7", "2.7", ("7.5", "8.0", "8.6", "9.0", "10.0", "12.0"), ptx="12.0"),
    ArchList("cu128", "2.8", "2.10", ("7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0")),
    ArchList("cu128", "2.11", "2.11", ("7.5", "8.0", "8.6", "9.0", "10.0", "12.0")),
    ArchList("cu129", "2.8", "2.8", ("7.0", "7.5", "8.0", "8.6", "9.0", "10.0", "12.0"), ptx="12.0"),
    ArchList("cu130", "2.9", "2.13", ("7.5", "8.0", "8.6", "9.0", "10.0", "12.0"), ptx="12.0"),
    ArchList("cu130", "2.9", "2.13", ("7.5", "8.0", "8.6", "9.0", "10.0", "11.0", "12.0"), ptx="12.0", machine="aarch64"),
    ArchList(
        "cu132", "2.12", "2.13", ("7.5", "8.0", "8.6", "9.0", "10.0", "12.0"), ptx="12.0", assumed=True,
        note="cu132 is not in the reference table; assumed to match cu130 (CUDA 13 dropped Maxwell, Pascal and Volta)",
    ),
)


# -- ROCm: gfx targets per PyTorch ROCm build (no PTX-like forward compatibility) --


@record(frozen=True)
class GfxList:
    """The AMD GPU targets (gfx…) the ROCm variants are built for."""
    variants: tuple[str, ...]  # "rocm6.0", ...
    targets: tuple[str, ...]
    source: str


_GFX_CLASSIC = ("gfx900", "gfx906", "gfx908", "gfx90a", "gfx1030", "gfx1100")
GFX_LISTS: tuple[GfxList, ...] = (
    GfxList(("rocm5.5", "rocm5.6", "rocm5.7"), _GFX_CLASSIC, "PyTorch .ci/docker/manywheel/build.sh (ROCm < 6.0)"),
    GfxList(("rocm6.0", "rocm6.1", "rocm6.2"), (*_GFX_CLASSIC, "gfx942"), "PyTorch .ci/docker/manywheel/build.sh (ROCm ≥ 6.0)"),
    GfxList(
        ("rocm7.0", "rocm7.1", "rocm7.2"),
        ("gfx900", "gfx906", "gfx908", "gfx90a", "gfx942", "gfx1030", "gfx1100", "gfx1101", "gfx1102",
         "gfx1200", "gfx1201", "gfx950", "gfx1150", "gfx1151"),
        "PyTorch .ci/docker/manywheel/build.sh (ROCm 7.x)",
    ),
)


# -- Apple: MPS --

MPS_MIN_MACOS = "14.0"  # the macOS PyTorch's MPS backend now asks for


# -- lookups --


def parse_cuda_version(value: int) -> str | None:
    """cuDriverGetVersion's integer (also the "found version" in CUDA's errors): 12080 → "12.8"."""
    if value <= 0:
        return None
    return f"{value // 1000}.{(value % 1000) // 10}"


def compare_versions(a: str, b: str) -> int:
    """-1, 0, 1 comparing dotted numbers, missing parts as zeros ("580" == "580.0.0")."""
    ta, tb = version_tuple(a), version_tuple(b)
    n = max(len(ta), len(tb))
    ta, tb = ta + (0,) * (n - len(ta)), tb + (0,) * (n - len(tb))
    return (ta > tb) - (ta < tb)


def cuda_of_variant(variant: str) -> str | None:
    """"cu128" → "12.8", "cu130" → "13.0", "cu92" → "9.2"; None for cpu, rocm, "cuda"."""
    m = re.fullmatch(r"cu(\d+)(\d)", variant)
    return f"{int(m.group(1))}.{m.group(2)}" if m else None


def variant_of_cuda(cuda: str) -> str:
    """"12.8" → "cu128"."""
    major, minor = (version_tuple(cuda) + (0, 0))[:2]
    return f"cu{major}{minor}"


def driver_floor(cuda: str) -> DriverFloor | None:
    """The floor row (both platforms) for a CUDA version ("12.6"), or None when the table has no line for it."""
    for row in DRIVER_FLOORS:
        if compare_versions(row.first, cuda) <= 0 <= compare_versions(row.last, cuda):
            return row
    return None


def floor_driver(cuda: str, platform: str = "linux") -> str | None:
    """The oldest driver that runs CUDA `cuda` on "linux" or "windows"."""
    row = driver_floor(cuda)
    if row is None:
        return None
    return row.windows if platform == "windows" else row.linux


def toolkit_driver(cuda: str, platform: str = "linux") -> str | None:
    row = TOOLKIT_DRIVERS.get(".".join(map(str, version_tuple(cuda)[:2])))
    if row is None:
        return None
    return row[1] if platform == "windows" else row[0]


def cuda_for_driver(driver: str, platform: str = "linux") -> str | None:
    """The newest toolkit whose bundled driver this driver meets (a derived, approximate answer:
    the driver's own cuDriverGetVersion is the real one)."""
    best = None
    for cuda, (linux, windows) in TOOLKIT_DRIVERS.items():
        needed = windows if platform == "windows" else linux
        if needed and compare_versions(driver, needed) >= 0:
            if best is None or compare_versions(cuda, best) > 0:
                best = cuda
    return best


def release_of(version: str) -> str:
    """"2.13.0" → "2.13"."""
    return ".".join(map(str, version_tuple(version)[:2]))


def arch_list(variant: str, version: str | None, machine: str = "x86_64") -> ArchList | None:
    """The architectures a build carries. A row for another release of the same variant is
    returned marked `assumed` (nearest release first), so a verdict never hides a guess."""
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine.lower(), machine.lower())
    rows = [r for r in ARCH_LISTS if r.variant == variant]
    if not rows:
        return None
    exact_machine = [r for r in rows if r.machine == machine] or [r for r in rows if r.machine == "x86_64"]
    release = release_of(version) if version else None
    if release:
        for r in exact_machine:
            if compare_versions(r.first, release) <= 0 <= compare_versions(r.last, release):
                if r.machine != machine:
                    return _assume(r, f"no {machine} row for {variant}; the x86_64 list is shown")
                return r

        def distance(r: ArchList) -> int:
            rel = version_tuple(release)
            return min(abs(_minor_index(version_tuple(r.first)) - _minor_index(rel)),
                       abs(_minor_index(version_tuple(r.last)) - _minor_index(rel)))

        nearest = min(exact_machine, key=distance)
        return _assume(nearest, f"no row for {variant} in torch {release}; the {nearest.first}–{nearest.last} list is assumed")
    newest = max(exact_machine, key=lambda r: version_tuple(r.last))
    return newest if newest.machine == machine else _assume(newest, f"no {machine} row for {variant}")


def _minor_index(t: tuple[int, ...]) -> int:
    t = t + (0, 0)
    return t[0] * 100 + t[1]


def _assume(row: ArchList, note: str) -> ArchList:
    return ArchList(row.variant, row.first, row.last, row.archs, row.ptx, row.machine, True, note)


@record(frozen=True)
class Coverage:
    """Whether a build runs on one GPU, and how (its own SASS, a compatible one, PTX JIT)."""
    ok: bool
    how: str  # "sm_90", "sm_86 (same major, older minor)", "PTX 12.0 JIT", or why not


def covers(archs: ArchList, capability: str) -> Coverage:
    """Does a build run on a GPU of this compute capability? SASS for sm_XY runs on the same
    major with minor ≥ Y; PTX JIT-compiles for any newer capability."""
    cc = version_tuple(capability)
    if len(cc) < 2:
        return Coverage(False, f"unknown compute capability {capability!r}")
    same_major = [a for a in archs.archs if version_tuple(a)[0] == cc[0] and version_tuple(a)[1] <= cc[1]]
    if same_major:
        best = max(same_major, key=version_tuple)
        tag = "sm_" + best.replace(".", "")
        return Coverage(True, tag if version_tuple(best) == cc[:2] else f"{tag} code (same major version)")
    if archs.ptx and version_tuple(archs.ptx) <= cc[:2]:
        return Coverage(True, f"PTX {archs.ptx} JIT-compiled by the driver (slow first run)")
    return Coverage(False, f"no sm_{cc[0]}x code and no PTX at or below {cc[0]}.{cc[1]}")


def uncovered(archs: ArchList, gpus) -> list:
    """The GPUs (objects with `compute_capability`; those whose capability is known) that a
    build with `archs` has no code for."""
    return [g for g in gpus if g.compute_capability and not covers(archs, g.compute_capability).ok]


def gfx_list(variant: str) -> GfxList | None:
    base = re.match(r"rocm\d+\.\d+", variant)
    for row in GFX_LISTS:
        if variant in row.variants or (base and base.group() in row.variants):
            return row
    return None


@record(frozen=True)
class DriverVerdict:
    """Whether this machine's driver can run a build's CUDA version."""
    status: str  # "ok" | "ptx-jit" | "too-old" | "unknown"
    cuda: str  # the build's CUDA version, "12.6"
    floor: str | None  # the line's floor for this platform
    toolkit: str | None  # the toolkit's own driver for this platform
    why: str


def driver_verdict(cuda: str, driver: str | None, driver_cuda: str | None, platform: str = "linux") -> DriverVerdict:
    """Can a driver run a build of this CUDA version? By the driver version against the line's
    floor (minor-version compatibility) and the toolkit's own driver; failing that, by the CUDA
    version the driver reports."""
    floor = floor_driver(cuda, platform)
    toolkit = toolkit_driver(cuda, platform)
    major = version_tuple(cuda)[0]
    if driver:
        if floor is None:
            return DriverVerdict("unknown", cuda, None, toolkit, f"no driver floor in the catalog for CUDA {cuda}")
        if compare_versions(driver, floor) < 0:
            return DriverVerdict("too-old", cuda, floor, toolkit,
                                 f"CUDA {major}.x needs driver ≥ {floor} ({platform}); this driver is {driver}")
        if toolkit and compare_versions(driver, toolkit) < 0:
            return DriverVerdict("ptx-jit", cuda, floor, toolkit,
                                 f"driver {driver} meets the CUDA {major}.x floor {floor} but is older than CUDA {cuda}'s own "
                                 f"driver {toolkit}: code JIT-compiled from PTX can fail")
        return DriverVerdict("ok", cuda, floor, toolkit, f"driver {driver} ≥ {toolkit or floor} (CUDA {cuda})")
    if driver_cuda:
        have = version_tuple(driver_cuda)
        if have[:1] < (major,):
            return DriverVerdict("too-old", cuda, floor, toolkit,
                                 f"the driver supports CUDA {driver_cuda}; CUDA {major}.x needs a {major}.x driver (≥ {floor or '?'})")
        if have[:2] < version_tuple(cuda)[:2]:
            return DriverVerdict("ptx-jit", cuda, floor, toolkit,
                                 f"the driver supports CUDA {driver_cuda}, older than {cuda}: runs by minor-version "
                                 "compatibility, but code JIT-compiled from PTX can fail")
        return DriverVerdict("ok", cuda, floor, toolkit, f"the driver supports CUDA {driver_cuda} ≥ {cuda}")
    return DriverVerdict("unknown", cuda, floor, toolkit, "the driver version is unknown")
