"""Gradient transforms, chains, accumulation, EMA and schedules against torch.optim / torch.nn.utils."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchfn as fn
from torchfn import schedules

SIZES = [8, 16, 12, 3]  # as in conftest.py


def _twins(torch_mlp):
    module = torch_mlp()
    model = fn.mlp(SIZES)
    return module, model, fn.from_state_dict(module.state_dict(), like=model.init(0))


def _worst(params, module) -> float:
    flat = fn.to_state_dict(params)
    return max((flat[k] - v).abs().max().item() for k, v in module.state_dict().items())


@pytest.mark.parametrize("clip", ["norm", "value"])
def test_clipping_chain_matches_torch_clip_utils_then_adam(clip, data, torch_mlp):
    x, y = data
    module, model, params = _twins(torch_mlp)
    torch_opt = torch.optim.Adam(module.parameters(), lr=1e-2)
    first = fn.clip_by_global_norm(0.5) if clip == "norm" else fn.clip_by_value(0.05)
    opt = fn.chain(first, fn.adam())
    state = opt.init(params)
    step = fn.train_step(lambda p, b: fn.cross_entropy(model(p, b[0]), b[1]), opt)
    for _ in range(10):
        torch_opt.zero_grad()
        nn.functional.cross_entropy(module(x), y).backward()
        if clip == "norm":
            nn.utils.clip_grad_norm_(module.parameters(), 0.5)
        else:
            nn.utils.clip_grad_value_(module.parameters(), 0.05)
        torch_opt.step()
        params, state, _ = step(params, state, (x, y), 1e-2)
    assert _worst(params, module) <= 1e-6


def test_weight_decay_mask_matches_a_torch_param_group(data, torch_mlp):
    x, y = data
    module, model, params = _twins(torch_mlp)
    decay = [p for n, p in module.named_parameters() if not n.endswith("bias")]
    no_decay = [p for n, p in module.named_parameters() if n.endswith("bias")]
    torch_opt = torch.optim.AdamW([{"params": decay}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=1e-2, weight_decay=0.3)
    opt = fn.adamw(weight_decay=0.3, mask=fn.no_decay_on_bias)
    state = opt.init(params)
    step = fn.train_step(lambda p, b: fn.cross_entropy(model(p, b[0]), b[1]), opt)
    for _ in range(10):
        torch_opt.zero_grad()
        nn.functional.cross_entropy(module(x), y).backward()
        torch_opt.step()
        params, state, _ = step(params, state, (x, y), 1e-2)
    assert _worst(params, module) <= 1e-6
    # The mask mattered: decaying everything ends elsewhere.
    everything = fn.adamw(weight_decay=0.3)
    p2, s2 = fn.from_state_dict(torch_mlp().state_dict(), like=model.init(0)), None
    s2 = everything.init(p2)
    step2 = fn.train_step(lambda p, b: fn.cross_entropy(model(p, b[0]), b[1]), everything)
    for _ in range(10):
        p2, s2, _ = step2(p2, s2, (x, y), 1e-2)
    assert _worst(p2, module) > 1e-5


def test_add_decayed_weights_with_mask_is_coupled_l2_on_weights_only():
    params = {"w": torch.ones(2), "bias": torch.ones(2)}
    grads = {"w": torch.zeros(2), "bias": torch.zeros(2)}
    t = fn.add_decayed_weights(0.5, mask={"w": True, "bias": False})
    out, _ = t.update(grads, t.init(params), params)
    assert out["w"].tolist() == [0.5, 0.5] and out["bias"].tolist() == [0.0, 0.0]


def test_accumulating_two_half_batches_is_one_full_batch_step(data):
    x, y = data
    model = fn.mlp(SIZES)
    params = model.init(fn.key(0))
    loss = lambda p, b: fn.cross_entropy(model(p, b[0]), b[1])  # noqa: E731
    full_opt = fn.adam()
    full, _, _ = fn.train_step(loss, full_opt)(params, full_opt.init(params), (x, y), 1e-2)
    acc = fn.accumulate(fn.adam(), 2)
    step = fn.train_step(loss, acc)
    state = acc.init(params)
    mid, state, _ = step(params, state, (x[:16], y[:16]), 1e-2)
    assert all(torch.equal(a, b) for a, b in zip(fn.leaves(mid), fn.leaves(params))), "moved before the k-th call"
    done, state, _ = step(mid, state, (x[16:], y[16:]), 1e-2)
    assert max((a - b).abs().max().item() for a, b in zip(fn.leaves(done), fn.leaves(full))) <= 1e-6
    assert state["count"] == 0 and state["opt"]["step"] == 1


def test_ema_matches_torch_averaged_model_ema():
    from torch.optim.swa_utils import get_ema_multi_avg_fn

    avg = [torch.zeros(3)]
    upd = get_ema_multi_avg_fn(0.9)
    ours = {"w": torch.zeros(3)}
    for i in range(1, 5):
        new = [torch.full((3,), float(i))]
        upd(avg, new, None)
        ours = fn.ema(ours, {"w": new[0]}, 0.9)
    assert torch.allclose(ours["w"], avg[0], atol=1e-7)


def _torch_lrs(make_sched, steps: int, base: float = 0.1) -> list[float]:
    opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=base)
    sched = make_sched(opt)
    out = []
    for _ in range(steps):
        out.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return out


@pytest.mark.parametrize("ours, theirs, steps", [
    # CosineAnnealingLR rises again after T_max (a cycle); ours holds `final`: compare to T_max.
    (schedules.cosine(0.1, 20, final=0.01),
     lambda o: torch.optim.lr_scheduler.CosineAnnealingLR(o, T_max=20, eta_min=0.01), 21),
    (schedules.linear(0.05, 0.1, 10),
     lambda o: torch.optim.lr_scheduler.LinearLR(o, start_factor=0.5, end_factor=1.0, total_iters=10), 30),
    (schedules.piecewise([5, 12], [0.1, 0.05, 0.025]),
     lambda o: torch.optim.lr_scheduler.MultiStepLR(o, milestones=[5, 12], gamma=0.5), 30),
    (schedules.one_cycle(0.1, 30),
     lambda o: torch.optim.lr_scheduler.OneCycleLR(o, max_lr=0.1, total_steps=30, cycle_momentum=False), 30),
])
def test_schedules_match_torch_lr_schedulers(ours, theirs, steps):
    expected = _torch_lrs(theirs, steps)
    got = [ours(i) for i in range(len(expected))]
    assert max(abs(a - b) for a, b in zip(got, expected)) <= 1e-9, list(zip(got, expected))


def test_warmup_then_cosine():
    sched = schedules.warmup(schedules.cosine(0.1, 10), 5)
    assert [round(sched(i), 6) for i in range(6)] == [0.0, 0.02, 0.04, 0.06, 0.08, 0.1]
    assert sched(15) == pytest.approx(0.0)


def test_chain_refuses_a_missing_optimizer():
    with pytest.raises(TypeError, match="the last part must be an Optimizer"):
        fn.chain(fn.clip_by_value(1.0))
