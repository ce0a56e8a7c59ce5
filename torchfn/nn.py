"""Layers as pairs of pure functions: `init(rng) -> params` and `apply(params, x) -> y`.

Params are plain nested dicts of tensors, named like the matching `torch.nn` module's
state_dict (`weight`, `bias`; children "0", "1", ... in `sequential`), so a model moves
between torchfn and `nn.Module` with `io.to_state_dict` / `io.from_state_dict`.

`rng` is an int key (see `torchfn.random`: pure, the same key gives the same params) or
a `torch.Generator` the caller owns. Parameters are drawn on the CPU and then moved, so a
key gives the same model on every device. `apply` takes `key=` too: only dropout uses it,
and `key=None` means evaluation (dropout off) — there is no global training flag.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from torchfn import random
from torchfn.contracts import ContractError, contract
from torchfn.tree import tree_map

Params = dict[str, Any]
Rng = int | torch.Generator


@dataclass(frozen=True)
class Layer:
    """A model: how to make its params, and the pure function that uses them."""

    init: Callable[[Rng], Params]
    apply: Callable[..., torch.Tensor]  # apply(params, x, *, key=None) -> y
    name: str = "layer"

    def __call__(self, params: Params, x: torch.Tensor, *, key: int | None = None) -> torch.Tensor:
        return self.apply(params, x, key=key)


def _uniform(shape: Sequence[int], bound: float, g: torch.Generator, dtype: torch.dtype,
             device: torch.device | str | None) -> torch.Tensor:
    t = torch.empty(tuple(shape), dtype=torch.float32).uniform_(-bound, bound, generator=g)
    return t.to(dtype=dtype, device=device)


def _cpu_generator(rng: Rng) -> torch.Generator:
    if isinstance(rng, torch.Generator):
        return rng
    return random.generator(rng, "cpu")


# -- linear --------------------------------------------------------------------------


# No `returns=` on the built-in layers: torch guarantees their output shapes, and each check costs ~1 µs.
@contract(params={"weight": "d_out d_in", "bias?": "d_out"}, x="*batch d_in", name="linear")
def linear_apply(params: Params, x: torch.Tensor, *, key: int | None = None) -> torch.Tensor:
    return F.linear(x, params["weight"], params.get("bias"))


def linear(d_in: int, d_out: int, *, bias: bool = True, dtype: torch.dtype = torch.float32,
           device: torch.device | str | None = None) -> Layer:
    """y = x Wᵀ + b, initialised as `nn.Linear` is (uniform ±1/√d_in)."""

    def init(rng: Rng) -> Params:
        g = _cpu_generator(rng)
        bound = 1 / math.sqrt(d_in) if d_in > 0 else 0.0
        params = {"weight": _uniform((d_out, d_in), bound, g, dtype, device)}
        if bias:
            params["bias"] = _uniform((d_out,), bound, g, dtype, device)
        return params

    return Layer(init, linear_apply, f"linear({d_in}→{d_out})")


# -- conv2d --------------------------------------------------------------------------


def conv2d(c_in: int, c_out: int, kernel_size: int | tuple[int, int], *, stride: int | tuple[int, int] = 1,
           padding: int | tuple[int, int] | str = 0, bias: bool = True, dtype: torch.dtype = torch.float32,
           device: torch.device | str | None = None) -> Layer:
    """A 2-d convolution over (N, C, H, W) or (C, H, W), initialised as `nn.Conv2d` is."""
    kh, kw = (kernel_size, kernel_size) if isinstance(kernel_size, int) else kernel_size

    def init(rng: Rng) -> Params:
        g = _cpu_generator(rng)
        fan_in = c_in * kh * kw
        bound = 1 / math.sqrt(fan_in) if fan_in > 0 else 0.0
        params = {"weight": _uniform((c_out, c_in, kh, kw), bound, g, dtype, device)}
        if bias:
            params["bias"] = _uniform((c_out,), bound, g, dtype, device)
        return params

    @contract(params={"weight": f"c_out c_in {kh} {kw}", "bias?": "c_out"}, x="*batch c_in h w", name="conv2d")
    def apply(params: Params, x: torch.Tensor, *, key: int | None = None) -> torch.Tensor:
        if x.dim() not in (3, 4):  # '*batch' would let a 5-d input through to a confusing torch error
            raise ContractError(f"conv2d: x has {x.dim()} dimensions {tuple(x.shape)}, expected 4 (N, C, H, W) "
                                f"or 3 (C, H, W); for volumes use a 3-d convolution")
        return F.conv2d(x, params["weight"], params.get("bias"), stride=stride, padding=padding)

    return Layer(init, apply, f"conv2d({c_in}→{c_out}, {kh}x{kw})")


# -- layernorm -----------------------------------------------------------------------


def layernorm(d: int, *, eps: float = 1e-5, dtype: torch.dtype = torch.float32,
              device: torch.device | str | None = None) -> Layer:
    """Normalise the last dimension, then scale and shift (`nn.LayerNorm(d)`)."""

    def init(rng: Rng) -> Params:
        return {"weight": torch.ones(d, dtype=dtype, device=device), "bias": torch.zeros(d, dtype=dtype, device=device)}

    @contract(params={"weight": "d", "bias": "d"}, x="*batch d", name="layernorm")
    def apply(params: Params, x: torch.Tensor, *, key: int | None = None) -> torch.Tensor:
        return F.layer_norm(x, (d,), params["weight"], params["bias"], eps)

    return Layer(init, apply, f"layernorm({d})")


# -- dropout -------------------------------------------------------------------------


def dropout(p: float) -> Layer:
    """Zero each element with probability p and scale the rest by 1/(1-p).

    Random only when given a key: `apply(params, x, key=k)` is training, `key=None` is
    evaluation. An int key draws from a generator; a tensor key (what `train_step` passes,
    see `torchfn.random.as_tensor_key`) from a counter-based hash that torch.compile traces. The mask comes from a generator seeded by the key alone, so the same
    key drops the same elements (pure), and nothing global is read or advanced.
    """
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout probability must be in [0, 1), got {p}")

    def apply(params: Params, x: torch.Tensor, *, key: int | None = None) -> torch.Tensor:
        if key is None or p == 0.0:
            return x
        if isinstance(key, torch.Tensor):  # a tensor key: hash-based bits, which torch.compile traces
            keep = (random.bits(key, x.shape, x.device) >= int(p * 2**32)).to(x.dtype)
            return x * keep / (1.0 - p)
        g = random.generator(key, x.device)
        keep = torch.empty(x.shape, dtype=x.dtype, device=x.device).bernoulli_(1.0 - p, generator=g)
        return x * keep / (1.0 - p)

    return Layer(_no_params, apply, f"dropout({p})")


# -- parameter-free layers -----------------------------------------------------------


_EMPTY: Params = {}


def _no_params(rng: Rng) -> Params:
    return {}


def activation(fn: Callable[[torch.Tensor], torch.Tensor], name: str | None = None) -> Layer:
    """A layer with no params from any tensor function."""

    def apply(params: Params, x: torch.Tensor, *, key: int | None = None) -> torch.Tensor:
        return fn(x)

    return Layer(_no_params, apply, name or getattr(fn, "__name__", "activation"))


relu = activation(torch.relu, "relu")
gelu = activation(F.gelu, "gelu")
tanh = activation(torch.tanh, "tanh")


def flatten(start_dim: int = 1) -> Layer:
    return activation(lambda x: torch.flatten(x, start_dim), f"flatten({start_dim})")


# -- composition ---------------------------------------------------------------------


def sequential(*layers: Layer) -> Layer:
    """Apply layers in turn; params {"0": ..., "1": ...} as `nn.Sequential` names them."""
    if not layers:
        raise ValueError("sequential needs at least one layer")
    names = [str(i) for i in range(len(layers))]

    def init(rng: Rng) -> Params:
        if isinstance(rng, torch.Generator):
            return {n: layer.init(rng) for n, layer in zip(names, layers)}
        keys = random.split(rng, len(layers))
        return {n: layer.init(k) for n, layer, k in zip(names, layers, keys)}

    def apply(params: Params, x: torch.Tensor, *, key: int | None = None) -> torch.Tensor:
        keys = random.split(key, len(layers)) if key is not None else (None,) * len(layers)
        for n, layer, k in zip(names, layers, keys):
            child = params.get(n, _EMPTY) if isinstance(params, dict) else _EMPTY
            if child is _EMPTY and layer.init is not _no_params and n not in params:
                # A state_dict has no entry for a parameter-free child (ReLU); any other must be there.
                raise ContractError(f"params have no entry {n!r} for child {n} ({layer.name}); "
                                    f"they have {sorted(params, key=str)}")
            try:
                x = layer.apply(child, x, key=k)
            except ContractError as exc:
                raise exc.at(n) from None  # the error names the layer path: "2.0.weight"
        return x

    return Layer(init, apply, "sequential(" + ", ".join(layer.name for layer in layers) + ")")


def mlp(sizes: Sequence[int], *, act: Layer = relu, dropout_p: float = 0.0, dtype: torch.dtype = torch.float32,
        device: torch.device | str | None = None) -> Layer:
    """Linear layers with `act` between them: mlp([512, 256, 128, 2]).

    With dropout_p > 0 a dropout follows each activation (and shifts the child names,
    exactly as the equivalent nn.Sequential would).
    """
    if len(sizes) < 2:
        raise ValueError("mlp needs at least an input and an output size")
    layers: list[Layer] = []
    for i, (d_in, d_out) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(linear(d_in, d_out, dtype=dtype, device=device))
        if i < len(sizes) - 2:
            layers.append(act)
            if dropout_p > 0:
                layers.append(dropout(dropout_p))
    return sequential(*layers)


def to_device(params: Any, device: torch.device | str, dtype: torch.dtype | None = None) -> Any:
    """A copy of a params tree on another device (and dtype); the original is untouched."""
    return tree_map(lambda t: t.to(device=device, dtype=dtype) if isinstance(t, torch.Tensor) else t, params)
