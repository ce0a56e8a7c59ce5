"""Start `doctor fleet` as real separate node processes on 127.0.0.1 (torchrun agents, or the
srun/mpirun variables), each with its own environment: its own HOME, PATH of fake commands that
print real captured output, and libtorch trees."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
from testsupport.gpu_fakes import QUERY, SMI_5090, SMI_H200  # real nvidia-smi outputs

__all__ = ["QUERY", "SMI_5090", "SMI_H200", "Node", "free_port", "node_env", "start_torchrun", "finish"]


@dataclass
class Node:
    name: str
    proc: subprocess.Popen

    def result(self, timeout: float) -> tuple[int, str, str]:
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, out, err


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def node_env(root: Path, smi: str | None = None, extra: dict | None = None) -> dict[str, str]:
    """A hermetic environment for one node: HOME and TMPDIR under `root`, a bin/ of fake commands first on
    PATH (then the system's, for getent, g++, cmake), no LIBTORCH* or launcher variables."""
    (root / "home").mkdir(parents=True, exist_ok=True)
    bin_dir = root / "bin"
    bin_dir.mkdir(exist_ok=True)
    if smi is not None:
        script = bin_dir / "nvidia-smi"
        script.write_text(f'#!/bin/sh\nfor a in "$@"; do [ "$a" = "{QUERY}" ] && {{ printf %s \'{smi}\'; exit 0; }}; done\nexit 1\n')
        script.chmod(0o755)
    (root / "tmp").mkdir(exist_ok=True)  # torchrun's torchelastic_* logs land here, not in /tmp
    keep = {k: v for k, v in os.environ.items() if k in ("LANG", "LC_ALL")}
    env = {**keep, "HOME": str(root / "home"), "TMPDIR": str(root / "tmp"),
           "PATH": f"{bin_dir}:{Path(sys.executable).parent}:/usr/bin:/bin",
           "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "NO_COLOR": "1"}
    env.update(extra or {})
    return env


def start_torchrun(name: str, env: dict[str, str], nnodes: int, nproc: int, endpoint: str, args: list[str],
                   cwd: Path) -> Node:
    argv = [sys.executable, "-m", "torch.distributed.run", f"--nnodes={nnodes}", f"--nproc-per-node={nproc}",
            "--rdzv-backend=c10d", f"--rdzv-endpoint={endpoint}", "--rdzv-id=doctor-fleet-test",
            "--max-restarts=0", "-m", "doctor", "fleet", *args]
    return Node(name, subprocess.Popen(argv, env=env, cwd=cwd, text=True, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, start_new_session=True))


def start_rank(name: str, env: dict[str, str], args: list[str], cwd: Path) -> Node:
    """One rank started the way srun or mpirun start it: the launcher's variables are in `env`."""
    argv = [sys.executable, "-m", "doctor", "fleet", *args]
    return Node(name, subprocess.Popen(argv, env=env, cwd=cwd, text=True, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, start_new_session=True))


def finish(nodes: list[Node], timeout: float) -> dict[str, tuple[int, str, str]]:
    """Every node's (exit code, stdout, stderr); a node still running after `timeout` is killed
    and fails the test with what it printed."""
    out = {}
    for node in nodes:
        try:
            out[node.name] = node.result(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(node.proc.pid, 9)
            stdout, stderr = node.proc.communicate()
            raise AssertionError(f"{node.name} still running after {timeout} s:\n{stdout}\n{stderr}") from None
    return out
