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

from torchfn.tree import flatten, leaves, leaves_like, tree_map, unflatten, unflatten_like

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


class _Active:
    """The params that have a gradient, as torch.optim sees them.

    Grads are matched to params by key path (a structure mismatch names the first
    differing path). A `None` grad means "no gradient": that param and its optimizer
    state are passed through untouched, as torch.optim skips `p.grad is None`.
    The params' tree spec is flattened once per step and reused: Python pytrees cost
    microseconds per node, and a step is only a few kernels on small models.
    """

    __slots__ = ("params", "spec", "ps", "gs", "idx", "_all")

    def __init__(self, params: Params, grads: Params) -> None:
        ps, self.spec = flatten(params)
        if not ps:  # the foreach kernels reject empty lists with a message that names no cause
            raise ValueError("params have no tensors: there is nothing to optimise (did you pass a parameter-free layer?)")
        gs, gspec = flatten(grads)
        if gspec != self.spec:
            gs = leaves_like(params, grads, "grads")
        self.params = params
        if any(g is None for g in gs):
            self.idx: list[int] | None = [i for i, g in enumerate(gs) if g is not None]
            self.ps, self.gs = [ps[i] for i in self.idx], [gs[i] for i in self.idx]
        else:
            self.idx, self.ps, self.gs = None, ps, gs
        self._all = ps

    def _flat(self, tree: Params) -> list[Any]:
        ls, spec = flatten(tree)
        return ls if spec == self.spec else leaves_like(self.params, tree, "optimizer state")

    def pick(self, tree: Params) -> list[torch.Tensor]:
        """The active leaves of a state tree shaped like params."""
        ls = self._flat(tree)
        return ls if self.idx is None else [ls[i] for i in self.idx]

    def rebuild(self, new: list[torch.Tensor], old: Params | None = None) -> Params:
        """A params-shaped tree: `new` where there was a grad, `old`'s leaves elsewhere."""
        if self.idx is None:
            return unflatten(self.spec, new)
        full = list(self._flat(old) if old is not None else self._all)
        for i, t in zip(self.idx, new):
            full[i] = t
        return unflatten(self.spec, full)


def _leaves_checked(params: Params, grads: Params) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    a = _Active(params, grads)
    return a.ps, a.gs


def sgd(*, weight_decay: float = 0.0, maximize: bool = False) -> Optimizer:
    """p ← p − lr·g (torch.optim.SGD with no momentum)."""

    def init(params: Params) -> State:
        return {}

    def step(params: Params, grads: Params, state: State, lr: float) -> tuple[Params, State]:
        with torch.no_grad():
            a = _Active(params, grads)
            gs = torch._foreach_neg(a.gs) if maximize else a.gs
            gs = _with_weight_decay(a.ps, gs, weight_decay)
            new = torch._foreach_add(a.ps, gs, alpha=-lr)
        return a.rebuild(new), {}

    return Optimizer(init, step, "sgd")


def momentum(beta: float = 0.9, *, nesterov: bool = False, weight_decay: float = 0.0, dampening: float = 0.0,
             maximize: bool = False) -> Optimizer:
    """Heavy-ball momentum: v ← β·v + (1−dampening)·g; p ← p − lr·v (torch.optim.SGD(momentum=β)).

    As in torch.optim, the first step sets v ← g (dampening applies from the second step).
    """
    if nesterov and (beta <= 0 or dampening != 0):
        raise ValueError("nesterov momentum requires beta > 0 and dampening = 0 (as torch.optim.SGD)")

    def init(params: Params) -> State:
        return {"velocity": _zeros(params), "step": 0}

    def step(params: Params, grads: Params, state: State, lr: float) -> tuple[Params, State]:
        t = state.get("step", 1) + 1  # a state saved before "step" existed is past its first step
        with torch.no_grad():
            a = _Active(params, grads)
            gs = torch._foreach_neg(a.gs) if maximize else a.gs
            gs = _with_weight_decay(a.ps, gs, weight_decay)
            if t == 1:  # torch.optim: the buffer starts as a copy of the first gradient
                vs = [g.clone() for g in gs]
            else:
                vs = torch._foreach_mul(a.pick(state["velocity"]), beta)
                torch._foreach_add_(vs, gs, alpha=1.0 - dampening)
            direction = torch._foreach_add(gs, vs, alpha=beta) if nesterov else vs
            new = torch._foreach_add(a.ps, direction, alpha=-lr)
        return a.rebuild(new), {"velocity": a.rebuild(vs, state["velocity"]), "step": t}

    return Optimizer(init, step, "momentum")


