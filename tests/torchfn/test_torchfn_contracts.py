"""Shape, dtype and device contracts: a broken one names the dimension and where it came from."""

from __future__ import annotations

import pytest
import torch
from jaxtyping import Float, Int
from torch import Tensor

import torchfn as fn
from torchfn.contracts import parse


def test_wrong_input_width_names_the_dimension():
    model = fn.mlp([4, 16, 3])
    params = model.init(0)
    with pytest.raises(fn.ContractError) as err:
        model(params, torch.randn(8, 3))
    message = str(err.value)
    assert "dimension 'd_in' of x is 3" in message
    assert "params['0.weight'] has d_in = 4" in message and message.startswith("layer 0: linear:")
    assert "(8, 3)" in message and "(16, 4)" in message


def test_batch_dimensions_bound_across_arguments_are_compared():
    @fn.contract(x="*batch n", y="*batch n")
    def add(x, y):
        return x + y

    assert add(torch.ones(2, 3, 4), torch.ones(2, 3, 4)).shape == (2, 3, 4)
    with pytest.raises(fn.ContractError, match=r"dimensions 'batch' of y is \(2, 5\), but x has batch = \(2, 3\)"):
        add(torch.ones(2, 3, 4), torch.ones(2, 5, 4))


def test_rank_fixed_sizes_and_the_result_are_checked():
    @fn.contract(x="n 3", returns="n")
    def norms(x):
        return x.norm(dim=-1)

    with pytest.raises(fn.ContractError, match=r"x has 1 dimension \(3,\), expected 2"):
        norms(torch.ones(3))
    with pytest.raises(fn.ContractError, match="axis 1 of x must be 3, got 4"):
        norms(torch.ones(2, 4))

    @fn.contract(x="n 3", returns="n")
    def wrong(x):
        return x

    with pytest.raises(fn.ContractError, match="the result has 2 dimensions"):
        wrong(torch.ones(2, 3))


def test_dtype_and_device_mismatches_are_named():
    layer = fn.linear(4, 2)
    params = layer.init(0)
    with pytest.raises(fn.ContractError, match="x is float64 but params\\['weight'\\] is float32"):
        layer(params, torch.ones(1, 4, dtype=torch.float64))
    # The meta device is a real second device that needs no hardware.
    with pytest.raises(fn.ContractError, match="x is on meta but params\\['weight'\\] is on cpu"):
        layer(params, torch.ones(1, 4, device="meta"))


def test_conv_kernel_size_is_a_fixed_dimension():
    conv = fn.conv2d(2, 4, 3)
    params = conv.init(0)
    params = {**params, "weight": torch.zeros(4, 2, 5, 5)}
    with pytest.raises(fn.ContractError, match=r"axis 2 of params\['weight'\] must be 3, got 5"):
        conv(params, torch.zeros(1, 2, 8, 8))


def test_jaxtyping_annotations_are_checked_with_our_messages():
    @fn.contract()
    def project(x: Float[Tensor, "batch d"], w: Float[Tensor, "d k"]) -> Float[Tensor, "batch k"]:
        return x @ w

    assert project(torch.ones(2, 3), torch.ones(3, 5)).shape == (2, 5)
    with pytest.raises(fn.ContractError, match="dimension 'd' of w is 4, but x has d = 3"):
        project(torch.ones(2, 3), torch.ones(4, 5))
    with pytest.raises(fn.ContractError, match="x has dtype int64, expected one of"):
        project(torch.ones(2, 3, dtype=torch.int64), torch.ones(3, 5))


def test_missing_params_entries_are_named():
    layer = fn.linear(4, 2)
    with pytest.raises(fn.ContractError, match="params has no entry 'weight'"):
        layer({"bias": torch.zeros(2)}, torch.ones(1, 4))


def test_checks_can_be_switched_off_for_hot_loops():
    layer = fn.linear(4, 2)
    params = layer.init(0)
    with fn.checks(False):
        assert not fn.checks_enabled()
        with pytest.raises(RuntimeError):  # torch's own, less helpful, error
            layer(params, torch.ones(1, 3))
    assert fn.checks_enabled()


