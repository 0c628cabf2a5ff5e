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


@pytest.fixture
def serve_http(make_server: Callable[..., Any]) -> Iterator[Callable[..., Any]]:
    """Start scripted servers over Streamable HTTP on loopback: ``serve_http(era=..., rules=...,
    **options)`` gives ``(ScriptedServer, HttpServerProcess)``; whatever runs is killed at
    teardown (after the clients of ``start_client``, when requested after this fixture)."""
    procs: list[Any] = []

    def start(*, era: str = "both", rules: Any = (), **options: Any) -> tuple[Any, Any]:
        server = make_server(era=era, rules=rules)
        proc = server.http_server(**options)
        procs.append(proc)
        return server, proc

    yield start
    for proc in procs:
        if proc.running():
            proc.kill()
