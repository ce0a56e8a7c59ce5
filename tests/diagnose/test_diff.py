"""`doctor diff` on real reports of this machine, and on hand-made ones for what this machine lacks."""

from __future__ import annotations

import copy
import json
import zipfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from testsupport.ci_support import doctor_env, run_doctor

from doctor.commands.diff import command
from doctor.diagnose.diff import Input, compare


@pytest.fixture(scope="module")
def reports(tmp_path_factory, old_abi_tree) -> tuple[Path, Path]:
    """`doctor check --json` here, and again with LIBTORCH at a fetched old-ABI 2.6.0 tree."""
    tmp = tmp_path_factory.mktemp("diff")
    (tmp / "home").mkdir()
    # Fetched, as the issue asks: the tree zipped as the official old-ABI archive, then installed.
    archive = tmp / "libtorch-shared-with-deps-2.6.0+cpu.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for file in sorted(old_abi_tree.rglob("*")):
            zf.write(file, "libtorch/" + file.relative_to(old_abi_tree).as_posix())
    dest = tmp / "libtorch-2.6.0"
    fetched = run_doctor(["fetch-libtorch", "--version", "2.6.0", "--variant", "cpu", "--abi", "pre-cxx11",
                          "--archive", str(archive), "--dest", str(dest), "--no-lock", "-q"], cwd=tmp, env=doctor_env(tmp))
    assert fetched.returncode == 0, fetched.stderr
    a, b = tmp / "here.json", tmp / "old-abi.json"
    for path, extra in ((a, {}), (b, {"LIBTORCH": str(dest)})):
        result = run_doctor(["check", "--json"], cwd=tmp, env=doctor_env(tmp, **extra))
        assert result.returncode in (0, 1), result.stderr
        path.write_text(result.stdout)
    return a, b


def test_diff_lists_abi_and_version_change_and_exits_1(reports):
    a, b = reports
    result = run_doctor(["diff", str(a), str(b)], cwd=a.parent, env=doctor_env(a.parent))
    assert result.returncode == 1, result.stderr
    lines = result.stdout.splitlines()
    assert "    ✗ libtorch version: 2.13.0 → 2.6.0 [diff.changed]" in lines
    assert "    ✗ libtorch CXX11 ABI: cxx11 → pre-cxx11 [diff.changed]" in lines
    assert "    ! LIBTORCH: none → " + str(json.loads(b.read_text())["facts"]["env"]["LIBTORCH"]) + " [diff.changed]" in lines
    assert lines[0].startswith("[✗] libtorch (active):")


def test_diff_json_names_each_difference(reports):
    a, b = reports
    result = run_doctor(["diff", str(a), str(b), "--json"], cwd=a.parent, env=doctor_env(a.parent))
    data = json.loads(result.stdout)
    assert data["command"] == "diff" and data["exit_code"] == 1
    changed = {(d["fact"], d["a"], d["b"], d["level"]) for d in data["facts"]["differences"]}
    assert {("libtorch version", "2.13.0", "2.6.0", "error"), ("libtorch CXX11 ABI", "cxx11", "pre-cxx11", "error"),
            ("libtorch C++ standard", "20", "17", "warning")} <= changed
    abi = next(f for f in data["findings"] if f["subject"] == "libtorch CXX11 ABI")
    assert [e["excerpt"] for e in abi["evidence"]] == [
        f"facts.libtorch.candidates[{data_active(a)}].abi = cxx11",
        f"facts.libtorch.candidates[{data_active(b)}].abi = pre-cxx11",
    ]
    # the fix names A's whole build, so it works when pasted (`--abi pre-cxx11` alone asked for 2.13.0)
    back = json.loads(run_doctor(["diff", str(b), str(a), "--json"], cwd=a.parent, env=doctor_env(a.parent)).stdout)
    fix = next(f for f in back["findings"] if f["subject"] == "libtorch CXX11 ABI")["fix"]
    assert fix == "build and run with one ABI: doctor fetch-libtorch --version 2.6.0 --variant cpu --abi pre-cxx11"
    pasted = run_doctor([*fix.split(": ", 1)[1].split()[1:], "--dry-run", "--no-lock"], cwd=a.parent, env=doctor_env(a.parent))
    assert pasted.returncode == 0, pasted.stderr


def data_active(path: Path) -> int:
    return json.loads(path.read_text())["facts"]["libtorch"]["active"]


def test_same_report_exits_0(reports):
    a, _ = reports
    result = run_doctor(["diff", str(a), str(a)], cwd=a.parent, env=doctor_env(a.parent))
    assert result.returncode == 0, result.stdout
    assert result.stdout.splitlines()[-1] == "No problems found."


@pytest.mark.parametrize("fmt", ["markdown", "junit", "github"])
def test_diff_renders_in_every_ci_format(reports, fmt):
    a, b = reports
    result = invoke([str(a), str(b), "--format", fmt], env={"GITHUB_STEP_SUMMARY": ""})
    assert "libtorch CXX11 ABI" in result.output and result.return_value == 1


def invoke(args: list[str], **kw):
    """The command through click (stderr kept apart); its return value is the exit code."""
    return CliRunner().invoke(command, args, standalone_mode=False, catch_exceptions=False, **kw)


def report(**facts) -> dict:
    base = {"schema": "torch-doctor/report", "schema_version": 1, "command": "check", "findings": [],
            "facts": {"libtorch": {"candidates": [], "active": None}, "python_torch": None, "gpu": None, "env": {}}}
    base["facts"].update(facts)
    return base


NVIDIA = {"nvidia": {"driver_version": "570.124.06", "driver_cuda_version": "12.8", "reachable": True,
                     "gpus": [{"name": "NVIDIA H200", "compute_capability": "9.0", "visible": True}]},
          "amd": {"gpus": []}, "apple": None, "recommended": {"variant": "cu128"}}


