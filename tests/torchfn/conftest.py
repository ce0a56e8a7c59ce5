"""Shared fixtures for torchfn's tests: the reference nn.Sequential MLP and its data.

SIZES is repeated in the tests that need it (test modules cannot import a conftest).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

SIZES = [8, 16, 12, 3]


def _torch_mlp(sizes: list[int] = SIZES, seed: int = 0) -> nn.Sequential:
    torch.manual_seed(seed)
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


@pytest.fixture
def data() -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    return torch.randn(32, SIZES[0], generator=g), torch.randint(0, SIZES[-1], (32,), generator=g)


@pytest.fixture
def torch_mlp():
    """Builds the nn.Sequential twin of `torchfn.mlp(SIZES)`, seeded."""
    return _torch_mlp


@pytest.fixture(autouse=True, scope="package")
def one_thread():
    """Tiny models gain nothing from threads, and on a busy 2-core CI machine OpenMP's
    waiting threads make them many times slower; restored for everyone else afterwards."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