def test_contracts_hold_under_vmap_and_grad():
    model = fn.mlp([3, 5, 1])
    params = model.init(0)
    xs = torch.randn(7, 3)

    def loss(p, x):
        return model(p, x).sum()

    per_example = fn.vmap(fn.grad(loss), in_dims=(None, 0))(params, xs)
    assert per_example["0"]["weight"].shape == (7, 5, 3)
    summed = fn.grad(lambda p: sum(loss(p, x) for x in xs))(params)
    assert torch.allclose(per_example["0"]["weight"].sum(0), summed["0"]["weight"], atol=1e-6)


@pytest.mark.parametrize("text, error", [
    ("a ... *b", "at most one variadic"),
    ("a b-1", "not supported"),
    ("*1x", "is not a name"),
])
def test_unsupported_shape_strings_fail_when_declared(text, error):
    with pytest.raises(ValueError, match=error):
        parse(text)


def test_a_contract_on_an_unknown_argument_fails_when_declared():
    with pytest.raises(TypeError, match="has no argument 'z'"):
        fn.contract(z="n")(lambda x: x)


def test_params_in_any_mapping_are_checked_the_same():
    from types import MappingProxyType

    layer = fn.linear(4, 2)
    params = MappingProxyType(layer.init(0))
    assert layer(params, torch.ones(1, 4)).shape == (1, 2)
    with pytest.raises(fn.ContractError, match="dimension 'd_in' of x is 3"):
        layer(params, torch.ones(1, 3))


def test_errors_name_the_layer_path_in_nested_models():
    # Regression: a shape error deep in a model said "params['weight']", not which weight.
    model = fn.sequential(fn.sequential(fn.linear(4, 8), fn.relu), fn.sequential(fn.linear(8, 6), fn.linear(6, 2)))
    params = model.init(0)
    params["1"]["1"]["weight"] = torch.zeros(2, 5)
    with pytest.raises(fn.ContractError) as err:
        model(params, torch.ones(3, 4))
    assert str(err.value).startswith("layer 1.1: linear: dimension 'd_in' of x is 6, but params['1.1.weight'] has "
                                     "d_in = 5"), err.value
    assert err.value.path == ("1", "1")


def test_a_missing_child_is_named():
    # Regression: a params tree without child '2' failed inside linear with "no entry 'weight'".
    model = fn.mlp([4, 8, 2])
    params = model.init(0)
    del params["2"]
    with pytest.raises(fn.ContractError, match=r"params have no entry '2' for child 2 \(linear\(8→2\)\)"):
        model(params, torch.ones(3, 4))
    del params["1"]  # relu's empty entry may be absent, as in a state_dict
    params["2"] = model.init(0)["2"]
    assert model(params, torch.ones(3, 4)).shape == (3, 2)


def test_conv2d_rejects_a_5d_input():
    conv = fn.conv2d(2, 4, 3)
    with pytest.raises(fn.ContractError, match=r"conv2d: x has 5 dimensions \(1, 1, 2, 8, 8\), expected 4"):
        conv(conv.init(0), torch.zeros(1, 1, 2, 8, 8))
    assert conv(conv.init(0), torch.zeros(2, 8, 8)).shape == (4, 6, 6)


def test_autocast_activations_meet_float32_params():
    # Regression: under autocast the first layer's bf16 output broke the next layer's dtype contract.
    model = fn.mlp([4, 8, 2])
    params = model.init(0)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        out = model(params, torch.ones(3, 4))
    assert out.dtype == torch.bfloat16
    with pytest.raises(fn.ContractError, match="x is bfloat16 but params\\['weight'\\] is float32"):
        fn.linear(4, 2)(fn.linear(4, 2).init(0), torch.ones(3, 4, dtype=torch.bfloat16))


def test_an_int_index_with_a_float_table_is_a_valid_contract():
    @fn.contract()
    def lookup(table: Float[Tensor, "vocab d"], idx: Int[Tensor, "n"]) -> Float[Tensor, "n d"]:
        return table[idx]

    assert lookup(torch.ones(10, 3), torch.tensor([1, 2])).shape == (2, 3)
    with pytest.raises(fn.ContractError, match="idx has dtype float32, expected one of"):
        lookup(torch.ones(10, 3), torch.ones(2))
    # Two floats must still agree with each other.
    @fn.contract()
    def add(a: Float[Tensor, "n"], b: Float[Tensor, "n"]) -> Float[Tensor, "n"]:
        return a + b

    with pytest.raises(fn.ContractError, match="b is float64 but a is float32"):
        add(torch.ones(2), torch.ones(2, dtype=torch.float64))
