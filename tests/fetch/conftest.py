"""Fixtures for the fetch tests: a scriptable local HTTP server."""

from __future__ import annotations

import pytest
from fetch_helpers import Server


@pytest.fixture
def server():
    srv = Server()
    yield srv
    srv.close()
