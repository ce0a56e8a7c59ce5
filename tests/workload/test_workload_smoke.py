"""`doctor smoke`: the real torch on this machine's CPU, one verdict per device."""

from __future__ import annotations

import json

import torch
from click.testing import CliRunner

from doctor.commands.smoke import command as smoke
from doctor.model import Level
from doctor.workload.smoke import area_for, run_device
from support import doctor_subprocess


def test_cpu_trains():
    threads = torch.get_num_threads()
    r = run_device(torch, "cpu", steps=60)
    assert torch.get_num_threads() == threads  # smoke trains on one thread and gives the setting back
    assert r.ok, r.problems or r.error
    assert r.round_trip_exact and r.grads_finite and r.max_difference_from_cpu == 0.0
    assert r.last_loss < 0.5 * r.first_loss


def test_a_device_that_cannot_compute_fails_with_its_own_error():
    # The meta device holds shapes and no data: a real torch device on which training cannot work.
    r = run_device(torch, "meta", steps=5)
    assert not r.ok and r.error
    area = area_for(r)
    assert area.level is Level.ERROR
    assert [f.id for f in area.findings] == ["smoke.failed"]
    assert r.error in area.findings[0].detail


def test_too_few_steps_is_reported_as_a_loss_that_did_not_fall():
    r = run_device(torch, "cpu", steps=1)
    assert not r.ok and not r.error
    assert r.problems == [f"the loss did not fall: {r.first_loss:.4f} → {r.last_loss:.4f} in 1 steps"]


def invoke(*args: str):
    """The command as the CLI runs it: its return value is the exit code."""
    return CliRunner().invoke(smoke, list(args), catch_exceptions=False, standalone_mode=False)


def test_smoke_json_has_one_passing_verdict_for_the_cpu():
    result = invoke("--device", "cpu", "--json")
    assert result.return_value == 0, result.output
    report = json.loads(result.stdout)
    assert [a["name"] for a in report["areas"]] == ["smoke.cpu"]
    assert [(f["id"], f["level"], f["subject"]) for f in report["findings"]] == [("smoke.passed", "ok", "cpu")]
    assert report["smoke"][0]["ok"] is True and report["facts"]["torch_version"] == torch.__version__


def test_asking_for_cuda_gets_a_verdict_either_way():
    result = invoke("--device", "cuda", "--json")
    report = json.loads(result.stdout)
    if torch.cuda.is_available():
        assert result.return_value == 0 and all(f["id"] == "smoke.passed" for f in report["findings"])
    else:
        expected = "cuda.not-compiled" if torch.version.cuda is None else "cuda.no-device"
        assert result.return_value == 1
        assert [(f["id"], f["level"]) for f in report["findings"]] == [(expected, "error")]


def test_doctor_smoke_json_exits_0_as_a_user_runs_it():
    proc = doctor_subprocess("smoke", "--json")
    assert proc.returncode == 0, proc.stderr
    report = json.loads(proc.stdout)
    assert report["command"] == "smoke" and report["exit_code"] == 0
    assert any(f["id"] == "smoke.passed" and f["subject"] == "cpu" for f in report["findings"])
