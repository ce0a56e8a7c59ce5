"""Gradient transforms in optax's manner, composed with `chain` in front of an optimizer.

    opt = fn.chain(fn.clip_by_global_norm(1.0), fn.adamw(weight_decay=0.1, mask=fn.no_decay_on_bias))
    step = fn.train_step(loss, opt)           # a chain is an Optimizer

A transform is a pair of pure functions, `init(params) -> state` and
`update(grads, state, params) -> (grads, state)`. `chain(*transforms, optimizer)` is an
`Optimizer` whose state is the tuple of their states. `accumulate(optimizer, k)` averages the
gradients of k calls and steps every k-th one; `ema` keeps a moving average of params.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from torchfn.optim import Optimizer
from torchfn.tree import leaves, leaves_like, tree_map, unflatten_like, with_paths

Params = Any


@dataclass(frozen=True)
class Transform:
    init: Callable[[Params], Any]
    update: Callable[[Params, Any, Params], tuple[Params, Any]]
    name: str = "transform"


def _present(gs: list) -> list[torch.Tensor]:
    return [g for g in gs if g is not None]


def clip_by_global_norm(max_norm: float) -> Transform:
    """Scale all grads by min(1, max_norm / (‖g‖₂ + 1e-6)), as torch.nn.utils.clip_grad_norm_."""
    if max_norm <= 0:
        raise ValueError(f"max_norm must be positive, got {max_norm}")

    def update(grads: Params, state: Any, params: Params) -> tuple[Params, Any]:
        gs = leaves(grads)
        present = _present(gs)
        if not present:
            return grads, state
        with torch.no_grad():
            total = torch.linalg.vector_norm(torch.stack(torch._foreach_norm(present)))
            scale = torch.clamp(max_norm / (total + 1e-6), max=1.0)
            scaled = iter(torch._foreach_mul(present, scale))
        return unflatten_like(grads, [None if g is None else next(scaled) for g in gs]), state

    return Transform(lambda p: (), update, f"clip_by_global_norm({max_norm})")


def clip_by_value(limit: float) -> Transform:
    """Clamp every grad element to [-limit, limit], as torch.nn.utils.clip_grad_value_."""

    def update(grads: Params, state: Any, params: Params) -> tuple[Params, Any]:
        return tree_map(lambda g: None if g is None else g.clamp(-limit, limit), grads), state

    return Transform(lambda p: (), update, f"clip_by_value({limit})")


def add_decayed_weights(weight_decay: float, mask: Any = None) -> Transform:
    """g ← g + wd·p (coupled L2), only where `mask` says so (see `decay_mask`)."""

    def update(grads: Params, state: Any, params: Params) -> tuple[Params, Any]:
        flags = decay_mask(mask, params)
        gs = leaves_like(params, grads, "grads")
        out = [g if g is None or not f else g + weight_decay * p for g, p, f in zip(gs, leaves(params), flags)]
        return unflatten_like(params, out), state

    return Transform(lambda p: (), update, f"add_decayed_weights({weight_decay})")


def decay_mask(mask: Any, params: Params) -> list[bool]:
    """One bool per param leaf: `mask` is None (all), a tree of bools, or a function of the dotted path."""
    if mask is None:
        return [True] * len(leaves(params))
    if callable(mask):
        return [bool(mask(path)) for path, _ in with_paths(params)]
    return [bool(m) for m in leaves_like(params, mask, "the weight-decay mask")]


def no_decay_on_bias(path: str) -> bool:
    """A mask: decay weights, not biases or norm scales (the usual AdamW recipe)."""
    last = path.rsplit(".", 1)[-1]
    return last not in ("bias", "scale") and not path.split(".")[-2:-1] == ["norm"]


def chain(*parts: Transform | Optimizer) -> Optimizer:
    """Transforms applied in order to the grads, then the optimizer (the last part)."""
    if not parts or not isinstance(parts[-1], Optimizer):
        raise TypeError("chain(*transforms, optimizer): the last part must be an Optimizer (fn.adam(), ...)")
    transforms, opt = parts[:-1], parts[-1]
    for t in transforms:
        if not isinstance(t, Transform):
            raise TypeError(f"chain: {t!r} is not a gradient transform")

    def init(params: Params) -> Any:
        return {"transforms": tuple(t.init(params) for t in transforms), "opt": opt.init(params)}

    def step(params: Params, grads: Params, state: Any, lr: float) -> tuple[Params, Any]:
        states = []
        for t, s in zip(transforms, state["transforms"]):
            grads, s = t.update(grads, s, params)
            states.append(s)
        new, opt_state = opt.step(params, grads, state["opt"], lr)
        return new, {"transforms": tuple(states), "opt": opt_state}

    return Optimizer(init, step, "chain(" + ", ".join([t.name for t in transforms] + [opt.name]) + ")")


def accumulate(optimizer: Optimizer, every: int) -> Optimizer:
    """Gradient accumulation: average the grads of `every` calls, step the optimizer on the last.

    The other calls return the params unchanged. With a mean loss over equal micro-batches,
    this is one step on their union.
    """
    if every < 1:
        raise ValueError(f"every must be at least 1, got {every}")

    def init(params: Params) -> Any:
        return {"count": 0, "sum": tree_map(torch.zeros_like, params), "opt": optimizer.init(params)}

    def step(params: Params, grads: Params, state: Any, lr: float) -> tuple[Params, Any]:
        gs = leaves_like(params, grads, "grads")
        with torch.no_grad():
            total = [s if g is None else s + g for s, g in zip(leaves_like(params, state["sum"]), gs)]
        count = state["count"] + 1
        if count < every:
            return params, {"count": count, "sum": unflatten_like(params, total), "opt": state["opt"]}
        mean = unflatten_like(params, [t / every for t in total])
        new, opt_state = optimizer.step(params, mean, state["opt"], lr)
        return new, {"count": 0, "sum": tree_map(torch.zeros_like, params), "opt": opt_state}

    return Optimizer(init, step, f"accumulate({optimizer.name}, {every})")


def ema(average: Params, params: Params, decay: float) -> Params:
    """The moving average of params: decay·average + (1−decay)·params (a new tree)."""
    with torch.no_grad():
        new = torch._foreach_lerp(leaves(average), leaves_like(average, params, "params"), 1.0 - decay)
    return unflatten_like(average, new)
