"""Fixtures for the Hub's tests: scripted servers as config entries, and hubs stopped after
each test."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import conduit_mcp as mcp


def scripted(*args: str, **extra: Any) -> dict[str, Any]:
    """A config entry running the scripted test server with ``args``."""
    return {"command": sys.executable, "args": ["-m", "conduit_mcp.testing", *args], **extra}


MISSING = {"command": "/nonexistent/never-started-mcp-server"}


@pytest.fixture
def start_hub() -> Iterator[Callable[..., mcp.Hub]]:
    hubs: list[mcp.Hub] = []

    def start(config: Any, **options: Any) -> mcp.Hub:
        options.setdefault("backoff", lambda attempt: 0.01)
        options.setdefault("restart_base", 0.02)
        hub = mcp.Hub.start(config, **options)
        hubs.append(hub)
        return hub

    yield start
    for hub in hubs:
        hub.stop()


class Boom:
    """A message the patched connection actor crashes on (fault injection)."""


@pytest.fixture
def crashable(monkeypatch: pytest.MonkeyPatch) -> type[Boom]:
    """Make the connection actor crash on a planted :class:`Boom`, in any state."""
    from conduit_mcp.actors.connection import Connection

    original = Connection._common
    original_ready = Connection.on_ready

    def common(self: Any, kind: str, ev: Any) -> Any:
        if isinstance(ev, Boom):
            raise RuntimeError("injected connection crash")
        return original(self, kind, ev)

    def on_ready(self: Any, kind: str, ev: Any) -> Any:
        if isinstance(ev, Boom):
            raise RuntimeError("injected connection crash")
        return original_ready(self, kind, ev)

    monkeypatch.setattr(Connection, "_common", common)
    monkeypatch.setattr(Connection, "on_ready", on_ready)
    return Boom
