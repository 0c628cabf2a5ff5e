"""Calls after an idle gap, against real servers that close idle connections.

uvicorn, hypercorn (both serving the official ``mcp`` 2.3.0 server:
``tests/peers/keepalive_peer.py``) and Node's http server (``tests/peers/keepalive_node.cjs``)
close a connection that stayed idle for their keep-alive timeout. A call made just then
goes out on a pooled connection the server is closing: it must be sent again on another
connection (the server never ran it), and a pooled connection must not be kept longer
than the server allows (docs/connection.md, "Idle connections").

Each server sits behind ``tests/peers/latency_proxy.py`` (50 ms each way), so that its close
and the next request cross each other as over a real network; on bare loopback the close
arrives within microseconds and the race almost never shows. The servers count the calls
they ran (``hits``): no call may run twice. The pauses are the behaviour under test (an
idle gap), not a wait for an event; their count is bounded and small (the full run is
``scripts/keepalive_soak.py``).
"""

from __future__ import annotations

import logging
import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import conduit_mcp as mcp

from .http_peer import HttpPeer, free_port

pytestmark = [pytest.mark.timeout(90), pytest.mark.interop]

PEERS = Path(__file__).resolve().parent.parent / "peers"
DELAY = 0.05  # the proxy's latency each way (s)
# The race's window after an answer, for a server timeout T: the request must reach the
# server after it closed (pause > T - 2 * DELAY) and leave before its close reached the
# client (pause < T). These pauses sit in it, with a few milliseconds for the client itself.
INSIDE = (-0.085, -0.07, -0.055, -0.04, -0.025)
RESENT = "sent again"


@pytest.fixture
def peers() -> Iterator[Callable[..., HttpPeer]]:
    started: list[HttpPeer] = []

    def start(argv: list[str], port: int, **kw: Any) -> HttpPeer:
        peer = HttpPeer(argv, port, **kw)
        started.append(peer)
        return peer

    yield start
    for peer in reversed(started):
        peer.kill()


def serve(peers: Callable[..., HttpPeer], server: str, keep_alive: float) -> HttpPeer:
    """The server (uvicorn, hypercorn or node) behind the latency proxy: the proxy."""
    port = free_port()
    if server == "node":
        node = shutil.which("node")
        if node is None:
            pytest.skip("node is not installed")
        argv = [node, str(PEERS / "keepalive_node.cjs"), str(port), str(keep_alive)]
        peer = peers(argv, port, ready=["listening on port"])
    else:
        script = str(PEERS / "keepalive_peer.py")
        argv = [sys.executable, script, "--server", server, "--port", str(port)]
        peer = peers([*argv, "--keep-alive", str(keep_alive)], port, ready=[])
    front = free_port()
    argv = [sys.executable, str(PEERS / "latency_proxy.py"), "--listen", str(front)]
    return peers([*argv, "--to", str(peer.port), "--delay", str(DELAY)], front, ready=[])


def connections(proxy: HttpPeer, expected: int | None = None) -> int:
    """How many connections the proxy accepted: once it printed ``expected`` of them (or
    after a short deadline: then fewer), or now. (It prints a connection's line before it
    forwards a byte, so once a call returned its connection is counted.)"""
    if expected is not None:
        proxy.wait_for_output(f"connection {expected}", timeout=2.0)
    return sum(1 for line in list(proxy.output) if line.startswith("connection "))


def calls_after(
    client: mcp.Client, pauses: list[float], prefix: str, burst: int = 1
) -> tuple[int, list[str]]:
    """After each pause (an idle gap), ``burst`` calls of ``hit`` at once, each with a key
    of its own: (calls made, the failures as kind/reason)."""
    failures: list[str] = []
    made = 0

    def one(key: str) -> None:
        try:
            client.call_tool("hit", {"key": key}, timeout=20)
        except mcp.Error as exc:
            failures.append(f"{exc.kind}/{exc.reason}")

    for pause in pauses:
        time.sleep(pause)  # the idle gap under test, not a wait for an event
        threads = [
            threading.Thread(target=one, args=(f"{prefix}-{made + i}",)) for i in range(burst)
        ]
        made += burst
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    return made, failures


def hits(client: mcp.Client) -> dict[str, Any]:
    got = client.call_tool("hits", {}, timeout=20).structured_content
    assert isinstance(got, dict)
    return got.get("result", got)  # type: ignore[no-any-return]


def resent(caplog: pytest.LogCaptureFixture) -> int:
    return sum(1 for r in caplog.records if RESENT in r.getMessage())


