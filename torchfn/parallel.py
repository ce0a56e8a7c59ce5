"""Data-parallel training on torch.distributed: the same pure step, gradients averaged.

    # torchrun --nproc-per-node 2 train.py
    import torchfn as fn
    from torchfn import parallel
    rank, world = parallel.init()                        # gloo on CPU, NCCL on GPUs
    params = parallel.broadcast(model.init(fn.key(0)))   # every rank starts from rank 0's
    step = parallel.data_parallel(loss, fn.adam())
    params, state, loss = step(params, state, parallel.shard(batch), 1e-3)

Each rank computes the loss and gradients of its shard, one all-reduce sums the
gradients (all of them flattened into one buffer, plus one flag per param saying whether
any rank had a gradient for it), and the average is what every rank's optimizer applies:
with equal shards and a mean loss, that is exactly the full-batch gradient, so the ranks
stay identical without exchanging params. The loss returned is the average over ranks.

`python -m torchfn.parallel` (under torchrun, or alone as a group of one) is a training smoke test: a small MLP for a
few steps; rank 0 prints one JSON line and can save the params (see docs/torchfn.md).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist

from torchfn import random
from torchfn.optim import Optimizer
from torchfn.train import _takes_key, value_and_grad
from torchfn.tree import leaves, unflatten_like

Params = Any


def default_backend() -> str:
    """NCCL where CUDA and NCCL are there, gloo otherwise (CPU)."""
    if torch.cuda.is_available() and dist.is_nccl_available():
        return "nccl"
    return "gloo"


def init(backend: str | None = None, *, init_method: str | None = None, rank: int | None = None,
         world_size: int | None = None) -> tuple[int, int]:
    """Join the process group (once) and return `(rank, world_size)`.

    Under torchrun, the environment (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT) says
    everything; otherwise pass `init_method="tcp://127.0.0.1:PORT"`, `rank` and
    `world_size`. With NCCL each process uses the GPU LOCAL_RANK names.
    """
    if not dist.is_available():
        raise RuntimeError("this torch build has no torch.distributed")
    if not dist.is_initialized():
        backend = backend or default_backend()
        if backend == "nccl":
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank or 0)))
        kwargs: dict[str, Any] = {"backend": backend}
        if init_method is not None:
            kwargs.update(init_method=init_method, rank=rank, world_size=world_size)
        dist.init_process_group(**kwargs)
    return dist.get_rank(), dist.get_world_size()


def device() -> torch.device:
    """The device this rank computes on: its GPU under NCCL, else the CPU."""
    if dist.is_initialized() and dist.get_backend() == "nccl":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device("cpu")


def shard(batch: Any, rank: int | None = None, world_size: int | None = None) -> Any:
    """This rank's equal slice of every tensor in `batch` (along dim 0).

    The global batch must divide evenly: unequal shards would weight examples unequally
    in the averaged gradient, and the result would no longer equal full-batch training.
    """
    rank = dist.get_rank() if rank is None else rank
    world_size = dist.get_world_size() if world_size is None else world_size

    def cut(t: Any) -> Any:
        if not isinstance(t, torch.Tensor):
            return t
        n = t.shape[0]
        if n % world_size:
            raise ValueError(f"a batch of {n} does not split evenly over {world_size} ranks; "
                             f"use a batch size that is a multiple of {world_size}")
        size = n // world_size
        return t[rank * size:(rank + 1) * size]

    return unflatten_like(batch, [cut(t) for t in leaves(batch)])


def broadcast(params: Params, src: int = 0, group: Any = None) -> Params:
    """A copy of rank `src`'s params on every rank (so that all start identical)."""
    ps = [t.detach().clone() for t in leaves(params)]
    for t in ps:
        dist.broadcast(t, src, group=group)
    return unflatten_like(params, ps)


def all_reduce_mean(grads: list[torch.Tensor | None], like: list[torch.Tensor], group: Any = None
                    ) -> list[torch.Tensor | None]:
    """The average of each gradient over the ranks, in one all-reduce.

    A param that no rank has a gradient for stays None (the optimizers skip it, as
    torch.optim does); one that some ranks lack counts as zero there.
    """
    world = dist.get_world_size(group)
    flat_parts = [(g if g is not None else torch.zeros_like(p)).reshape(-1) for g, p in zip(grads, like)]
    flags = torch.tensor([g is not None for g in grads], dtype=like[0].dtype, device=like[0].device)
    buf = torch.cat(flat_parts + [flags])
    dist.all_reduce(buf, op=dist.ReduceOp.SUM, group=group)
    buf /= world
    out: list[torch.Tensor | None] = []
    offset = 0
    for p in like:
        n = p.numel()
        out.append(buf[offset:offset + n].view_as(p))
        offset += n
    had = buf[offset:]
    return [g if bool(h > 0) else None for g, h in zip(out, had)]


