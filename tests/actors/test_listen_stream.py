"""The listen actor against a recording transport (no server): what it opens and closes for
each want, what it publishes for ``await_listening``, what it tells the connection."""

from __future__ import annotations

import queue
import time
from typing import Any

import pykka
import pytest

from conduit_mcp.actors.listen import (
    MAX_LISTENS,
    Incarnations,
    ListenBack,
    ListenRouted,
    ListenStream,
    Want,
    WantSeen,
)
from conduit_mcp.config import build_config
from conduit_mcp.otp.base import SafeActor
from conduit_mcp.otp.registry import Registry
from conduit_mcp.protocol.jsonrpc import Notification, Response
from conduit_mcp.protocol.listen import ACKNOWLEDGED, SUBSCRIPTION_ID
from conduit_mcp.published import Published
from conduit_mcp.transports.base import StreamMessages

pytestmark = pytest.mark.timeout(10)

TOOLS = {"toolsListChanged": True}
BOTH = {"toolsListChanged": True, "promptsListChanged": True}


class Recorder(SafeActor):
    """Stands for the connection: records what the listen actor tells it."""

    def __init__(self, out: queue.Queue[Any]) -> None:
        super().__init__()
        self._out = out

    def receive(self, message: Any) -> Any:
        self._out.put(message)
        return None


class Transport:
    """Records open_stream/close_stream (the listen actor's thread)."""

    gen = 1

    def __init__(self) -> None:
        self.events: queue.Queue[tuple[str, str, Any]] = queue.Queue()

    def open_stream(self, tag: str, message: Any, sink: Any, last_event_id: Any = None) -> None:
        self.events.put(("open", tag, message["params"]["notifications"]))

    def close_stream(self, tag: str) -> None:
        self.events.put(("close", tag, None))

    def next(self) -> tuple[str, str, Any]:
        return self.events.get(timeout=5)


@pytest.fixture
def rig() -> Any:
    out: queue.Queue[Any] = queue.Queue()
    registry = Registry()
    conn = Recorder.start(out)
    registry.set("connection", conn)
    shared = Published()
    ref = ListenStream.start("c", registry, shared, build_config({}), Incarnations())
    assert out.get(timeout=5) == ListenBack(False)
    yield ref, shared, out, Transport()
    for actor in (ref, conn):
        try:
            actor.stop()
        except pykka.ActorDeadError:
            pass


def want(shared: Published, transport: Transport, filter: dict[str, Any]) -> Want:
    shared.want_listen(shared.listen_want + 1)
    return Want(shared.listen_want, filter, transport.gen, transport, "2026-07-28")


def ack(tag: str, honoured: dict[str, Any]) -> StreamMessages:
    params = {"_meta": {SUBSCRIPTION_ID: tag}, "notifications": honoured}
    return StreamMessages(1, tag, [Notification(ACKNOWLEDGED, params)])


def seen(out: queue.Queue[Any], seq: int) -> None:
    deadline = time.monotonic() + 5
    while True:
        got = out.get(timeout=max(0.01, deadline - time.monotonic()))
        if got == WantSeen(seq):
            return


def test_a_new_filter_swaps_the_listen_once_the_new_one_is_acknowledged(rig):
    ref, shared, out, transport = rig
    first = want(shared, transport, TOOLS)
    ref.tell(first)
    kind, tag1, filter1 = transport.next()
    assert (kind, filter1) == ("open", TOOLS) and tag1.startswith("listen-")
    seen(out, first.seq)  # the connection hears it acted on the want
    ref.tell(ack(tag1, TOOLS))
    assert shared.wait_listen(5) == TOOLS
    second = want(shared, transport, BOTH)
    assert shared.listen is None  # await_listening waits for the new filter
    ref.tell(second)
    kind, tag2, filter2 = transport.next()
    assert (kind, filter2) == ("open", BOTH)
    assert transport.events.empty()  # the old one stays until the new one is acknowledged
    ref.tell(ack(tag2, {"toolsListChanged": True}))  # honoured in part
    assert transport.next() == ("close", tag1, None)
    assert shared.wait_listen(5) == {"toolsListChanged": True}


