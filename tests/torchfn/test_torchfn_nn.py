"""Layers: pure init from a key, the same numbers as the torch.nn module with the same params."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torchfn as fn


def test_init_from_a_key_is_pure_and_keys_differ():
    model = fn.mlp([4, 8, 2])
    a, b, c = model.init(fn.key(7)), model.init(fn.key(7)), model.init(fn.key(8))
    assert all(torch.equal(u, v) for u, v in zip(fn.leaves(a), fn.leaves(b)))
    assert not torch.equal(a["0"]["weight"], c["0"]["weight"])


def test_init_with_a_generator_uses_the_callers_generator():
    layer = fn.linear(5, 3)
    p1 = layer.init(torch.Generator().manual_seed(0))
    p2 = layer.init(torch.Generator().manual_seed(0))
    assert torch.equal(p1["weight"], p2["weight"])
    assert p1["weight"].abs().max() <= 1 / 5**0.5  # nn.Linear's bound, 1/sqrt(fan_in)


def test_mlp_params_are_named_as_nn_sequential_names_them():
    model = fn.mlp([4, 8, 8, 2])
    module = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    assert sorted(fn.to_state_dict(model.init(0))) == sorted(module.state_dict())


@pytest.mark.parametrize("make_fn, make_module, shape", [
    (lambda: fn.conv2d(3, 5, 3, stride=2, padding=1), lambda: nn.Conv2d(3, 5, 3, stride=2, padding=1), (2, 3, 9, 9)),
    (lambda: fn.layernorm(6), lambda: nn.LayerNorm(6), (4, 7, 6)),
    (lambda: fn.linear(6, 4, bias=False), lambda: nn.Linear(6, 4, bias=False), (3, 6)),
])
def test_layer_matches_its_torch_module(make_fn, make_module, shape):
    layer, module = make_fn(), make_module()
    with torch.no_grad():
        for p in module.parameters():
            p.uniform_(-1, 1)  # LayerNorm starts at 1 and 0: make the comparison mean something
    params = fn.from_state_dict(module.state_dict(), like=layer.init(0))
    x = torch.randn(*shape)
    assert torch.equal(layer(params, x), module(x))


def test_conv_net_composes_with_flatten():
    model = fn.sequential(fn.conv2d(1, 4, 3), fn.relu, fn.flatten(), fn.linear(4 * 6 * 6, 10))
    params = model.init(fn.key(0))
    assert model(params, torch.randn(2, 1, 8, 8)).shape == (2, 10)


def test_dropout_is_a_pure_function_of_its_key():
    drop = fn.dropout(0.5)
    x = torch.ones(1000)
    a, b, c = drop({}, x, key=fn.key(1)), drop({}, x, key=fn.key(1)), drop({}, x, key=fn.key(2))
    assert torch.equal(a, b)
    assert not torch.equal(a, c)
    assert set(a.unique().tolist()) == {0.0, 2.0}  # kept elements are scaled by 1/(1-p)
    assert 400 < int((a == 0).sum()) < 600
    assert drop({}, x) is x  # no key: evaluation, identity
    torch.manual_seed(0)
    before = torch.random.get_rng_state()
    drop({}, x, key=fn.key(3))
    assert torch.equal(before, torch.random.get_rng_state()), "dropout touched the global RNG"


def test_sequential_gives_each_dropout_its_own_key():
    model = fn.sequential(fn.dropout(0.5), fn.dropout(0.5))
    out = model({}, torch.ones(2000), key=fn.key(0))
    assert out.unique().tolist() == [0.0, 4.0]
    one = fn.dropout(0.5)({}, torch.ones(2000), key=fn.key(0))
    assert int((out == 0).sum()) > int((one == 0).sum())  # two independent masks drop more


def test_split_keys_are_distinct_and_stable():
    keys = fn.split(fn.key(0), 4)
    assert len(set(keys)) == 4
    assert keys == fn.split(fn.key(0), 4)
    assert all(0 <= k < 2**63 for k in keys)
    assert fn.fold_in(fn.key(0), 1) != fn.fold_in(fn.key(0), 2)


def test_to_device_copies_and_leaves_the_original():
    params = fn.linear(2, 2).init(0)
    moved = fn.to_device(params, "cpu", torch.float64)
    assert moved["weight"].dtype == torch.float64 and params["weight"].dtype == torch.float32


def test_bad_arguments_are_refused():
    with pytest.raises(ValueError, match="dropout probability"):
        fn.dropout(1.0)
    with pytest.raises(ValueError, match="at least an input and an output"):
        fn.mlp([3])
