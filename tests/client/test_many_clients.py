"""Many clients in one process, through the public API: an idle client holds no thread of its
own, and ``Client.stop_all`` stops many at once exactly as ``stop`` stops one."""

from __future__ import annotations

import threading
import time

import pytest

import conduit_mcp as mcp
from conduit_mcp.otp import pooled

pytestmark = pytest.mark.timeout(60)

N = 24


def test_idle_clients_hold_no_thread_and_stop_all_stops_them(serve_http, monkeypatch) -> None:
    monkeypatch.setattr(pooled, "IDLE_SECONDS", 0.2)  # an idle pool worker exits sooner
    _, srv = serve_http()
    before = len(threading.enumerate())
    clients = [mcp.Client.start(srv.spec(), protocol="modern") for _ in range(N)]
    try:
        for client in clients:
            assert client.await_ready(timeout=10).state == "ready"
        for client in clients:
            assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
        # Two actors a client (supervisor, connection), and none owns a thread: the actor
        # pool's workers serve them while they have messages, then exit when idle.
        names = [t.name for t in threading.enumerate()]
        assert not [n for n in names if n.startswith(("Supervisor", "Connection"))]
        deadline = time.monotonic() + 10
        while pooled.pool_threads() > 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        added = [t.name for t in threading.enumerate()][before:]
        assert pooled.pool_threads() == 0, added
        assert len(added) < 8, added  # the shared I/O loop, timers, the listing workers
    finally:
        mcp.Client.stop_all(clients, timeout=10)
    for client in clients:
        assert client.status().state == "closed"
        with pytest.raises(mcp.Error) as info:
            client.call_tool("add", {"a": 1, "b": 2}, timeout=1)
        assert info.value.kind == "closed"
    mcp.Client.stop_all(clients, timeout=1)  # idempotent, never raises


def test_stop_all_fails_calls_in_flight_as_stop_does(serve_http) -> None:
    _, srv = serve_http()
    clients = [mcp.Client.start(srv.spec(), protocol="modern") for _ in range(3)]
    for client in clients:
        client.await_ready(timeout=10)
    futures = [c.futures.call_tool("slow", {"seconds": 30}, timeout=30) for c in clients]
    mcp.Client.stop_all(clients, timeout=10)
    for future in futures:
        with pytest.raises(mcp.Error) as info:
            future.get(timeout=10)
        assert (info.value.kind, info.value.reason) == ("closed", "stopped")
