"""The CPU peak estimate and torch's BLAS / thread report, from real captured text."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from doctor.host import Host
from doctor.workload.bench import cpu_context
from doctor.probe.system import parse_cpuinfo
from doctor.workload.cpu import (
    estimate_peak,
    parse_max_freq_khz,
    parse_parallel_info,
    parse_torch_config,
    usable_cores,
    x86_family,
)


def test_epyc_zen4_runs_avx512_on_256_bit_units(fixture_text):
    text = fixture_text("cpuinfo-amd-epyc-avx512-2cpu.txt")
    info = parse_cpuinfo(text)
    assert (info.model, info.logical, info.physical_cores, info.arch) == ("AMD EPYC", 2, 2, "x86")
    assert info.mhz == 2596.156
    assert x86_family(text) == ("AuthenticAMD", 25)  # family 25 model 17: Zen 4 (Genoa)
    peak = estimate_peak(info, usable_cpus=2, vendor="AuthenticAMD", family=25)
    assert peak.simd == "AVX-512 on 256-bit units (AMD Zen 4, family 25)" and peak.flops_per_cycle == 32
    assert peak.gflops == {"float32": 166.2, "bfloat16": 332.3}  # 2 × 2596.156 MHz × 32; bf16 is native
    assert peak.basis == ("2 cores × 2596 MHz (cpuinfo MHz) × 32 float32 FLOP/cycle "
                          "(AVX-512 on 256-bit units (AMD Zen 4, family 25), FMA, 2 pipes)")
    # A process pinned to one CPU can use one core's pipes.
    assert estimate_peak(info, usable_cpus=1, vendor="AuthenticAMD", family=25).gflops["float32"] == 83.1
    # Without the family (or on a full-width AVX-512 part) the 512-bit datapath counts.
    full = estimate_peak(info, usable_cpus=2)
    assert full.simd == "AVX-512" and full.flops_per_cycle == 64 and full.gflops["float32"] == 332.3


def test_aarch64_needs_the_cpufreq_file_for_a_frequency(fixture_text):
    info = parse_cpuinfo(fixture_text("cpuinfo-rk3588-aarch64-8cpu.txt"))
    assert (info.logical, info.physical_cores, info.mhz, info.arch) == (8, None, None, "arm")
    assert "asimd" in info.flags and info.model == "aarch64"
    assert estimate_peak(info, 8) is None  # no MHz in an aarch64 cpuinfo
    peak = estimate_peak(info, 8, parse_max_freq_khz("2400000\n"))
    assert peak.simd == "NEON" and peak.gflops == {"float32": 307.2}  # 8 × 2400 × 16; no bf16 flag


def test_smt_siblings_do_not_double_the_peak():
    # Two logical CPUs on one core (same physical id and core id), as a hyperthreaded VM shows them.
    text = "".join(f"processor\t: {i}\nmodel name\t: Intel Xeon\nflags\t\t: sse2 avx avx2 fma\n"
                   f"cpu MHz\t\t: 3000.000\nphysical id\t: 0\ncore id\t\t: 0\n\n" for i in range(2))
    info = parse_cpuinfo(text)
    assert (info.logical, info.physical_cores) == (2, 1)
    assert usable_cores(info, 2) == 1
    assert estimate_peak(info, 2).gflops == {"float32": 96.0}  # 1 × 3000 × 32 (AVX2 + FMA)


def test_max_freq_file_parsing():
    assert parse_max_freq_khz("3500000\n") == 3500.0
    assert parse_max_freq_khz(None) is None and parse_max_freq_khz("") is None and parse_max_freq_khz("0") is None


def test_torch_config_names_the_blas(fixture_text):
    config = parse_torch_config(fixture_text("torch-2.13.0-cpu-config.txt"))
    assert config == {"blas": "mkl", "lapack": "mkl", "blas_version": "MKL 2024.2", "cpu_capability": "AVX512",
                      "torch_version": "2.13.0"}


def test_parallel_info_gives_thread_counts(fixture_text):
    info = parse_parallel_info(fixture_text("torch-2.13.0-cpu-parallel-info.txt"))
    assert info["get_num_threads"] == "2" and info["mkl_get_max_threads"] == "2"
    assert info["OMP_NUM_THREADS"] == "[not set]" and info["backend"] == "OpenMP"
    assert info["hardware_concurrency"] == "2"


def test_cpu_context_reads_through_the_host(tmp_path, fixture_text):
    import torch

    (tmp_path / "proc").mkdir()
    (tmp_path / "proc/cpuinfo").write_text(fixture_text("cpuinfo-rk3588-aarch64-8cpu.txt"))
    freq = tmp_path / "sys/devices/system/cpu/cpu0/cpufreq"
    freq.mkdir(parents=True)
    (freq / "cpuinfo_max_freq").write_text("2400000\n")
    host = Host.for_test(tmp_path, env={"OMP_NUM_THREADS": "1"})
    ctx = cpu_context(torch, host)
    assert ctx["name"] == "aarch64" and ctx["thread_env"] == {"OMP_NUM_THREADS": "1"}
    assert ctx["peak_gflops"]["float32"] > 0 and "2400 MHz" in ctx["peak_basis"]
    assert ctx["threads"] == torch.get_num_threads()


@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)), max_size=2000))
def test_cpuinfo_parser_never_raises(text):
    info = parse_cpuinfo(text)
    assert info.logical >= 0
    estimate_peak(info, 4)


@given(st.text(max_size=2000))
def test_config_parsers_never_raise(text):
    parse_torch_config(text)
    parse_parallel_info(text)
