"""`srun -N1 -n2 doctor fleet` on a real one-node Slurm cluster the test starts for itself:
its own munged (own key and socket), slurmctld and slurmd on free ports, state in tmp_path."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import pytest
from testsupport.nodes import REPO, free_port

DAEMONS = ("munged", "slurmctld", "slurmd", "srun")


@pytest.fixture
def slurm(tmp_path):
    missing = [d for d in DAEMONS if shutil.which(d) is None and not os.path.exists(f"/usr/sbin/{d}")]
    if missing:
        pytest.fail(f"Slurm is not installed ({', '.join(missing)}): scripts/test installs slurmctld slurmd slurm-client munge")
    if os.geteuid() != 0:
        pytest.fail("the one-node Slurm cluster runs its daemons as root (SlurmUser=root)")
    host = socket.gethostname()
    d = tmp_path / "slurm"
    for sub in ("spool", "state", "log"):
        (d / sub).mkdir(parents=True)
    key = d / "munge.key"
    key.write_bytes(os.urandom(1024))
    key.chmod(0o600)
    sock = d / "munge.socket"
    conf = d / "slurm.conf"
    conf.write_text("\n".join([
        "ClusterName=doctortest", f"SlurmctldHost={host}(127.0.0.1)", "SlurmUser=root", "SlurmdUser=root",
        "AuthType=auth/munge", "CredType=cred/munge", f"AuthInfo=socket={sock}", "MpiDefault=none",
        "ProctrackType=proctrack/linuxproc", "TaskPlugin=task/none", "JobAcctGatherType=jobacct_gather/none",
        "SchedulerType=sched/builtin", "SelectType=select/linear", "ReturnToService=2",
        f"SlurmctldPort={free_port()}", f"SlurmdPort={free_port()}", f"SlurmdSpoolDir={d}/spool",
        f"StateSaveLocation={d}/state", f"SlurmctldPidFile={d}/ctld.pid", f"SlurmdPidFile={d}/d.pid",
        f"SlurmctldLogFile={d}/log/ctld.log", f"SlurmdLogFile={d}/log/d.log",
        f"NodeName={host} NodeAddr=127.0.0.1 CPUs={os.cpu_count() or 2} State=UNKNOWN",
        "PartitionName=test Nodes=ALL Default=YES MaxTime=INFINITE State=UP", ""]))
    env = {**os.environ, "SLURM_CONF": str(conf)}
    procs = [subprocess.Popen(["munged", "--foreground", "--force", f"--socket={sock}", f"--key-file={key}",
                               f"--pid-file={d}/munged.pid", f"--log-file={d}/log/munged.log",
                               f"--seed-file={d}/munged.seed"], env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        _wait(lambda: sock.exists(), 10, "munged did not create its socket")
        procs.append(subprocess.Popen(["slurmctld", "-D", "-c", "-i"], env=env, start_new_session=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        time.sleep(1)
        procs.append(subprocess.Popen(["slurmd", "-D", "-N", host], env=env, start_new_session=True,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        _wait(lambda: "idle" in subprocess.run(["sinfo", "-h", "-o", "%t"], env=env, capture_output=True,
                                               text=True).stdout, 30,
              f"the Slurm node never became idle; see {d}/log")
        yield env
    finally:
        for p in reversed(procs):
            os.killpg(p.pid, signal.SIGTERM)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, signal.SIGKILL)


def _wait(ready, seconds: float, message: str) -> None:
    deadline = time.monotonic() + seconds
    while not ready():
        if time.monotonic() > deadline:
            pytest.fail(message)
        time.sleep(0.2)


def test_srun_N1_n2_doctor_fleet(slurm, tmp_path):
    env = {**slurm, "PYTHONPATH": str(REPO), "HOME": str(tmp_path), "MASTER_PORT": str(free_port()),
           "OMP_NUM_THREADS": "1"}
    env = {k: v for k, v in env.items() if not k.startswith(("LIBTORCH", "RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR"))}
    run = subprocess.run(["srun", "-N1", "-n2", sys.executable, "-m", "doctor", "fleet", "--timeout", "40",
                          "--max-size", "4096", "--iters", "2", "--json"],
                         env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    report = json.loads(run.stdout)  # only rank 0 prints
    launch = report["facts"]["launch"]
    assert (launch["launcher"], launch["world_size"], launch["master_addr"]) == ("slurm", 2, socket.gethostname())
    assert [n["ranks"] for n in report["facts"]["nodes"]] == [[0, 1]]  # one node: one gatherer, both ranks
    assert all(not p for r in report["facts"]["ranks"] for p in r["gloo"].values())
    assert report["facts"]["ranks"][1]["training"]["param_spread"] == 0.0
