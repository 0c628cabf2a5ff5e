"""The legacy era (``initialize``, 2025-11-25 and older) over Streamable HTTP, through
the public API against the scripted server on loopback: the session id kept and sent back,
the GET stream after ``notifications/initialized``, resuming a dropped response stream with
``Last-Event-ID``, DELETE on close, a lost session re-initialized once with every request in
flight re-sent once; and the era probe ending legacy on the "Missing session ID" answer."""

from __future__ import annotations

import collections
import logging
import queue
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(30)

LEGACY = "2025-11-25"
FAST = {"request_timeout": 5.0, "backoff_base": 0.05, "backoff_max": 0.2}


def start(start_client, srv, **options):
    client = start_client(srv.spec(), **{**FAST, "protocol": "legacy", **options})
    status = client.await_ready(timeout=5)
    assert (status.state, status.era, status.version) == ("ready", "legacy", LEGACY)
    return client


def is_get(event):
    return event.get("event") == "http" and event["verb"] == "GET"


def test_the_session_id_is_kept_and_sent_back(serve_http, start_client):
    server, srv = serve_http(era="legacy")
    client = start(start_client, srv)
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    assert "add" in {t.name for t in client.list_tools().items}
    (created,) = server.events("session_created")
    sid = created["session"]
    http = server.events("http")
    first, rest = http[0], http[1:]
    assert first["verb"] == "POST" and first["status"] == 200
    assert "mcp-session-id" not in first["headers"]  # the initialize POST
    assert "mcp-protocol-version" not in first["headers"]
    assert len(rest) >= 3  # notifications/initialized, tools/call, tools/list (+ the GET)
    for event in rest:
        assert event["headers"]["mcp-session-id"] == sid
        assert event["headers"]["mcp-protocol-version"] == LEGACY
        assert event["status"] in (200, 202)
    assert [e["params"]["protocolVersion"] for e in server.received("initialize")] == [LEGACY]
    assert not any("mcp-method" in e["headers"] for e in http)  # modern-only headers


def test_the_get_stream_opens_after_initialized_and_carries_notifications(serve_http, start_client):
    server, srv = serve_http(era="legacy")
    client = start(start_client, srv)
    sid = server.events("session_created")[0]["session"]
    get = server.wait_for(is_get)
    assert get["status"] == 200 and get["session"] == sid
    assert get["headers"]["accept"] == "text/event-stream"
    assert get["t"] > server.received("notifications/initialized")[0]["t"]

    inbox: queue.Queue = queue.Queue()
    client.subscribe_notifications(inbox, ["notifications/tools/list_changed"])
    assert client.call_tool("changed", {"kind": "tools"}).structured_content["sent"] == 1
    note = inbox.get(timeout=5)
    assert note.method == "notifications/tools/list_changed"  # only the GET stream has it
    assert len(server.find(is_get)) == 1


def test_a_dropped_response_stream_is_resumed_with_last_event_id(serve_http, start_client):
    server, srv = serve_http(
        era="legacy",
        rules=[{"match": {"tool": "progress"}, "action": {"drop_stream": 1}}],
        sse_retry_ms=10,
    )
    client = start(start_client, srv)
    seen: list[mcp.Progress] = []
    result = client.call_tool("progress", {"steps": 3, "delay": 0.05}, on_progress=seen.append)
    assert result.text == "done 3 steps"
    assert [p.progress for p in seen] == [1, 2, 3]
    (call,) = server.received("tools/call")
    assert server.wait_for("stream_dropped")["id"] == call["id"]
    resumed = server.wait_for("stream_resumed")
    assert resumed["last_event_id"].endswith("-1")  # after the one event it had
    resuming = [e for e in server.find(is_get) if "last-event-id" in e["headers"]]
    assert [e["headers"]["last-event-id"] for e in resuming] == [resumed["last_event_id"]]
    assert server.events("cancelled") == []  # a legacy disconnection is no cancellation


def test_a_timed_out_legacy_request_is_cancelled_with_a_notification(serve_http, start_client):
    server, srv = serve_http(era="legacy")
    client = start(start_client, srv)
    with pytest.raises(mcp.Error) as err:
        client.call_tool("never", {}, timeout=0.3)
    assert err.value.kind == "timeout"
    (call,) = server.received("tools/call")
    note = server.wait_for("notifications/cancelled")
    assert note["params"]["requestId"] == call["id"]
    assert server.wait_for({"event": "cancelled", "id": call["id"]})["found"] is True
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"