def test_gpu_driver_and_devices_are_relevant():
    b_gpu = copy.deepcopy(NVIDIA)
    b_gpu["nvidia"].update(driver_version="535.104.05", driver_cuda_version="12.2")
    b_gpu["nvidia"]["gpus"][0].update(name="Tesla T4", compute_capability="7.5")
    b_gpu["recommended"]["variant"] = "cu126"
    diff = compare(Input("a.json", report(gpu=NVIDIA)), Input("b.json", report(gpu=b_gpu)))
    levels = {d["fact"]: (d["a"], d["b"], d["level"]) for d in diff.facts["differences"]}
    assert levels == {
        "NVIDIA driver": ("570.124.06", "535.104.05", "error"),
        "CUDA the driver supports": ("12.8", "12.2", "error"),
        "NVIDIA GPUs": ("NVIDIA H200 (sm 9.0)", "Tesla T4 (sm 7.5)", "error"),
        "variant that fits": ("cu128", "cu126", "warning"),
    }
    assert diff.exit_code() == 1


def test_gpu_missing_on_b_and_env_difference():
    b_gpu = copy.deepcopy(NVIDIA)
    b_gpu["nvidia"].update(reachable=False, gpus=[])
    a = report(gpu=NVIDIA, env={"CUDA_VISIBLE_DEVICES": "0"})
    b = report(gpu=b_gpu, env={"CUDA_VISIBLE_DEVICES": ""})
    diff = compare(Input("a.json", a), Input("b.json", b))
    facts = {d["fact"]: (d["a"], d["b"]) for d in diff.facts["differences"]}
    assert facts["NVIDIA GPUs"] == ("NVIDIA H200 (sm 9.0)", "none")
    assert facts["NVIDIA driver answers"] == ("yes", "no")
    assert facts["CUDA_VISIBLE_DEVICES"] == ("0", "none")


def test_only_warnings_exit_0_unless_strict(tmp_path):
    a = report(toolchain={"compilers": [{"name": "g++", "version": "12.2.0", "max_std": 23}]})
    b = report(toolchain={"compilers": [{"name": "g++", "version": "9.4.0", "max_std": 17}]})
    files = []
    for name, data in (("a.json", a), ("b.json", b)):
        (tmp_path / name).write_text(json.dumps(data))
        files.append(str(tmp_path / name))
    plain = invoke(files)
    assert plain.return_value == 0 and "! g++: 12.2.0 (up to c++23) → 9.4.0 (up to c++17)" in plain.output
    assert invoke([*files, "--strict"]).return_value == 1


def test_problems_only_one_side_has():
    a = report()
    b = report()
    b["findings"] = [{"id": "loader.library-not-found", "level": "error", "title": "libc10.so not found", "fix": "export LD_LIBRARY_PATH=…"}]
    diff = compare(Input("a.json", a), Input("b.json", b))
    results = next(area for area in diff.areas if area.name == "results")
    assert [f.title for f in results.findings] == ["only B reports loader.library-not-found (error): libc10.so not found"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("not json", "not JSON"),
        ('{"schema": "something-else"}', "not a torch-doctor report"),
        (json.dumps({**report(), "command": "explain"}), "a `doctor explain` report"),
        (json.dumps({**report(), "schema_version": 99}), "report schema version 99, this doctor reads up to 2"),
    ],
)
def test_bad_inputs_exit_2(tmp_path, content, message):
    bad = tmp_path / "bad.json"
    bad.write_text(content)
    good = tmp_path / "good.json"
    good.write_text(json.dumps(report()))
    result = run_doctor(["diff", str(good), str(bad)], cwd=tmp_path, env=doctor_env(tmp_path))
    assert result.returncode == 2
    assert f"{bad}: {message}" in result.stderr


def test_missing_file_exits_2(tmp_path):
    result = run_doctor(["diff", str(tmp_path / "nope.json"), "-"], cwd=tmp_path, env=doctor_env(tmp_path))
    assert result.returncode == 2 and "nope.json: cannot read" in result.stderr


def test_b_from_stdin(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(report()))
    result = invoke([str(tmp_path / "a.json"), "-"], input=json.dumps(report()))
    assert result.return_value == 0, result.output


def test_facts_of_the_wrong_shape_exit_2(tmp_path):
    good = tmp_path / "good.json"
    good.write_text(json.dumps(report()))
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(report(libtorch=["not", "a", "table"])))
    result = run_doctor(["diff", str(good), str(bad)], cwd=tmp_path, env=doctor_env(tmp_path))
    assert result.returncode == 2, result.stderr
    # the part named, no Python error text ("'list' object has no attribute 'get'")
    assert result.stderr.startswith(f"error: {bad}: facts.libtorch is a list, not in the shape `doctor check --json` writes\n")


def test_an_active_index_that_names_no_candidate_is_no_active_libtorch(tmp_path):
    """-1 and true are not candidate indexes (Python took -1 as the last one, true as 1)."""
    tree = {"version": "2.13.0", "variant": "cpu", "abi": "cxx11"}
    good = tmp_path / "good.json"
    good.write_text(json.dumps(report(libtorch={"candidates": [tree, {**tree, "version": "2.9.0"}], "active": 0})))
    for active in (-1, True):
        odd = tmp_path / "odd.json"
        odd.write_text(json.dumps(report(libtorch={"candidates": [tree, {**tree, "version": "2.9.0"}], "active": active})))
        data = json.loads(run_doctor(["diff", str(good), str(odd), "--json"], cwd=tmp_path, env=doctor_env(tmp_path)).stdout)
        assert ("libtorch version", "2.13.0", "none") in {(d["fact"], d["a"], d["b"]) for d in data["facts"]["differences"]}
