"""The recommended variant: a pure function of facts (doctor/catalog/recommend.py). Facts are
built directly here — no Host, no probe — from the real values of shared/reference/gpu.md;
one end-to-end test checks that `check` puts the recommendation into the GPU facts."""

from __future__ import annotations

import pytest
from testsupport.gpu_fakes import check_gpu

from doctor.catalog.recommend import BACKEND_ENV, Backend, chosen_backend, published_variants, recommend
from doctor.errors import UsageError
from doctor.model import Evidence
from doctor.probe.apple import AppleFacts
from doctor.probe.gpu import GpuFacts, XpuFacts
from doctor.probe.nvidia import NvidiaFacts, NvidiaGpu
from doctor.probe.python_torch import PythonTorch
from doctor.probe.rocm import AmdGpu, RocmFacts


def nvidia(driver: str | None, *gpus: tuple[str, str], cuda: str | None = None, **kw) -> GpuFacts:
    """GPU facts of a machine whose driver answered with these (name, compute capability) GPUs."""
    nv = NvidiaFacts(present=True, driver_version=driver, driver_version_source="nvidia-smi" if driver else "",
                     driver_cuda_version=cuda, reachable=bool(gpus),
                     gpus=[NvidiaGpu(i, name, None, cc) for i, (name, cc) in enumerate(gpus)], **kw)
    return GpuFacts(nv, RocmFacts(), None, XpuFacts())


def no_gpu() -> GpuFacts:
    return GpuFacts(NvidiaFacts(), RocmFacts(), None, XpuFacts())


H200 = ("NVIDIA H200", "9.0")


def test_published_variants_follow_the_release_table():
    assert published_variants("2.13.0") == ["cpu", "cu126", "cu130", "cu132", "rocm7.1", "rocm7.2"]
    assert published_variants("2.8.1", "Windows") == ["cpu", "cu126", "cu128"]  # no cu129 on Windows, no ROCm
    assert published_variants("2.13.0", "Darwin") == ["cpu"]
    assert published_variants("3.0.0") is None


def test_newest_variant_whose_driver_and_archs_fit():
    gpu = nvidia("580.65.06", H200)
    rec = recommend(gpu, "Linux", "x86_64", version="2.13.0")
    assert rec.variant == "cu132" and rec.source == "policy"
    assert any("assumed to match cu130" in r for r in rec.reasons)  # cu132's arch list is an assumption, said so
    rec = recommend(gpu, "Linux", "x86_64", version="2.7.1")
    assert rec.variant == "cu128" and rec.version == "2.7.1"


def test_a_variant_without_ptx_risk_beats_a_newer_one_with_it():
    rec = recommend(nvidia("570.124.06", H200), "Linux", "x86_64", version="2.8.0")
    assert rec.variant == "cu128"  # cu129 needs 575.51.03 for PTX; 570.124.06 meets cu128's 570.26
    assert any("preferred to the newer cu129" in r for r in rec.reasons)


def test_only_ptx_risky_variants_left_is_still_a_cuda_variant():
    rec = recommend(nvidia("550.144.03", H200), "Linux", "x86_64", version="2.13.0")
    assert rec.variant == "cu126" and any("PTX" in r for r in rec.reasons)


def test_a_gap_toolkits_driver_runs_the_older_variant_cleanly():
    # 535.104.05 is CUDA 12.2 Update 2's driver: cu121 runs without PTX risk, cu124 would not
    rec = recommend(nvidia("535.104.05", H200), "Linux", "x86_64", version="2.5.1")
    why = {c.variant: c.why for c in rec.considered}
    assert rec.variant == "cu121" and why["cu121"].startswith("the driver supports it")
    assert why["cu124"].startswith("the driver meets its floor, not its toolkit's driver")
    assert any("preferred to the newer cu124" in r and "550.54.14" in r for r in rec.reasons)


def test_every_visible_gpu_must_be_covered():
    gpu = nvidia("580.65.06", ("NVIDIA GeForce RTX 4090", "8.9"), ("NVIDIA GeForce RTX 3090", "8.6"),
                 ("NVIDIA GeForce GTX 1080 Ti", "6.1"))
    rec = recommend(gpu, "Linux", "x86_64", version="2.13.0")
    assert rec.variant == "cu126"  # the GTX 1080 Ti (6.1) rules out cu130 and cu132
    why = {c.variant: c.why for c in rec.considered}
    assert "lack NVIDIA GeForce GTX 1080 Ti (6.1)" in why["cu132"]
    assert any(r.startswith("3 visible NVIDIA GPUs") for r in rec.reasons)
    gpu.nvidia.gpus[2].visible = False  # CUDA_VISIBLE_DEVICES=0,1: only the visible ones count
    assert recommend(gpu, "Linux", "x86_64", version="2.13.0").variant == "cu132"


