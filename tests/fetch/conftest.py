"""Fixtures for the fetch tests: a scriptable local HTTP server, a fake machine (`--auto`)."""

from __future__ import annotations

import pytest
from testsupport.fetch_helpers import Server
from testsupport.gpu_fakes import machine  # noqa: F401  (pytest fixture)


@pytest.fixture
def server():
    srv = Server()
    yield srv
    srv.close()
