"""The CUDA catalog: each row checked against the reference table (shared/reference/gpu.md),
the rules that use it, and driver-floor tests generated from the rows and run end to end on
fake machines: each floor exactly passes, one patch below is `cuda.driver-too-old`."""

from __future__ import annotations

import pytest
from testsupport.gpu_fakes import WSL_PROC_VERSION, check_gpu, findings

from doctor.catalog.cuda import (
    ARCH_LISTS,
    DRIVER_FLOORS,
    GFX_LISTS,
    TOOLKIT_DRIVERS,
    arch_list,
    compare_versions,
    covers,
    cuda_for_driver,
    cuda_of_variant,
    driver_floor,
    driver_verdict,
    gfx_list,
    variant_of_cuda,
)
from doctor.model import Level

# The reference table, transcribed by hand: the catalog must say the same.
REFERENCE_FLOORS = {
    ("13.0", "13.9"): ("580", "580"),
    ("12.0", "12.9"): ("525.60.13", "528.33"),
    ("11.1", "11.8"): ("450.80.02", "452.39"),
    ("11.0", "11.0"): ("450.36.06", "451.22"),
}
# NVIDIA CUDA Toolkit release notes, "CUDA Toolkit and Corresponding Driver Versions", the GA
# rows (Linux x86_64, Windows x86_64; "N/A" = None). docs/gpu.md quotes the same rows.
REFERENCE_TOOLKITS = {
    "11.8": ("520.61.05", "520.06"),  # CUDA 11.8 GA
    "12.0": ("525.60.13", "527.41"),  # CUDA 12.0 GA
    "12.1": ("530.30.02", "531.14"),  # CUDA 12.1 GA
    "12.2": ("535.54.03", "536.25"),  # CUDA 12.2 GA
    "12.3": ("545.23.06", "545.84"),  # CUDA 12.3 GA
    "12.4": ("550.54.14", "551.61"),  # CUDA 12.4 GA
    "12.5": ("555.42.02", "555.85"),  # CUDA 12.5 GA
    "12.6": ("560.28.03", "560.76"),  # CUDA 12.6 GA
    "12.8": ("570.26", "570.65"),  # CUDA 12.8 GA
    "12.9": ("575.51.03", "576.02"),  # CUDA 12.9 GA
    "13.0": ("580.65.06", None),  # CUDA 13.0 GA
    "13.1": ("590.44.01", None),  # CUDA 13.1 GA
}
M2H = "5.0 6.0 7.0 7.5 8.0 8.6 9.0"
REFERENCE_ARCHS = {
    ("cu118", "2.1", "2.7", "x86_64"): "3.7 " + M2H,
    ("cu121", "2.1", "2.5", "x86_64"): M2H,
    ("cu124", "2.4", "2.6", "x86_64"): M2H,
    ("cu126", "2.6", "2.13", "x86_64"): M2H,
    ("cu128", "2.7", "2.7", "x86_64"): "7.5 8.0 8.6 9.0 10.0 12.0+PTX",
    ("cu128", "2.8", "2.10", "x86_64"): "7.0 7.5 8.0 8.6 9.0 10.0 12.0",
    ("cu128", "2.11", "2.11", "x86_64"): "7.5 8.0 8.6 9.0 10.0 12.0",
    ("cu129", "2.8", "2.8", "x86_64"): "7.0 7.5 8.0 8.6 9.0 10.0 12.0+PTX",
    ("cu130", "2.9", "2.13", "x86_64"): "7.5 8.0 8.6 9.0 10.0 12.0+PTX",
    ("cu130", "2.9", "2.13", "aarch64"): "7.5 8.0 8.6 9.0 10.0 11.0 12.0+PTX",
    ("cu132", "2.12", "2.13", "x86_64"): "7.5 8.0 8.6 9.0 10.0 12.0+PTX",  # assumed, see the row's note
}


@pytest.mark.parametrize("row", DRIVER_FLOORS, ids=lambda r: f"CUDA {r.first}-{r.last}")
def test_driver_floor_row(row):
    assert REFERENCE_FLOORS[(row.first, row.last)] == (row.linux, row.windows)


