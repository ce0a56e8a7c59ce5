"""Fixtures for the macOS and Windows tests: the real torch 2.13.0 trees of both platforms."""

from __future__ import annotations

from pathlib import Path

import pytest
from testsupport.platform_wheels import platform_tree


@pytest.fixture(scope="session")
def mac_tree() -> Path:
    return platform_tree("macos-arm64")


@pytest.fixture(scope="session")
def win_tree() -> Path:
    return platform_tree("windows-x86_64")
