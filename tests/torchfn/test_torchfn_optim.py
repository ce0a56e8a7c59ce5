"""torchfn's optimizers: pure, deterministic, and equal to torch.optim step for step."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchfn as fn

SIZES = [8, 16, 12, 3]  # as in conftest.py

CASES = {
    "sgd": (lambda ps: torch.optim.SGD(ps, lr=0.05), fn.sgd(), 0.05),
    "sgd-wd": (lambda ps: torch.optim.SGD(ps, lr=0.05, weight_decay=0.01), fn.sgd(weight_decay=0.01), 0.05),
    "momentum": (lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9), fn.momentum(0.9), 0.05),
    "nesterov": (lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, nesterov=True),
                 fn.momentum(0.9, nesterov=True), 0.05),
    "adam": (lambda ps: torch.optim.Adam(ps, lr=1e-2), fn.adam(), 1e-2),
    "adam-wd": (lambda ps: torch.optim.Adam(ps, lr=1e-2, weight_decay=0.1), fn.adam(weight_decay=0.1), 1e-2),
    "adamw": (lambda ps: torch.optim.AdamW(ps, lr=1e-2, weight_decay=0.1), fn.adamw(weight_decay=0.1), 1e-2),
    "dampening": (lambda ps: torch.optim.SGD(ps, lr=0.05, momentum=0.9, dampening=0.3),
                  fn.momentum(0.9, dampening=0.3), 0.05),
    "sgd-maximize": (lambda ps: torch.optim.SGD(ps, lr=0.01, momentum=0.5, maximize=True),
                     fn.momentum(0.5, maximize=True), 0.01),
    "amsgrad": (lambda ps: torch.optim.Adam(ps, lr=1e-2, amsgrad=True), fn.adam(amsgrad=True), 1e-2),
    "adamw-amsgrad-max": (lambda ps: torch.optim.AdamW(ps, lr=1e-3, amsgrad=True, maximize=True, weight_decay=0.1),
                          fn.adamw(amsgrad=True, maximize=True, weight_decay=0.1), 1e-3),
}


@pytest.mark.parametrize("name", list(CASES))
def test_matches_torch_optim_for_20_steps(name, data, torch_mlp):
    make_torch_opt, opt, lr = CASES[name]
    x, y = data
    module = torch_mlp()
    model = fn.mlp(SIZES)
    params = fn.from_state_dict(module.state_dict(), like=model.init(0))
    torch_opt = make_torch_opt(module.parameters())
    state = opt.init(params)
    loss_of = fn.value_and_grad(lambda p: fn.cross_entropy(model(p, x), y), method="autograd")
    worst = 0.0
    for _ in range(20):
        torch_opt.zero_grad()
        nn.functional.cross_entropy(module(x), y).backward()
        torch_opt.step()
        _, grads = loss_of(params)
        params, state = opt.step(params, grads, state, lr)
        for k, v in module.state_dict().items():
            worst = max(worst, (fn.to_state_dict(params)[k] - v).abs().max().item())
    assert worst <= 1e-6, f"{name}: torchfn and torch.optim differ by {worst:g} after 20 steps"
    # The training did something (a test that passes with a no-op optimizer proves nothing).
    assert not torch.equal(fn.to_state_dict(params)["0.weight"], torch_mlp().state_dict()["0.weight"])


def _snapshot(tree):
    return [t.clone() if isinstance(t, torch.Tensor) else t for t in fn.leaves(tree)]


@pytest.mark.parametrize("name", list(CASES))
def test_step_is_pure(name, data):
    _, opt, lr = CASES[name]
    x, y = data
    model = fn.mlp(SIZES)
    params = model.init(fn.key(3))
    state = opt.init(params)
    _, grads = fn.value_and_grad(lambda p: fn.cross_entropy(model(p, x), y), method="autograd")(params)
    # One step first so that momentum / Adam state is non-zero when purity is tested.
    params, state = opt.step(params, grads, state, lr)
    before = [_snapshot(params), _snapshot(grads), _snapshot(state)]
    pointers = {t.data_ptr() for t in fn.leaves([params, grads, state]) if isinstance(t, torch.Tensor)}

    p1, s1 = opt.step(params, grads, state, lr)
    p2, s2 = opt.step(params, grads, state, lr)

    after = [_snapshot(params), _snapshot(grads), _snapshot(state)]
    for b, a in zip(before, after):
        assert all(torch.equal(u, v) if isinstance(u, torch.Tensor) else u == v for u, v in zip(b, a)), \
            "step changed its inputs"
    assert all(torch.equal(u, v) if isinstance(u, torch.Tensor) else u == v
               for u, v in zip(fn.leaves([p1, s1]), fn.leaves([p2, s2]))), "same inputs gave different outputs"
    fresh = [t for t in fn.leaves([p1, s1]) if isinstance(t, torch.Tensor)]
    assert not any(t.data_ptr() in pointers for t in fresh), "step returned a tensor that aliases an input"
    assert not any(torch.equal(u, v) for u, v in zip(fn.leaves(p1), fn.leaves(params))), "step did not move params"


def test_grads_of_another_tree_are_refused():
    opt = fn.adam()
    params = {"w": torch.ones(2), "b": torch.ones(1)}
    with pytest.raises(ValueError, match="tree structures differ at 'b': grads has no 'b'"):
        opt.step(params, {"w": torch.ones(2)}, opt.init(params), 0.1)
    with pytest.raises(ValueError, match=r"differ at '0\.bias'"):
        nested = {"0": {"weight": torch.ones(2), "bias": torch.ones(2)}}
        opt.step(nested, {"0": {"weight": torch.ones(2), "b": torch.ones(2)}}, opt.init(nested), 0.1)


@pytest.mark.parametrize("name", ["sgd", "momentum", "adam", "adamw"])
def test_grads_in_another_key_order_are_matched_by_key(name):
    # Regression: grads {'b','a'} for params {'a','b'} used to be applied crosswise.
    _, opt, lr = CASES[name]
    params = {"a": torch.zeros(2), "b": torch.zeros(2)}
    grads = {"b": torch.full((2,), 1.0), "a": torch.full((2,), -1.0)}
    new, _ = opt.step(params, grads, opt.init(params), lr)
    assert (new["a"] > 0).all() and (new["b"] < 0).all(), new


@pytest.mark.parametrize("make_torch_opt, opt", [
    (lambda ps: torch.optim.AdamW(ps, lr=0.1, weight_decay=0.5), fn.adamw(weight_decay=0.5)),
    (lambda ps: torch.optim.SGD(ps, lr=0.1, momentum=0.9, weight_decay=0.5), fn.momentum(0.9, weight_decay=0.5)),
])
def test_params_without_grads_are_not_decayed_as_in_torch_optim(make_torch_opt, opt):
    # Regression: an unused param got a zero grad, so AdamW decayed it; torch.optim skips it.
    used, unused = torch.ones(3, requires_grad=True), torch.ones(3, requires_grad=True)
    torch_opt = make_torch_opt([used, unused])
    params = {"used": torch.ones(3), "unused": torch.ones(3)}
    state = opt.init(params)
    step_of = fn.value_and_grad(lambda p: (p["used"] ** 2).sum(), method="autograd")
    for _ in range(3):
        torch_opt.zero_grad()
        (used ** 2).sum().backward()
        torch_opt.step()
        _, grads = step_of(params)
        assert grads["unused"] is None
        params, state = opt.step(params, grads, state, 0.1)
    assert torch.equal(params["unused"], torch.ones(3)) and torch.equal(unused.detach(), torch.ones(3))
    assert torch.allclose(params["used"], used.detach(), atol=1e-7)


def test_namedtuple_tuple_and_dataclass_params_are_trees():
    import dataclasses
    from typing import NamedTuple

    class Lin(NamedTuple):
        w: torch.Tensor
        b: torch.Tensor

    @fn.register_dataclass
    @dataclasses.dataclass
    class Model:
        first: Lin
        rest: tuple

    params = Model(Lin(torch.ones(2, 2), torch.zeros(2)), (torch.ones(2),))
    loss = lambda p, x: ((x @ p.first.w.T + p.first.b) * p.rest[0]).sum()  # noqa: E731
    x = torch.randn(4, 2, generator=torch.Generator().manual_seed(0))
    ref = torch.func.grad(loss)(params, x)
    for method in ("func", "autograd"):
        _, grads = fn.value_and_grad(loss, method=method)(params, x)
        assert isinstance(grads, Model) and isinstance(grads.first, Lin) and isinstance(grads.rest, tuple)
        assert torch.allclose(grads.first.w, ref.first.w) and torch.allclose(grads.rest[0], ref.rest[0])
    opt = fn.adam()
    new, state = opt.step(params, grads, opt.init(params), 0.1)
    assert isinstance(new, Model) and isinstance(state["m"].first, Lin)
    assert not torch.equal(new.first.w, params.first.w)


@pytest.mark.parametrize("name", list(CASES))
def test_empty_params_are_refused_with_a_clear_message(name):
    _, opt, lr = CASES[name]
    with pytest.raises(ValueError, match="params have no tensors"):
        opt.step({}, {}, opt.init({}), lr)


def test_adam_state_counts_steps_without_mutation():
    opt = fn.adam()
    params = {"w": torch.ones(3)}
    s0 = opt.init(params)
    _, s1 = opt.step(params, {"w": torch.ones(3)}, s0, 0.1)
    assert (s0["step"], s1["step"]) == (0, 1)
    assert torch.equal(s0["m"]["w"], torch.zeros(3))
