"""The extra layers against their torch.nn twins: same params by name, same outputs and gradients."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchfn as fn


def _x(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0))


@pytest.mark.parametrize("ours, theirs, shape", [
    (fn.max_pool2d(2), nn.MaxPool2d(2), (2, 3, 8, 8)),
    (fn.avg_pool2d(3, stride=2, padding=1), nn.AvgPool2d(3, stride=2, padding=1), (2, 3, 9, 9)),
    (fn.adaptive_avg_pool2d((2, 3)), nn.AdaptiveAvgPool2d((2, 3)), (2, 3, 7, 9)),
    (fn.adaptive_max_pool2d(1), nn.AdaptiveMaxPool2d(1), (2, 3, 7, 9)),
])
def test_pooling_matches_torch(ours, theirs, shape):
    x = _x(*shape)
    assert torch.equal(ours({}, x), theirs(x))


@pytest.mark.parametrize("make, module", [
    (lambda: fn.rmsnorm(6), lambda: nn.RMSNorm(6)),
    (lambda: fn.embedding(10, 4), lambda: nn.Embedding(10, 4)),
    (lambda: fn.multi_head_attention(8, 2), lambda: nn.MultiheadAttention(8, 2, batch_first=True)),
])
def test_layers_match_their_modules_with_the_same_state_dict(make, module):
    torch.manual_seed(0)
    mod = module()
    layer = make()
    params = fn.from_state_dict(mod.state_dict(), like=layer.init(0))  # same names, same shapes
    if isinstance(mod, nn.Embedding):
        x = torch.tensor([[1, 2, 9], [0, 0, 3]])
        expected = mod(x)
    elif isinstance(mod, nn.MultiheadAttention):
        x = _x(2, 5, 8)
        expected = mod(x, x, x, need_weights=False)[0]
        causal = torch.triu(torch.ones(5, 5, dtype=torch.bool), diagonal=1)
        got_causal = layer.apply(params, x, causal=True)
        assert torch.allclose(got_causal, mod(x, x, x, attn_mask=causal, need_weights=False)[0], atol=1e-6)
    else:
        x = _x(3, 6)
        expected = mod(x)
    got = layer(params, x)
    assert torch.allclose(got, expected, atol=1e-6)
    # Gradients agree too.
    g_ours = torch.func.grad(lambda p: layer(p, x).square().sum())(params)
    expected.square().sum().backward()
    for name, p in mod.named_parameters():
        assert torch.allclose(fn.to_state_dict(g_ours)[name], p.grad, atol=1e-5), name


def test_embedding_refuses_float_indices():
    layer = fn.embedding(10, 4)
    with pytest.raises(fn.ContractError, match="idx has dtype float32, expected an integer tensor"):
        layer(layer.init(0), torch.ones(3))


def test_batchnorm_threads_running_stats_like_nn_batchnorm():
    mod = nn.BatchNorm2d(3, momentum=0.2)
    bn = fn.batchnorm(3, momentum=0.2)
    params, stats = bn.init(), bn.init_stats()
    start = {k: v.clone() for k, v in stats.items()}
    for i in range(3):
        x = _x(4, 3, 5, 5) * (i + 1) + i
        y, stats = bn.apply(params, stats, x, train=True)
        assert torch.allclose(y, mod(x), atol=1e-6)
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        assert torch.allclose(stats[name].float(), getattr(mod, name).float(), atol=1e-6), name
    assert all(torch.equal(start[k], v) for k, v in bn.init_stats().items()), "the caller's stats were changed"
    assert torch.equal(start["running_mean"], torch.zeros(3))
    mod.eval()
    x = _x(2, 3, 5, 5)
    y, same = bn.apply(params, stats, x, train=False)
    assert torch.allclose(y, mod(x), atol=1e-6) and same is stats
    with pytest.raises(fn.ContractError, match=r"expected \(N, 3, ...\)"):
        bn.apply(params, stats, _x(2, 4, 5), train=True)


def test_residual_and_branches_compose_and_name_paths():
    block = fn.residual(fn.sequential(fn.linear(4, 4), fn.relu))
    both = fn.branches(fn.linear(4, 2), fn.linear(4, 2))
    model = fn.sequential(block, both)
    params = model.init(fn.key(0))
    x = _x(3, 4)
    h = x + torch.relu(x @ params["0"]["0"]["weight"].T + params["0"]["0"]["bias"])
    expected = sum(h @ params["1"][i]["weight"].T + params["1"][i]["bias"] for i in ("0", "1"))
    assert torch.allclose(model(params, x), expected, atol=1e-6)
    params["1"]["1"]["weight"] = torch.zeros(2, 3)
    with pytest.raises(fn.ContractError, match=r"layer 1\.1: linear: .*params\['1\.1\.weight'\]"):
        model(params, x)


def test_summary_counts_parameters_per_path():
    text = fn.summary(fn.mlp([4, 8, 2]).init(0))
    assert "0.weight" in text and "(8, 4)" in text and "2.bias" in text
    assert text.splitlines()[-1].split()[-1] == str(4 * 8 + 8 + 8 * 2 + 2)
