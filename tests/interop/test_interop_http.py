"""conduit-mcp against real third-party MCP servers over streamable HTTP (loopback).

* ``modern_peer.py http``: the official ``mcp`` 2.3.0 server, dual-era. Its modern path is
  strict: it refuses a request without ``Mcp-Method`` (and ``Mcp-Name`` for tools/call), so a
  modern call that works proves the headers are right.
* ``legacy_peer.py http``: ``mcp`` 1.30.0, handshake only: it answers the probe 400 with id
  ``"server-error"``; auto mode must fall back to 2025-11-25.
* server-everything ``streamableHttp``: the TS SDK, handshake only, sessions, SSE answers.
  Bound to 127.0.0.1 by ``tests/peers/bind-localhost.cjs`` and started with a clean
  environment (its ``get-env`` tool dumps the environment).

Each test starts its own server process; nothing sleeps to wait for an event.
"""

from __future__ import annotations

import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import conduit_mcp as mcp

from .http_peer import HttpPeer, free_port

pytestmark = [pytest.mark.timeout(60), pytest.mark.interop]

READY_TIMEOUT = 20.0
PEER_TOOLS = {
    "add",
    "echo",
    "slow_count",
    "add_dynamic_tool",
    "remove_dynamic_tool",
    "log_something",
}
STEP_PROGRESS = [(1.0, 3.0, "step 1/3"), (2.0, 3.0, "step 2/3"), (3.0, 3.0, "step 3/3")]
MODES = {
    "auto": ("modern", "2026-07-28", "probe"),
    "modern": ("modern", "2026-07-28", "pinned"),
    "legacy": ("legacy", "2025-11-25", "pinned"),
}
BIND_LOCALHOST = Path(__file__).resolve().parent.parent / "peers" / "bind-localhost.cjs"


@pytest.fixture
def peers() -> Iterator[Callable[..., HttpPeer]]:
    started: list[HttpPeer] = []

    def start(argv: list[str], port: int, **kw: object) -> HttpPeer:
        peer = HttpPeer(argv, port, **kw)  # type: ignore[arg-type]
        started.append(peer)
        return peer

    yield start
    for peer in started:
        peer.kill()


def python_peer(peers: Callable[..., HttpPeer], cmd: list[str]) -> HttpPeer:
    port = free_port()
    return peers([*cmd[:-1], "http", "--port", str(port)], port, ready=[])


class ProgressLog:
    def __init__(self) -> None:
        self.events: list[tuple[float, float | None, str | None]] = []
        self.threads: set[int] = set()

    def __call__(self, p: mcp.Progress) -> None:
        self.events.append((p.progress, p.total, p.message))
        self.threads.add(threading.get_ident())


@pytest.mark.parametrize("protocol", list(MODES))
def test_modern_peer_http_negotiates_calls_and_streams_progress(
    start_client: Callable[..., mcp.Client],
    peers: Callable[..., HttpPeer],
    modern_peer_cmd: list[str],
    protocol: str,
) -> None:
    peer = python_peer(peers, modern_peer_cmd)
    client = start_client(mcp.Http(peer.url), protocol=protocol)
    era, version, origin = MODES[protocol]
    status = client.await_ready(timeout=READY_TIMEOUT)
    assert (status.state, status.era, status.version, status.origin) == (
        "ready",
        era,
        version,
        origin,
    )
    assert {t.name for t in client.list_all_tools(timeout=10)} == PEER_TOOLS

    result = client.call_tool("add", {"a": 2, "b": 3}, timeout=10)
    assert (result.is_error, result.text, result.structured_content) == (False, "5", {"result": 5})
    assert client.call_tool("echo", {"text": "héllo ✓"}, timeout=10).text == "héllo ✓"

    log = ProgressLog()
    done = client.call_tool("slow_count", {"steps": 3, "delay": 0.01}, on_progress=log, timeout=10)
    assert done.text == "counted to 3"
    assert log.events == STEP_PROGRESS
    assert log.threads == {threading.get_ident()}

    prompt = client.get_prompt("greet", {"name": "Ada"}, timeout=10)
    assert "Ada" in str(prompt.raw)
    read = client.read_resource("peer://greeting", timeout=10)
    assert read.contents and read.contents[0]["uri"] == "peer://greeting"


def test_modern_peer_http_errors_reach_the_caller(
    start_client: Callable[..., mcp.Client],
    peers: Callable[..., HttpPeer],
    modern_peer_cmd: list[str],
) -> None:
    peer = python_peer(peers, modern_peer_cmd)
    client = start_client(mcp.Http(peer.url), protocol="auto")
    assert client.await_ready(timeout=READY_TIMEOUT).era == "modern"
    with pytest.raises(mcp.Error) as err:
        client.request("no/such_method", {}, timeout=10)
    assert (err.value.kind, err.value.code) == ("server", -32601)
    # the connection is still usable
    assert client.call_tool("add", {"a": 1, "b": 1}, timeout=10).text == "2"


def test_legacy_peer_http_auto_falls_back(
    start_client: Callable[..., mcp.Client],
    peers: Callable[..., HttpPeer],
    legacy_peer_cmd: list[str],
) -> None:
    peer = python_peer(peers, legacy_peer_cmd)
    client = start_client(mcp.Http(peer.url), protocol="auto")
    status = client.await_ready(timeout=READY_TIMEOUT)
    assert (status.state, status.era, status.version, status.origin) == (
        "ready",
        "legacy",
        "2025-11-25",
        "probe",
    )
    info = client.server_info()
    assert info is not None and info.name == "conduit-legacy-peer"
    assert {t.name for t in client.list_all_tools(timeout=10)} == PEER_TOOLS
    assert client.call_tool("add", {"a": 40, "b": 2}, timeout=10).text == "42"
    log = ProgressLog()
    assert (
        client.call_tool(
            "slow_count", {"steps": 3, "delay": 0.01}, on_progress=log, timeout=10
        ).text
        == "counted to 3"
    )
    assert log.events == STEP_PROGRESS


def test_everything_http_auto_echo_and_long_running_progress(
    start_client: Callable[..., mcp.Client],
    peers: Callable[..., HttpPeer],
    everything_js: Path,
) -> None:
    port = free_port()
    node = shutil.which("node") or "node"
    clean = {"PATH": "/usr/bin:/bin:/usr/local/bin", "PORT": str(port)}
    peer = peers(
        [node, "--require", str(BIND_LOCALHOST), str(everything_js), "streamableHttp"],
        port,
        ready=["listening on port"],
        env=clean,
    )
    client = start_client(mcp.Http(peer.url), protocol="auto")
    status = client.await_ready(timeout=READY_TIMEOUT)
    assert (status.state, status.era, status.version, status.origin) == (
        "ready",
        "legacy",
        "2025-11-25",
        "probe",
    )
    names = {t.name for t in client.list_all_tools(timeout=10)}
    assert {"echo", "get-env", "trigger-long-running-operation"} <= names
    echoed = client.call_tool("echo", {"message": "hi there"}, timeout=10)
    assert (echoed.is_error, echoed.text) == (False, "Echo: hi there")
    log = ProgressLog()
    result = client.call_tool(
        "trigger-long-running-operation", {"duration": 1, "steps": 4}, on_progress=log, timeout=15
    )
    assert result.text.startswith("Long running operation completed. Duration: 1 seconds")
    assert log.events == [(float(i), 4.0, None) for i in range(1, 5)]
    assert log.threads == {threading.get_ident()}
    client.stop()
    # stop() ended the session with a DELETE (MCP spec 2025-11-25, Transports, "Session Management")
    assert peer.wait_for_output("Received session termination request", timeout=10)
