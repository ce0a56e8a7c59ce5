"""Collective smoke on a process group: all_reduce, all_gather and broadcast give exactly the
values they must, then a bandwidth sweep and small-message latency, as nccl-tests reports them.

nccl-tests' formulas (doc/PERFORMANCE.md there): algbw = bytes / time, where bytes is the message
size for all_reduce and broadcast and the whole gathered output for all_gather; busbw = algbw ×
2(n−1)/n for all_reduce, × (n−1)/n for all_gather, × 1 for broadcast.
"""

from __future__ import annotations

import time
from typing import Any

from doctor.workload import first_line

OPS = ("all_reduce", "all_gather", "broadcast")
DEFAULT_SIZES = tuple(1 << s for s in range(10, 23, 2))  # 1 KiB … 4 MiB, ×4 each step
LATENCY_BYTES = 8


def bus_factor(op: str, n: int) -> float:
    return {"all_reduce": 2 * (n - 1) / n, "all_gather": (n - 1) / n, "broadcast": 1.0}[op]


def check_correct(torch: Any, group: Any, device: str) -> dict[str, str]:
    """op → "" when the result is exactly right, else what was wrong (or the error's first line)."""
    dist = torch.distributed
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    out: dict[str, str] = {}
    base = torch.arange(1024, dtype=torch.float64, device=device)
    try:  # small integers in float64: every sum is exact
        t = base + rank
        dist.all_reduce(t, group=group)
        want = base * n + n * (n - 1) / 2
        out["all_reduce"] = "" if torch.equal(t, want) else f"sum wrong by up to {float((t - want).abs().max()):g}"
    except Exception as exc:
        out["all_reduce"] = first_line(exc)
    try:
        parts = [torch.empty(16, dtype=torch.int64, device=device) for _ in range(n)]
        dist.all_gather(parts, torch.full((16,), rank, dtype=torch.int64, device=device), group=group)
        wrong = [i for i, p in enumerate(parts) if not bool((p == i).all())]
        out["all_gather"] = "" if not wrong else f"slots from rank(s) {', '.join(map(str, wrong))} are wrong"
    except Exception as exc:
        out["all_gather"] = first_line(exc)
    try:
        t = base.clone() if rank == 0 else torch.zeros_like(base)
        dist.broadcast(t, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)
        out["broadcast"] = "" if torch.equal(t, base) else "received values differ from rank 0's"
    except Exception as exc:
        out["broadcast"] = first_line(exc)
    return out


def _run(torch: Any, op: str, group: Any, tensor: Any, parts: list) -> None:
    dist = torch.distributed
    if op == "all_reduce":
        dist.all_reduce(tensor, group=group)
    elif op == "all_gather":
        dist.all_gather(parts, tensor, group=group)
    else:
        dist.broadcast(tensor, src=dist.get_global_rank(group, 0) if group is not None else 0, group=group)


def time_op(torch: Any, op: str, group: Any, nbytes: int, device: str, iters: int, warmup: int = 1) -> float:
    """Seconds per call, the slowest rank's (a collective is as fast as its slowest member)."""
    dist = torch.distributed
    n = dist.get_world_size(group)
    tensor = torch.ones(max(1, nbytes // 4), dtype=torch.float32, device=device)
    parts = [torch.empty_like(tensor) for _ in range(n)] if op == "all_gather" else []
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for _ in range(warmup):
        _run(torch, op, group, tensor, parts)
    sync()
    dist.barrier(group=group)
    start = time.perf_counter()
    for _ in range(iters):
        _run(torch, op, group, tensor, parts)
    sync()
    seconds = torch.tensor([(time.perf_counter() - start) / iters], dtype=torch.float64, device=device)
    dist.all_reduce(seconds, op=dist.ReduceOp.MAX, group=group)
    return float(seconds.item())


def sweep(torch: Any, group: Any, device: str, sizes: tuple[int, ...] = DEFAULT_SIZES, iters: int = 5) -> list[dict]:
    """One row per (op, size): time, algbw and busbw in GB/s (10⁹ bytes, as nccl-tests prints)."""
    n = torch.distributed.get_world_size(group)
    rows = []
    for op in OPS:
        for size in sizes:
            seconds = time_op(torch, op, group, size, device, iters)
            moved = size * n if op == "all_gather" else size  # all_gather: nccl-tests counts the whole output
            algbw = moved / seconds / 1e9 if seconds > 0 else 0.0
            rows.append({"op": op, "bytes": size, "seconds": seconds, "algbw_gbs": algbw,
                         "busbw_gbs": algbw * bus_factor(op, n)})
    return rows


def latency(torch: Any, group: Any, device: str, iters: int = 20) -> dict[str, float]:
    """Microseconds per call at LATENCY_BYTES, per op."""
    return {op: time_op(torch, op, group, LATENCY_BYTES, device, iters, warmup=2) * 1e6 for op in OPS}


def nccl_plan(torch: Any) -> tuple[str, str]:
    """(device, "") when this rank can take part in an NCCL group, else ("", why not)."""
    if not torch.distributed.is_nccl_available():
        return "", f"this torch ({torch.__version__}) is built without NCCL"
    if not torch.cuda.is_available():
        return "", "no CUDA device visible to this rank (torch.cuda.is_available() is False)"
    return "cuda", ""
