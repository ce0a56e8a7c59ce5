"""Optimizers as pairs of pure functions, the Hasktorch (and optax) way.

    opt = adam()
    state = opt.init(params)
    params, state = opt.step(params, grads, state, lr)

`step` returns new params and a new state and never changes its inputs: it uses the
out-of-place `torch._foreach_*` kernels (one kernel per op over all tensors, as
torch.optim's fast path does) and mutates only the tensors it has just made. The
arithmetic follows torch.optim's order exactly, so results agree with `torch.optim.SGD`
/ `Adam` / `AdamW` to float rounding. `lr` is an argument of `step`, so a schedule is
just a function of the step number.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from torchfn.tree import leaves, tree_map, unflatten_like

Params = Any
State = dict[str, Any]


@dataclass(frozen=True)
class Optimizer:
    init: Callable[[Params], State]
    step: Callable[[Params, Params, State, float], tuple[Params, State]]
    name: str = "optimizer"


def _zeros(params: Params) -> Params:
    return tree_map(torch.zeros_like, params)


def _with_weight_decay(ps: list[torch.Tensor], gs: list[torch.Tensor], weight_decay: float) -> list[torch.Tensor]:
    # torch.optim's (coupled) L2 weight decay: g + wd * p, as a new list.
    return torch._foreach_add(gs, ps, alpha=weight_decay) if weight_decay else gs


def _leaves_checked(params: Params, grads: Params) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    ps, gs = leaves(params), leaves(grads)
    if not ps:  # the foreach kernels reject empty lists with a message that names no cause
        raise ValueError("params have no tensors: there is nothing to optimise (did you pass a parameter-free layer?)")
    if len(ps) != len(gs):
        raise ValueError(f"grads have {len(gs)} tensors but params have {len(ps)}; "
                         "take grads of the same params tree you step")
    return ps, gs


def sgd(*, weight_decay: float = 0.0) -> Optimizer:
    """p ← p − lr·g (torch.optim.SGD with no momentum)."""

    def init(params: Params) -> State:
        return {}

    def step(params: Params, grads: Params, state: State, lr: float) -> tuple[Params, State]:
        with torch.no_grad():
            ps, gs = _leaves_checked(params, grads)
            gs = _with_weight_decay(ps, gs, weight_decay)
            new = torch._foreach_add(ps, gs, alpha=-lr)
        return unflatten_like(params, new), {}

    return Optimizer(init, step, "sgd")


def momentum(beta: float = 0.9, *, nesterov: bool = False, weight_decay: float = 0.0) -> Optimizer:
    """Heavy-ball momentum: v ← β·v + g; p ← p − lr·v (torch.optim.SGD(momentum=β))."""

    def init(params: Params) -> State:
        return {"velocity": _zeros(params)}

    def step(params: Params, grads: Params, state: State, lr: float) -> tuple[Params, State]:
        with torch.no_grad():
            ps, gs = _leaves_checked(params, grads)
            gs = _with_weight_decay(ps, gs, weight_decay)
            vs = torch._foreach_mul(leaves(state["velocity"]), beta)
            torch._foreach_add_(vs, gs)
            direction = torch._foreach_add(gs, vs, alpha=beta) if nesterov else vs
            new = torch._foreach_add(ps, direction, alpha=-lr)
        return unflatten_like(params, new), {"velocity": unflatten_like(params, vs)}

    return Optimizer(init, step, "momentum")


def _adam(b1: float, b2: float, eps: float, weight_decay: float, decoupled: bool, name: str) -> Optimizer:
    def init(params: Params) -> State:
        return {"step": 0, "m": _zeros(params), "v": _zeros(params)}

    def step(params: Params, grads: Params, state: State, lr: float) -> tuple[Params, State]:
        t = state["step"] + 1
        with torch.no_grad():
            ps, gs = _leaves_checked(params, grads)
            if decoupled and weight_decay:
                ps = torch._foreach_mul(ps, 1.0 - lr * weight_decay)
            elif weight_decay:
                gs = _with_weight_decay(ps, gs, weight_decay)
            m = torch._foreach_lerp(leaves(state["m"]), gs, 1.0 - b1)
            v = torch._foreach_mul(leaves(state["v"]), b2)
            torch._foreach_addcmul_(v, gs, gs, value=1.0 - b2)
            bias1 = 1.0 - b1**t
            bias2_sqrt = (1.0 - b2**t) ** 0.5
            denom = torch._foreach_sqrt(v)
            torch._foreach_div_(denom, bias2_sqrt)
            torch._foreach_add_(denom, eps)
            if decoupled and weight_decay:  # ps is already our own copy: update it in place
                torch._foreach_addcdiv_(ps, m, denom, value=-lr / bias1)
                new = ps
            else:
                new = torch._foreach_addcdiv(ps, m, denom, value=-lr / bias1)
        return unflatten_like(params, new), {"step": t, "m": unflatten_like(params, m), "v": unflatten_like(params, v)}

    return Optimizer(init, step, name)


def adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, *, weight_decay: float = 0.0) -> Optimizer:
    """Adam (torch.optim.Adam; weight_decay is the coupled L2 penalty)."""
    return _adam(b1, b2, eps, weight_decay, decoupled=False, name="adam")


def adamw(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, *, weight_decay: float = 1e-2) -> Optimizer:
    """AdamW: Adam with decoupled weight decay p ← p·(1 − lr·wd) (torch.optim.AdamW)."""
    return _adam(b1, b2, eps, weight_decay, decoupled=True, name="adamw")