def test_kepler_has_no_variant_in_new_releases():
    gpu = nvidia("470.256.02", ("Tesla K80", "3.7"), ("Tesla K80", "3.7"))
    rec = recommend(gpu, "Linux", "x86_64", version="2.13.0")
    assert rec.variant == "cpu" and any("no CUDA variant of torch 2.13 fits" in r for r in rec.reasons)
    assert recommend(gpu, "Linux", "x86_64", version="2.7.0").variant == "cu118"  # 470 runs 11.x (minor-version compat)


def test_backend_overrides():
    rec = recommend(no_gpu(), "Linux", "x86_64", version="2.13.0", backend=chosen_backend(None, "cu128"))
    assert rec.variant == "cu128" and rec.source == "override"
    assert any("not published for torch 2.13" in r for r in rec.reasons)
    assert rec.evidence[0].source == BACKEND_ENV
    assert recommend(no_gpu(), "Linux", "x86_64", version="2.8.0", backend=Backend("rocm6.4", BACKEND_ENV)).variant == "rocm6.4"
    rec = recommend(nvidia("580.65.06", H200), "Linux", "x86_64", version="2.13.0", backend=chosen_backend("CPU", "cu130"))
    assert rec.variant == "cpu" and rec.reasons[-1].startswith("--backend=CPU")  # the option beats the variable
    with pytest.raises(UsageError, match="DOCTOR_GPU_BACKEND='cuda12'"):
        recommend(no_gpu(), "Linux", "x86_64", version="2.13.0", backend=chosen_backend(None, "cuda12"))
    with pytest.raises(UsageError, match="--backend"):
        recommend(no_gpu(), "Linux", "x86_64", version="2.13.0", backend=chosen_backend("gpu", None))
    assert chosen_backend(None, None) is None and chosen_backend(None, "") is None


def test_driver_override_without_a_gpu_recommends_for_that_driver():
    def override(driver, cuda):
        return GpuFacts(NvidiaFacts(driver_version=driver, driver_cuda_version=cuda, override=driver or cuda),
                        RocmFacts(), None, XpuFacts())

    rec = recommend(override(None, "12.4"), "Linux", "x86_64", version="2.13.0")
    assert rec.variant == "cu126" and any("architectures not checked" in r for r in rec.reasons)
    assert recommend(override("580.65.06", "13.0"), "Linux", "x86_64", version="2.13.0").variant == "cu132"
    assert recommend(override("470.256.02", None), "Linux", "x86_64", version="2.13.0").variant == "cpu"


def test_version_defaults():
    rec = recommend(no_gpu(), "Linux", "x86_64")
    assert rec.version == "2.13.0" and "newest release the catalog knows" in rec.reasons[0]
    python = PythonTorch("/site/torch", "2.9.1+cu128", "2.9.1", "cu128", "12.8", None, None, False, None, "python3",
                         [Evidence("file", "/site/torch/version.py", "__version__ = '2.9.1+cu128'")])
    rec = recommend(no_gpu(), "Linux", "x86_64", python=python)
    assert rec.version == "2.9.1" and "installed Python torch" in rec.reasons[0]
    rec = recommend(no_gpu(), "Linux", "x86_64", version="3.1.0")
    assert any("not in the catalog" in r for r in rec.reasons)


def test_unreachable_and_unusable_states_are_named_not_explained():
    gpu = GpuFacts(NvidiaFacts(present=True, unreachable="no-device-node"),
                   RocmFacts(present=True, unusable="kfd-not-writable"), None, XpuFacts())
    rec = recommend(gpu, "Linux", "x86_64", version="2.13.0")
    assert rec.variant == "cpu"
    assert any("NVIDIA GPU seems present but cannot be used (no-device-node" in r for r in rec.reasons)
    assert any("AMD GPU seems present but cannot be used (kfd-not-writable" in r for r in rec.reasons)


def test_rocm_and_macos():
    amd = GpuFacts(NvidiaFacts(), RocmFacts(present=True, usable=True, kfd=True, kfd_writable=True,
                                            gpus=[AmdGpu(1, "gfx942", 90402)]), None, XpuFacts())
    assert recommend(amd, "Linux", "x86_64", version="2.13.0").variant == "rocm7.2"
    mac = GpuFacts(NvidiaFacts(), RocmFacts(), AppleFacts("x86_64", True, True, "15.1", False, ["rosetta"]), XpuFacts())
    rec = recommend(mac, "Darwin", "x86_64", version="2.13.0")
    assert rec.variant == "cpu" and any("Rosetta" in r for r in rec.reasons)


def test_recommendation_is_in_the_gpu_facts(machine):
    machine.nvidia_driver("580.65.06")
    machine.nvidia_smi("0, NVIDIA B200, 580.65.06, 183359, 10.0\n")
    gpu, area = check_gpu(machine)
    assert gpu.recommended.variant == "cu132"
    assert "recommended: cu132" in area.summary
    assert any(d.startswith("recommended variant for torch 2.13.0: cu132") for d in area.details)
