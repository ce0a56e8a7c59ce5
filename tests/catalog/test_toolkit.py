"""Every row of the host-compiler table, PyTorch's major/minor rule, and which CUDA releases build for
which GPU architectures (against the real target lists of six releases' ptxas)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from doctor.catalog.toolkit import (
    HOST_COMPILER_LIMITS,
    NVCC_ARCHES,
    compute_capability,
    host_compiler_limit,
    major_minor,
    newest_cuda_for,
    nvcc_releases,
    nvcc_targets,
)
from doctor.diagnose.cuda_stack import compare_cuda, cuda_of_variant
from doctor.model import Level

# (release, gcc max, clang max): what each release's crt/host_config.h enforces and its
# installation guide lists (docs/cuda.md has the source of each row).
ROWS = [
    ("11.8", 11, 14), ("12.0", 12, 14), ("12.1", 12, 15), ("12.2", 12, 15), ("12.3", 12, 16),
    ("12.4", 13, 17), ("12.5", 13, 17), ("12.6", 13, 18), ("12.8", 14, 19), ("12.9", 14, 19),
    ("13.0", 15, 20),
]


@pytest.mark.parametrize(("cuda", "gcc", "clang"), ROWS)
def test_every_row(cuda, gcc, clang):
    row = host_compiler_limit(cuda)
    assert (row.cuda, row.gcc_max, row.clang_max) == (cuda, gcc, clang)
    assert row.source.startswith("https://docs.nvidia.com/cuda/archive/") and cuda in row.source


def test_table_is_exactly_the_rows_tested_and_never_lowers_a_limit():
    assert [(r.cuda, r.gcc_max, r.clang_max) for r in HOST_COMPILER_LIMITS] == ROWS
    for a, b in zip(HOST_COMPILER_LIMITS, HOST_COMPILER_LIMITS[1:]):
        assert b.gcc_max >= a.gcc_max and b.clang_max >= a.clang_max


def test_unlisted_minor_takes_the_row_below_and_other_majors_nothing():
    assert host_compiler_limit("12.7.1").cuda == "12.6"
    assert host_compiler_limit("V13.2.51").cuda == "13.0"
    assert host_compiler_limit("11.7") is None and host_compiler_limit("garbage") is None


def test_newest_cuda_for_a_compiler():
    assert newest_cuda_for("gcc", 14) == "12.8"
    assert newest_cuda_for("clang", 20) == "13.0"
    assert newest_cuda_for("gcc", 99) is None


def test_major_minor():
    assert major_minor("12.4.131") == (12, 4) and major_minor(None) is None


@pytest.mark.parametrize(("nvcc", "build", "level"), [
    ("12.4", "12.4", None), ("12.4", "12.8", Level.WARNING), ("11.8", "12.1", Level.ERROR),
    ("13.0", "12.8", Level.ERROR), ("12.6", None, None),
])
def test_pytorch_rule(nvcc, build, level):
    assert compare_cuda(nvcc, build) is level


def test_variant_to_cuda():
    assert [cuda_of_variant(v) for v in ("cu118", "cu128", "cu130", "cpu", "cuda", "rocm6.4", None)] == [
        "11.8", "12.8", "13.0", None, None, None, None]


# --- which CUDA releases build for which GPU architecture ---

NVCC_FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "nvcc"


def _ptxas_targets(release: str) -> set[str]:
    """The sm_ targets the release's ptxas accepts, from its real `ptxas --help` (--gpu-name)."""
    text = (NVCC_FIXTURES / f"{release}.ptxas-gpu-name.txt").read_text()
    allowed = text[text.index("Allowed values"):]
    return {compute_capability(t) for t in re.findall(r"'(sm_\w+)'", allowed)}


PTXAS_RELEASES = sorted(p.name.split(".ptxas")[0] for p in NVCC_FIXTURES.glob("*.ptxas-gpu-name.txt"))


def test_ptxas_fixtures_cover_each_change_since_11_8():
    assert PTXAS_RELEASES == ["11.8", "12.0", "12.4", "12.8", "12.9", "13.0"]


@pytest.mark.parametrize("release", PTXAS_RELEASES)
def test_arch_table_agrees_with_each_releases_ptxas(release):
    real = _ptxas_targets(release)
    said = set()
    for base in NVCC_ARCHES:
        for cc in (base, base + "a", base + "f"):
            span = nvcc_releases(cc)
            if span and major_minor(span[0]) <= major_minor(release) and (
                    span[1] is None or major_minor(release) <= major_minor(span[1])):
                said.add(cc)
    assert said == real
    # and the 13.0 nvcc's own --list-gpu-code (base targets only) agrees with its ptxas
    if release == "13.0":
        listed = {compute_capability(c) for c in (NVCC_FIXTURES / "13.0.list-gpu-code.txt").read_text().split()}
        assert listed == {cc for cc in real if not cc.endswith(("a", "f"))}


def test_arch_names_and_spans():
    assert compute_capability("compute_86") == "8.6" and compute_capability("sm_100a") == "10.0a"
    assert compute_capability("sm_120f") == "12.0f" and compute_capability("sm_8") is None
    assert compute_capability("[sm_61]") is None and compute_capability("compute_86 ") is None
    assert nvcc_releases("8.6") == ("11.1", None) and nvcc_releases("3.5") == ("5.0", "11.8")
    assert nvcc_releases("8.6a") is None and nvcc_releases("9.0f") is None and nvcc_releases("4.0") is None
    assert nvcc_releases("9.0a") == ("12.0", None) and nvcc_releases("10.1f") == ("12.9", "12.9")
    assert nvcc_targets("11.0") == ["3.5", "3.7", "5.0", "5.2", "5.3", "6.0", "6.1", "6.2", "7.0", "7.2", "7.5", "8.0"]
    assert nvcc_targets("13.2")[0] == "7.5" and nvcc_targets("garbage") == []
