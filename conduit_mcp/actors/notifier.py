"""The notifier: the actor that runs user code for notifications, so the connection never does.

The connection never runs user code, and notifications reach subscribers in order, from a
thread of their own (docs/connection.md, "Notifications"). The connection tells this actor a :class:`Deliver` batch; the
actor hands each notification, in order of arrival, to each subscriber in subscription order
(:mod:`conduit_mcp.notifications` describes the kinds):

==================  ============================  =============================================
subscriber          delivery                      when it fails
==================  ============================  =============================================
``ActorRef``        ``tell``                      dead (``ActorDeadError``): removed at once
queue               ``put_nowait``                ``queue.Full``: that notification is dropped
                                                  for it, counted in ``dropped``, warned; other
                                                  errors: warned (type only), it stays
``asyncio.Queue``   ``put_nowait`` on its loop,   loop closed: removed; full: dropped, counted
                    one ``call_soon_threadsafe``  and warned (on the loop); a loop that has
                    per batch                     not run ``max_subscriber_backlog`` puts yet:
                                                  dropped and counted here
callable            queued for it (at most        raises: warned (type only), it stays;
                    ``max_subscriber_backlog``),  its queue full: that notification is
                    then called in this thread    dropped for it, counted in ``dropped``
==================  ============================  =============================================

A slow callable cannot make the notifier hold a flood (docs/connection.md, "Floods"): each
callable subscriber has its own bounded queue, and the queues are drained a slice at a time
(:class:`_Drain`, told to itself), so new batches keep being accepted (or dropped and
counted) between two slices and the actor's mailbox never grows behind a slow callback. Once
the client's ``stop()`` has begun (``halt`` is set), no subscriber is called again.

Warnings never show params (they may carry arguments or secrets): a subscriber's type or
function name, the method, the exception's type. Subscription changes apply from the next
batch: a ``Subscribe`` or ``Unsubscribe`` is a message like ``Deliver``, handled in arrival
order.

The notifier is a lazy supervisor child (:func:`child_spec`): a client nobody subscribes to
never starts its thread. It outlives a crashed connection: the restarted one tells it
:class:`Replay`, and hears every subscriber back (so it listens for them again). Its
subscribers outlive the notifier itself: they are kept in a dict the client's tree owns and
hands to every incarnation, so a crashed notifier loses at most the batch it was delivering
(docs/actor-tree.md). User code cannot crash it (every exception from a subscriber is
caught).
"""

from __future__ import annotations

import asyncio
import logging
import queue
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

import pykka

from conduit_mcp.actors.events import Consumers
from conduit_mcp.notifications import ServerNotification, Subscriber, subscriber_key
from conduit_mcp.otp.base import Link, SafeActor
from conduit_mcp.otp.flag import Flag
from conduit_mcp.otp.supervisor import ChildSpec, RestartType, child_spec_for
from conduit_mcp.protocol.server_logs import LOG_METHOD
from conduit_mcp.published import Deliveries
from conduit_mcp.server_logs import ServerLog

if TYPE_CHECKING:
    from conduit_mcp.replies import Reply

__all__ = [
    "Deliver",
    "Notifier",
    "NotifierStats",
    "Replay",
    "Stats",
    "Subscribe",
    "Unsubscribe",
    "child_spec",
]

logger = logging.getLogger("conduit_mcp.actors.notifier")


