"""More layers: pooling, embedding, RMS norm, attention, combinators, BatchNorm with explicit state.

Same shape as torchfn.nn: `init(rng) -> params`, `apply(params, x, *, key=None) -> y`,
params named as the matching torch.nn module's state_dict. BatchNorm has state that is
not trained (running statistics): it is threaded through explicitly —
`y, stats = bn.apply(params, stats, x, train=True)` — with the mode an argument, never a flag.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from torchfn import random
from torchfn.contracts import ContractError, contract
from torchfn.nn import Layer, Params, Rng, _cpu_generator, _uniform, activation, linear
from torchfn.tree import with_paths

# -- pooling (no params) --------------------------------------------------------------


def max_pool2d(kernel_size: int, stride: int | None = None, padding: int = 0) -> Layer:
    return activation(lambda x: F.max_pool2d(x, kernel_size, stride, padding), f"max_pool2d({kernel_size})")


def avg_pool2d(kernel_size: int, stride: int | None = None, padding: int = 0) -> Layer:
    return activation(lambda x: F.avg_pool2d(x, kernel_size, stride, padding), f"avg_pool2d({kernel_size})")


def adaptive_avg_pool2d(output_size: int | tuple[int, int]) -> Layer:
    return activation(lambda x: F.adaptive_avg_pool2d(x, output_size), f"adaptive_avg_pool2d({output_size})")


def adaptive_max_pool2d(output_size: int | tuple[int, int]) -> Layer:
    return activation(lambda x: F.adaptive_max_pool2d(x, output_size), f"adaptive_max_pool2d({output_size})")


# -- embedding and norms ----------------------------------------------------------------


def embedding(num: int, dim: int, *, dtype: torch.dtype = torch.float32, device: Any = None) -> Layer:
    """A table of `num` vectors; `apply(params, idx)` looks up an integer tensor (nn.Embedding, N(0, 1) init)."""

    def init(rng: Rng) -> Params:
        g = _cpu_generator(rng)
        return {"weight": torch.randn(num, dim, generator=g).to(dtype=dtype, device=device)}

    @contract(params={"weight": "num dim"}, dtype=None, name="embedding")
    def apply(params: Params, idx: torch.Tensor, *, key: Any = None) -> torch.Tensor:
        if idx.dtype.is_floating_point:
            raise ContractError(f"embedding: idx has dtype {str(idx.dtype).removeprefix('torch.')}, "
                                "expected an integer tensor of indices")
        return F.embedding(idx, params["weight"])

    return Layer(init, apply, f"embedding({num}, {dim})")


def rmsnorm(d: int, *, eps: float | None = None, dtype: torch.dtype = torch.float32, device: Any = None) -> Layer:
    """x / rms(x) · weight over the last dimension (nn.RMSNorm(d))."""

    def init(rng: Rng) -> Params:
        return {"weight": torch.ones(d, dtype=dtype, device=device)}

    @contract(params={"weight": "d"}, x="*batch d", name="rmsnorm")
    def apply(params: Params, x: torch.Tensor, *, key: Any = None) -> torch.Tensor:
        return F.rms_norm(x, (d,), params["weight"], eps)

    return Layer(init, apply, f"rmsnorm({d})")


@dataclass(frozen=True)
class BatchNorm:
    """Batch normalisation with its running statistics as an explicit value.

    `init(rng) -> params` (weight, bias), `init_stats() -> stats` (running_mean,
    running_var, num_batches_tracked: nn.BatchNorm's buffers, by name), and
    `apply(params, stats, x, *, train) -> (y, stats)`: in training the batch statistics
    normalise and the returned stats are updated (momentum as nn.BatchNorm); in
    evaluation the running statistics normalise and stats come back unchanged.
    """

    num_features: int
    eps: float = 1e-5
    momentum: float = 0.1

    def init(self, rng: Rng = 0) -> Params:
        return {"weight": torch.ones(self.num_features), "bias": torch.zeros(self.num_features)}

    def init_stats(self) -> dict[str, torch.Tensor]:
        return {"running_mean": torch.zeros(self.num_features), "running_var": torch.ones(self.num_features),
                "num_batches_tracked": torch.tensor(0)}

    def apply(self, params: Params, stats: dict[str, torch.Tensor], x: torch.Tensor, *,
              train: bool) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if x.dim() < 2 or x.shape[1] != self.num_features:
            raise ContractError(f"batchnorm: x has shape {tuple(x.shape)}, expected (N, {self.num_features}, ...)")
        if not train:
            y = F.batch_norm(x, stats["running_mean"], stats["running_var"], params["weight"], params["bias"],
                             False, 0.0, self.eps)
            return y, stats
        mean = stats["running_mean"].clone()  # F.batch_norm updates these in place: on copies, never the caller's
        var = stats["running_var"].clone()
        y = F.batch_norm(x, mean, var, params["weight"], params["bias"], True, self.momentum, self.eps)
        return y, {"running_mean": mean, "running_var": var,
                   "num_batches_tracked": stats["num_batches_tracked"] + 1}


def batchnorm(num_features: int, *, eps: float = 1e-5, momentum: float = 0.1) -> BatchNorm:
    """BatchNorm1d/2d/3d alike (the statistics are per channel, dim 1)."""
    return BatchNorm(num_features, eps, momentum)


# -- attention ----------------------------------------------------------------------------


def multi_head_attention(d: int, heads: int, *, bias: bool = True) -> Layer:
    """Self-attention as nn.MultiheadAttention(d, heads, batch_first=True), computed with
    F.scaled_dot_product_attention. `apply(params, x, key=None, mask=None, causal=False)`;
    x is (batch, seq, d). Params: in_proj_weight (3d, d), in_proj_bias, out_proj.{weight,bias}.
    """
    if d % heads:
        raise ValueError(f"d={d} is not divisible by heads={heads}")
    out = linear(d, d, bias=bias)

    def init(rng: Rng) -> Params:
        g = _cpu_generator(rng)
        bound = math.sqrt(6.0 / (d + 3 * d))  # xavier_uniform_ on (3d, d), as nn.MultiheadAttention
        params: Params = {"in_proj_weight": _uniform((3 * d, d), bound, g, torch.float32, None)}
        if bias:
            params["in_proj_bias"] = torch.zeros(3 * d)
        params["out_proj"] = out.init(g)
        if bias:
            params["out_proj"]["bias"] = torch.zeros(d)
        return params

    @contract(params={"in_proj_weight": "three_d d", "in_proj_bias?": "three_d"}, x="batch seq d", name="attention")
    def apply(params: Params, x: torch.Tensor, *, key: Any = None, mask: torch.Tensor | None = None,
              causal: bool = False) -> torch.Tensor:
        b, n, _ = x.shape
        qkv = F.linear(x, params["in_proj_weight"], params.get("in_proj_bias"))
        q, k, v = (t.view(b, n, heads, d // heads).transpose(1, 2) for t in qkv.chunk(3, dim=-1))
        # No attention dropout: SDPA's would draw from the global RNG; put fn.dropout after it instead.
        y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal)
        return out.apply(params["out_proj"], y.transpose(1, 2).reshape(b, n, d))

    return Layer(init, apply, f"multi_head_attention({d}, {heads})")


# -- combinators ----------------------------------------------------------------------------


def residual(layer: Layer) -> Layer:
    """x + layer(x); params are the inner layer's."""

    def apply(params: Params, x: torch.Tensor, *, key: Any = None) -> torch.Tensor:
        return x + layer.apply(params, x, key=key)

    return Layer(layer.init, apply, f"residual({layer.name})")


def branches(*layers: Layer, combine: Callable[[list[torch.Tensor]], torch.Tensor] = sum) -> Layer:  # type: ignore[assignment]
    """Every layer on the same input, outputs combined (summed by default; e.g. torch.cat)."""
    if not layers:
        raise ValueError("branches needs at least one layer")
    names = [str(i) for i in range(len(layers))]

    def init(rng: Rng) -> Params:
        if isinstance(rng, torch.Generator):
            return {n: layer.init(rng) for n, layer in zip(names, layers)}
        return {n: layer.init(k) for n, layer, k in zip(names, layers, random.split(rng, len(layers)))}

    def apply(params: Params, x: torch.Tensor, *, key: Any = None) -> torch.Tensor:
        keys = random.split(key, len(layers)) if key is not None else (None,) * len(layers)
        outs = []
        for n, layer, k in zip(names, layers, keys):
            try:
                outs.append(layer.apply(params.get(n, {}), x, key=k))
            except ContractError as exc:
                raise exc.at(n) from None
        return combine(outs)

    return Layer(init, apply, "branches(" + ", ".join(layer.name for layer in layers) + ")")


def summary(params: Any) -> str:
    """A table of parameter counts per path, and the total."""
    rows = [(path, tuple(t.shape), t.numel()) for path, t in with_paths(params) if isinstance(t, torch.Tensor)]
    width = max([len(p) for p, _, _ in rows] + [5])
    lines = [f"{'path':<{width}}  {'shape':<18} {'params':>10}"]
    lines += [f"{p:<{width}}  {str(s):<18} {n:>10,}" for p, s, n in rows]
    lines.append(f"{'total':<{width}}  {'':<18} {sum(n for _, _, n in rows):>10,}")
    return "\n".join(lines)


__all__ = ["BatchNorm", "adaptive_avg_pool2d", "adaptive_max_pool2d", "avg_pool2d", "batchnorm", "embedding",
           "max_pool2d", "multi_head_attention", "branches", "residual", "rmsnorm", "summary"]
