"""Change notifications and the cache against real servers.

* mcp 2.3.0 (``modern_peer.py``, over stdio and streamable HTTP): ``add_dynamic_tool``
  announces a tool list change. In the modern era it reaches the client only through
  ``subscriptions/listen`` (the client opens one for its subscriber and its cached list: over
  HTTP a long-lived SSE answer); in the legacy era directly (over HTTP on the GET stream).
  Either way the subscriber is told and the cache is refreshed without anyone asking.
* server-everything: ``notifications/resources/updated`` for a URI the client subscribed to
  (``resources/subscribe``), sent by its ``toggle-subscriber-updates`` tool every 5 s.

Nothing sleeps to wait for an event: each wait is on a queue or condition with a deadline.
"""

from __future__ import annotations

import queue
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import conduit_mcp as mcp

from .http_peer import HttpPeer, free_port

pytestmark = [pytest.mark.timeout(60), pytest.mark.interop]

READY_TIMEOUT = 20.0
TOOLS_CHANGED = "notifications/tools/list_changed"


def stdio(cmd: list[str], **kw: object) -> mcp.Stdio:
    return mcp.Stdio(cmd[0], cmd[1:], **kw)  # type: ignore[arg-type]


def wait_refreshed(
    notes: queue.Queue[mcp.ServerNotification],
    client: mcp.Client,
    name: str,
    present: bool,
    timeout: float = 10.0,
) -> None:
    """Wait (deadline) until a tools refresh has landed with ``name`` in or out of the cache:
    each landed refresh is announced to subscribers as ``LIST_REFRESHED``."""
    deadline = time.monotonic() + timeout
    while (client.tool(name) is not None) != present:
        left = deadline - time.monotonic()
        assert left > 0, f"tool {name!r} {'never appeared' if present else 'never left'}"
        note = notes.get(timeout=left)
        assert note.method in (TOOLS_CHANGED, mcp.LIST_REFRESHED)


@pytest.fixture
def http_peers() -> Iterator[Callable[[list[str]], HttpPeer]]:
    started: list[HttpPeer] = []

    def start(cmd: list[str]) -> HttpPeer:
        port = free_port()
        peer = HttpPeer([*cmd[:-1], "http", "--port", str(port)], port, ready=[])
        started.append(peer)
        return peer

    yield start
    for peer in started:
        peer.kill()


@pytest.mark.parametrize("transport", ["stdio", "http"])
@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_mcp_peer_tool_list_change_reaches_subscriber_and_refreshes_cache(
    start_client: Callable[..., mcp.Client],
    modern_peer_cmd: list[str],
    protocol: str,
    transport: str,
    http_peers: Callable[[list[str]], HttpPeer],
) -> None:
    spec = (
        stdio(modern_peer_cmd)
        if transport == "stdio"
        else mcp.Http(http_peers(modern_peer_cmd).url)
    )
    client = start_client(spec, protocol=protocol)
    status = client.await_ready(timeout=READY_TIMEOUT)
    assert status.era == ("modern" if protocol == "auto" else "legacy")
    notes: queue.Queue[mcp.ServerNotification] = queue.Queue()
    client.subscribe_notifications(notes, methods=[TOOLS_CHANGED, mcp.LIST_REFRESHED])
    before = {t.name for t in client.list_all_tools(timeout=10)}
    honoured = client.await_listening(timeout=10)
    if status.era == "modern":
        assert honoured.get("toolsListChanged") is True  # through subscriptions/listen
    name = f"dyn_{uuid.uuid4().hex[:8]}"
    assert name not in before

    client.call_tool("add_dynamic_tool", {"name": name}, timeout=10)
    note = notes.get(timeout=10)
    assert note.method == TOOLS_CHANGED
    assert "io.modelcontextprotocol/subscriptionId" not in str(dict(note.params))
    wait_refreshed(notes, client, name, present=True)  # refreshed without anyone asking
    assert name in {t.name for t in client.cached_tools() or ()}

    client.call_tool("remove_dynamic_tool", {"name": name}, timeout=10)
    wait_refreshed(notes, client, name, present=False)


def test_everything_resource_updated_for_subscribed_uri(
    start_client: Callable[..., mcp.Client], everything_cmd: list[str], everything_js: Path
) -> None:
    client = start_client(stdio(everything_cmd), protocol="auto")  # the minimal environment
    assert client.await_ready(timeout=READY_TIMEOUT).era == "legacy"
    updates: queue.Queue[mcp.ServerNotification] = queue.Queue()
    client.subscribe_notifications(updates, methods=["notifications/resources/updated"])
    uri = "demo://resource/static/document/architecture.md"
    assert uri in {r.uri for r in client.list_all_resources(timeout=10)}
    client.subscribe(uri, timeout=10)
    client.call_tool("toggle-subscriber-updates", {}, timeout=10)
    try:
        note = updates.get(timeout=15)  # it sends one every 5 s per subscribed URI
        assert note.method == "notifications/resources/updated"
        assert note.params["uri"] == uri
    finally:
        client.call_tool("toggle-subscriber-updates", {}, timeout=10)
