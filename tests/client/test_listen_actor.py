"""The listen-stream actor's isolation, through the public API, over stdio and HTTP against
the scripted server: a crash of the listen actor (or inside a stream it reads) fails no call
in flight, costs no connection restart, and the listen comes back; a malformed event on a
listen stream is dropped; the old incarnation's listens are closed at the server."""

from __future__ import annotations

import logging
import queue
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.actors.listen import ListenStream
from conduit_mcp.testing.waiting import notes_before

pytestmark = pytest.mark.timeout(30)

SID = "io.modelcontextprotocol/subscriptionId"
TOOLS_CHANGED = "notifications/tools/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"
BARRIER = "test/barrier"
TRANSPORTS = ["stdio", "http"]


class _Boom:
    """A message the patched listen actor crashes on."""


@pytest.fixture
def crash_listen(monkeypatch: pytest.MonkeyPatch) -> Callable[[], Any]:
    original = ListenStream.receive

    def receive(self: Any, message: Any) -> Any:
        if isinstance(message, _Boom):
            raise RuntimeError("injected listen actor crash")
        return original(self, message)

    monkeypatch.setattr(ListenStream, "receive", receive)
    return _Boom


@pytest.fixture
def ready_client(make_server, serve_http, start_client) -> Iterator[Callable[..., Any]]:
    def start(transport: str, **options: Any) -> tuple[Any, mcp.Client]:
        if transport == "stdio":
            server = make_server()
            spec = server.stdio()
        else:
            server, srv = serve_http()
            spec = srv.spec()
        client = start_client(spec, request_timeout=10, **options)
        assert client.await_ready(timeout=10).era == "modern"
        return server, client

    yield start


def listen_event(server: Any, notifications: dict[str, Any], after: Any = None) -> Any:
    return server.wait_for(
        lambda e: (
            e.get("event") == "listen"
            and e.get("notifications") == notifications
            and (after is None or e.get("id") != after)
        ),
        timeout=10,
    )


def barrier(client: mcp.Client, listen_id: Any) -> None:
    """A notification on the live listen (over HTTP a notification outside a listen has no
    stream to travel on), after everything that listen carried before."""
    params = {"_meta": {SID: listen_id}}
    client.call_tool("notify", {"method": BARRIER, "params": params})


def until_barrier(notes: Any, timeout: float = 5.0) -> list[str]:
    """The methods of the notifications before the next barrier (deadline)."""
    return [n.method for n in notes_before(notes, BARRIER, timeout)]


def wait_new(runtime: Any, child: str, old: Any, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        ref = runtime.registry.get(child)
        if ref is not None and ref is not old and ref.is_alive():
            return ref
        assert time.monotonic() < deadline, f"{child} was not restarted within {timeout} s"
        time.sleep(0.01)


def slow_calls(client: mcp.Client, pool: ThreadPoolExecutor, n: int = 10) -> list[Any]:
    return [pool.submit(client.call_tool, "slow", {"seconds": 0.5}) for _ in range(n)]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_crashed_listen_actor_fails_no_call_and_listens_again(
    ready_client, crash_listen, transport
):
    server, client = ready_client(transport)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[TOOLS_CHANGED, BARRIER])
    client.list_all_tools()  # a cached list: its list_changed refreshes it
    assert client.await_listening(timeout=5) == {"toolsListChanged": True}
    first = listen_event(server, {"toolsListChanged": True})
    runtime = client._runtime()
    connection, listen = runtime.registry.get("connection"), runtime.registry.get("listen")

    with ThreadPoolExecutor(10) as pool:
        calls = slow_calls(client, pool)
        server.wait_for("tools/call", timeout=5, count=10)  # all ten in flight
        listen.tell(crash_listen())
        wait_new(runtime, "listen", listen)
        results = [f.result(timeout=10) for f in calls]
    assert [r.is_error for r in results] == [False] * 10
    assert runtime.registry.get("connection") is connection  # only the listen actor restarted

    # the new incarnation listens again, and closed what the old one had open
    again = listen_event(server, {"toolsListChanged": True}, after=first["id"])
    server.wait_for({"event": "cancelled", "id": first["id"]}, timeout=5)
    assert client.await_listening(timeout=5) == {"toolsListChanged": True}
    listed = len(server.received("tools/list"))
    client.call_tool("add_tool", {"name": "after_crash"})
    barrier(client, again["id"])
    assert until_barrier(notes) == [TOOLS_CHANGED]  # reaches a subscriber...
    deadline = time.monotonic() + 5
    while client.tool("after_crash") is None:  # ... and the cache (a refresh)
        assert time.monotonic() < deadline, "the cached tools were not refreshed"
        time.sleep(0.02)
    assert len(server.received("tools/list")) > listed
    assert again["id"] != first["id"]


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_crash_inside_a_stream_restarts_only_the_listen_actor(
    ready_client, monkeypatch, transport
):
    """The actor crashes while it reads a listen's acknowledgement (a parser crash): the
    calls in flight all succeed, the connection is the same, the listen comes back with the
    whole filter."""
    server, client = ready_client(transport)
    client.subscribe_notifications(queue.Queue(), methods=[TOOLS_CHANGED])
    assert client.await_listening(timeout=5) == {"toolsListChanged": True}
    runtime = client._runtime()
    connection, listen = runtime.registry.get("connection"), runtime.registry.get("listen")
    original = ListenStream._acked
    crashed: list[bool] = []

    def acked(self: Any, tag: str, params: Any) -> None:
        if not crashed:
            crashed.append(True)
            raise ValueError("injected crash while reading an acknowledgement")
        original(self, tag, params)

    monkeypatch.setattr(ListenStream, "_acked", acked)
    with ThreadPoolExecutor(10) as pool:
        calls = slow_calls(client, pool)
        server.wait_for("tools/call", timeout=5, count=10)
        client.subscribe_notifications(queue.Queue(), methods=[PROMPTS_CHANGED])  # a new listen
        wait_new(runtime, "listen", listen)
        results = [f.result(timeout=10) for f in calls]
    assert crashed == [True]
    assert [r.is_error for r in results] == [False] * 10
    assert runtime.registry.get("connection") is connection
    both = {"toolsListChanged": True, "promptsListChanged": True}
    assert client.await_listening(timeout=5) == both
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"


