"""Mixed precision: bf16/fp16 compute with fp32 master params ends where fp32 training does."""

from __future__ import annotations

import pytest
import torch

import torchfn as fn


def _task():
    g = torch.Generator().manual_seed(0)
    x = torch.randn(128, 16, generator=g)
    y = (x[:, :4].sum(1) > 0).long() + (x[:, 4] > 1).long()
    return fn.mlp([16, 64, 3]), (x, y)


def _train(precision, opt, steps=40):
    model, batch = _task()
    params = model.init(fn.key(0))
    state = opt.init(params)
    step = fn.train_step(lambda p, b: fn.cross_entropy(model(p, b[0]), b[1]), opt, precision=precision)
    losses = []
    for _ in range(steps):
        params, state, loss = step(params, state, batch, 1e-2)
        losses.append(float(loss))
    return params, state, losses


@pytest.mark.parametrize("precision, opt", [("bf16", fn.adam()), ("fp16", fn.dynamic_loss_scale(fn.adam()))])
def test_low_precision_training_matches_fp32_within_tolerance(precision, opt):
    ref, _, ref_losses = _train(None, fn.adam())
    params, state, losses = _train(precision, opt)
    assert all(t.dtype == torch.float32 for t in fn.leaves(params)), "master params left float32"
    assert losses[-1] < 0.5 * losses[0]
    assert max(abs(a - b) for a, b in zip(losses, ref_losses)) < 0.05, (losses[-5:], ref_losses[-5:])
    # Adam turns tiny gradient differences into lr-sized steps, so params are compared by what
    # they compute: the two models predict the same class on nearly every example.
    model, (x, _) = _task()
    agree = (model(params, x).argmax(1) == model(ref, x).argmax(1)).float().mean().item()
    assert agree >= 0.95, agree
    # Low precision was really used: the run differs from fp32 in its last bits.
    assert any(not torch.equal(a, b) for a, b in zip(fn.leaves(params), fn.leaves(ref)))
    if precision == "fp16":
        assert state["skipped"] == 0 and state["loss_scale"] == 2.0**16


def test_fp16_overflow_skips_the_step_and_halves_the_scale():
    model, batch = _task()
    params = model.init(fn.key(0))
    opt = fn.dynamic_loss_scale(fn.adam(), init_scale=2.0**40, growth_interval=2)
    step = fn.train_step(lambda p, b: fn.cross_entropy(model(p, b[0]), b[1]), opt, precision="fp16")
    state = opt.init(params)
    new, state, loss = step(params, state, batch, 1e-2)
    assert state["skipped"] == 1 and state["loss_scale"] == 2.0**39
    assert all(torch.equal(a, b) for a, b in zip(fn.leaves(new), fn.leaves(params)))
    assert torch.isfinite(loss)
    for _ in range(40):  # backs off until the grads fit fp16, then steps
        new, state, loss = step(new, state, batch, 1e-2)
        if state["opt"]["step"]:
            break
    assert state["opt"]["step"] == 1 and 1.0 <= state["loss_scale"] < 2.0**40 and state["skipped"] > 1


def test_precision_is_validated():
    with pytest.raises(ValueError, match="precision must be one of"):
        fn.train_step(lambda p, b: p["w"].sum(), fn.sgd(), precision="fp8")
