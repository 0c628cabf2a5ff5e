"""Fixtures for driving real clients against real scripted server subprocesses."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

import conduit_mcp as mcp


@pytest.fixture
def start_client() -> Iterator[Callable[..., mcp.Client]]:
    clients: list[mcp.Client] = []

    def start(transport: Any, **options: Any) -> mcp.Client:
        options.setdefault("backoff", lambda attempt: 0.01)
        client = mcp.Client.start(transport, **options)
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.stop()
