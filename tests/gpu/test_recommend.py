"""The recommended variant: policy, overrides, and the reasoning it shows."""

from __future__ import annotations

import shutil

import pytest
from gpu_fakes import SMI_K80_OLD, SMI_MIXED, check_gpu

from doctor.errors import UsageError
from doctor.probe.gpu import detect_gpus
from doctor.recommend import published_variants, recommend_variant


def machine_with(machine, driver: str, csv: str, gpus: int = 1):
    machine.nvidia_driver(driver, gpus=gpus)
    machine.nvidia_smi(csv)
    return machine.host()


def test_published_variants_follow_the_release_table():
    assert published_variants("2.13.0") == ["cpu", "cu126", "cu130", "cu132", "rocm7.1", "rocm7.2"]
    assert published_variants("2.8.1", "Windows") == ["cpu", "cu126", "cu128"]  # no cu129 on Windows, no ROCm
    assert published_variants("2.13.0", "Darwin") == ["cpu"]
    assert published_variants("3.0.0") is None


def test_newest_variant_whose_driver_and_archs_fit(machine):
    host = machine_with(machine, "580.65.06", "0, NVIDIA H200, 580.65.06, 143771, 9.0\n")
    rec = recommend_variant(host, "2.13.0", detect_gpus(host, recommend=False))
    assert rec.variant == "cu132" and rec.source == "policy"
    assert any("assumed to match cu130" in r for r in rec.reasons)  # cu132's arch list is an assumption, said so
    rec = recommend_variant(host, "2.7.1", detect_gpus(host, recommend=False))
    assert rec.variant == "cu128" and rec.version == "2.7.1"


def test_a_variant_without_ptx_risk_beats_a_newer_one_with_it(machine):
    host = machine_with(machine, "570.124.06", "0, NVIDIA H200, 570.124.06, 143771, 9.0\n")
    rec = recommend_variant(host, "2.8.0", detect_gpus(host, recommend=False))
    assert rec.variant == "cu128"  # cu129 needs 575.51.03 for PTX; 570.124.06 meets cu128's 570.26
    assert any("preferred to the newer cu129" in r for r in rec.reasons)


def test_only_ptx_risky_variants_left_is_still_a_cuda_variant(machine):
    host = machine_with(machine, "550.144.03", "0, NVIDIA H200, 550.144.03, 143771, 9.0\n")
    rec = recommend_variant(host, "2.13.0", detect_gpus(host, recommend=False))
    assert rec.variant == "cu126" and any("PTX" in r for r in rec.reasons)


def test_every_visible_gpu_must_be_covered(machine):
    host = machine_with(machine, "580.65.06", SMI_MIXED.replace("560.35.03", "580.65.06"), gpus=3)
    rec = recommend_variant(host, "2.13.0", detect_gpus(host, recommend=False))
    assert rec.variant == "cu126"  # the GTX 1080 Ti (6.1) rules out cu130 and cu132
    why = {c.variant: c.why for c in rec.considered}
    assert "lack NVIDIA GeForce GTX 1080 Ti (6.1)" in why["cu132"]
    assert any(r.startswith("3 visible NVIDIA GPUs") for r in rec.reasons)


def test_kepler_has_no_variant_in_new_releases(machine, libcuda):
    machine.nvidia_driver("470.256.02", gpus=2)
    machine.nvidia_smi(SMI_K80_OLD, old_driver=True)
    target = machine.root / "usr/lib/x86_64-linux-gnu/libcuda.so.1"
    target.parent.mkdir(parents=True)
    shutil.copy(libcuda(version=11040, cc="3.7", name="Tesla K80", count=2), target)
    gpu = detect_gpus(machine.host(), recommend=False)
    rec = recommend_variant(machine.host(), "2.13.0", gpu)
    assert rec.variant == "cpu" and any("no CUDA variant of torch 2.13 fits" in r for r in rec.reasons)
    rec = recommend_variant(machine.host(), "2.7.0", gpu)
    assert rec.variant == "cu118"  # driver 470 runs CUDA 11.x by minor-version compatibility


def test_backend_overrides(machine):
    host = machine.host({"DOCTOR_GPU_BACKEND": "cu128"})
    rec = recommend_variant(host, "2.13.0")
    assert rec.variant == "cu128" and rec.source == "override"
    assert any("not published for torch 2.13" in r for r in rec.reasons)
    assert rec.evidence[0].source == "DOCTOR_GPU_BACKEND"
    assert recommend_variant(machine.host({"DOCTOR_GPU_BACKEND": "rocm6.4"}), "2.8.0").variant == "rocm6.4"
    assert recommend_variant(machine.host(), "2.13.0", backend="CPU").variant == "cpu"
    with pytest.raises(UsageError, match="DOCTOR_GPU_BACKEND='cuda12'"):
        recommend_variant(machine.host({"DOCTOR_GPU_BACKEND": "cuda12"}), "2.13.0")
    with pytest.raises(UsageError, match="--backend"):
        recommend_variant(machine.host(), "2.13.0", backend="gpu")


def test_driver_override_without_a_gpu_recommends_for_that_driver(machine):
    rec = recommend_variant(machine.host({"DOCTOR_CUDA_DRIVER_VERSION": "12.4"}), "2.13.0")
    assert rec.variant == "cu126" and any("architectures not checked" in r for r in rec.reasons)
    rec = recommend_variant(machine.host({"DOCTOR_CUDA_DRIVER_VERSION": "580.65.06"}), "2.13.0")
    assert rec.variant == "cu132"
    rec = recommend_variant(machine.host({"DOCTOR_CUDA_DRIVER_VERSION": "470.256.02"}), "2.13.0")
    assert rec.variant == "cpu"


def test_version_defaults(machine):
    rec = recommend_variant(machine.host())
    assert rec.version == "2.13.0" and "newest release the catalog knows" in rec.reasons[0]
    site = machine.root / "site"
    (site / "torch").mkdir(parents=True)
    (site / "torch/version.py").write_text("__version__ = '2.9.1+cu128'\ncuda = '12.8'\nhip = None\n")
    rec = recommend_variant(machine.host(sys_path=["/site"]))
    assert rec.version == "2.9.1" and "installed Python torch" in rec.reasons[0]
    rec = recommend_variant(machine.host(), "3.1.0")
    assert any("not in the catalog" in r for r in rec.reasons)


def test_recommendation_is_in_the_gpu_facts(machine):
    machine.nvidia_driver("580.65.06")
    machine.nvidia_smi("0, NVIDIA B200, 580.65.06, 183359, 10.0\n")
    gpu, area = check_gpu(machine)
    assert gpu.recommended.variant == "cu132"
    assert "recommended: cu132" in area.summary
    assert any(d.startswith("recommended variant for torch 2.13.0: cu132") for d in area.details)
