"""Fixtures for the interop tests: clients against real third-party MCP servers.

The peer fixtures themselves (``modern_peer_cmd``, ``legacy_peer_cmd``, ``everything_cmd`` ...)
live in ``tests/conftest.py``; a missing peer skips locally and fails in CI.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import conduit_mcp as mcp


@pytest.fixture
def start_client() -> Iterator[Callable[..., mcp.Client]]:
    """``start_client(transport, **options)``: ``mcp.Client.start``, stopped at teardown.

    Every client a test starts is stopped (which also closes its server process), even when
    the test fails half-way.
    """
    clients: list[mcp.Client] = []

    def start(transport: Any, **options: Any) -> mcp.Client:
        client = mcp.Client.start(transport, **options)
        clients.append(client)
        return client

    yield start
    for client in reversed(clients):
        client.stop()
