"""`doctor fleet` for real: separate node processes on 127.0.0.1 (two torchrun agents with c10d
rendezvous, or ranks started with the srun/mpirun variables), each with its own environment."""

from __future__ import annotations

import json
import time

import pytest
from testsupport.nodes import REPO, SMI_5090, SMI_H200, finish, free_port, node_env, start_rank, start_torchrun
from testsupport.support import make_tree

SMALL = ["--timeout", "40", "--max-size", "16384", "--iters", "2"]


@pytest.fixture
def old_abi_home(tmp_path, abi_libs):
    """A Hasktorch-style LIBTORCH_HOME holding a 2.5.1 libtorch whose libc10.so is a real pre-cxx11 ELF."""
    home = tmp_path / "b" / "libtorch-home"
    make_tree(home / "2.5.1" / "linux-x86_64" / "cpu", "2.5.1", "cpu", libc10=abi_libs["pre-cxx11"])
    return home


def test_two_nodes_whose_environments_differ(tmp_path, old_abi_home):
    a = node_env(tmp_path / "a", SMI_H200)
    b = node_env(tmp_path / "b", SMI_5090, {"LIBTORCH_HOME": str(old_abi_home)})
    endpoint = f"127.0.0.1:{free_port()}"
    nodes = [start_torchrun(n, e, 2, 1, endpoint, [*SMALL, "--json"], tmp_path) for n, e in (("a", a), ("b", b))]
    results = finish(nodes, 180)
    (code_a, out_a, err_a), (code_b, out_b, err_b) = results["a"], results["b"]
    # one of the two agents got rank 0 (c10d rendezvous decides); that node prints the report
    first, other = (out_a, out_b) if out_a.strip() else (out_b, out_a)
    assert other == "", other
    report = json.loads(first)
    assert report["command"] == "fleet" and report["exit_code"] == 1 == code_a == code_b
    nodes_by_name = {n["name"]: n for n in report["facts"]["nodes"]}
    assert len(nodes_by_name) == 2
    node_b = next(n for n, v in nodes_by_name.items() if v["report"]["facts"]["env"].get("LIBTORCH_HOME"))
    node_a = next(n for n in nodes_by_name if n != node_b)
    diffs = {d["fact"]: {v["value"]: v["nodes"] for v in d["values"]} for d in report["facts"]["comparison"]}
    assert diffs["NVIDIA driver"] == {"570.124.06": [node_a], "575.64.03": [node_b]}
    assert diffs["libtorch version"] == {"2.13.0": [node_a], "2.5.1": [node_b]}
    assert diffs["libtorch CXX11 ABI"] == {"cxx11": [node_a], "pre-cxx11": [node_b]}
    titles = [f["title"] for f in report["findings"] if f["id"] == "fleet.differs"]
    assert f"NVIDIA driver differs across nodes: 570.124.06 on {node_a}; 575.64.03 on {node_b}" in titles
    # the collectives ran on both ranks over gloo; NCCL says why it did not
    gloo = report["facts"]["collectives"]["gloo"]
    assert {r["op"] for r in gloo["sweep"]} == {"all_reduce", "all_gather", "broadcast"}
    assert all(r["busbw_gbs"] == pytest.approx(r["algbw_gbs"] * (1.0 if r["op"] != "all_gather" else 0.5))
               for r in gloo["sweep"])
    assert all(not problem for r in report["facts"]["ranks"] for problem in r["gloo"].values())
    assert "without NCCL" in report["facts"]["collectives"]["nccl"]["skipped"]
    assert "doctor fleet found problems" in err_a + err_b


def test_four_ranks_on_two_nodes_text(tmp_path):
    # a GPU name is free text from another node's nvidia-smi: the table shows it, the terminal never acts on it
    env = node_env(tmp_path / "n", SMI_H200.replace("H200", "H200\x1b]0;owned\x07"))
    endpoint = f"127.0.0.1:{free_port()}"
    nodes = [start_torchrun(n, env, 2, 2, endpoint, SMALL, tmp_path) for n in ("a", "b")]
    results = finish(nodes, 240)
    out = "".join(r[1] for r in results.values())
    # same environment on both nodes: each node's two ranks share one gatherer; nothing differs
    assert "Differences between nodes: same on every node" in out
    assert "correct on 4 ranks" in out and "gradients average across 4 ranks" in out
    table = out.split("Nodes\n", 1)[1].split("\n\n", 1)[0].splitlines()
    assert [row.split()[1] for row in table[1:]] == ["0,1", "2,3"]
    assert "busbw" in out and "all_reduce  16 KiB" in out
    assert "H200\\x1b]0;owned\\x07" in out and "\x1b" not in out and "\x07" not in out