def test_an_old_listens_late_acknowledgement_is_not_published(rig):
    ref, shared, _, transport = rig
    ref.tell(want(shared, transport, TOOLS))
    _, tag1, _ = transport.next()
    ref.tell(want(shared, transport, BOTH))
    _, tag2, _ = transport.next()
    ref.tell(ack(tag1, TOOLS))  # the older listen answers first
    assert transport.events.empty()  # nothing older to close
    assert shared.wait_listen(0.2) is None  # not what the consumers want now
    ref.tell(ack(tag2, BOTH))
    assert shared.wait_listen(5) == BOTH
    assert transport.next() == ("close", tag1, None)


def test_at_most_four_listens_are_open(rig):
    ref, shared, _, transport = rig
    filters = [{"resourceSubscriptions": [f"u{i}"]} for i in range(MAX_LISTENS + 2)]
    for f in filters:
        ref.tell(want(shared, transport, f))
    opened = [transport.next() for _ in range(MAX_LISTENS)]
    assert [f for _, _, f in opened] == filters[:MAX_LISTENS]
    time.sleep(0.1)  # (the absence of a fifth open: nothing to wait for)
    assert transport.events.empty()
    # the newest acknowledged closes the older ones and opens the one wanted now
    ref.tell(ack(opened[-1][1], filters[MAX_LISTENS - 1]))
    events = [transport.next() for _ in range(MAX_LISTENS)]
    assert sorted(e[1] for e in events if e[0] == "close") == sorted(t for _, t, _ in opened[:-1])
    assert [e[2] for e in events if e[0] == "open"] == [filters[-1]]


def test_notifications_are_routed_without_their_subscription_id_and_strays_dropped(rig):
    ref, shared, out, transport = rig
    ref.tell(want(shared, transport, TOOLS))
    _, tag, _ = transport.next()
    changed = "notifications/tools/list_changed"
    live = Notification(changed, {"_meta": {SUBSCRIPTION_ID: tag, "k": 1}})
    stray = Notification(changed, {"_meta": {SUBSCRIPTION_ID: "listen-0"}})
    ref.tell(StreamMessages(1, tag, [stray, live, Response(tag, {})]))
    deadline = time.monotonic() + 5
    while True:
        got = out.get(timeout=max(0.01, deadline - time.monotonic()))
        if isinstance(got, ListenRouted):
            break
    assert got.notifications == [Notification(changed, {"_meta": {"k": 1}})]
    assert tag not in shared.live_listens  # its final answer ended it


class GetTransport(Transport):
    """Records the GET stream's opens (``message`` None) too."""

    def open_stream(self, tag: str, message: Any, sink: Any, last_event_id: Any = None) -> None:
        self.events.put(("open", tag, None if message is None else message["params"]))


def test_a_get_stream_that_keeps_failing_is_given_up_and_the_connection_told(rig, monkeypatch):
    from conduit_mcp.actors import listen as listen_module
    from conduit_mcp.actors.listen import StreamGaveUp
    from conduit_mcp.protocol import listen as lsn
    from conduit_mcp.transports.base import StreamEnded

    # the floor has its own test; here only the count of failures in a row matters
    monkeypatch.setattr(listen_module.lsn, "reopen_delay", lambda retry, churn: 0.01)
    ref, shared, out, _ = rig
    transport = GetTransport()
    shared.want_listen(shared.listen_want + 1)
    ref.tell(Want(shared.listen_want, {}, transport.gen, transport, "2025-11-25", get=1))
    for _ in range(lsn.GIVE_UP_AFTER):
        kind, tag, _ = transport.next()
        assert kind == "open"
        ref.tell(StreamEnded(transport.gen, tag, "failed"))
    deadline = time.monotonic() + 5
    while True:
        got = out.get(timeout=max(0.01, deadline - time.monotonic()))
        if got == StreamGaveUp(transport.gen):
            break
    assert transport.events.empty()  # not reopened again
