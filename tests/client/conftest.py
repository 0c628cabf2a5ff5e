"""Fixtures for driving real clients against real scripted server subprocesses."""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

import conduit_mcp as mcp
from conduit_mcp.testing import AuthServerProcess


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


# ---- OAuth: the test authorization server, a person, the usual OAuth options -------------

M2M = {
    "client_id": "m2m-basic",
    "client_secret": "s3cret-m2m-5e1a",
    "token_endpoint_auth_method": "client_secret_basic",
    "grant_types": ["client_credentials"],
}
ADD = {"a": 1, "b": 2}


@pytest.fixture
def auth_server(tmp_path: Any) -> Any:
    """Start authorization servers in ``tmp_path``; stopped at teardown."""
    started: list[AuthServerProcess] = []

    def start(**options: Any) -> AuthServerProcess:
        options.setdefault("scopes", "mcp,write,offline_access")
        options.setdefault("client", [orjson.dumps(M2M).decode()])
        server = AuthServerProcess(tmp_path / f"as{len(started)}", **options)
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


class Person:
    """Plays the application's ``on_authorize``: keeps every URL it is given."""

    def __init__(self) -> None:
        self.urls: queue.Queue[str] = queue.Queue()
        self.count = 0

    def __call__(self, url: str) -> None:
        self.count += 1
        self.urls.put(url)

    def next_url(self, timeout: float = 10.0) -> str:
        return self.urls.get(timeout=timeout)


def person_oauth(person: Person, **kw: Any) -> mcp.OAuth:
    return mcp.OAuth(on_authorize=person, redirect_uri="http://127.0.0.1:9/callback", **kw)


def m2m_oauth(**kw: Any) -> mcp.OAuth:
    return mcp.OAuth(
        client_id=M2M["client_id"],
        client_secret=M2M["client_secret"],
        grant="client_credentials",
        **kw,
    )


def mcp_posts(server: Any) -> list[dict[str, Any]]:
    return [e for e in server.events("http") if e["verb"] == "POST" and e["path"] == "/mcp"]