def _adam(b1: float, b2: float, eps: float, weight_decay: float, decoupled: bool, name: str,
          amsgrad: bool = False, maximize: bool = False, mask: Any = None) -> Optimizer:
    def init(params: Params) -> State:
        state = {"step": 0, "m": _zeros(params), "v": _zeros(params)}
        if amsgrad:
            state["v_max"] = _zeros(params)
        return state

    def step(params: Params, grads: Params, state: State, lr: float) -> tuple[Params, State]:
        t = state["step"] + 1
        with torch.no_grad():
            a = _Active(params, grads)
            ps, gs = a.ps, a.gs
            if maximize:
                gs = torch._foreach_neg(gs)
            if decoupled and weight_decay and mask is not None:
                from torchfn.transforms import decay_mask

                flags = decay_mask(mask, params)
                flags = flags if a.idx is None else [flags[i] for i in a.idx]
                ps = [p * (1.0 - lr * weight_decay) if f else p.clone() for p, f in zip(ps, flags)]
            elif decoupled and weight_decay:
                ps = torch._foreach_mul(ps, 1.0 - lr * weight_decay)
            elif weight_decay:
                gs = _with_weight_decay(ps, gs, weight_decay)
            m = torch._foreach_lerp(a.pick(state["m"]), gs, 1.0 - b1)
            v = torch._foreach_mul(a.pick(state["v"]), b2)
            torch._foreach_addcmul_(v, gs, gs, value=1.0 - b2)
            bias1 = 1.0 - b1**t
            bias2_sqrt = (1.0 - b2**t) ** 0.5
            if amsgrad:
                v_max = torch._foreach_maximum(a.pick(state["v_max"]), v)
                denom = torch._foreach_sqrt(v_max)
            else:
                denom = torch._foreach_sqrt(v)
            torch._foreach_div_(denom, bias2_sqrt)
            torch._foreach_add_(denom, eps)
            if decoupled and weight_decay:  # ps is already our own copy: update it in place
                torch._foreach_addcdiv_(ps, m, denom, value=-lr / bias1)
                new = ps
            else:
                new = torch._foreach_addcdiv(ps, m, denom, value=-lr / bias1)
        new_state = {"step": t, "m": a.rebuild(m, state["m"]), "v": a.rebuild(v, state["v"])}
        if amsgrad:
            new_state["v_max"] = a.rebuild(v_max, state["v_max"])
        return a.rebuild(new), new_state

    return Optimizer(init, step, name)


def adam(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, *, weight_decay: float = 0.0,
         amsgrad: bool = False, maximize: bool = False) -> Optimizer:
    """Adam (torch.optim.Adam; weight_decay is the coupled L2 penalty)."""
    return _adam(b1, b2, eps, weight_decay, decoupled=False, name="adam", amsgrad=amsgrad, maximize=maximize)


def adamw(b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8, *, weight_decay: float = 1e-2,
          amsgrad: bool = False, maximize: bool = False, mask: Any = None) -> Optimizer:
    """AdamW: Adam with decoupled weight decay p ← p·(1 − lr·wd) (torch.optim.AdamW).

    A param whose grad is None is neither decayed nor moved, as in torch.optim. `mask`
    limits the decay (a tree of bools, or a function of the dotted path such as
    `fn.no_decay_on_bias`): torch.optim's param group with weight_decay=0.
    """
    return _adam(b1, b2, eps, weight_decay, decoupled=True, name="adamw", amsgrad=amsgrad, maximize=maximize,
                 mask=mask)
