"""`doctor bench`: three sections on the real CPU, a warning when GEMM is far below the peak."""

from __future__ import annotations

import json

import pytest

from doctor.model import Level
from doctor.workload.bench import compiled_area, gemm_area, verdict_fractions
from testsupport.support import doctor_subprocess

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_bench_json_has_all_three_sections_and_plots(tmp_path):
    png = tmp_path / "gemm.png"
    proc = doctor_subprocess("bench", "--quick", "--device", "cpu", "--json", "--plot", str(png))
    assert proc.returncode == 0, proc.stderr  # warnings (a busy CI machine) exit 0
    report = json.loads(proc.stdout)
    gemm, = report["gemm"]
    assert gemm["device"] == "cpu" and gemm["threads"] >= 1 and gemm["blas"]
    assert {r["dtype"] for r in gemm["results"]} >= {"float32"}
    assert all(r["gflops"] > 0 for r in gemm["results"])
    assert gemm["peak_gflops"]["float32"] > 0 and 0 < gemm["fraction_of_peak"]["float32"]
    dispatch, = report["dispatch"]
    assert 0 < dispatch["us_per_op"] < 1000 and dispatch["batching_speedup"] > 1
    compiled, = report["compiled"]
    assert [r["batch"] for r in compiled["results"]] == [1, 256]
    # g++ is part of this project's test set-up, so torch.compile must work here.
    assert compiled["compile"]["ok"] is True, compiled["compile"]["error"]
    assert compiled["torchscript"]["ok"] is True, compiled["torchscript"]["error"]
    for row in compiled["results"]:
        assert row["eager_us"] > 0 and row["compile_speedup"] > 0 and row["torchscript_speedup"] > 0
    assert {a["name"] for a in report["areas"]} == {"gemm.cpu", "dispatch.cpu", "compiled.cpu"}
    data = png.read_bytes()
    assert data[:8] == PNG_MAGIC and png.stat().st_size > 5000
    # Both charts, side by side: the IHDR width is that of the 13-inch figure at 120 dpi.
    assert int.from_bytes(data[16:20], "big") == 13 * 120


