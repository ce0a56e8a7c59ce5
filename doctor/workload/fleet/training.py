"""A data-parallel training step with torchfn: each rank takes its shard of one fixed batch,
computes gradients with torchfn, and averages them with dist.all_reduce. The averaged gradient
must equal the full-batch gradient (equal shards, mean loss), the ranks' parameters must stay
identical, and a few steps must lower the loss.

torchfn has no data-parallel helper in this tree yet, so the step is torchfn.value_and_grad +
dist.all_reduce here (torchfn.parallel, when it lands, is the same two calls).
"""

from __future__ import annotations

import time
from typing import Any

from doctor.workload import first_line

SIZES = [8, 16, 4]
PER_RANK = 32
STEPS = 30
LR = 0.5


def data_parallel_smoke(torch: Any, group: Any = None, device: str = "cpu", steps: int = STEPS) -> dict[str, Any]:
    """This rank's view: the gradient error vs the full batch, the parameter spread across ranks,
    the loss before and after; never raises (an exception becomes `error`)."""
    import torchfn as fn

    dist = torch.distributed
    rank, n = dist.get_rank(group), dist.get_world_size(group)
    out: dict[str, Any] = {"ranks": n, "steps": steps, "grad_error": None, "param_spread": None,
                           "first_loss": None, "last_loss": None, "error": "", "seconds": 0.0}
    start = time.perf_counter()
    try:
        g = torch.Generator().manual_seed(0)  # the same problem on every rank
        x_all = torch.randn(PER_RANK * n, SIZES[0], generator=g)
        y_all = (x_all @ torch.randn(SIZES[0], SIZES[-1], generator=g)).argmax(dim=1)
        x_all, y_all = x_all.to(device), y_all.to(device)
        shard = slice(rank * PER_RANK, (rank + 1) * PER_RANK)
        model = fn.mlp(SIZES)
        params = fn.to_device(model.init(fn.key(0)), device)

        def loss_fn(p: Any, batch: tuple[Any, Any]) -> Any:
            return fn.cross_entropy(model(p, batch[0]), batch[1])

        value_and_grad = fn.value_and_grad(loss_fn, method="autograd")

        def averaged(p: Any) -> tuple[Any, Any]:
            loss, grads = value_and_grad(p, (x_all[shard], y_all[shard]))
            flat = fn.leaves(grads)
            for t in flat:
                dist.all_reduce(t, group=group)
                t /= n
            loss = loss.detach().clone()
            dist.all_reduce(loss, group=group)
            return loss / n, grads

        first, grads = averaged(params)
        full_loss, full = value_and_grad(params, (x_all, y_all))
        out["grad_error"] = max(float((a - b).abs().max()) for a, b in zip(fn.leaves(grads), fn.leaves(full)))
        opt = fn.sgd()
        state = opt.init(params)
        loss = first
        for _ in range(steps):
            params, state = opt.step(params, grads, state, LR)
            loss, grads = averaged(params)
        spread = torch.cat([t.detach().flatten() for t in fn.leaves(params)])
        high, low = spread.clone(), spread.clone()
        dist.all_reduce(high, op=dist.ReduceOp.MAX, group=group)
        dist.all_reduce(low, op=dist.ReduceOp.MIN, group=group)
        out["param_spread"] = float((high - low).abs().max())
        out["first_loss"], out["last_loss"] = float(first), float(loss)
    except Exception as exc:
        out["error"] = first_line(exc)
    out["seconds"] = round(time.perf_counter() - start, 3)
    return out
