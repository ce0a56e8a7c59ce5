"""Fixtures for the GPU tests: a fake machine over a temporary root, fake libcuda builds."""

from __future__ import annotations

import pytest
from gpu_fakes import FakeMachine, build_fake_libcuda


@pytest.fixture
def machine(tmp_path) -> FakeMachine:
    return FakeMachine(tmp_path / "root")


@pytest.fixture(scope="session")
def libcuda(tmp_path_factory):
    """libcuda(**kw) → a compiled fake libcuda.so.1, built once per set of arguments."""
    built = {}

    def make(**kw):
        key = tuple(sorted(kw.items()))
        if key not in built:
            built[key] = build_fake_libcuda(tmp_path_factory.mktemp("libcuda") / "libcuda.so.1", **kw)
        return built[key]

    return make
