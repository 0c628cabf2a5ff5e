"""Progress that keeps a call alive, against real third-party servers: the official ``mcp``
2.3.0 ``MCPServer`` peer (``slow_count``) over stdio in both eras, over streamable HTTP and
over its 2024-11-05 SSE app, and the TypeScript SDK's server-everything
(``trigger-long-running-operation``) over stdio. Each reports progress every
0.25 s for longer than the call's 1 s timeout: with ``reset_timeout_on_progress`` the call
completes, without it it is cut off at its timeout (the control that shows the test can fail).
No ``on_progress`` is given: the keep-alive asks for progress by itself.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import conduit_mcp as mcp

from .http_peer import HttpPeer, free_port

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

READY_TIMEOUT = 20.0
TIMEOUT = 1.0
SSE_PEERS = Path(__file__).resolve().parent.parent / "sse" / "sse_peers.py"
SLOW = {"steps": 10, "delay": 0.25}  # 2.5 s in all, a report every 0.25 s


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


def kept_alive_then_cut_off(client: mcp.Client) -> None:
    """``slow_count`` outlives its timeout with the reset on, and is cut off without it."""
    started = time.monotonic()
    done = client.call_tool("slow_count", SLOW, timeout=TIMEOUT, reset_timeout_on_progress=True)
    assert done.text == "counted to 10"
    assert time.monotonic() - started > 2 * TIMEOUT
    with pytest.raises(mcp.Error) as err:
        client.call_tool("slow_count", SLOW, timeout=TIMEOUT)
    assert (err.value.kind, err.value.reason) == ("timeout", "deadline")


def stdio(cmd: list[str]) -> mcp.Stdio:
    return mcp.Stdio(cmd[0], cmd[1:])


@pytest.mark.parametrize(("protocol", "era"), [("modern", "modern"), ("legacy", "legacy")])
def test_the_official_peer_is_kept_alive_by_its_progress(
    start_client: Callable[..., mcp.Client], modern_peer_cmd: list[str], protocol: str, era: str
) -> None:
    client = start_client(stdio(modern_peer_cmd), protocol=protocol)
    assert client.await_ready(timeout=READY_TIMEOUT).era == era
    kept_alive_then_cut_off(client)


def test_the_official_peer_over_http_is_kept_alive_by_its_progress(
    start_client: Callable[..., mcp.Client],
    peers: Callable[..., HttpPeer],
    modern_peer_cmd: list[str],
) -> None:
    port = free_port()
    peer = peers([*modern_peer_cmd[:-1], "http", "--port", str(port)], port, ready=[])
    client = start_client(mcp.Http(peer.url))
    assert client.await_ready(timeout=READY_TIMEOUT).era == "modern"
    kept_alive_then_cut_off(client)


def test_the_official_sse_app_is_kept_alive_by_its_progress(
    start_client: Callable[..., mcp.Client],
    peers: Callable[..., HttpPeer],
    modern_peer_cmd: list[str],
) -> None:
    port = free_port()
    peer = peers(
        [sys.executable, str(SSE_PEERS), "modern", "--port", str(port)], port, ready=[], path="/sse"
    )
    client = start_client(mcp.Sse(peer.url))
    assert client.await_ready(timeout=READY_TIMEOUT).era == "legacy"
    kept_alive_then_cut_off(client)


def test_server_everything_is_kept_alive_by_its_progress(
    start_client: Callable[..., mcp.Client], everything_cmd: list[str]
) -> None:
    client = start_client(stdio(everything_cmd), protocol="auto", reset_timeout_on_progress=True)
    client.await_ready(timeout=READY_TIMEOUT)
    args = {"duration": 2.5, "steps": 10}  # a report every 0.25 s
    done = client.call_tool("trigger-long-running-operation", args, timeout=TIMEOUT)
    assert done.is_error is False
    assert done.text.startswith("Long running operation completed.")
    with pytest.raises(mcp.Error) as err:
        client.call_tool(
            "trigger-long-running-operation", args, timeout=TIMEOUT, reset_timeout_on_progress=False
        )
    assert (err.value.kind, err.value.reason) == ("timeout", "deadline")
