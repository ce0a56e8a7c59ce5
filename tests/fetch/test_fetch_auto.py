"""`--variant auto`: the command layer gathers the GPU facts and hands them to the plan; the
plan asks the catalog's pure recommendation, and never probes itself."""

from __future__ import annotations

import json

from testsupport.support import doctor_subprocess

from doctor.fetch.plan import FetchRequest, resolve_plan
from doctor.host import Host
from doctor.probe.gpu import GpuFacts, XpuFacts
from doctor.probe.nvidia import NvidiaFacts, NvidiaGpu
from doctor.probe.rocm import RocmFacts


def h200(driver: str) -> GpuFacts:
    nv = NvidiaFacts(present=True, reachable=True, driver_version=driver, gpus=[NvidiaGpu(0, "NVIDIA H200", 143771, "9.0")])
    return GpuFacts(nv, RocmFacts(), None, XpuFacts())


def test_the_plan_uses_the_facts_it_is_given(tmp_path):
    host = Host.for_test(tmp_path, system="Linux", machine="x86_64")
    calls = []

    def facts():
        calls.append(1)
        return h200("580.65.06")

    plan = resolve_plan(host, FetchRequest(version="2.13.0"), gpu_facts=facts)
    assert plan.variant == "cu132" and calls == [1]
    assert any(n.startswith("variant cu132 (auto): ") for n in plan.notes)
    plan = resolve_plan(host, FetchRequest(version="2.8.0"), gpu_facts=lambda: h200("570.124.06"))
    assert plan.variant == "cu128"  # 570.124.06 runs cu128 cleanly, cu129 only with PTX risk


def test_an_explicit_variant_or_another_platform_gathers_nothing(tmp_path):
    host = Host.for_test(tmp_path, system="Linux", machine="x86_64")

    def never():
        raise AssertionError("GPU facts gathered although not needed")

    assert resolve_plan(host, FetchRequest(version="2.13.0", variant="cu130"), gpu_facts=never).variant == "cu130"
    other = resolve_plan(host, FetchRequest(version="2.13.0", platform="windows-x86_64"), gpu_facts=never)
    assert other.variant == "cpu"
    # without facts, auto says why it is cpu
    plan = resolve_plan(host, FetchRequest(version="2.13.0"))
    assert plan.variant == "cpu" and any("no GPU facts were gathered" in n for n in plan.notes)


def test_the_backend_variable_is_honoured_by_the_plan(tmp_path):
    host = Host.for_test(tmp_path, env={"DOCTOR_GPU_BACKEND": "rocm7.2"}, system="Linux", machine="x86_64")
    assert resolve_plan(host, FetchRequest(version="2.13.0"), gpu_facts=lambda: h200("580.65.06")).variant == "rocm7.2"


def test_fetch_and_cache_key_commands_gather_the_facts(tmp_path):
    # For real through the CLI: the driver override stands for a GPU machine's driver.
    env = {"DOCTOR_CUDA_DRIVER_VERSION": "12.4", "HOME": str(tmp_path), "XDG_CACHE_HOME": str(tmp_path / "cache")}
    result = doctor_subprocess("fetch-libtorch", "--version", "2.13.0", "--dry-run", "--json", "--no-lock", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["plan"]["variant"] == "cu126"
    result = doctor_subprocess("cache-key", "--version", "2.13.0", env=env, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "-cu126-" in result.stdout
