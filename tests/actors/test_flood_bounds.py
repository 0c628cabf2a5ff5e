"""Every flood bound at its edge (docs/connection.md, "Floods"): ``max_inbox`` in the pending
table, ``max_answer_backlog`` in the stdio transport's write backlog,
``max_subscriber_backlog`` in the notifier, and the per-call progress kept by a reply
channel. Real actors and real pipes; every wait has a deadline.
"""

from __future__ import annotations

import os
import queue
import threading
from typing import Any

import pykka
import pytest

from conduit_mcp.actors.notifier import Deliver, Notifier, NotifierStats, Stats, Subscribe
from conduit_mcp.actors.pending import Drops, PendingTable
from conduit_mcp.config import build_config
from conduit_mcp.errors import Error
from conduit_mcp.notifications import ServerNotification
from conduit_mcp.protocol.jsonrpc import ErrorResponse, Notification, Request, Response
from conduit_mcp.published import Deliveries
from conduit_mcp.replies import PROGRESS, PROGRESS_KEPT, SyncReply
from conduit_mcp.transports.stdio import Stdio, StdioTransport

pytestmark = pytest.mark.timeout(20)

NOTE = Notification("notifications/message", {"level": "info"})
PING = Request("s-1", "ping", None)


# -- max_inbox ----------------------------------------------------------------------------------


def test_the_reader_tells_up_to_max_inbox_then_drops_all_but_answers() -> None:
    counted: list[tuple[str, int]] = []
    table = PendingTable(max_inbox=3, drops=Drops(lambda kind, n: counted.append((kind, n))))
    assert table.admit([NOTE, PING]) == [NOTE, PING]  # 2 behind
    assert table.admit([NOTE]) == [NOTE]  # 3 behind: at the bound
    answer = Response(7, {})
    error = ErrorResponse(8, -1, "x", None)
    assert table.admit([NOTE, answer, PING, error]) == [answer, error]
    assert table.drops.inbound == 2 and counted == [("inbound", 2)]
    assert table.told == 5  # answers are counted too: the connection handles them
    table.handled += 3  # the connection caught up: 2 behind, room for one more read
    assert table.admit([NOTE, PING]) == [NOTE, PING]
    assert table.drops.inbound == 2


def test_max_inbox_is_an_option_with_a_floor() -> None:
    assert build_config({}).max_inbox == 10_000
    assert build_config({"max_inbox": 1}).max_inbox == 1
    with pytest.raises(Error) as caught:
        build_config({"max_inbox": 0})
    assert (caught.value.kind, caught.value.reason) == ("config", "max_inbox")


# -- max_answer_backlog -------------------------------------------------------------------------


class _Table:
    def __init__(self) -> None:
        self.drops = Drops()


def _transport(limit: int, *, full: bool) -> tuple[StdioTransport, _Table, int, int]:
    """A stdio transport writing to a pipe nobody reads (already full if ``full``)."""
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    table = _Table()
    transport = StdioTransport(
        Stdio("true"), None, 1, max_frame=1024, pending=table, max_answer_backlog=limit
    )
    while full:  # from now on everything goes to the backlog
        try:
            os.write(write_fd, b"x" * 65536)
        except BlockingIOError:
            break
    transport._fd = write_fd  # what _spawn sets once the process runs
    transport._drain_scheduled = True  # no loop drains it: the pipe is never read
    return transport, table, read_fd, write_fd


ANSWER = {"jsonrpc": "2.0", "id": "s-1", "result": {}}
SIZE = len(b'{"jsonrpc":"2.0","id":"s-1","result":{}}\n')