@pytest.mark.parametrize("cuda", TOOLKIT_DRIVERS, ids=lambda c: f"toolkit {c}")
def test_toolkit_driver_row(cuda):
    assert TOOLKIT_DRIVERS[cuda] == REFERENCE_TOOLKITS[cuda]
    # the toolkit's own driver is never below its line's floor
    assert compare_versions(TOOLKIT_DRIVERS[cuda][0], driver_floor(cuda).linux) >= 0
    linux, windows = TOOLKIT_DRIVERS[cuda]
    # its own GA driver is exactly where the table starts saying this CUDA version...
    assert cuda_for_driver(linux) == cuda
    if windows:
        assert cuda_for_driver(windows, "windows") == cuda
    # ...and one patch below, an older toolkit (or none) is all it supports
    assert cuda_for_driver(_one_below(linux)) != cuda


def _one_below(driver: str) -> str:
    """"535.54.03" → "535.54.02"; "570.26" → "570.25"; "580.65.06" → "580.65.05"."""
    parts = driver.split(".")
    last = int(parts[-1])
    if last == 0:
        return f"{parts[0]}.{int(parts[1]) - 1}.99"
    return ".".join([*parts[:-1], str(last - 1).zfill(len(parts[-1]))])


def test_toolkit_table_has_every_minor_from_11_8_to_the_newest():
    # 12.7 was never released; any other gap makes a driver read as an older CUDA
    minors = sorted(TOOLKIT_DRIVERS, key=lambda c: tuple(map(int, c.split("."))))
    assert minors == ["11.8", "12.0", "12.1", "12.2", "12.3", "12.4", "12.5", "12.6", "12.8", "12.9", "13.0", "13.1"]


@pytest.mark.parametrize("driver, cuda", [
    ("525.60.13", "12.0"),  # issue 13: read as 11.8 while the 12.0 row was missing
    ("535.104.05", "12.2"),  # issue 13: read as 12.1 while the 12.2 row was missing
    ("545.23.08", "12.3"), ("555.42.06", "12.5"), ("550.144.03", "12.4"), ("520.61.05", "11.8"),
])
def test_drivers_between_the_old_rows(driver, cuda):
    assert cuda_for_driver(driver) == cuda


@pytest.mark.parametrize("row", ARCH_LISTS, ids=lambda r: f"{r.variant} {r.first}-{r.last} {r.machine}")
def test_arch_list_row(row):
    assert row.label == REFERENCE_ARCHS[(row.variant, row.first, row.last, row.machine)]
    assert row.assumed == (row.variant == "cu132") and (not row.assumed or row.note)


@pytest.mark.parametrize("row", GFX_LISTS, ids=lambda r: r.variants[0])
def test_gfx_list_row(row):
    assert "gfx90a" in row.targets and "manywheel/build.sh" in row.source
    # ROCm ≥ 6.0 builds carry MI300 (gfx942); the ROCm 5 ones do not
    assert ("gfx942" in row.targets) == (not row.variants[0].startswith("rocm5"))
    if row.variants[0].startswith("rocm7"):
        assert {"gfx950", "gfx1200", "gfx1201", "gfx1151"} <= set(row.targets)


def test_variant_names():
    assert cuda_of_variant("cu128") == "12.8" and cuda_of_variant("cu130") == "13.0" and cuda_of_variant("cu92") == "9.2"
    assert cuda_of_variant("cpu") is None and cuda_of_variant("rocm6.4") is None and cuda_of_variant("cuda") is None
    assert variant_of_cuda("12.8") == "cu128"


def test_arch_lookup_by_release_and_machine():
    assert arch_list("cu128", "2.9.1").label == "7.0 7.5 8.0 8.6 9.0 10.0 12.0"
    assert arch_list("cu128", "2.7.0").ptx == "12.0"
    assert "11.0" in arch_list("cu130", "2.10.0", "aarch64").archs
    other = arch_list("cu118", "2.0.1")  # no row for 2.0: the nearest, marked assumed
    assert other.assumed and "assumed" in other.note and "3.7" in other.archs
    assert arch_list("cu126", "2.8.0", "aarch64").assumed  # no aarch64 row for cu126
    assert arch_list("cu999", "2.13.0") is None


@pytest.mark.parametrize(
    "variant, version, cc, ok",
    [
        ("cu126", "2.13.0", "8.9", True),  # sm_86 code runs on 8.9
        ("cu126", "2.13.0", "12.0", False),  # RTX 5090: no sm_12x and no PTX
        ("cu128", "2.8.0", "12.0", True),
        ("cu128", "2.7.0", "12.1", True),
        ("cu130", "2.9.0", "11.0", False),  # Thor: x86_64 cu130 lacks 11.0, PTX 12.0 is newer
        ("cu130", "2.9.0", "6.1", False),  # Pascal needs cu126 or older
        ("cu126", "2.9.0", "6.1", True),
        ("cu118", "2.7.0", "3.7", True),  # Kepler: only cu118
        ("cu126", "2.7.0", "3.7", False),
        ("cu118", "2.7.0", "9.0", True),  # H200 with cu118
        ("cu130", "2.9.0", "13.0", True),  # a future GPU: PTX JIT
    ],
)
def test_coverage_rule(variant, version, cc, ok):
    assert covers(arch_list(variant, version), cc).ok is ok