def test_a_node_that_never_starts_is_named_within_the_timeout(tmp_path):
    # rank 0 of 2, started as srun starts a task; rank 1 never comes
    env = node_env(tmp_path / "n", extra={"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_LOCALID": "0",
                                          "SLURM_NODEID": "0", "SLURM_NODELIST": "localhost",
                                          "MASTER_PORT": str(free_port())})
    start = time.monotonic()
    code, out, err = finish([start_rank("r0", env, ["--timeout", "3", "--json"], tmp_path)], 120)["r0"]
    elapsed = time.monotonic() - start
    report = json.loads(out)
    assert code == 1 and report["exit_code"] == 1
    assert report["findings"][0]["id"] == "fleet.rank-missing"
    assert report["findings"][0]["title"] == "1 of 2 ranks did not join within 3 s: rank 1"
    assert elapsed < 60  # the 3 s join timeout, plus the probes and torch's import on a busy machine


def test_a_rank_whose_store_never_starts_says_so(tmp_path):
    port = free_port()
    env = node_env(tmp_path / "n", extra={"OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
                                          "OMPI_COMM_WORLD_LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                                          "MASTER_PORT": str(port)})
    code, out, err = finish([start_rank("r1", env, ["--timeout", "3"], tmp_path)], 120)["r1"]
    assert code == 1 and out == ""
    # the one line, not under torch's C++ log of each attempt (37 frames of backtrace each)
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"error: rank 1 could not reach the rendezvous store at 127.0.0.1:{port} within 3 s")
    # a log level the user set is theirs
    code, _, err = finish([start_rank("r1", env | {"TORCH_CPP_LOG_LEVEL": "WARNING"}, ["--timeout", "3"], tmp_path)], 120)["r1"]
    assert code == 1 and "TCPStore.cpp" in err and err.splitlines()[-1].startswith("error: rank 1 could not reach")


def test_mpirun_style_ranks_join_and_agree(tmp_path):
    port = str(free_port())
    ranks = []
    for r in (0, 1):
        env = node_env(tmp_path / f"r{r}", extra={"OMPI_COMM_WORLD_RANK": str(r), "OMPI_COMM_WORLD_SIZE": "2",
                                                  "OMPI_COMM_WORLD_LOCAL_RANK": "0", "MASTER_ADDR": "127.0.0.1",
                                                  "MASTER_PORT": port})
        ranks.append(start_rank(f"r{r}", env, [*SMALL, "--format", "junit"], tmp_path))
    results = finish(ranks, 180)
    code0, out0, _ = results["r0"]
    assert out0.startswith("<?xml") and 'name="fleet.differs"' not in out0
    assert results["r1"][1] == ""
    assert code0 == results["r1"][0]


def test_without_a_launcher_exit_2(tmp_path):
    code, out, err = finish([start_rank("alone", node_env(tmp_path), [], tmp_path)], 60)["alone"]
    assert code == 2 and out == ""
    assert err.splitlines()[0].startswith("error: `doctor fleet` was not started by a launcher")
    assert err.splitlines()[1].startswith("hint: torchrun --nnodes N")


def _cuda_with_nccl() -> bool:
    import torch

    return torch.cuda.is_available() and torch.distributed.is_nccl_available()


@pytest.mark.skipif(not _cuda_with_nccl(), reason="no GPU with a CUDA torch here: the NCCL path needs one (device machine)")
def test_nccl_path_on_a_gpu_machine(tmp_path):
    env = node_env(tmp_path / "n", extra={"PATH": f"{tmp_path}/n/bin:/usr/local/bin:/usr/bin:/bin"})
    endpoint = f"127.0.0.1:{free_port()}"
    out = "".join(r[1] for r in finish([start_torchrun("a", env, 1, 1, endpoint, [*SMALL, "--json"], tmp_path)], 240).values())
    nccl = json.loads(out)["facts"]["collectives"]["nccl"]
    assert "skipped" not in nccl and nccl["sweep"]


def test_without_torch_exit_2_with_the_install_hint(tmp_path):
    # a Python without torch, built as the smoke/bench tests build it (tests/workload)
    import importlib.util
    import os
    import subprocess
    import sys

    spec = importlib.util.spec_from_file_location("without_torch", REPO / "tests/workload/test_workload_without_torch.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.python_without(tmp_path, "torch", "torchgen", "functorch")  # fills tmp_path/site
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(PYTHONPATH=f"{REPO}{os.pathsep}{tmp_path / 'site'}", RANK="0", WORLD_SIZE="2", MASTER_ADDR="127.0.0.1")
    proc = subprocess.run([sys.executable, "-S", "-m", "doctor", "fleet"], capture_output=True, text=True, env=env,
                          cwd=tmp_path, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "`doctor fleet` needs torch, which is not installed" in proc.stderr and proc.stdout == ""
    assert "Traceback" not in proc.stderr