def test_closing_the_client_deletes_the_session(serve_http, start_client):
    server, srv = serve_http(era="legacy")
    client = start(start_client, srv)
    client.call_tool("add", {"a": 1, "b": 2})
    sid = server.events("session_created")[0]["session"]
    client.stop()
    assert server.wait_for("session_deleted")["session"] == sid
    delete = server.wait_for(lambda e: e.get("event") == "http" and e["verb"] == "DELETE")
    assert delete["status"] == 200 and delete["headers"]["mcp-session-id"] == sid


def test_a_lost_session_is_initialized_again_once_and_each_request_resent_once(
    serve_http, start_client
):
    expire = {
        "match": {"tool": "slow"},
        "action": {"delay": 0.5, "expire_session": True},
        "times": 4,
    }
    server, srv = serve_http(era="legacy", rules=[expire])
    client = start(start_client, srv)
    with ThreadPoolExecutor(4) as pool:
        futures = [
            pool.submit(client.call_tool, "slow", {"seconds": 0}, timeout=5) for _ in range(4)
        ]
        results = [f.result(timeout=10) for f in futures]
    assert [r.is_error for r in results] == [False] * 4
    calls = server.received("tools/call")
    assert sorted(collections.Counter(c["id"] for c in calls).values()) == [2, 2, 2, 2]
    assert len(server.received("initialize")) == 2  # exactly one new initialize
    first, second = (e["session"] for e in server.events("session_created"))
    assert [e["session"] for e in server.events("session_expired")] == [first]
    answered = [
        e
        for e in server.events("http")
        if e["verb"] == "POST" and e["status"] == 200 and e["session"] == second
    ]
    assert len(answered) >= 5  # initialize + the four re-sent calls (+ initialized: 202)
    assert client.status().state == "ready"
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"


def test_auto_mode_ends_legacy_on_the_missing_session_answer(serve_http, start_client):
    server, srv = serve_http(era="legacy")
    # probe_timeout far above await_ready's: only the 400 answer can make it legacy in time
    client = start_client(srv.spec(), **FAST, probe_timeout=30.0)
    status = client.await_ready(timeout=5)
    assert (status.era, status.version, status.origin) == ("legacy", LEGACY, "probe")
    probe = server.events("http")[0]
    assert probe["headers"]["mcp-method"] == "server/discover"
    assert probe["status"] == 400
    assert server.received("server/discover") == []  # refused before the protocol core
    assert len(server.received("initialize")) == 1
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"


def test_a_get_stream_that_ends_at_once_is_reopened_after_a_floor_and_a_backoff(
    serve_http, start_client, caplog
):
    """A server that sends ``retry: 1`` and ends every GET stream at once: the client waits
    at least the floor (1 s) before reopening, twice that the next time, and says so."""
    from conduit_mcp.actors.listen import Stats
    from conduit_mcp.protocol.listen import REOPEN_FLOOR

    caplog.set_level(logging.WARNING, logger="conduit_mcp.listen")
    server, srv = serve_http(era="legacy", sse_retry_ms=1, end_get_streams=True)
    client = start(start_client, srv)
    server.wait_for(is_get, timeout=10, count=3)
    times = [e["t"] for e in server.find(is_get)]
    first, second = times[1] - times[0], times[2] - times[1]
    assert first >= REOPEN_FLOOR * 0.9  # the floor, not the server's 1 ms
    assert second >= 2 * REOPEN_FLOOR * 0.9  # backing off while it churns
    deadline = time.monotonic() + 5
    while not any("keeps ending at once" in r.getMessage() for r in caplog.records):
        assert time.monotonic() < deadline, "no warning about the churning GET stream"
        time.sleep(0.02)
    assert len(server.find(is_get)) == 3  # the next one waits 4 s
    stats = client._runtime().registry.get("listen").ask(Stats(), timeout=5)
    assert (stats.get_reopens, stats.get_gave_up) == (3, False)  # the counter says so too
