"""state_dict interop both ways, and safetensors checkpoints."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file

import torchfn as fn

SIZES = [8, 16, 12, 3]  # as in conftest.py


def test_state_dict_round_trip_gives_identical_outputs(torch_mlp, data):
    x, _ = data
    module = torch_mlp()
    model = fn.mlp(SIZES)
    params = fn.from_state_dict(module.state_dict(), like=model.init(0))
    assert torch.equal(model(params, x), module(x))

    other = torch_mlp(seed=5)
    assert not torch.equal(other(x), module(x))
    other.load_state_dict(fn.to_state_dict(params))
    assert torch.equal(other(x), module(x))


def test_params_are_copies_not_views_of_the_module(torch_mlp):
    module = torch_mlp()
    params = fn.from_state_dict(module.state_dict())
    with torch.no_grad():
        module[0].weight.add_(1.0)
    assert not torch.equal(params["0"]["weight"], module[0].weight)


def test_without_a_template_missing_relu_entries_still_apply(torch_mlp, data):
    x, _ = data
    module = torch_mlp()
    params = fn.from_state_dict(module.state_dict())  # no "1", "3" entries: ReLUs have no params
    assert "1" not in params
    assert torch.equal(fn.mlp(SIZES)(params, x), module(x))


def test_a_state_dict_that_does_not_fit_is_named(torch_mlp):
    sd = torch_mlp().state_dict()
    like = fn.mlp(SIZES).init(0)
    bad = dict(sd)
    bad.pop("2.bias")
    bad["9.weight"] = torch.zeros(1)
    with pytest.raises(ValueError, match=r"missing \['2.bias'\]; unexpected \['9.weight'\]"):
        fn.from_state_dict(bad, like=like)
    bad = dict(sd)
    bad["0.weight"] = torch.zeros(3, 3)
    with pytest.raises(ValueError, match=r"state_dict\['0.weight'\] has shape \(3, 3\), the params expect \(16, 8\)"):
        fn.from_state_dict(bad, like=like)


def test_checkpoint_round_trip_keeps_the_whole_tree(tmp_path, data):
    x, y = data
    model = fn.mlp(SIZES)
    opt = fn.adam()
    params = model.init(fn.key(0))
    step = fn.train_step(lambda p, b: fn.cross_entropy(model(p, b[0]), b[1]), opt)
    params, state, _ = step(params, opt.init(params), (x, y), 1e-2)
    tree = {"params": params, "opt_state": state, "epoch": 3, "note": "digits", "shape": (2, 3)}
    path = tmp_path / "ckpt.safetensors"
    fn.save(path, tree, metadata={"run": "test"})
    loaded = fn.load(path)
    assert loaded["epoch"] == 3 and loaded["note"] == "digits" and loaded["shape"] == (2, 3)
    assert loaded["opt_state"]["step"] == 1
    assert loaded["params"]["1"] == {}  # the ReLU's empty params survive
    assert all(torch.equal(a, b) for a, b in zip(fn.leaves(tree["params"]), fn.leaves(loaded["params"])))
    assert all(torch.equal(a, b) for a, b in zip(fn.leaves(state["m"]), fn.leaves(loaded["opt_state"]["m"])))
    # Resuming from the file continues exactly as resuming from memory.
    a = step(params, state, (x, y), 1e-2)
    b = step(loaded["params"], loaded["opt_state"], (x, y), 1e-2)
    assert all(torch.equal(u, v) for u, v in zip(fn.leaves(a[0]), fn.leaves(b[0])))
    meta = fn.io.metadata(path)
    assert meta["run"] == "test" and meta["format"] == "torchfn/1"
    assert json.loads(meta["torchfn.tree"])["epoch"] == 3


def test_a_tensor_held_twice_is_saved(tmp_path):
    w = torch.arange(4.0)
    fn.save(tmp_path / "t.safetensors", {"a": w, "b": w})
    back = fn.load(tmp_path / "t.safetensors")
    assert torch.equal(back["a"], w) and torch.equal(back["b"], w)


def test_a_plain_safetensors_file_loads_as_nested_dicts(tmp_path, torch_mlp):
    sd = {k: v.contiguous() for k, v in torch_mlp().state_dict().items()}
    save_file(sd, tmp_path / "plain.safetensors")
    params = fn.load(tmp_path / "plain.safetensors")
    assert torch.equal(params["0"]["weight"], sd["0.weight"])


def test_unsaveable_things_are_refused(tmp_path):
    with pytest.raises(TypeError, match="cannot save object at params.x"):
        fn.save(tmp_path / "x.safetensors", {"params": {"x": object()}})
    with pytest.raises(ValueError, match="keys must be strings without '.'"):
        fn.save(tmp_path / "x.safetensors", {"a.b": torch.ones(1)})
    with pytest.raises(ValueError, match=r"metadata keys \['torchfn.tree'\] are torchfn's own"):
        fn.save(tmp_path / "x.safetensors", {"a": torch.ones(1)}, metadata={"torchfn.tree": "{}"})
    assert not list(tmp_path.iterdir())  # nothing half-written left behind


def test_a_plain_file_of_a_deep_model_loads_in_the_models_order(tmp_path, data):
    # Regression: safetensors lists tensors in string order ('0', '10', '2'), and `load`
    # gave them back so: optimizer state from model.init then no longer lined up.
    from safetensors.torch import save_file

    x, y = data
    model = fn.mlp([8] + [6] * 11 + [3])  # 12 linears: children 0, 2, ..., 22
    params = model.init(fn.key(0))
    save_file(fn.to_state_dict(params), str(tmp_path / "plain.safetensors"))
    loaded = fn.load(tmp_path / "plain.safetensors")
    assert list(loaded) == [k for k in params if params[k]] and list(loaded)[:6] == ["0", "2", "4", "6", "8", "10"]
    shaped = fn.load(tmp_path / "plain.safetensors", like=params)
    assert [k for k, _ in fn.tree.with_paths(shaped)] == [k for k, _ in fn.tree.with_paths(params)]
    opt = fn.adam()
    step = fn.train_step(lambda p, b: fn.cross_entropy(model(p, b[0]), b[1]), opt)
    p1, _, l1 = step(params, opt.init(params), (x, y), 1e-2)
    p2, _, l2 = step(loaded, opt.init(params), (x, y), 1e-2)
    assert torch.equal(l1, l2)
    wider = {**params, "22": {**params["22"], "extra": torch.ones(1)}}
    with pytest.raises(ValueError, match=r"missing \['22.extra'\]"):
        fn.load(tmp_path / "plain.safetensors", like=wider)
