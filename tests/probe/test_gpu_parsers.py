"""The GPU parsers are pure functions of text: real strings, then fuzzing."""

from __future__ import annotations

import pytest
from testsupport.gpu_fakes import PROC_OLD, PROC_OPEN, SMI_H200, SMI_MIXED
from hypothesis import given
from hypothesis import strategies as st

from doctor.probe.nvidia import (
    SMI_FIELDS_OLD,
    parse_child_output,
    parse_cuda_version,
    parse_module_version,
    parse_override,
    parse_proc_gpu_information,
    parse_proc_version,
    parse_smi_csv,
    parse_visible_devices,
)
from doctor.probe.rocm import gfx_name, gfx_targets_in_names, parse_kfd_properties, parse_rocm_version


def test_proc_version_both_formats():
    assert parse_proc_version(PROC_OPEN) == ("550.144.03", "open")
    assert parse_proc_version(PROC_OLD) == ("375.74", "proprietary")
    assert parse_proc_version("GCC version: gcc 12\n") == (None, None)
    assert parse_proc_version("") == (None, None)


def test_module_version_is_just_the_number():
    assert parse_module_version("550.144.03\n") == "550.144.03"
    assert parse_module_version("garbage") is None


def test_smi_csv_one_and_several_gpus():
    (h200,) = parse_smi_csv(SMI_H200)
    assert h200 == {"index": "0", "name": "NVIDIA H200", "driver_version": "570.124.06", "memory.total": "143771", "compute_cap": "9.0"}
    rows = parse_smi_csv(SMI_MIXED)
    assert [r["compute_cap"] for r in rows] == ["8.9", "8.6", "6.1"]
    assert rows[2]["name"] == "NVIDIA GeForce GTX 1080 Ti"


def test_smi_csv_not_available_fields_and_wrong_widths():
    rows = parse_smi_csv("0, NVIDIA A100-SXM4-80GB, 535.183.01, [N/A], [Not Supported]\nNo devices were found\n")
    assert rows == [{"index": "0", "name": "NVIDIA A100-SXM4-80GB", "driver_version": "535.183.01", "memory.total": None,
                     "compute_cap": None}]
    assert parse_smi_csv("0, Tesla K80, 470.256.02, 11441\n", SMI_FIELDS_OLD)[0]["name"] == "Tesla K80"
    assert parse_smi_csv("0, Tesla K80, 470.256.02, 11441\n") == []  # 4 fields where 5 were asked


def test_proc_gpu_information():
    text = "Model: \t\t NVIDIA H200\nIRQ:   \t\t 143\nGPU UUID: \t GPU-5a1d2c3e\nBus Location: \t 0000:19:00.0\nDevice Minor: \t 0\n"
    info = parse_proc_gpu_information(text)
    assert info["Model"] == "NVIDIA H200" and info["Device Minor"] == "0" and info["Bus Location"] == "0000:19:00.0"


def test_cuda_version_integer():
    assert parse_cuda_version(12080) == "12.8"
    assert parse_cuda_version(13000) == "13.0"
    assert parse_cuda_version(11040) == "11.4"
    assert parse_cuda_version(0) is None


def test_child_output_survives_a_hang_after_the_version():
    text = '{"event": "cuDriverGetVersion", "path": "/usr/lib/libcuda.so.1", "rc": 0, "version": 12080}\n'
    report = parse_child_output(text + '{"event": "cuInit"')  # killed mid-line
    assert report.driver_cuda == 12080 and report.cu_init is None
    report = parse_child_output('{"event": "dlopen", "path": "x", "ok": false, "error": "x: cannot open"}\nnot json\n[1]\n')
    assert report.errors == ["x: cannot open"] and report.driver_cuda is None


@pytest.mark.parametrize(
    "value, count, visible, says",
    [
        (None, 3, [0, 1, 2], ""),
        ("1", 3, [1], "hides GPU 0, 2"),
        ("2,0", 3, [2, 0], "hides GPU 1"),
        ("0,7,1", 3, [0], "hides GPU 1, 2"),  # CUDA stops at the first invalid entry
        ("", 2, [], "empty"),
        ("-1", 2, [], "no valid GPU"),
        ("0,0", 2, [0], "hides GPU 1"),
        ("GPU-5a1d2c3e", 2, None, "UUID"),
    ],
)
def test_visible_devices_as_cuda_reads_them(value, count, visible, says):
    seen = parse_visible_devices(value, count)
    assert seen.indices == visible
    assert says in seen.note


def test_override_is_a_driver_or_a_cuda_version():
    assert parse_override("550.54.14") == ("550.54.14", None)
    assert parse_override("580") == ("580", None)
    assert parse_override("12.4") == (None, "12.4")
    for bad in ("abc", "12", "5.5", "1.2.3.4", ""):
        with pytest.raises(ValueError):
            parse_override(bad)


@pytest.mark.parametrize("value, name", [(90010, "gfx90a"), (90402, "gfx942"), (110501, "gfx1151"), (100300, "gfx1030"),
                                         (90000, "gfx900"), (120001, "gfx1201"), (90500, "gfx950"), (0, None)])
def test_gfx_target_version_decoding(value, name):
    assert gfx_name(value) == name


def test_kfd_properties_and_rocm_version():
    props = parse_kfd_properties("cpu_cores_count 0\nsimd_count 1216\ngfx_target_version 90402\nname ignored words\n")
    assert props == {"cpu_cores_count": 0, "simd_count": 1216, "gfx_target_version": 90402}
    assert parse_rocm_version("6.4.0-47\n") == "6.4.0"
    assert parse_rocm_version("none") is None


def test_gfx_targets_from_rocblas_file_names():
    names = ["TensileLibrary_lazy_gfx942.dat", "Kernels.so-000-gfx90a-xnack+.hsaco", "TensileLibrary_lazy_gfx1100.dat", "TensileManifest.txt"]
    assert gfx_targets_in_names(names) == ["gfx90a", "gfx942", "gfx1100"]


@given(st.integers(min_value=1, max_value=15), st.integers(min_value=0, max_value=15), st.integers(min_value=0, max_value=15))
def test_gfx_name_round_trips(major, minor, stepping):
    name = gfx_name(major * 10000 + minor * 100 + stepping)
    assert name == f"gfx{major}{minor:x}{stepping:x}"


@given(st.text())
def test_parsers_never_raise(text):
    parse_proc_version(text)
    parse_module_version(text)
    parse_smi_csv(text)
    parse_proc_gpu_information(text)
    parse_child_output(text)
    parse_kfd_properties(text)
    parse_rocm_version(text)
    parse_visible_devices(text, 4)


@given(st.lists(st.tuples(st.integers(0, 15), st.text(alphabet="abcdefghijklmnopqrstuvwxyz ", max_size=20),
                          st.sampled_from(["8.9", "9.0", "12.0", "[N/A]"])), max_size=8))
def test_smi_csv_fuzzed_rows(rows):
    text = "".join(f"{i}, {name.strip() or 'x'}, 570.124.06, 1000, {cc}\n" for i, name, cc in rows)
    parsed = parse_smi_csv(text)
    assert len(parsed) == len(rows)
    assert all(p["compute_cap"] in ("8.9", "9.0", "12.0", None) for p in parsed)