def test_ptx_coverage_says_so():
    assert "PTX" in covers(arch_list("cu130", "2.9.0"), "13.0").how
    assert covers(arch_list("cu126", "2.9.0"), "8.9").how == "sm_86 code (same major version)"
    assert covers(arch_list("cu126", "2.9.0"), "9.0").how == "sm_90"


def test_cuda_for_driver_is_the_newest_toolkit_met():
    assert cuda_for_driver("570.124.06") == "12.8"
    assert cuda_for_driver("550.144.03") == "12.4"
    assert cuda_for_driver("566.36", "windows") == "12.6"
    assert cuda_for_driver("470.256.02") is None


def test_driver_verdicts():
    assert driver_verdict("12.6", "560.35.03", None).status == "ok"
    assert driver_verdict("12.6", "550.144.03", None).status == "ptx-jit"
    assert driver_verdict("13.0", "570.124.06", None).status == "too-old"
    assert driver_verdict("12.6", None, "12.4").status == "ptx-jit"
    assert driver_verdict("13.0", None, "12.9").status == "too-old"
    assert driver_verdict("12.8", None, "12.8").status == "ok"
    assert driver_verdict("12.8", None, None).status == "unknown"
    assert driver_verdict("9.2", "400.1", None).status == "unknown"  # no floor row for CUDA 9


def test_gfx_lookup():
    assert gfx_list("rocm6.2.4").variants[0] == "rocm6.0"  # 6.2.4 is a 6.2
    assert gfx_list("rocm7.2") is not None and gfx_list("rocm6.4") is None


# -- generated from the rows: each floor exactly, and one patch below, end to end --


def one_patch_below(version: str) -> str:
    """525.60.13 → 525.60.12; 580 → 579.99 (nothing below .0 but the previous release)."""
    parts = [int(p) for p in version.split(".")]
    if len(parts) > 1 and parts[-1] > 0:
        parts[-1] -= 1
        width = len(version.split(".")[-1])
        return ".".join([*map(str, parts[:-1]), str(parts[-1]).zfill(width)])
    return f"{parts[0] - 1}.99"


def floor_cases():
    for row in DRIVER_FLOORS:
        for platform in ("linux", "windows"):
            floor = row.windows if platform == "windows" else row.linux
            yield pytest.param(row.first, platform, floor, False, id=f"CUDA {row.first} {platform} {floor} exactly")
            yield pytest.param(row.first, platform, one_patch_below(floor), True,
                               id=f"CUDA {row.first} {platform} {one_patch_below(floor)} below")


@pytest.mark.parametrize("cuda, platform, driver, too_old", list(floor_cases()))
def test_driver_floor_end_to_end(machine, cuda, platform, driver, too_old):
    csv = f"0, NVIDIA H100 80GB HBM3, {driver}, 81559, 9.0\n"
    if platform == "linux":
        machine.nvidia_driver(driver)
        machine.nvidia_smi(csv)
    else:  # the Windows driver, seen from WSL
        machine.file("/dev/dxg")
        machine.file("/proc/version", WSL_PROC_VERSION)
        machine.nvidia_smi(csv, where="/usr/lib/wsl/lib")
    variant = variant_of_cuda(cuda)
    gpu, area = check_gpu(machine, trees={"/opt/libtorch": ("2.9.0", variant)})
    assert gpu.nvidia.driver_version == driver
    old = findings(area, "cuda.driver-too-old")
    if too_old:
        (f,) = old
        assert f.level is Level.ERROR and "needs a newer NVIDIA driver" in f.title
        floor = driver_floor(cuda)
        assert (floor.windows if platform == "windows" else floor.linux) in f.fix
    else:
        assert old == []
        assert not [f for f in area.findings if f.level is Level.ERROR]


def test_one_patch_below():
    assert one_patch_below("525.60.13") == "525.60.12"
    assert one_patch_below("450.80.02") == "450.80.01"
    assert one_patch_below("580") == "579.99"
    assert compare_versions(one_patch_below("580"), "580") < 0
