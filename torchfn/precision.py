"""Mixed precision: compute in bf16/fp16 under autocast, keep fp32 master params, scale fp16 losses.

    opt = fn.dynamic_loss_scale(fn.adam())                  # fp16 only; bf16 needs no scaling
    step = fn.train_step(loss, opt, precision="fp16")
    params, state, loss = step(params, opt.init(params), batch, 1e-3)

The params stay in float32 (autocast casts them per op, and their gradients come back in
float32), so the optimizer updates full-precision master weights. fp16's narrow range makes
small gradients underflow: the loss is multiplied by a scale before the backward pass and the
gradients divided by it after; a step whose gradients overflowed (inf/nan) is skipped and the
scale halved, and after `growth_interval` good steps it doubles — torch.amp.GradScaler's rule.
"""

from __future__ import annotations

from typing import Any

import torch

from torchfn.optim import Optimizer
from torchfn.tree import leaves, tree_map

DTYPES = {"bf16": torch.bfloat16, "bfloat16": torch.bfloat16, "fp16": torch.float16, "float16": torch.float16}


def compute_dtype(precision: str | torch.dtype | None) -> torch.dtype | None:
    if precision is None or isinstance(precision, torch.dtype):
        return precision
    if precision not in DTYPES:
        raise ValueError(f"precision must be one of {sorted(DTYPES)} or None, got {precision!r}")
    return DTYPES[precision]


def dynamic_loss_scale(optimizer: Optimizer, *, init_scale: float = 2.0**16, growth_factor: float = 2.0,
                       backoff_factor: float = 0.5, growth_interval: int = 2000) -> Optimizer:
    """An optimizer that takes gradients of the SCALED loss (train_step scales it for you)."""

    def init(params: Any) -> dict[str, Any]:
        return {"loss_scale": float(init_scale), "good_steps": 0, "skipped": 0, "opt": optimizer.init(params)}

    def step(params: Any, grads: Any, state: dict[str, Any], lr: float) -> tuple[Any, dict[str, Any]]:
        scale = state["loss_scale"]
        present = [g for g in leaves(grads) if g is not None]
        finite = bool(torch.stack([torch.isfinite(g).all() for g in present]).all()) if present else True
        if not finite:
            return params, {**state, "loss_scale": scale * backoff_factor, "good_steps": 0,
                            "skipped": state["skipped"] + 1}
        unscaled = tree_map(lambda g: None if g is None else g / scale, grads)
        new, opt_state = optimizer.step(params, unscaled, state["opt"], lr)
        good = state["good_steps"] + 1
        if good >= growth_interval:
            scale, good = scale * growth_factor, 0
        return new, {"loss_scale": scale, "good_steps": good, "skipped": state["skipped"], "opt": opt_state}

    return Optimizer(init, step, f"dynamic_loss_scale({optimizer.name})")
