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


class _Boom:
    """A message the patched connection crashes on (fault injection)."""


@pytest.fixture
def crashable(monkeypatch: pytest.MonkeyPatch) -> Callable[[], Any]:
    """Make the connection actor crash on a planted message; returns its factory
    (``conn.tell(crashable())`` crashes that connection, in any state)."""
    from conduit_mcp.actors.connection import Connection

    original = Connection._common
    original_ready = Connection.on_ready

    def common(self: Any, kind: str, ev: Any) -> Any:
        if isinstance(ev, _Boom):
            raise RuntimeError("injected connection crash")
        return original(self, kind, ev)

    def on_ready(self: Any, kind: str, ev: Any) -> Any:
        if isinstance(ev, _Boom):
            raise RuntimeError("injected connection crash")
        return original_ready(self, kind, ev)

    monkeypatch.setattr(Connection, "_common", common)
    monkeypatch.setattr(Connection, "on_ready", on_ready)
    return _Boom
