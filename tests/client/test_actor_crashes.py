"""Crashing the notifier and the refresher through the public API: what each crash costs is
what the actor tree promises (docs/actor-tree.md). The connection's own crashes are tested in
test_supervision.py and test_notifications_api.py."""

from __future__ import annotations

import queue
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.actors.notifier import Notifier
from conduit_mcp.actors.refresher import Refresher
from conduit_mcp.testing.waiting import notes_before

pytestmark = pytest.mark.timeout(30)

BARRIER = "test/barrier"


class _Boom:
    """A message the patched actor crashes on (fault injection)."""


@pytest.fixture
def crashable_actors(monkeypatch: pytest.MonkeyPatch) -> type[_Boom]:
    """Make the notifier and the refresher crash on a planted ``_Boom``."""
    for cls in (Notifier, Refresher):
        original = cls.receive

        def receive(self: Any, message: Any, original: Any = original) -> Any:
            if isinstance(message, _Boom):
                raise RuntimeError("injected crash")
            return original(self, message)

        monkeypatch.setattr(cls, "receive", receive)
    return _Boom


def _wait_new(client: mcp.Client, child: str, old: Any, timeout: float = 5.0) -> Any:
    """The restarted incarnation of ``child`` (waited for with a deadline, not a sleep)."""
    registry = client._runtime().registry
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        ref = registry.get(child)
        if ref is not None and ref is not old and ref.is_alive():
            return ref
        time.sleep(0.01)  # poll, bounded by the deadline (as server.wait_for does)
    raise AssertionError(f"{child} was not restarted")


def _until_barrier(notes: queue.Queue[Any]) -> list[str]:
    return [n.method for n in notes_before(notes, BARRIER, timeout=10)]


def test_a_crashed_notifier_keeps_its_subscribers_and_calls_in_flight(
    crashable_actors, make_server, start_client
):
    server = make_server()
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes)
    client.call_tool("notify", {"method": "test/a"})
    client.call_tool("notify", {"method": BARRIER})
    assert _until_barrier(notes) == ["test/a"]
    registry = client._runtime().registry
    old = registry.get("notifier")
    with ThreadPoolExecutor(4) as pool:
        calls = [pool.submit(client.call_tool, "slow", {"seconds": 0.5}) for _ in range(4)]
        server.wait_for(
            lambda e: e.get("method") == "tools/call" and e["params"]["name"] == "slow",
            timeout=5,
            count=4,
        )
        old.tell(crashable_actors())
        new = _wait_new(client, "notifier", old)
        assert [c.result(timeout=10).text for c in calls] == ["slept 0.5"] * 4
    assert new is not old
    # The subscriber is still there and later notifications reach it, in order.
    client.call_tool("notify", {"method": "test/b"})
    client.call_tool("notify", {"method": BARRIER})
    assert _until_barrier(notes) == ["test/b"]


def test_a_refresher_crashed_mid_refresh_leaves_the_list_stale_for_the_next_read(
    crashable_actors, make_server, start_client
):
    # The second tools/list (the refresh after list_changed) answers only after 3 s.
    server = make_server(
        rules=[{"match": {"method": "tools/list", "nth": 2}, "action": {"delay": 3}}]
    )
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    before = client.list_all_tools()
    assert client.tool("fresh_tool") is None
    with ThreadPoolExecutor(2) as pool:
        in_flight = pool.submit(client.call_tool, "slow", {"seconds": 1.0})
        client.call_tool("add_tool", {"name": "fresh_tool"})  # the server says list_changed
        server.wait_for("tools/list", timeout=5, count=2)  # the refresh is walking
        old = client._runtime().registry.get("refresher")
        old.tell(crashable_actors())
        _wait_new(client, "refresher", old)
        assert in_flight.result(timeout=10).text == "slept 1.0"
    # The crashed refresh stored nothing: the cached list is the old one, and stale.
    assert client.cached_tools() == before
    assert client.tool("fresh_tool") is None
    # The next read asks the server (a third tools/list) and finds the new tool.
    tools = client.list_all_tools(timeout=10)
    assert "fresh_tool" in {t.name for t in tools}
    assert len(server.received("tools/list")) >= 3
    assert client.tool("fresh_tool") is not None
    # The crash was reported as a failed refresh: later changes are refreshed again.
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[mcp.LIST_REFRESHED])
    client.call_tool("add_tool", {"name": "second_tool"})
    assert notes.get(timeout=10).params["kind"] == "tools"
    assert client.tool("second_tool") is not None
