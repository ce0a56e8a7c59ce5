"""nccl.not-compiled: the advice speaks of the platform that has no NCCL — Windows when the log's
own paths say so, else the machine the doctor runs on — and keeps the CUDA-build advice for Linux.

The corpus logs are in tests/fixtures/logs (nccl.not-compiled--*.log: five of them Windows)."""

from __future__ import annotations

import pytest

from doctor.explain import explain_text
from doctor.explain.facts import MachineFacts

NO_NCCL = "RuntimeError: Distributed package doesn't have NCCL built in"


@pytest.mark.parametrize("line", [
    '  File "C:\\Users\\u\\AppData\\Local\\Programs\\Python\\Python311\\Lib\\site-packages\\torch\\distributed\\distributed_c10d.py", line 1013, in _new_process_group_helper',
    "ERROR:torch.distributed.elastic.multiprocessing.api:failed (exitcode: 1) local_rank: 0 (pid: 27316) of binary: D:\\envs\\x\\python.exe",
])
def test_a_windows_log_gets_gloo_and_wsl_not_a_cuda_build(line):
    [f] = explain_text(line + "\n" + NO_NCCL + "\n")
    assert (f.id, f.title) == ("nccl.not-compiled", "torch for Windows has no NCCL, and the job asked for the nccl backend")
    assert "gloo" in f.fix and "WSL 2" in f.fix and "CUDA build of torch" not in f.fix
    assert "The log's paths are Windows paths (" in f.detail


def test_the_machine_decides_when_the_log_does_not_say():
    mac = explain_text(NO_NCCL, MachineFacts(system="Darwin"))[0]
    assert mac.title == "torch for macOS has no NCCL, and the job asked for the nccl backend" and "WSL" not in mac.fix
    assert "The doctor runs on macOS, where PyTorch publishes no NCCL." in mac.detail
    linux = explain_text(NO_NCCL, MachineFacts(system="Linux"))[0]
    assert linux.title == "this torch has no NCCL, and the job asked for the nccl backend"
    assert "install a CUDA build of torch" in linux.fix
    # a Linux path in the traceback says nothing of the platform: the machine's answer stands
    posix = '  File "/home/u/venv/lib/python3.12/site-packages/torch/distributed/distributed_c10d.py", line 1013'
    assert explain_text(posix + "\n" + NO_NCCL, MachineFacts(system="Linux"))[0].title == linux.title
