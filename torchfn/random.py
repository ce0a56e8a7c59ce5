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


def split(k: int, n: int = 2) -> tuple[int, ...]:
    """`n` new keys, independent of each other and of `k`."""
    base = _mix(int(k) & _MASK)
    return tuple(_mix(base ^ _mix(i + 1)) >> 1 for i in range(n))


def fold_in(k: int, data: int) -> int:
    """A key derived from `k` and an int (a step number, an example index)."""
    return _mix(k ^ _mix(int(data) & _MASK)) >> 1


def generator(k: int | torch.Generator, device: torch.device | str = "cpu") -> torch.Generator:
    """A fresh generator seeded from `k` (a generator passed in is used as it is)."""
    if isinstance(k, torch.Generator):
        return k
    g = torch.Generator(device=device)
    g.manual_seed(k)
    return g
