"""Notifier: delivery order, every subscriber kind and its failure rule, filters, the lazy
supervisor child. Real actors; every wait is on a queue, an event or an ask, with a deadline.

An ``ask`` of the notifier is a barrier: it is handled after every message told before it.
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
from typing import TYPE_CHECKING, Any

import pykka
import pytest

from conduit_mcp.actors.notifier import (
    Deliver,
    Notifier,
    NotifierStats,
    Stats,
    Subscribe,
    Unsubscribe,
    child_spec,
)
from conduit_mcp.errors import Error
from conduit_mcp.notifications import ServerNotification
from conduit_mcp.otp import Link, SafeActor, StartChild, Supervisor, WhichChildren
from conduit_mcp.replies import OK, SyncReply

if TYPE_CHECKING:
    from conftest import Events

pytestmark = pytest.mark.timeout(20)

SECRET = "tok-very-secret"
MSG = "notifications/message"
TOOLS = "notifications/tools/list_changed"


def note(i: int, method: str = MSG) -> ServerNotification:
    return ServerNotification("c1", method, {"i": i, "secret": SECRET})


def stats(ref: pykka.ActorRef[Any]) -> NotifierStats:
    return ref.ask(Stats(), timeout=5)


def drain(q: queue.Queue[Any] | queue.SimpleQueue[Any], n: int) -> list[Any]:
    return [q.get(timeout=5) for _ in range(n)]


@pytest.fixture
def notifier() -> pykka.ActorRef[Any]:
    return Notifier.start("c1")


class Sink(SafeActor):
    """An actor subscriber: logs what it is told."""

    def __init__(self, log: Events, *, link: Link | None = None) -> None:
        super().__init__(link=link)
        self.log = log

    def receive(self, message: Any) -> Any:
        self.log.put(message)


# -- order --------------------------------------------------------------------------------------


def test_batches_are_delivered_in_order_of_arrival(notifier: pykka.ActorRef[Any]) -> None:
    q: queue.SimpleQueue[ServerNotification] = queue.SimpleQueue()
    assert notifier.ask(Subscribe(q), timeout=5) is True
    notifier.tell(Deliver([note(0), note(1), note(2)]))
    notifier.tell(Deliver([note(3)]))
    notifier.tell(Deliver([]))
    notifier.tell(Deliver([note(4), note(5)]))
    assert [n.params["i"] for n in drain(q, 6)] == [0, 1, 2, 3, 4, 5]
    assert stats(notifier) == NotifierStats(subscribers=1, delivered=6, dropped=0)


def test_each_notification_reaches_subscribers_in_subscription_order(
    notifier: pykka.ActorRef[Any],
) -> None:
    # Callables get their notifications in slices the notifier tells itself, so they are
    # awaited on a queue, not read after a Stats ask (which may come between two slices).
    seen: queue.SimpleQueue[tuple[str, int]] = queue.SimpleQueue()
    names = ["a", "b", "c"]
    for name in names:
        notifier.tell(Subscribe(lambda n, name=name: seen.put((name, n.params["i"]))))
    notifier.tell(Deliver([note(0), note(1)]))
    assert stats(notifier).subscribers == 3
    assert drain(seen, 6) == [(name, i) for i in (0, 1) for name in names]


def test_callable_runs_in_the_notifier_thread(notifier: pykka.ActorRef[Any]) -> None:
    threads: queue.SimpleQueue[str] = queue.SimpleQueue()
    notifier.tell(Subscribe(lambda n: threads.put(threading.current_thread().name)))
    notifier.tell(Deliver([note(0)]))
    assert threads.get(timeout=5) != threading.current_thread().name


# -- subscriber kinds ---------------------------------------------------------------------------


def test_actor_subscriber_is_told_the_notification(
    notifier: pykka.ActorRef[Any], events: Events
) -> None:
    sink = Sink.start(events)
    notifier.tell(Subscribe(sink))
    notifier.tell(Deliver([note(0), note(1)]))
    got = events.wait_for(2)
    assert got == [note(0), note(1)]
    assert all(isinstance(n, ServerNotification) for n in got)


def test_dead_actor_is_removed_at_once(notifier: pykka.ActorRef[Any], events: Events) -> None:
    dead = Sink.start(events)
    alive = Sink.start(events)
    notifier.tell(Subscribe(dead))
    notifier.tell(Subscribe(alive))
    assert stats(notifier).subscribers == 2
    dead.stop()
    notifier.tell(Deliver([note(0), note(1)]))
    assert stats(notifier).subscribers == 1
    assert events.wait_for(2) == [note(0), note(1)]
    assert notifier.ask(Unsubscribe(dead), timeout=5) is False


def test_queue_subscriber(notifier: pykka.ActorRef[Any]) -> None:
    q: queue.Queue[ServerNotification] = queue.Queue()
    notifier.tell(Subscribe(q))
    notifier.tell(Deliver([note(0)]))
    assert q.get(timeout=5) == note(0)


def test_full_queue_drops_for_that_subscriber_only_and_counts(
    notifier: pykka.ActorRef[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="conduit_mcp")
    small: queue.Queue[ServerNotification] = queue.Queue(maxsize=1)
    big: queue.SimpleQueue[ServerNotification] = queue.SimpleQueue()
    notifier.tell(Subscribe(small))
    notifier.tell(Subscribe(big))
    notifier.tell(Deliver([note(0), note(1), note(2)]))
    assert stats(notifier) == NotifierStats(subscribers=2, delivered=4, dropped=2)
    assert notifier.proxy().dropped.get(timeout=5) == 2
    assert small.get_nowait() == note(0) and small.empty()
    assert [n.params["i"] for n in drain(big, 3)] == [0, 1, 2]
    # Still subscribed: a later notification fits again.
    notifier.tell(Deliver([note(3)]))
    assert small.get(timeout=5) == note(3)
    assert "dropped 2 notification(s)" in caplog.text
    assert SECRET not in caplog.text


def test_queue_raising_something_else_is_warned_and_kept(
    notifier: pykka.ActorRef[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="conduit_mcp")

    class Broken:
        calls = 0

        def put_nowait(self, item: Any) -> None:
            Broken.calls += 1
            raise OSError(f"cannot put {item.params['secret']}")

    notifier.tell(Subscribe(Broken()))
    notifier.tell(Deliver([note(0), note(1)]))
    assert stats(notifier).subscribers == 1
    assert Broken.calls == 2
    assert "OSError" in caplog.text and SECRET not in caplog.text


def test_raising_callable_is_logged_by_type_and_stays(
    notifier: pykka.ActorRef[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="conduit_mcp")
    after: queue.SimpleQueue[ServerNotification] = queue.SimpleQueue()
    calls: queue.SimpleQueue[int] = queue.SimpleQueue()

    def bad(n: ServerNotification) -> None:
        calls.put(n.params["i"])
        raise ValueError(f"bad params {n.params['secret']}")

    notifier.tell(Subscribe(bad))
    notifier.tell(Subscribe(after))
    notifier.tell(Deliver([note(0), note(1)]))
    assert stats(notifier).subscribers == 2
    assert [n.params["i"] for n in drain(after, 2)] == [0, 1]
    assert drain(calls, 2) == [0, 1]
    assert "ValueError" in caplog.text
    assert SECRET not in caplog.text
    assert "stays subscribed" in caplog.text


@pytest.mark.parametrize("exc", [SystemExit(1), KeyboardInterrupt(), GeneratorExit()])
def test_callable_raising_a_base_exception_does_not_kill_the_notifier(
    notifier: pykka.ActorRef[Any], exc: BaseException
) -> None:
    def bad(n: ServerNotification) -> None:
        raise exc

    notifier.tell(Subscribe(bad))
    notifier.tell(Deliver([note(0)]))
    assert stats(notifier).subscribers == 1
    assert notifier.is_alive()


def test_asyncio_queue_gets_notifications_on_its_own_loop(notifier: pykka.ActorRef[Any]) -> None:
    async def main() -> tuple[list[int], bool]:
        q: asyncio.Queue[ServerNotification] = asyncio.Queue()
        assert notifier.ask(Subscribe(q), timeout=5) is True  # captures this loop
        loop_thread = threading.current_thread()
        notifier.tell(Deliver([note(0), note(1)]))
        notifier.tell(Deliver([note(2)]))
        got = [(await asyncio.wait_for(q.get(), 5)).params["i"] for _ in range(3)]
        return got, threading.current_thread() is loop_thread

    got, same_thread = asyncio.run(main())
    assert got == [0, 1, 2] and same_thread
    # The loop is closed now: the next batch removes the subscriber.
    notifier.tell(Deliver([note(3)]))
    assert stats(notifier) == NotifierStats(subscribers=0, delivered=3, dropped=0)


def test_full_asyncio_queue_drops_and_counts(
    notifier: pykka.ActorRef[Any], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="conduit_mcp")

    async def main() -> int:
        q: asyncio.Queue[ServerNotification] = asyncio.Queue(maxsize=1)
        notifier.ask(Subscribe(q), timeout=5)
        notifier.tell(Deliver([note(0), note(1), note(2)]))
        first = await asyncio.wait_for(q.get(), 5)  # the whole batch was put in one callback
        assert q.empty()
        return first.params["i"]

    assert asyncio.run(main()) == 0
    assert stats(notifier).dropped == 2
    assert "dropped 2 notification(s)" in caplog.text and SECRET not in caplog.text


def test_asyncio_queue_subscribed_off_loop_is_refused() -> None:
    with pytest.raises(Error) as err:
        Subscribe(asyncio.Queue())
    assert (err.value.kind, err.value.reason) == ("argument", "subscriber")


# -- subscribe, unsubscribe, filters ------------------------------------------------------------


def test_unsubscribe_stops_delivery(notifier: pykka.ActorRef[Any]) -> None:
    a: queue.SimpleQueue[ServerNotification] = queue.SimpleQueue()
    b: queue.SimpleQueue[ServerNotification] = queue.SimpleQueue()
    notifier.tell(Subscribe(a))
    notifier.tell(Subscribe(b))
    notifier.tell(Deliver([note(0)]))
    assert notifier.ask(Unsubscribe(a), timeout=5) is True
    assert notifier.ask(Unsubscribe(a), timeout=5) is False
    notifier.tell(Deliver([note(1)]))
    assert stats(notifier).subscribers == 1
    assert [n.params["i"] for n in drain(b, 2)] == [0, 1]
    assert a.get_nowait() == note(0) and a.empty()


def test_bound_method_unsubscribes_with_a_fresh_bound_method(
    notifier: pykka.ActorRef[Any],
) -> None:
    class Handler:
        def on(self, n: ServerNotification) -> None:
            pass

    h = Handler()
    notifier.tell(Subscribe(h.on))
    assert notifier.ask(Unsubscribe(h.on), timeout=5) is True


def test_method_filter(notifier: pykka.ActorRef[Any]) -> None:
    tools: queue.SimpleQueue[ServerNotification] = queue.SimpleQueue()
    every: queue.SimpleQueue[ServerNotification] = queue.SimpleQueue()
    notifier.tell(Subscribe(tools, frozenset({TOOLS})))
    notifier.tell(Subscribe(every, None))
    notifier.tell(Deliver([note(0), note(1, TOOLS), note(2)]))
    assert stats(notifier).delivered == 4
    assert drain(tools, 1) == [note(1, TOOLS)] and tools.empty()
    assert [n.params["i"] for n in drain(every, 3)] == [0, 1, 2]


def test_resubscribing_replaces_the_filter_and_keeps_the_place(
    notifier: pykka.ActorRef[Any],
) -> None:
    seen: list[str] = []

    def first(n: ServerNotification) -> None:
        seen.append("first")

    def second(n: ServerNotification) -> None:
        seen.append("second")

    notifier.tell(Subscribe(first, [TOOLS]))
    notifier.tell(Subscribe(second))
    assert notifier.ask(Subscribe(first, None), timeout=5) is False
    notifier.tell(Deliver([note(0)]))
    assert stats(notifier).subscribers == 2
    assert seen == ["first", "second"]


def test_replies_are_answered_when_given(notifier: pykka.ActorRef[Any]) -> None:
    q: queue.SimpleQueue[ServerNotification] = queue.SimpleQueue()
    sub_reply, unsub_reply = SyncReply(), SyncReply()
    notifier.tell(Subscribe(q, reply=sub_reply))
    assert sub_reply.queue.get(timeout=5) == (OK, True)
    notifier.tell(Unsubscribe(q, reply=unsub_reply))
    assert unsub_reply.queue.get(timeout=5) == (OK, True)


def test_invalid_subscriber_fails_in_the_callers_thread() -> None:
    with pytest.raises(Error) as err:
        Subscribe(42)
    assert (err.value.kind, err.value.reason) == ("argument", "subscriber")
    with pytest.raises(Error) as err:
        Unsubscribe("nope")
    assert (err.value.kind, err.value.reason) == ("argument", "subscriber")
    with pytest.raises(Error) as err:
        Subscribe(print, "notifications/message")
    assert (err.value.kind, err.value.reason) == ("argument", "methods")


def test_subscriber_count_through_a_proxy(notifier: pykka.ActorRef[Any]) -> None:
    proxy = notifier.proxy()
    assert proxy.subscriber_count().get(timeout=5) == 0
    notifier.tell(Subscribe(print))
    assert proxy.subscriber_count().get(timeout=5) == 1


def test_unknown_message_is_ignored(notifier: pykka.ActorRef[Any]) -> None:
    assert notifier.ask("what", timeout=5) is None
    assert notifier.is_alive()


# -- supervision --------------------------------------------------------------------------------


def test_lazy_supervisor_child(events: Events) -> None:
    sup = Supervisor.start([child_spec("c1")])
    assert dict(sup.ask(WhichChildren(), timeout=5)) == {"notifier": None}
    ref = sup.ask(StartChild("notifier"), timeout=5)
    assert sup.ask(StartChild("notifier"), timeout=5) is ref
    sink = Sink.start(events)
    ref.tell(Subscribe(sink))
    ref.tell(Deliver([note(0)]))
    assert events.wait_for(1) == [note(0)]
    sup.stop(timeout=5)
    assert not ref.is_alive()


def test_link_hears_a_normal_stop(link: Link, exits: Events) -> None:
    ref = Notifier.start("c1", link=link)
    ref.ask(Stats(), timeout=5)
    urn = ref.actor_urn
    ref.stop(timeout=5)
    assert exits.wait_for(1) == [(urn, None)]
