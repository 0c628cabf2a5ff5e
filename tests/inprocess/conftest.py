"""Fixtures for clients over ``InProcess``: started clients are stopped at teardown, and no
in-process server thread may outlive its client."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import conduit_mcp as mcp

THREAD = "conduit-mcp-inprocess"


def server_threads() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name == THREAD and t.is_alive()]


def wait_no_server_thread(timeout: float = 10.0) -> None:
    """Wait (bounded) until every in-process server thread has ended."""
    deadline = time.monotonic() + timeout
    while server_threads():
        assert time.monotonic() < deadline, f"server threads left: {server_threads()}"
        time.sleep(0.01)


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