@pytest.mark.parametrize("fit", [0, 1, 3])
def test_answers_fill_the_backlog_up_to_max_answer_backlog_then_are_dropped(fit: int) -> None:
    transport, table, read_fd, write_fd = _transport(SIZE * fit, full=True)
    try:
        for _ in range(fit + 2):
            transport.send_answer(ANSWER)
        # An empty backlog always takes one (a lone answer is never refused); after that,
        # answers are kept while the backlog stays within the bound.
        kept = max(fit, 1)
        assert len(transport._backlog) == SIZE * kept
        assert table.drops.answer == fit + 2 - kept
        transport.send_bytes(b"z" * 10_000)  # the client's own requests are never dropped
        assert len(transport._backlog) == SIZE * kept + 10_000
    finally:
        transport._fd = None
        os.close(read_fd)
        os.close(write_fd)


def test_answers_go_straight_to_a_pipe_with_room_whatever_the_bound() -> None:
    transport, table, read_fd, write_fd = _transport(0, full=False)
    try:
        for _ in range(3):
            transport.send_answer(ANSWER)
        assert os.read(read_fd, 1000) == b'{"jsonrpc":"2.0","id":"s-1","result":{}}\n' * 3
        assert table.drops.answer == 0 and not transport._backlog
    finally:
        transport._fd = None
        os.close(read_fd)
        os.close(write_fd)


# -- max_subscriber_backlog ---------------------------------------------------------------------


def _note(i: int) -> ServerNotification:
    return ServerNotification("c1", "notifications/message", {"i": i})


def test_a_blocked_callable_subscriber_keeps_max_backlog_and_the_rest_is_dropped() -> None:
    gate = threading.Event()
    entered = threading.Event()
    got: queue.SimpleQueue[int] = queue.SimpleQueue()
    counted: list[tuple[str, int]] = []

    def blocked(n: ServerNotification) -> None:
        entered.set()
        assert gate.wait(10)
        got.put(n.params["i"])

    ref = Notifier.start("c1", max_backlog=5, on_dropped=lambda k, n: counted.append((k, n)))
    try:
        ref.ask(Subscribe(blocked), timeout=5)
        ref.tell(Deliver([_note(0)]))
        assert entered.wait(5)  # the subscriber is now busy with notification 0
        ref.tell(Deliver([_note(i) for i in range(1, 6)]))  # 5 wait: at the bound
        ref.tell(Deliver([_note(6), _note(7)]))  # no room: dropped, counted
        gate.set()
        assert [got.get(timeout=5) for _ in range(6)] == [0, 1, 2, 3, 4, 5]
        s: NotifierStats = ref.ask(Stats(), timeout=5)
        assert s.dropped == 2 and counted == [("notification", 2)]
    finally:
        gate.set()
        ref.stop()


def test_no_subscriber_is_called_once_halt_is_set() -> None:
    halt = threading.Event()
    calls: list[int] = []
    gate = threading.Event()

    entered = threading.Event()

    def sub(n: ServerNotification) -> None:
        calls.append(n.params["i"])
        entered.set()
        assert gate.wait(10)

    ref = Notifier.start("c1", halt=halt)
    try:
        ref.ask(Subscribe(sub), timeout=5)
        ref.tell(Deliver([_note(i) for i in range(10)]))
        assert entered.wait(5)
        halt.set()  # stop() begins while notification 0 runs
        gate.set()
        ref.ask(Stats(), timeout=5)
        ref.tell(Deliver([_note(10)]))
        ref.ask(Stats(), timeout=5)
        assert calls == [0]
    finally:
        ref.stop()


def test_the_connection_stops_telling_the_notifier_past_its_backlog() -> None:
    deliveries = Deliveries()
    deliveries.told = 7
    ref: pykka.ActorRef[Any] = Notifier.start("c1", deliveries=deliveries)
    try:
        # A (re)started notifier owes nothing its dead incarnation held.
        assert ref.ask(Stats(), timeout=5).subscribers == 0
        assert deliveries.backlog == 0
        deliveries.told += 2
        ref.tell(Deliver([_note(1), _note(2)]))
        ref.ask(Stats(), timeout=5)
        assert deliveries.backlog == 0
    finally:
        ref.stop()


# -- per-call progress ----------------------------------------------------------------------


