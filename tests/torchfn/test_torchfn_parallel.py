"""Data-parallel steps on torch.distributed (gloo on 127.0.0.1): 2 ranks equal 1 rank on the full batch."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import torchfn as fn
from torchfn import parallel

REPO = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _torchrun(nproc: int, out: Path, tmp_path: Path, steps: int = 4) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MASTER_", "RANK", "WORLD_SIZE", "LOCAL_"))}
    env.update(PYTHONPATH=str(REPO), OMP_NUM_THREADS="1", HOME=str(tmp_path), TMPDIR=str(tmp_path))  # torchelastic_* logs
    cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--nnodes=1",
           "--master-addr=127.0.0.1", f"--master-port={_free_port()}",
           "-m", "torchfn.parallel", "--steps", str(steps), "--backend", "gloo", "--out", str(out)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len(lines) == 1, proc.stdout  # rank 0 alone reports
    return json.loads(lines[0])


def test_two_ranks_under_torchrun_match_one_rank_on_the_full_batch(tmp_path):
    one = _torchrun(1, tmp_path / "one.safetensors", tmp_path)
    two = _torchrun(2, tmp_path / "two.safetensors", tmp_path)
    assert (one["world_size"], two["world_size"]) == (1, 2) and two["backend"] == "gloo"
    assert max(abs(a - b) for a, b in zip(one["losses"], two["losses"])) <= 1e-6, (one, two)
    p1, p2 = fn.load(tmp_path / "one.safetensors"), fn.load(tmp_path / "two.safetensors")
    worst = max((a - b).abs().max().item() for a, b in zip(fn.leaves(p1), fn.leaves(p2)))
    assert worst <= 1e-6, worst
    # It trained: the params moved from their init, and the loss fell.
    start = fn.mlp([32, 64, 10]).init(fn.key(0))
    assert not torch.equal(p1["0"]["weight"], start["0"]["weight"]) and one["loss_fell"]


def _unused_param_rank(rank: int, port: int, out: str) -> None:
    parallel.init("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    try:
        params = {"w": torch.ones(3), "unused": torch.ones(3)}
        opt = fn.adamw(weight_decay=0.5)
        step = parallel.data_parallel(lambda p, b: (p["w"] * b).sum() / b.shape[0], opt)
        batch = parallel.shard(torch.arange(8.0).reshape(4, 2).repeat(1, 2)[:, :3])
        new, state, loss = step(params, opt.init(params), batch, 0.1)
        if rank == 0:
            fn.save(out, {"new": new, "loss": loss})
    finally:
        torch.distributed.destroy_process_group()


def test_spawned_ranks_average_grads_and_skip_params_no_rank_uses(tmp_path):
    out = tmp_path / "r.safetensors"
    torch.multiprocessing.spawn(_unused_param_rank, args=(_free_port(), str(out)), nprocs=2, join=True)
    got = fn.load(out)
    assert torch.equal(got["new"]["unused"], torch.ones(3)), "a param without grads was decayed"
    x = torch.arange(8.0).reshape(4, 2).repeat(1, 2)[:, :3]
    ref_opt = fn.adamw(weight_decay=0.5)
    params = {"w": torch.ones(3), "unused": torch.ones(3)}
    grads = {"w": x.sum(0) / 4, "unused": None}
    ref, _ = ref_opt.step(params, grads, ref_opt.init(params), 0.1)
    assert torch.allclose(got["new"]["w"], ref["w"], atol=1e-7)
    assert torch.allclose(got["loss"], (params["w"] * x).sum() / 4)


def test_shard_refuses_uneven_batches():
    with pytest.raises(ValueError, match="a batch of 5 does not split evenly over 2 ranks"):
        parallel.shard(torch.ones(5, 2), rank=0, world_size=2)
    assert parallel.shard((torch.arange(6), torch.arange(6) * 2), rank=1, world_size=3)[1].tolist() == [4, 6]
