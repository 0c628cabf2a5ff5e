"""The connection's events as counters, added in the connection (O(1), no exporter code):
``mcp.client.connection.transitions``, ``mcp.client.request.cancellations``,
``mcp.client.response.dropped``; transitions are also logged at DEBUG."""

from __future__ import annotations

import asyncio
import logging
import os
import signal

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(30)

TRANSITIONS = "mcp.client.connection.transitions"
CANCELLATIONS = "mcp.client.request.cancellations"
DROPPED = "mcp.client.response.dropped"


def _key(**attrs: str) -> frozenset[tuple[str, str]]:
    return frozenset(attrs.items())


def test_transitions_of_a_connect_and_a_reconnect(make_server, start_client, otel, caplog):
    caplog.set_level(logging.DEBUG, logger="conduit_mcp.connection")
    server = make_server()
    client = start_client(server.stdio())
    counts = otel.counts(TRANSITIONS)
    assert counts == {
        _key(**{"from": "none", "to": "connecting"}): 1,
        _key(**{"from": "connecting", "to": "discovering"}): 1,
        _key(**{"from": "discovering", "to": "ready"}): 1,
    }
    os.kill(server.pids()[-1], signal.SIGKILL)
    client.wait_for_state(lambda s: s.state == "ready" and server.starts() == 2, timeout=10)
    counts = otel.counts(TRANSITIONS)
    assert counts[_key(**{"from": "ready", "to": "reconnecting", "reason": "exit"})] == 1
    assert counts[_key(**{"from": "reconnecting", "to": "connecting", "reason": "exit"})] == 1
    assert counts[_key(**{"from": "discovering", "to": "ready"})] == 2
    client.stop()
    counts = otel.counts(TRANSITIONS)
    assert counts[_key(**{"from": "ready", "to": "closed", "reason": "stopped"})] == 1
    logged = [r.getMessage() for r in caplog.records if r.name == "conduit_mcp.connection"]
    assert "connection discovering -> ready (reason None)" in logged
    assert "connection ready -> reconnecting (reason exit)" in logged


def test_cancellations_by_reason(make_server, start_client, otel):
    server = make_server()
    client = start_client(server.stdio())
    with pytest.raises(mcp.Error):
        client.call_tool("never", timeout=0.2)
    # counted before the caller got its answer: no waiting needed
    assert otel.counts(CANCELLATIONS) == {_key(reason="timeout"): 1}

    async def abandon() -> None:
        task = asyncio.create_task(client.aio.call_tool("never", timeout=20))
        await server.wait_for_async({"dir": "in", "method": "tools/call"}, count=2)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(abandon())
    server.wait_for("cancelled", count=2)  # the connection told the server, so it counted
    assert otel.counts(CANCELLATIONS) == {_key(reason="timeout"): 1, _key(reason="caller_down"): 1}


def test_dropped_responses(make_server, start_client, otel):
    server = make_server(rules=[{"match": {"tool": "echo"}, "action": "respond_twice"}])
    client = start_client(server.stdio())
    assert otel.counts(DROPPED) == {}
    assert client.call_tool("echo", {"text": "twice"}).text == "twice"
    # The duplicate precedes this answer on the pipe, so the reader has handed it to the
    # connection before this call returns (the reader answers a pending call itself; an
    # unmatched id goes to the connection's inbox, where it is counted)...
    client.call_tool("add", {"a": 1, "b": 1})
    # ...and this call is told to the connection after it, so by its answer it was counted.
    client.call_tool("add", {"a": 2, "b": 2})
    assert otel.counts(DROPPED) == {frozenset(): 1}


def test_counter_attributes_are_fixed_strings(make_server, start_client, otel):
    server = make_server()
    start_client(server.stdio())
    allowed = {"from", "to", "reason"}
    for point in otel.points(TRANSITIONS):
        assert set(point.attributes) <= allowed
        assert all(isinstance(v, str) for v in point.attributes.values())