def test_a_reply_keeps_the_latest_progress_kept_and_counts_the_older() -> None:
    reply = SyncReply(wants_progress=True)
    for i in range(PROGRESS_KEPT):
        reply.progress({"progress": i})
    assert reply.progress_dropped == 0
    reply.progress({"progress": PROGRESS_KEPT})  # one past the bound: the oldest goes
    assert reply.progress_dropped == 1
    assert reply.queue.get_nowait() == (PROGRESS, None)  # one wake-up for all of them
    assert reply.queue.empty()
    kept = reply.take_progress()
    assert [p["progress"] for p in kept] == list(range(1, PROGRESS_KEPT + 1))
    reply.progress({"progress": -1})
    assert reply.queue.get_nowait() == (PROGRESS, None)  # woken again once taken


def test_a_busy_asyncio_loop_holds_at_most_max_backlog_scheduled_puts() -> None:
    import asyncio

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    gate = threading.Event()
    busy = threading.Event()

    def block() -> None:
        busy.set()
        gate.wait(10)

    q: asyncio.Queue[ServerNotification] = asyncio.Queue()
    ref = Notifier.start("c1", max_backlog=3)
    try:
        ref.ask(Subscribe(q, loop=loop), timeout=5)
        loop.call_soon_threadsafe(block)
        assert busy.wait(5)  # the loop runs nothing else until the gate opens
        for i in range(5):
            ref.tell(Deliver([_note(i)]))
        s: NotifierStats = ref.ask(Stats(), timeout=5)
        assert s.dropped == 2
        gate.set()
        got = asyncio.run_coroutine_threadsafe(asyncio.wait_for(_take(q, 3), 5), loop).result(
            timeout=5
        )
        assert got == [0, 1, 2] and q.empty()
    finally:
        gate.set()
        ref.stop()
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()


async def _take(q: Any, n: int) -> list[int]:
    return [(await q.get()).params["i"] for _ in range(n)]


def test_a_new_transport_forgets_the_backlog() -> None:
    table = PendingTable(max_inbox=2)
    table.admit([NOTE, NOTE])  # told, and lost with the transport that read them
    assert table.admit([NOTE]) == []
    table.resync()
    assert table.admit([NOTE]) == [NOTE]


@pytest.mark.parametrize(
    ("option", "floor"),
    [("max_inbox", 1), ("max_answer_backlog", 0), ("max_subscriber_backlog", 1)],
)
def test_the_flood_options_are_checked_at_their_floor(option: str, floor: int) -> None:
    assert getattr(build_config({option: floor}), option) == floor
    with pytest.raises(Error) as caught:
        build_config({option: floor - 1})
    assert (caught.value.kind, caught.value.reason) == ("config", option)


def test_progress_is_not_told_to_an_actor_with_progress_kept_messages_waiting() -> None:
    from conduit_mcp.replies import FutureReply

    gate = threading.Event()
    entered = threading.Event()
    seen: queue.SimpleQueue[Any] = queue.SimpleQueue()

    class Busy(pykka.ThreadingActor):
        def on_receive(self, message: Any) -> None:
            entered.set()
            assert gate.wait(10)
            seen.put(message)

    ref = Busy.start()
    try:
        reply = FutureReply(pykka.ThreadingFuture(), ref)
        reply.request_id = 7
        ref.tell("first")
        assert entered.wait(5)  # busy: everything told from now on waits in its mailbox
        for i in range(PROGRESS_KEPT + 5):
            reply.progress({"progress": i})
        assert ref.actor_inbox.qsize() == PROGRESS_KEPT  # type: ignore[attr-defined]
        assert reply.progress_dropped == 5
        gate.set()
        messages = [seen.get(timeout=5) for _ in range(PROGRESS_KEPT + 1)]
        assert messages[0] == "first"
        assert messages[1:] == [
            ("conduit_mcp.progress", 7, {"progress": i}) for i in range(PROGRESS_KEPT)
        ]
    finally:
        gate.set()
        ref.stop()
