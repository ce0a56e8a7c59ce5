"""scripts/gpu-check, run for real: here (no GPU), and against a fake nvidia-smi on PATH."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from testsupport.gpu_fakes import FakeMachine

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts/gpu-check"
# These compare against this machine, which the tests assume has no GPU; on a GPU machine the
# script itself is the check (see docs/gpu.md).
pytestmark = pytest.mark.skipif(
    Path("/sys/module/nvidia").exists() or Path("/dev/kfd").exists() or bool(shutil.which("nvidia-smi")),
    reason="a real GPU driver is present: run scripts/gpu-check itself",
)
HEADER = ("+-----------------------------------------------------------------------------------------+\n"
          "| NVIDIA-SMI 570.124.06              Driver Version: 570.124.06     CUDA Version: {cuda}     |\n"
          "|-----------------------------------------+------------------------+----------------------+\n")


def run_script(tmp_path: Path, path: str, *args: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CUDA_", "DOCTOR_"))}
    env["PATH"] = path
    return subprocess.run([sys.executable, str(SCRIPT), "--no-torch", "--save", str(tmp_path / "out"), *args],
                          capture_output=True, text=True, env=env, timeout=120, cwd=tmp_path)


def fake_smi(machine: FakeMachine, cuda: str) -> str:
    machine.command("nvidia-smi", {
        "--query-gpu=index,name,driver_version,memory.total,compute_cap": ("0, NVIDIA H200, 570.124.06, 143771, 9.0\n", 0),
        "--query-gpu=index,name,driver_version,memory.total,compute_cap,pci.bus_id":
            ("0, NVIDIA H200, 570.124.06, 143771, 9.0, 00000000:19:00.0\n", 0),
    }, default=(HEADER.format(cuda=cuda), 0))
    return f"{machine.root / 'bin'}{os.pathsep}{os.environ['PATH']}"


def test_gpu_check_here_without_a_gpu(tmp_path):
    result = run_script(tmp_path, os.environ["PATH"])
    assert result.returncode == 0, result.stderr
    assert re.search(r"GPU count\s+0\s+0", result.stdout), result.stdout and "nvidia-smi: not found" in result.stdout
    assert {p.name for p in (tmp_path / "out").iterdir()} == {"doctor.json", "nvidia-smi.txt", "torch.json"}


def test_gpu_check_agrees_with_nvidia_smi(machine, tmp_path):
    result = run_script(tmp_path, fake_smi(machine, "12.8"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert re.search(r"GPU 0 compute cap\.\s+9\.0\s+9\.0\s+-\s+ok", result.stdout), result.stdout
    assert "The doctor agrees with nvidia-smi." in result.stdout
    # the driver-version precedence's inputs are shown and compared one by one
    assert re.search(r"driver by nvidia-smi\s+570\.124\.06\s+570\.124\.06\s+-\s+ok", result.stdout), result.stdout
    assert "warning: [gpu.cpu-build]" in result.stdout  # this machine's torch is the CPU wheel
    gpu = json.loads((tmp_path / "out/doctor.json").read_text())["facts"]["gpu"]  # `doctor check --json`, for real
    assert gpu["nvidia"]["gpus"][0]["name"] == "NVIDIA H200" and gpu["nvidia"]["driver_version"] == "570.124.06"
    assert gpu["recommended"]["variant"] and gpu["recommended"]["reasons"]


def test_gpu_check_reports_a_disagreement(machine, tmp_path):
    # No libcuda here: the doctor derives CUDA 12.8 from driver 570; this header says 12.9.
    result = run_script(tmp_path, fake_smi(machine, "12.9"))
    assert result.returncode == 1
    assert "driver CUDA version: doctor 12.8, nvidia-smi 12.9" in result.stdout


def test_gpu_check_direct_mode_needs_only_the_standard_library(machine, tmp_path):
    result = run_script(tmp_path, fake_smi(machine, "12.8"), "--direct")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "--direct: the GPU probes ran directly" in result.stdout
    assert re.search(r"GPU 0 name\s+NVIDIA H200\s+NVIDIA H200", result.stdout)