def test_bench_reports_a_compile_failure_instead_of_crashing(tmp_path):
    proc = doctor_subprocess("bench", "--quick", "--device", "cpu", "--json", env={
        "CXX": str(tmp_path / "no-such-g++"), "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / "inductor")})
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    compiled, = report["compiled"]
    assert compiled["compile"]["ok"] is False and "C++ compiler" in compiled["compile"]["error"]
    assert all("compile_us" not in r and r["torchscript_us"] > 0 for r in compiled["results"])
    failed = [f for f in report["findings"] if f["id"] == "bench.compile-failed"]
    assert [(f["level"], f["subject"]) for f in failed] == [("warning", "compile:cpu")]
    assert "install a C++ compiler" in failed[0]["fix"]


def _gemm(best: float, threads: int = 1, env: dict | None = None) -> dict:
    return {"device": "cpu", "name": "laptop", "results": [{"dtype": "float32", "n": 1024, "gflops": best,
                                                            "us_per_call": 1.0, "calls_per_round": 1}],
            "best_gflops": {"float32": best}, "peak_gflops": {"float32": 500.0},
            "fraction_of_peak": {"float32": round(best / 500.0, 3)}, "peak_basis": "4 cores × 3900 MHz × 32",
            "threads": threads, "interop_threads": 1, "usable_cpus": 8, "thread_env": env or {},
            "blas": "OpenBLAS 0.3.21", "parallel_backend": "OpenMP", "cpu_capability": "AVX2"}


def test_a_gemm_far_below_the_peak_warns_with_the_thread_settings():
    # The field-notes laptop: BLAS at ~4 GFLOP/s where hundreds were due.
    area = gemm_area(_gemm(4.0, threads=1, env={"OMP_NUM_THREADS": "1"}))
    finding, = area.findings
    assert (finding.id, finding.level) == ("bench.gemm-slow", Level.WARNING)
    assert "float32 GEMM reached a median 0.8% of the 500 GFLOP/s" in finding.detail
    assert "1 thread(s) of 8 usable CPUs (OMP_NUM_THREADS=1); BLAS: OpenBLAS 0.3.21" in finding.detail
    assert "OMP_NUM_THREADS" in finding.fix


def test_a_gemm_near_the_peak_is_fine():
    assert gemm_area(_gemm(300.0, threads=8)).findings == []


def test_the_verdict_uses_every_size_not_the_best():
    # Regression: one good size (a lucky round) hid a sweep that was slow everywhere else.
    results = [{"dtype": "float32", "n": n, "gflops": g, "us_per_call": 1.0, "calls_per_round": 1}
               for n, g in ((64, 5.0), (256, 20.0), (512, 300.0), (1024, 25.0))]
    g = {**_gemm(300.0, threads=8), "results": results,
         "verdict_fraction": verdict_fractions(results, {"float32": 500.0}, "cpu")}
    assert g["verdict_fraction"]["float32"] == {"median": 0.05, "by_size": {"256": 0.04, "512": 0.6, "1024": 0.05}}
    finding, = gemm_area(g).findings
    assert "median 5.0%" in finding.detail and "n=256: 4.0%, n=512: 60.0%, n=1024: 5.0%" in finding.detail
    assert "the best was 300.0 GFLOP/s" in finding.detail
    area = gemm_area(g)
    assert area.details[0].split() == ["dtype", "n", "GFLOP/s", "%", "of", "peak", "µs", "a", "call"]
    assert area.details[3].split()[:4] == ["float32", "512", "300.0", "60.0%"]


def test_compiled_area_prints_ratios_and_names_slower_than_eager():
    c = {"device": "cpu", "model": "torchfn mlp 512-256-128-2, forward",
         "compile": {"ok": True, "error": "", "seconds": 4.2}, "torchscript": {"ok": True, "error": "", "seconds": 0.1},
         "results": [{"batch": 1, "eager_us": 40.0, "compile_us": 80.0, "torchscript_us": 20.0,
                      "compile_speedup": 0.5, "torchscript_speedup": 2.0}]}
    area = compiled_area(c)
    assert area.summary == "batch 1: eager 40 µs, torch.compile 80 µs (0.50×), TorchScript 20 µs (2.00×)"
    assert area.findings == []
    c["results"][0].update(eager_spread=0.1, compile_spread=0.6, torchscript_spread=0.02)
    line = compiled_area(c).details[0]
    assert line == ("batch 1 spread over rounds (half the max−min range): eager ±5%, "
                    "torch.compile ±30%, runs disagree, TorchScript ±1%")


def test_a_thread_setting_below_the_usable_cpus_warns_with_its_measured_cost(tmp_path):
    env = {"OMP_NUM_THREADS": "1"}
    proc = doctor_subprocess("bench", "--quick", "--device", "cpu", "--no-compile", "--json", env=env)
    report = json.loads(proc.stdout)
    gemm, = report["gemm"]
    if gemm["usable_cpus"] < 2:
        pytest.fail("this test needs a machine with at least 2 usable CPUs")
    limited = gemm["threads_limited"]
    assert (limited["threads"], limited["usable_cpus"]) == (1, gemm["usable_cpus"])
    assert limited["gflops_at_setting"] > 0 and limited["gflops_at_usable"] > 0
    finding, = [f for f in report["findings"] if f["id"] == "bench.threads-limited"]
    assert finding["level"] == "warning"
    assert f"torch uses 1 thread(s) of {gemm['usable_cpus']} usable CPUs (OMP_NUM_THREADS=1)" in finding["detail"]
    assert f"{limited['gflops_at_setting']:.1f} GFLOP/s" in finding["detail"]