@pytest.mark.parametrize(
    ("server", "protocol"),
    [("uvicorn", "auto"), ("uvicorn", "legacy"), ("hypercorn", "auto"), ("node", "legacy")],
)
def test_a_call_into_the_servers_idle_close_is_sent_again_and_runs_once(
    peers: Callable[..., HttpPeer],
    caplog: pytest.LogCaptureFixture,
    server: str,
    protocol: str,
) -> None:
    """Server keep-alive 1 s (below the client's 4 s): calls after pauses inside the race's
    window all succeed, and the server ran each exactly once. Before the fix about one in
    three failed with ``transport``/``stream_broken``."""
    caplog.set_level(logging.DEBUG, logger="conduit_mcp.http")
    proxy = serve(peers, server, 1.0)
    client = mcp.Client.start(mcp.Http(proxy.url), protocol=protocol)
    try:
        client.await_ready(timeout=20)
        client.call_tool("hit", {"key": "warm-up"}, timeout=20)
        pauses = [1.0 + d for d in INSIDE]
        made, failures = calls_after(client, pauses, server, burst=2)
        assert failures == []
        seen = hits(client)
    finally:
        client.stop()
    assert seen == {"total": made + 1, "twice": []}
    if server != "node":  # Node announces its timeout: the client never races it (below)
        assert resent(caplog) >= 1  # the race did happen, and was survived


def test_default_idle_limit_drops_a_connection_before_a_5s_server_closes_it(
    peers: Callable[..., HttpPeer], caplog: pytest.LogCaptureFixture
) -> None:
    """uvicorn's default 5 s: a pause inside the race's window finds the pooled connection
    already dropped by the client (idle over its 4 s), so the call goes on a new connection,
    with nothing to send again. Before the fix (aiohttp's 15 s) these calls failed."""
    caplog.set_level(logging.DEBUG, logger="conduit_mcp.http")
    proxy = serve(peers, "uvicorn", 5.0)
    client = mcp.Client.start(mcp.Http(proxy.url))
    try:
        client.await_ready(timeout=20)
        client.call_tool("hit", {"key": "warm-up"}, timeout=20)
        before = connections(proxy, 1)
        made, failures = calls_after(client, [4.95], "five")
        assert failures == []
        assert connections(proxy, before + made) == before + made  # each on a new one
        seen = hits(client)
    finally:
        client.stop()
    assert seen == {"total": made + 1, "twice": []}
    assert resent(caplog) == 0


def test_keep_alive_option_edge_against_a_75s_server(peers: Callable[..., HttpPeer]) -> None:
    """hypercorn keeps idle connections 75 s; the client keeps them ``keep_alive`` (here
    1 s): a pause just under it reuses the connection, one just over it opens a new one."""
    proxy = serve(peers, "hypercorn", 75.0)
    client = mcp.Client.start(mcp.Http(proxy.url, keep_alive=1.0))
    try:
        client.await_ready(timeout=20)
        client.call_tool("hit", {"key": "warm-up"}, timeout=20)
        before = connections(proxy, 1)
        _, failures = calls_after(client, [0.6], "under")
        assert connections(proxy) == before  # reused
        _, more = calls_after(client, [1.4], "over")
        assert connections(proxy, before + 1) == before + 1  # idle past 1 s: dropped
        assert failures + more == []
        seen = hits(client)
    finally:
        client.stop()
    assert seen == {"total": 3, "twice": []}


def test_a_servers_keep_alive_header_shortens_the_idle_limit(
    peers: Callable[..., HttpPeer], caplog: pytest.LogCaptureFixture
) -> None:
    """Node answers ``Keep-Alive: timeout=1``: the client keeps idle connections 0.5 s, not
    its 4 s, so a pause of 0.3 s reuses the connection and pauses of 0.7 s and more (the
    race's window included) go on a new one, with nothing ever sent again."""
    caplog.set_level(logging.DEBUG, logger="conduit_mcp.http")
    proxy = serve(peers, "node", 1.0)
    client = mcp.Client.start(mcp.Http(proxy.url), protocol="legacy")
    try:
        client.await_ready(timeout=20)
        client.call_tool("hit", {"key": "warm-up"}, timeout=20)
        before = connections(proxy, 1)
        _, failures = calls_after(client, [0.3], "short")
        assert connections(proxy) == before  # reused
        pauses = [0.7, 0.93, 0.96]
        made, more = calls_after(client, pauses, "long")
        assert connections(proxy, before + made) == before + made  # each on a new one
        assert failures + more == []
        seen = hits(client)
    finally:
        client.stop()
    assert seen == {"total": 2 + made, "twice": []}
    assert resent(caplog) == 0
