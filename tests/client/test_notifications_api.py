"""Notifications through the public API (docs/connection.md, "Notifications"): every kind of subscriber, order,
filters, unsubscribing, dead subscribers, and the list_changed flood rules, against a real
scripted server subprocess.

A ``barrier`` notification, sent by a later ``notify`` call, tells a test that everything the
server sent before it has been delivered: notifications reach each subscriber in order.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from typing import Any

import pykka
import pytest

import conduit_mcp as mcp
from conduit_mcp.testing.waiting import notes_before

pytestmark = pytest.mark.timeout(30)

ERAS = [pytest.param("auto", id="modern"), pytest.param("legacy", id="legacy")]
TOOLS_CHANGED = "notifications/tools/list_changed"
BARRIER = "test/barrier"
WINDOW = 0.25


def ready(start_client: Any, server: Any, protocol: str = "auto", **options: Any) -> mcp.Client:
    client = start_client(server.stdio(), protocol=protocol, **options)
    status = client.await_ready(timeout=10)
    assert status.era == ("legacy" if protocol == "legacy" else "modern")
    return client


def notify(
    client: mcp.Client, method: str, count: int = 1, params: Any = None, timeout: float = 10.0
) -> None:
    args: dict[str, Any] = {"method": method, "count": count}
    if params is not None:
        args["params"] = params
    assert client.call_tool("notify", args, timeout=timeout).text == f"sent {count}"


def until_barrier(notes: Any, timeout: float = 5.0) -> list[Any]:
    """Every notification before the next barrier (deadline)."""
    return notes_before(notes, BARRIER, timeout)


class Recorder(pykka.ThreadingActor):
    """An actor subscriber: puts every message it is told on ``out``."""

    def __init__(self, out: queue.Queue[Any]) -> None:
        super().__init__()
        self.out = out

    def on_receive(self, message: Any) -> Any:
        self.out.put(message)


@pytest.fixture
def actors():
    refs: list[pykka.ActorRef[Any]] = []

    def start(out: queue.Queue[Any]) -> pykka.ActorRef[Any]:
        ref = Recorder.start(out)
        refs.append(ref)
        return ref

    yield start
    for ref in refs:
        ref.stop(block=False)


# -- every kind of subscriber, in order ---------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
def test_every_kind_of_subscriber_gets_every_notification_in_order(
    make_server, start_client, actors, protocol
):
    server = make_server()
    client = ready(start_client, server, protocol)
    by_actor: queue.Queue[Any] = queue.Queue()
    by_callable: queue.Queue[Any] = queue.Queue()
    by_queue: queue.Queue[Any] = queue.Queue()
    threads: set[str] = set()

    def callback(note: mcp.ServerNotification) -> None:
        threads.add(threading.current_thread().name)
        by_callable.put(note)

    client.subscribe_notifications(actors(by_actor))
    client.subscribe_notifications(callback)
    client.subscribe_notifications(by_queue)

    notify(client, "test/first", 50, {"n": 1})
    notify(client, "notifications/message", 1, {"level": "info", "data": "hello"})
    notify(client, "notifications/progress", 1, {"progressToken": 999999, "progress": 1})
    notify(client, "notifications/cancelled", 1, {"requestId": 999999})
    notify(client, "test/second", 50, {"n": 2})
    notify(client, BARRIER)
    expected = ["test/first"] * 50 + ["notifications/message"] + ["test/second"] * 50
    for notes in (by_actor, by_callable, by_queue):
        got = until_barrier(notes)
        assert [n.method for n in got] == expected  # no progress, no cancelled
        assert all(isinstance(n, mcp.ServerNotification) for n in got)
        assert {n.client for n in got} == {client.name}
        assert dict(got[0].params) == {"n": 1}
        assert dict(got[50].params) == {"level": "info", "data": "hello"}
        with pytest.raises(TypeError):
            got[0].params["n"] = 3  # read-only
    # the callable ran in the notifier's thread, never in the connection's or the caller's
    assert threading.current_thread().name not in threads
    assert not any(name.startswith("Connection") for name in threads)


def test_an_asyncio_queue_is_filled_on_its_own_loop(make_server, start_client):
    server = make_server()
    client = ready(start_client, server)

    async def main() -> list[Any]:
        notes: asyncio.Queue[Any] = asyncio.Queue()
        client.subscribe_notifications(notes)  # captures the running loop
        await client.aio.call_tool("notify", {"method": "test/a", "count": 20})
        await client.aio.call_tool("notify", {"method": BARRIER, "count": 1})
        got = []
        while True:
            note = await asyncio.wait_for(notes.get(), timeout=5)
            if note.method == BARRIER:
                return got
            got.append(note)

    got = asyncio.run(main())
    assert [n.method for n in got] == ["test/a"] * 20


def test_an_asyncio_queue_needs_its_loop(make_server, start_client):
    client = ready(start_client, make_server())
    with pytest.raises(mcp.Error) as err:
        client.subscribe_notifications(asyncio.Queue())  # no running loop in this thread
    assert (err.value.kind, err.value.reason) == ("argument", "subscriber")


@pytest.mark.parametrize("bad", [42, "queue", queue.Queue])
def test_a_bad_subscriber_is_refused_in_the_caller(make_server, start_client, bad):
    client = ready(start_client, make_server())
    with pytest.raises(mcp.Error) as err:
        client.subscribe_notifications(bad)
    assert (err.value.kind, err.value.reason) == ("argument", "subscriber")


def test_a_methods_filter_lets_only_those_through(make_server, start_client):
    server = make_server()
    client = ready(start_client, server)
    only_a: queue.Queue[Any] = queue.Queue()
    everything: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(only_a, methods=["test/a", BARRIER])
    client.subscribe_notifications(everything)
    for method in ("test/a", "test/b", "notifications/message", "test/a"):
        notify(client, method)
    notify(client, BARRIER)
    assert [n.method for n in until_barrier(only_a)] == ["test/a", "test/a"]
    assert [n.method for n in until_barrier(everything)] == [
        "test/a",
        "test/b",
        "notifications/message",
        "test/a",
    ]
    with pytest.raises(mcp.Error) as err:
        client.subscribe_notifications(queue.Queue(), methods="test/a")
    assert (err.value.kind, err.value.reason) == ("argument", "methods")


def test_subscribing_again_replaces_the_filter(make_server, start_client):
    server = make_server()
    client = ready(start_client, server)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=["test/a", BARRIER])
    client.subscribe_notifications(notes, methods=["test/b", BARRIER])
    notify(client, "test/a")
    notify(client, "test/b")
    notify(client, BARRIER)
    assert [n.method for n in until_barrier(notes)] == ["test/b"]  # once, not twice


def test_unsubscribe_stops_the_deliveries(make_server, start_client, actors):
    server = make_server()
    client = ready(start_client, server)
    gone: queue.Queue[Any] = queue.Queue()
    gone_actor_out: queue.Queue[Any] = queue.Queue()
    gone_actor = actors(gone_actor_out)
    stays: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(gone)
    client.subscribe_notifications(gone_actor)
    client.subscribe_notifications(stays)
    notify(client, "test/a")
    notify(client, BARRIER)
    for notes in (gone, gone_actor_out, stays):
        assert [n.method for n in until_barrier(notes)] == ["test/a"]
    client.unsubscribe_notifications(gone)
    client.unsubscribe_notifications(gone_actor)
    client.unsubscribe_notifications(queue.Queue())  # never subscribed: a no-op
    notify(client, "test/b")
    notify(client, BARRIER)
    assert [n.method for n in until_barrier(stays)] == ["test/b"]
    assert gone.empty() and gone_actor_out.empty()


def test_a_dead_actor_is_removed_and_the_others_go_on(make_server, start_client, actors, caplog):
    server = make_server()
    client = ready(start_client, server)
    dead_out: queue.Queue[Any] = queue.Queue()
    dead = actors(dead_out)
    alive_out: queue.Queue[Any] = queue.Queue()
    alive = actors(alive_out)
    client.subscribe_notifications(dead)
    client.subscribe_notifications(alive)
    notify(client, "test/a")
    notify(client, BARRIER)
    assert [n.method for n in until_barrier(dead_out)] == ["test/a"]
    assert [n.method for n in until_barrier(alive_out)] == ["test/a"]
    dead.stop(block=True)
    with caplog.at_level(logging.INFO, logger="conduit_mcp.actors.notifier"):
        for method in ("test/b", "test/c", BARRIER):
            notify(client, method)
        assert [n.method for n in until_barrier(alive_out)] == ["test/b", "test/c"]
    removed = [r for r in caplog.records if "removed" in r.getMessage()]
    assert len(removed) == 1 and "dead" in removed[0].getMessage()
    assert dead_out.empty()


def test_a_raising_callable_stays_subscribed(make_server, start_client, caplog):
    server = make_server()
    client = ready(start_client, server)
    seen: queue.Queue[Any] = queue.Queue()

    def flaky(note: mcp.ServerNotification) -> None:
        seen.put(note)
        if note.method == "test/raise":
            raise ValueError("secret-param-value")

    client.subscribe_notifications(flaky)
    with caplog.at_level(logging.WARNING, logger="conduit_mcp.actors.notifier"):
        for method in ("test/raise", "test/after", BARRIER):
            notify(client, method)
        assert [n.method for n in until_barrier(seen)] == ["test/raise", "test/after"]
    assert any("ValueError" in r.getMessage() for r in caplog.records)
    assert not any("secret-param-value" in r.getMessage() for r in caplog.records)


@pytest.mark.parametrize("protocol", ERAS)
def test_subscribers_survive_a_connection_crash(crashable, make_server, start_client, protocol):
    """The notifier (and its subscribers) outlive a crashed connection: the restarted one
    delivers to them, and (modern) listens for them again."""
    server = make_server()
    client = ready(start_client, server, protocol)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes)
    notify(client, "test/a")
    notify(client, BARRIER)
    assert [n.method for n in until_barrier(notes)] == ["test/a"]
    runtime = client._runtime()
    old = runtime.registry.get("connection")
    old.tell(crashable())
    client.wait_for_state(lambda s: s.state == "ready" and server.starts() == 2, timeout=10)
    assert runtime.registry.get("connection") is not old
    notify(client, "test/b")
    notify(client, BARRIER)
    assert [n.method for n in until_barrier(notes)] == ["test/b"]
    if protocol == "auto":
        assert client.await_listening(timeout=5)
        client.call_tool("changed", {"kind": "prompts"})
        notify(client, BARRIER)
        assert [n.method for n in until_barrier(notes)] == ["notifications/prompts/list_changed"]


# -- list_changed coalescing ---------------------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
def test_a_lone_list_changed_is_delivered_at_once_and_a_burst_twice(
    make_server, start_client, protocol
):
    server = make_server()
    client = ready(start_client, server, protocol)
    notes: queue.Queue[Any] = queue.Queue()
    prompts_changed = "notifications/prompts/list_changed"
    client.subscribe_notifications(notes, methods=[TOOLS_CHANGED, prompts_changed, BARRIER])
    notify(client, prompts_changed, 1)
    notify(client, BARRIER)
    assert [n.method for n in until_barrier(notes)] == [prompts_changed]  # never held
    # a burst: the first at once, the rest as one trailing notification at the window's end
    start = time.monotonic()
    notify(client, TOOLS_CHANGED, 30)
    first = notes.get(timeout=5)
    second = notes.get(timeout=5)
    arrived = time.monotonic()
    assert first.method == second.method == TOOLS_CHANGED
    assert arrived - start >= WINDOW * 0.9
    notify(client, BARRIER)
    assert until_barrier(notes) == []  # two in all


# -- acceptance: a flood of 10,000 list_changed --------------------------------------------


def test_a_flood_of_list_changed_is_coalesced_and_refreshes_are_bounded(make_server, start_client):
    """10,000 ``notifications/tools/list_changed`` in a row: each subscriber gets at most
    two per 250 ms window, the last one after the flood ended, and the cached tool list is
    refreshed at most twice per burst and at most once a second."""
    server = make_server()
    client = ready(start_client, server)
    arrivals: list[list[tuple[float, str]]] = [[], []]
    marks: queue.Queue[tuple[float, str]] = queue.Queue()

    def recorder(index: int) -> Any:
        def record(note: mcp.ServerNotification) -> None:
            now = time.monotonic()
            arrivals[index].append((now, note.method))
            if index == 0:
                marks.put((now, note.method))

        return record

    client.subscribe_notifications(recorder(0))
    client.subscribe_notifications(recorder(1), methods=[TOOLS_CHANGED])
    client.list_all_tools()  # a fetched list: the flood refreshes it
    client.await_listening(timeout=5)
    flood_start = time.monotonic()
    notify(client, TOOLS_CHANGED, 10_000, timeout=20)
    notify(client, BARRIER)  # every flood notification reached the connection before it

    deadline = time.monotonic() + 10
    barrier_at = trailing_at = refreshed_at = None
    while refreshed_at is None:
        now, method = marks.get(timeout=max(0.0, deadline - time.monotonic()))
        if method == BARRIER:
            barrier_at = now
        elif method == TOOLS_CHANGED and barrier_at is not None:
            trailing_at = now
        elif method == mcp.LIST_REFRESHED and trailing_at is not None:
            refreshed_at = now  # the refresh owed to the last delivery has landed
    assert client.call_tool("add", {"a": 1, "b": 1}).text == "2"  # still healthy

    for record in arrivals:
        times = [t for t, method in record if method == TOOLS_CHANGED]
        assert 2 <= len(times) < 10_000
        for earlier, later in zip(times, times[2:], strict=False):
            assert later - earlier >= WINDOW, "three deliveries within one window"
        assert times[-1] >= barrier_at  # the last one came after the flood ended
    flood_span = trailing_at - flood_start
    # Refreshes: every tools/list after the caller's first one. The gate spaces their starts
    # by a second at the connection; their requests queue behind the flood in its mailbox,
    # so the spacing seen at the server is not that: count them against the span instead.
    starts = [e["t"] for e in server.received("tools/list")][1:]
    assert 1 <= len(starts) <= 2 + int(flood_span)


def test_a_sustained_flood_refreshes_once_a_second(make_server, start_client):
    """list_changed without a pause for over two seconds: one delivery per window at most
    (two in any window), and the tool list refreshed about once a second, never more."""
    server = make_server()
    client = ready(start_client, server)
    times: list[float] = []
    marks: queue.Queue[tuple[float, str]] = queue.Queue()

    def record(note: mcp.ServerNotification) -> None:
        now = time.monotonic()
        if note.method == TOOLS_CHANGED:
            times.append(now)
        marks.put((now, note.method))

    client.subscribe_notifications(record, methods=[TOOLS_CHANGED, BARRIER, mcp.LIST_REFRESHED])
    client.list_all_tools()
    client.await_listening(timeout=5)
    start = time.monotonic()
    while time.monotonic() - start < 2.2:
        notify(client, TOOLS_CHANGED, 200)
    flood_end = time.monotonic()
    notify(client, BARRIER)
    deadline = time.monotonic() + 10
    barrier_at = trailing_at = refreshed_at = None
    while refreshed_at is None:
        now, method = marks.get(timeout=max(0.0, deadline - time.monotonic()))
        if method == BARRIER:
            barrier_at = now
        elif method == TOOLS_CHANGED and barrier_at is not None:
            trailing_at = now
        elif method == mcp.LIST_REFRESHED and trailing_at is not None:
            refreshed_at = now
    for earlier, later in zip(times, times[2:], strict=False):
        assert later - earlier >= WINDOW, "three deliveries within one window"
    assert len(times) <= 2 + (trailing_at - start) / WINDOW
    starts = [e["t"] for e in server.received("tools/list")][1:]
    span = trailing_at - start
    assert 2 <= len(starts) <= 2 + int(span)
    # refreshed while the flood went on, not only once it was over
    assert any(t < flood_end for t in starts[1:])