@pytest.mark.parametrize("transport", TRANSPORTS)
def test_a_malformed_event_on_a_listen_stream_is_dropped(ready_client, caplog, transport):
    caplog.set_level(logging.WARNING)
    server, client = ready_client(transport)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[TOOLS_CHANGED, BARRIER, "test/bad"])
    client.await_listening(timeout=5)
    live = listen_event(server, {"toolsListChanged": True})
    runtime = client._runtime()
    connection, listen = runtime.registry.get("connection"), runtime.registry.get("listen")
    bad = {"method": "test/bad", "params": {"_meta": {SID: live["id"]}}, "malformed": True}
    with ThreadPoolExecutor(4) as pool:
        calls = slow_calls(client, pool, 4)
        assert client.call_tool("notify", bad).text == "sent 1"
        results = [f.result(timeout=10) for f in calls]
    assert [r.is_error for r in results] == [False] * 4
    client.call_tool("changed", {"kind": "tools"})  # the listen still works
    barrier(client, live["id"])
    assert until_barrier(notes) == [TOOLS_CHANGED]  # the malformed one never delivered
    assert runtime.registry.get("connection") is connection
    assert runtime.registry.get("listen") is listen
    assert any("unusable" in r.getMessage() for r in caplog.records)


def test_no_listen_actor_until_a_listen_is_wanted(ready_client):
    _, client = ready_client("stdio")
    client.ping()
    runtime = client._runtime()
    assert runtime.registry.get("listen") is None  # lazy: a client nobody listens for
    client.subscribe_notifications(queue.Queue(), methods=[TOOLS_CHANGED])
    client.await_listening(timeout=5)
    assert runtime.registry.get("listen") is not None


def test_the_legacy_get_stream_comes_back_after_a_listen_actor_crash(
    serve_http, start_client, crash_listen
):
    server, srv = serve_http(era="legacy")
    client = start_client(srv.spec(), protocol="legacy", request_timeout=10)
    assert client.await_ready(timeout=10).era == "legacy"

    def gets() -> list[Any]:
        return [e for e in server.events("http") if e["verb"] == "GET"]

    server.wait_for(lambda e: e.get("event") == "http" and e["verb"] == "GET", timeout=5)
    runtime = client._runtime()
    connection, listen = runtime.registry.get("connection"), runtime.registry.get("listen")
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[TOOLS_CHANGED])
    with ThreadPoolExecutor(10) as pool:
        calls = slow_calls(client, pool)
        server.wait_for("tools/call", timeout=5, count=10)
        listen.tell(crash_listen())
        wait_new(runtime, "listen", listen)
        results = [f.result(timeout=10) for f in calls]
    assert [r.is_error for r in results] == [False] * 10
    assert runtime.registry.get("connection") is connection
    deadline = time.monotonic() + 5
    while len(gets()) < 2:  # the new incarnation opened its own GET stream
        assert time.monotonic() < deadline, "the GET stream was not reopened"
        time.sleep(0.02)
    assert client.call_tool("changed", {"kind": "tools"}).structured_content["sent"] == 1
    assert notes.get(timeout=5).method == TOOLS_CHANGED  # it travels on the GET stream


def test_a_change_right_after_the_first_listing_is_announced(make_server, start_client):
    """Over stdio the listen for a newly cached list is in the pipe before the caller's next
    request: ``list_all_tools()`` returns only once the listen actor has acted on the new
    want, so a tool added right after (no await_listening) is announced and refreshed."""
    server = make_server(extra_args=["--ttl-ms", "60000"])
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[mcp.LIST_REFRESHED])
    client.list_all_tools()
    client.call_tool("add_tool", {"name": "right_after"})
    assert notes.get(timeout=5).params["kind"] == "tools"
    assert client.tool("right_after") is not None
    (listen,) = server.received("subscriptions/listen")
    (added,) = [c for c in server.received("tools/call") if c["params"]["name"] == "add_tool"]
    assert listen["t"] < added["t"]


def test_a_listen_the_server_ends_is_reopened_no_sooner_than_the_floor(make_server, start_client):
    """The backoff says 10 ms (the fixture's); the floor says 1 s."""
    from conduit_mcp.protocol.listen import REOPEN_FLOOR

    server = make_server()
    client = start_client(server.stdio())  # backoff: 0.01 s
    client.await_ready(timeout=10)
    client.subscribe_notifications(queue.Queue(), methods=[TOOLS_CHANGED])
    first = listen_event(server, {"toolsListChanged": True})
    client.call_tool("end_listens", {"how": "result"})
    ended_at = server.received("tools/call")[-1]["t"]
    again = listen_event(server, {"toolsListChanged": True}, after=first["id"])
    assert again["t"] - ended_at >= REOPEN_FLOOR * 0.95
