"""The change counters, added in the connection: ``mcp.client.notifications`` (by method,
one per notification delivered to subscribers), ``mcp.client.cache.refreshes`` (by kind and
outcome: start, ok, error) and ``mcp.client.tool.definition_changes`` (one per tool whose
definition changed under the same name). docs/telemetry.md, "Telemetry"."""

from __future__ import annotations

import queue
import time
from typing import Any

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(30)

NOTIFICATIONS = "mcp.client.notifications"
REFRESHES = "mcp.client.cache.refreshes"
TOOL_CHANGES = "mcp.client.tool.definition_changes"
BARRIER = "test/barrier"


def _key(**attrs: str) -> frozenset[tuple[str, str]]:
    return frozenset(attrs.items())


def _until(notes: queue.Queue[Any], method: str, timeout: float = 10.0, **params: Any) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"no {method} within {timeout} s"
        try:
            note = notes.get(timeout=left)
        except queue.Empty:
            continue
        if note.method == method and all(note.params.get(k) == v for k, v in params.items()):
            return note


def test_notifications_delivered_are_counted_by_method(make_server, start_client, otel):
    server = make_server()
    client = start_client(server.stdio())
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes)
    client.call_tool("notify", {"method": "test/a", "count": 3})
    client.call_tool("notify", {"method": BARRIER})
    _until(notes, BARRIER)  # counted when told to the notifier, before it delivered
    counts = otel.counts(NOTIFICATIONS)
    assert counts[_key(**{"mcp.method.name": "test/a"})] == 3, counts
    assert counts[_key(**{"mcp.method.name": BARRIER})] == 1, counts


def test_a_refresh_is_counted_at_its_start_and_its_outcome(make_server, start_client, otel):
    server = make_server(
        rules=[
            {
                "match": {"method": "tools/list", "nth": 3},
                "action": {"error": {"code": -32603, "message": "boom"}},
            }
        ]
    )
    client = start_client(server.stdio())
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[mcp.LIST_REFRESHED])
    client.list_all_tools()
    client.await_listening(timeout=10)
    assert otel.counts(REFRESHES) == {}
    client.call_tool("changed", {"kind": "tools"})  # the refresher fetches the 2nd list
    _until(notes, mcp.LIST_REFRESHED, kind="tools")
    counts = otel.counts(REFRESHES)
    assert counts == {
        _key(kind="tools", outcome="start"): 1,
        _key(kind="tools", outcome="ok"): 1,
    }, counts
    # The next refresh fails (the server answers the 3rd tools/list with an error).
    client.call_tool("changed", {"kind": "tools"})
    server.wait_for("tools/list", timeout=10, count=3)
    client.ping(timeout=10)
    deadline = time.monotonic() + 10
    while _key(kind="tools", outcome="error") not in otel.counts(REFRESHES):
        assert time.monotonic() < deadline, otel.counts(REFRESHES)
        time.sleep(0.02)
    counts = otel.counts(REFRESHES)
    assert counts[_key(kind="tools", outcome="start")] == 2, counts
    assert counts[_key(kind="tools", outcome="error")] == 1, counts


def test_a_tool_redefined_under_its_name_is_counted(make_server, start_client, otel):
    changed_add = {
        "name": "add",
        "description": "Add two numbers, differently.",
        "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}}},
    }
    echo = {"name": "echo", "description": "A new echo.", "inputSchema": {"type": "object"}}
    second = {"tools": [changed_add, echo], "ttlMs": 0, "cacheScope": "public"}
    second["resultType"] = "complete"
    server = make_server(
        rules=[{"match": {"method": "tools/list", "nth": 2}, "action": {"result": second}}]
    )
    client = start_client(server.stdio())
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[mcp.TOOL_DEFINITION_CHANGED, mcp.LIST_REFRESHED])
    client.list_all_tools()
    client.await_listening(timeout=10)
    assert otel.counts(TOOL_CHANGES) == {}
    client.call_tool("changed", {"kind": "tools"})
    _until(notes, mcp.LIST_REFRESHED, kind="tools")
    # The notifications come after the counts (both in the connection, counted first).
    assert otel.counts(TOOL_CHANGES) == {frozenset(): 2}  # add and echo, not the removed ones