class Subscribe:
    """Subscribe ``sub`` to the methods in ``methods`` (``None``: every method).

    Validated when built, in the caller's thread (``Error("argument", ...)`` for a bad
    subscriber or filter; an ``asyncio.Queue``'s loop is captured there: see
    :meth:`Subscriber.of`). Subscribing a subscriber again replaces its filter and keeps its
    place. The answer (to an ``ask``, and to ``reply`` if given) is ``True`` for a new
    subscriber, ``False`` for a replaced filter.
    """

    __slots__ = ("subscriber", "reply")

    def __init__(
        self,
        sub: Any,
        methods: Iterable[str] | None = None,
        reply: Reply | None = None,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> None:
        self.subscriber = Subscriber.of(sub, methods, loop=loop)
        self.reply = reply


class Unsubscribe:
    """Remove ``sub``; the answer (and ``reply``'s) is whether it was subscribed."""

    __slots__ = ("key", "reply")

    def __init__(self, sub: Any, reply: Reply | None = None) -> None:
        self.key: Hashable = sub.key if isinstance(sub, Subscriber) else subscriber_key(sub)
        self.reply = reply


@dataclass(slots=True, frozen=True)
class Deliver:
    """Deliver ``notifications`` (in order) to every subscriber that wants each."""

    notifications: Sequence[ServerNotification]


@dataclass(slots=True, frozen=True)
class Replay:
    """A (re)started connection asks who is subscribed: each subscriber is told back to
    ``connection`` as a ``Consumers`` message, so it listens for them again (its copy of the
    subscribers died with the crashed incarnation; the notifier's did not)."""

    connection: Any


@dataclass(slots=True, frozen=True)
class Stats:
    """Ask: the answer is a :class:`NotifierStats`."""


class NotifierStats(NamedTuple):
    """Counters of one notifier incarnation."""

    subscribers: int
    """How many subscribers there are now."""
    delivered: int
    """Notifications handed to a subscriber (one per subscriber and notification)."""
    dropped: int
    """Notifications dropped because a subscriber's bounded queue was full."""


@dataclass(slots=True, frozen=True)
class _Drain:
    """Told by the notifier to itself: run a slice of the callable subscribers' queues."""


_DRAIN = _Drain()
#: Notifications one callable subscriber is handed per slice, at most.
_SLICE_ITEMS = 64
#: A slice ends once it has run this long (seconds), so a Deliver or a stop is not kept
#: waiting behind a long queue of slow callbacks.
_SLICE_SECONDS = 0.01
#: Seconds between two warnings about one subscriber's drops.
_WARN_EVERY = 10
#: Default of the ``max_subscriber_backlog`` option.
MAX_SUBSCRIBER_BACKLOG = 1000


class _Counter:
    """An int incremented from several threads (asyncio drops are counted on their loop)."""

    __slots__ = ("_lock", "value")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.value += n


class _Transit:
    """Notifications scheduled on an asyncio subscriber's loop (``sent``: the notifier's
    thread) and put into its queue there (``landed``: the loop's thread): a loop too busy to
    run the puts holds at most ``max_backlog`` of them."""

    __slots__ = ("sent", "landed")

    def __init__(self) -> None:
        self.sent = 0
        self.landed = 0


def _put_on_loop(
    target: asyncio.Queue[ServerNotification],
    items: list[ServerNotification],
    label: str,
    dropped: _Counter,
    transit: _Transit | None = None,
) -> None:
    """Runs on the queue's own loop: put the batch, dropping what does not fit."""
    if transit is not None:
        transit.landed += len(items)
    lost = 0
    for item in items:
        try:
            target.put_nowait(item)
        except asyncio.QueueFull:
            lost += 1
    if lost:
        dropped.add(lost)
        logger.warning("%s is full: dropped %d notification(s)", label, lost)


class Notifier(SafeActor):
    """Delivers a client's server notifications to its subscribers; see the module docstring.

    ``client_name`` names the client in log messages.
    """

    def __init__(
        self,
        client_name: str,
        subscribers: dict[Hashable, Subscriber] | None = None,
        *,
        link: Link | None = None,
        max_backlog: int = MAX_SUBSCRIBER_BACKLOG,
        halt: threading.Event | Flag | None = None,
        on_dropped: Callable[[str, int], None] | None = None,
        deliveries: Deliveries | None = None,
    ) -> None:
        super().__init__(link=link)
        # The connection's count of what it told this actor (the bound of its mailbox): what
        # a dead incarnation held is lost, so the count restarts here.
        self._deliveries = deliveries if deliveries is not None else Deliveries()
        self._deliveries.handled = self._deliveries.told
        # When each subscriber was last warned about drops (one warning per interval).
        self._warned: dict[Hashable, float] = {}
        # asyncio subscribers: what is scheduled on their loop and not yet put.
        self._transit: dict[Hashable, _Transit] = {}
        self.client_name = client_name
        # Server log messages go to Python logging from here, never from the connection.
        self._server_log = ServerLog(client_name)
        # Each callable subscriber's notifications not yet handed to it (bounded by
        # max_backlog), drained a slice at a time by _Drain.
        self._waiting: dict[Hashable, deque[ServerNotification]] = {}
        self._draining = False
        self._max_backlog = max_backlog
        # Set when the client's stop() begins: no subscriber is called after that.
        self._halt: threading.Event | Flag = halt if halt is not None else threading.Event()
        # Counts drops in telemetry (mcp.client.dropped, kind notification).
        self._on_dropped = on_dropped
        # Insertion order is subscription order; a re-subscribe keeps its place. The dict
        # belongs to the client's tree, so a restarted notifier has every subscriber; only
        # the notifier (one incarnation at a time) changes it.
        self._subs: dict[Hashable, Subscriber] = subscribers if subscribers is not None else {}
        self._delivered = 0
        self._dropped = _Counter()

    # -- queries (ask, or a proxy) -----------------------------------------------------------

    def subscriber_count(self) -> int:
        """How many subscribers there are."""
        return len(self._subs)

    @property
    def dropped(self) -> int:
        """How many notifications were dropped for a full queue, since this notifier started."""
        return self._dropped.value

    # -- messages ----------------------------------------------------------------------------

    def receive(self, message: Any) -> Any:
        if isinstance(message, Deliver):
            self._deliveries.handled += len(message.notifications)
            self._log(message.notifications)
            self._deliver(message.notifications)
            return None
        if message is _DRAIN:
            self._drain()
            return None
        if isinstance(message, Subscribe):
            return self._answer(message.reply, self._subscribe(message.subscriber))
        if isinstance(message, Unsubscribe):
            self._waiting.pop(message.key, None)
            self._transit.pop(message.key, None)
            return self._answer(message.reply, self._subs.pop(message.key, None) is not None)
        if isinstance(message, Stats):
            return NotifierStats(len(self._subs), self._delivered, self._dropped.value)
        if isinstance(message, Replay):
            self._replay(message.connection)
            return None
        return super().receive(message)

    # -- internals ---------------------------------------------------------------------------

    @staticmethod
    def _answer(reply: Reply | None, value: bool) -> bool:
        if reply is not None:
            reply.ok(value)
        return value

    def _subscribe(self, sub: Subscriber) -> bool:
        new = sub.key not in self._subs
        # Assigning an existing key keeps its position in the dict: the place is kept.
        self._subs[sub.key] = sub
        return new

    def _replay(self, connection: Any) -> None:
        try:
            for sub in list(self._subs.values()):
                connection.tell(Consumers(sub.key, sub.methods, True))
        except pykka.ActorDeadError:
            pass  # that incarnation died too; the next one asks again

    def _remove(self, sub: Subscriber, why: str) -> None:
        if self._subs.get(sub.key) is sub:
            del self._subs[sub.key]
            self._waiting.pop(sub.key, None)
            self._transit.pop(sub.key, None)
            logger.info(
                "client %s: notification subscriber %s removed: %s", self.client_name, sub.name, why
            )

    def _log(self, batch: Sequence[ServerNotification]) -> None:
        if self._halt.is_set():
            return
        for note in batch:
            if note.method == LOG_METHOD:
                try:
                    self._server_log.emit(note.params)
                except Exception as exc:  # a logging handler's own failure
                    logger.warning(
                        "client %s: logging a server log message raised %s",
                        self.client_name,
                        type(exc).__name__,
                    )

    def _deliver(self, batch: Sequence[ServerNotification]) -> None:
        subs = self._subs
        if not subs or not batch or self._halt.is_set():
            return
        order = list(subs.values())
        # One call_soon_threadsafe per asyncio subscriber and batch: one loop wake-up, not one
        # per notification; the loop runs callbacks in FIFO order, so order is kept.
        to_loops: dict[Hashable, list[ServerNotification]] = {}
        full: dict[Hashable, int] = {}
        delivered = 0
        for note in batch:
            method = note.method
            for sub in order:
                if not sub.wants(method) or subs.get(sub.key) is not sub:
                    continue
                kind = sub.kind
                if kind == "actor":
                    try:
                        sub.target.tell(note)
                    except pykka.ActorDeadError:
                        self._remove(sub, "the actor is dead")
                        continue
                elif kind == "queue":
                    try:
                        sub.target.put_nowait(note)
                    except queue.Full:
                        full[sub.key] = full.get(sub.key, 0) + 1
                        continue
                    except Exception as exc:
                        self._warn(sub, method, exc)
                        continue
                elif kind == "asyncio":
                    to_loops.setdefault(sub.key, []).append(note)
                else:
                    waiting = self._waiting.get(sub.key)
                    if waiting is None:
                        waiting = self._waiting[sub.key] = deque()
                    if len(waiting) >= self._max_backlog:
                        full[sub.key] = full.get(sub.key, 0) + 1
                    else:
                        waiting.append(note)
                    continue  # counted delivered when it is called (_drain)
                delivered += 1
        self._delivered += delivered
        if self._waiting and not self._draining:
            self._draining = True
            self.actor_ref.tell(_DRAIN)
        for key, count in full.items():
            self._dropped.add(count)
            if self._on_dropped is not None:
                self._on_dropped("notification", count)
            self._warn_full(key, subs[key].name, count)
        for key, items in to_loops.items():
            self._to_loop(subs[key], items)

    def _warn_full(self, key: Hashable, name: str, count: int) -> None:
        # At most one warning per subscriber and _WARN_EVERY seconds: a flood of drops must
        # not become a flood of log records (the counter has the numbers).
        now = time.monotonic()
        if now - self._warned.get(key, -_WARN_EVERY) < _WARN_EVERY:
            return
        self._warned[key] = now
        logger.warning(
            "client %s: notification subscriber %s is full: dropped %d notification(s) "
            "(warned at most every %ds; every drop is counted in mcp.client.dropped)",
            self.client_name,
            name,
            count,
            _WARN_EVERY,
        )

    def _drain(self) -> None:
        """Hand the callable subscribers their queued notifications, one each in
        subscription order per round (so each notification reaches them in that order),
        for at most ``_SLICE_SECONDS`` or ``_SLICE_ITEMS`` rounds; then tell ``_Drain`` again
        if anything is left: what arrived meanwhile (a Deliver, a stop) is handled in
        between."""
        self._draining = False
        waiting = self._waiting
        subs = self._subs
        halt = self._halt
        end = time.monotonic() + _SLICE_SECONDS
        delivered = 0
        for _ in range(_SLICE_ITEMS):
            if not waiting:
                break
            for key in list(waiting):
                sub = subs.get(key)
                items = waiting[key]
                if sub is None or not items:
                    del waiting[key]
                    continue
                if halt.is_set():
                    waiting.clear()
                    break
                note = items.popleft()
                try:
                    sub.target(note)
                except BaseException as exc:
                    # Whatever user code raises (even SystemExit): the subscriber stays,
                    # and the notifier, holding every other subscriber, keeps running.
                    self._warn(sub, note.method, exc)
                delivered += 1
                if not items:
                    del waiting[key]
            if time.monotonic() >= end:
                break
        self._delivered += delivered
        if waiting:
            self._draining = True
            self.actor_ref.tell(_DRAIN)

    def _to_loop(self, sub: Subscriber, items: list[ServerNotification]) -> None:
        loop = sub.loop
        assert loop is not None
        transit = self._transit.get(sub.key)
        if transit is None:
            transit = self._transit[sub.key] = _Transit()
        room = self._max_backlog - (transit.sent - transit.landed)
        if room < len(items):
            # The loop has not run the earlier puts yet: what does not fit is dropped.
            lost = len(items) - max(room, 0)
            items = items[: max(room, 0)]
            self._delivered -= lost
            self._dropped.add(lost)
            if self._on_dropped is not None:
                self._on_dropped("notification", lost)
            self._warn_full(sub.key, sub.name, lost)
            if not items:
                return
        try:
            label = f"client {self.client_name}: notification subscriber {sub.name}"
            loop.call_soon_threadsafe(
                _put_on_loop, sub.target, items, label, self._dropped, transit
            )
            transit.sent += len(items)
        except RuntimeError:
            # call_soon_threadsafe on a closed loop: nobody will ever read this queue.
            self._delivered -= len(items)
            self._remove(sub, "its event loop is closed")

    def _warn(self, sub: Subscriber, method: str, exc: BaseException) -> None:
        # The type only: an exception's message or traceback may quote the params.
        logger.warning(
            "client %s: notification subscriber %s raised %s on %s; it stays subscribed",
            self.client_name,
            sub.name,
            type(exc).__name__,
            method,
        )


def child_spec(
    client_name: str,
    subscribers: dict[Hashable, Subscriber] | None = None,
    *,
    id: str = "notifier",
    restart: RestartType = "permanent",
    shutdown: float = 5.0,
    max_backlog: int = MAX_SUBSCRIBER_BACKLOG,
    halt: threading.Event | Flag | None = None,
    on_dropped: Callable[[str, int], None] | None = None,
    deliveries: Deliveries | None = None,
) -> ChildSpec:
    """The lazy supervisor child for ``client_name``'s notifier (started on ``StartChild``)."""
    return child_spec_for(
        Notifier,
        client_name,
        subscribers,
        id=id,
        restart=restart,
        shutdown=shutdown,
        lazy=True,
        max_backlog=max_backlog,
        halt=halt,
        on_dropped=on_dropped,
        deliveries=deliveries,
    )