def data_parallel(loss_fn: Callable[..., torch.Tensor], optimizer: Optimizer, *, group: Any = None) -> Callable:
    """A data-parallel `train_step`: `step(params, opt_state, shard, lr, key=None) -> (params, opt_state, loss)`.

    Same contract as `torchfn.train_step`, but `shard` is this rank's part of the global
    batch (`parallel.shard(batch)`), the gradients are averaged over the ranks of `group`
    (default: all) before the optimizer step, and the loss returned is the average over
    ranks. `loss_fn` must be a mean over the examples of its shard. A `key` is folded with
    the rank, so dropout masks differ between ranks.
    """
    with_key = _takes_key(loss_fn)

    def loss(params: Params, batch: Any, key: Any) -> torch.Tensor:
        return loss_fn(params, batch, key=key) if with_key else loss_fn(params, batch)

    local = value_and_grad(loss, method="autograd")

    def step(params: Params, opt_state: Any, batch: Any, lr: float,
             key: int | None = None) -> tuple[Params, Any, torch.Tensor]:
        rank_key = None
        if key is not None and with_key:
            rank_key = random.as_tensor_key(random.fold_in(key, dist.get_rank(group)), leaves(params)[0].device)
        value, grads = local(params, batch, rank_key)
        ps = leaves(params)
        avg = all_reduce_mean(leaves(grads), ps, group)
        loss_sum = value.detach().clone().reshape(1)
        dist.all_reduce(loss_sum, op=dist.ReduceOp.SUM, group=group)
        new_params, new_state = optimizer.step(params, unflatten_like(params, avg), opt_state, lr)
        return new_params, new_state, loss_sum[0] / dist.get_world_size(group)

    return step


# -- the smoke test: torchrun --nproc-per-node N -m torchfn.parallel ------------------------


def smoke(steps: int = 5, batch_size: int = 64, sizes: tuple[int, ...] = (32, 64, 10), lr: float = 1e-2,
          seed: int = 0) -> tuple[Params, list[float]]:
    """Fit a small MLP to one fixed random batch for `steps` data-parallel steps; all ranks end equal.

    The data and the initial params depend only on `seed`, so a run on N ranks must
    match a run on one rank (same global batch) to float rounding.
    """
    import torchfn as fn

    rank, world = dist.get_rank(), dist.get_world_size()
    dev = device()
    model = fn.mlp(list(sizes))
    g = torch.Generator().manual_seed(seed)
    # One fixed global batch: fitting it must lower the loss at any step count (a smoke test).
    x = torch.randn(batch_size, sizes[0], generator=g)
    y = torch.randint(0, sizes[-1], (batch_size,), generator=g)
    params = broadcast(fn.to_device(model.init(fn.key(seed)), dev))
    opt = fn.adam()
    state = opt.init(params)
    step = data_parallel(lambda p, b: fn.cross_entropy(model(p, b[0]), b[1]), opt)
    losses = []
    for _ in range(steps):
        batch = shard((x.to(dev), y.to(dev)), rank, world)
        params, state, value = step(params, state, batch, lr)
        losses.append(float(value))
    return params, losses


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m torchfn.parallel",
                                     description="Data-parallel training smoke test (run under torchrun).")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--backend", choices=["gloo", "nccl"], default=None)
    parser.add_argument("--out", help="rank 0 saves the final params here (safetensors)")
    args = parser.parse_args(argv)
    if args.steps < 1 or args.batch_size < 1:
        parser.error("--steps and --batch-size must be at least 1")
    if "RANK" in os.environ:
        rank, world = init(args.backend)
    else:  # run alone, not under torchrun: a group of one on a free local port
        import socket

        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port = sock.getsockname()[1]
        rank, world = init(args.backend, init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        params, losses = smoke(args.steps, args.batch_size)
        if rank == 0:
            if args.out:
                import torchfn as fn

                fn.save(args.out, fn.to_device(params, "cpu"))
            print(json.dumps({"world_size": world, "backend": dist.get_backend(), "steps": args.steps,
                              "losses": losses, "loss_fell": losses[-1] < losses[0]}))
            sys.stdout.flush()
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
