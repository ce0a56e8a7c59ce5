"""Explicit random keys, as in JAX: a key is an int; `split` derives independent keys.

A function that takes a key and makes its own `torch.Generator` from it is pure: the same
key gives the same numbers, and no global RNG state is read or advanced.
"""

from __future__ import annotations

import torch

_MASK = (1 << 64) - 1


def _mix(x: int) -> int:
    # splitmix64's finaliser: cheap, well spread, and stable across platforms and versions.
    x = (x + 0x9E3779B97F4A7C15) & _MASK
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _MASK
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _MASK
    return x ^ (x >> 31)


def key(seed: int) -> int:
    """A key from any int seed."""
    return _mix(int(seed) & _MASK) >> 1  # 63 bits: torch seeds must fit in a signed int64


def split(k: int | torch.Tensor, n: int = 2) -> tuple:
    """`n` new keys, independent of each other and of `k` (tensor keys give tensor keys)."""
    if isinstance(k, torch.Tensor):
        base = _fold_t(k, 0x243F6A88)
        return tuple(_fold_t(base, i) for i in range(n))
    base = _mix(int(k) & _MASK)
    return tuple(_mix(base ^ _mix(i + 1)) >> 1 for i in range(n))


def fold_in(k: int | torch.Tensor, data: int) -> int | torch.Tensor:
    """A key derived from `k` and an int (a step number, an example index)."""
    if isinstance(k, torch.Tensor):
        return _fold_t(k, data)
    return _mix(k ^ _mix(int(data) & _MASK)) >> 1


def generator(k: int | torch.Generator, device: torch.device | str = "cpu") -> torch.Generator:
    """A fresh generator seeded from `k` (a generator passed in is used as it is)."""
    if isinstance(k, torch.Generator):
        return k
    g = torch.Generator(device=device)
    g.manual_seed(k)
    return g


# -- keys as tensors: randomness that torch.compile can trace --------------------------
#
# A `torch.Generator` made inside a compiled function breaks the graph. So a key may also
# be a 0-d int64 tensor, and then `split`, `fold_in` and `bits` are integer tensor ops (a
# counter-based hash, as JAX's threefry is): traceable, device-independent, and pure.
# Values stay below 2**32 and products below 2**49, so int64 never overflows.

_M32 = 0xFFFFFFFF


def _mul32(x: torch.Tensor, m: int) -> torch.Tensor:
    return (x * (m & 0xFFFF) + (((x * (m >> 16)) & 0xFFFF) << 16)) & _M32


def _h32(x: torch.Tensor) -> torch.Tensor:
    # "lowbias32" (Chris Wellons' hash prospector): a well-mixed 32-bit permutation.
    x = x ^ (x >> 16)
    x = _mul32(x, 0x7FEB352D)
    x = x ^ (x >> 15)
    x = _mul32(x, 0x846CA68B)
    return x ^ (x >> 16)


def as_tensor_key(k: int | torch.Tensor, device: torch.device | str = "cpu") -> torch.Tensor:
    """The key as a 0-d int64 tensor (what a compiled step receives)."""
    if isinstance(k, torch.Tensor):
        return k
    return torch.tensor(int(k) & ((1 << 63) - 1), dtype=torch.int64, device=device)


def _fold_t(k: torch.Tensor, data: int | torch.Tensor) -> torch.Tensor:
    lo, hi = k & _M32, k >> 32
    d = data & _M32 if isinstance(data, torch.Tensor) else torch.full_like(k, int(data) & _M32)
    a = _h32(lo ^ _h32(d ^ 0x9E3779B9))
    b = _h32(hi ^ a ^ 0x85EBCA6B) & 0x7FFFFFFF
    return (b << 32) | a


def bits(k: torch.Tensor, shape: tuple[int, ...] | torch.Size, device: torch.device | str | None = None) -> torch.Tensor:
    """Uniform random integers in [0, 2**32) of `shape`, a pure function of the tensor key."""
    n = 1
    for s in shape:
        n *= s
    idx = torch.arange(n, dtype=torch.int64, device=device if device is not None else k.device).view(tuple(shape))
    return _h32(_h32((idx + (k & _M32)) & _M32) ^ (k >> 32))
