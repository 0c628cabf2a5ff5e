"""The values one client's connection publishes for lock-free reads from any thread.

The connection is the only writer; it replaces whole frozen values (one reference store,
atomic under the GIL), so a reader on any thread sees either the old value or the new one,
never a mix, and never waits on the connection's mailbox. The object belongs to the client's
tree, not to one connection: what must outlive a crashed connection (its resource
subscriptions, the era it once negotiated) is kept here.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

from .protocol.failures import Failure
from .status import Status
from .transports.http_token import TokenCell


class Published:
    """The per-client values the connection publishes for lock-free reads."""

    __slots__ = (
        "status",
        "server_info",
        "capabilities",
        "instructions",
        "transport",
        "closing",
        "_changed",
        "_cond",
        "transitions",
        "cache",
        "listen",
        "listen_want",
        "live_listens",
        "resource_uris",
        "task_watch",
        "once_modern",
        "last_failure",
        "log_level",
        "deliveries",
        "token",
        "last_id",
        "watchers",
        "refreshed",
    )

    def __init__(self) -> None:
        self.status = Status("connecting")
        # The lock of every value below that threads wait on, and the Condition they wait
        # with: made by the first wait and dropped by the next notify, which wakes every
        # waiter it has (a Condition holds a deque of waiters: ~1.3 KiB a client, kept for
        # good though nothing waits once a client is ready).
        self._changed = threading.RLock()
        self._cond: threading.Condition | None = None
        self.transitions = 0
        self.server_info: Any = None
        self.capabilities: dict[str, Any] | None = None
        self.instructions: str | None = None
        self.transport: Any = None
        self.closing: list[Any] = []
        # The connection's cache (conduit_mcp.cache.Cache); a restarted connection has a new
        # one, and the old one answers cache_gone.
        self.cache: Any = None
        # The filter the server acknowledged for the live subscriptions/listen (None: none).
        self.listen: dict[str, Any] | None = None
        # The number of the filter the connection last asked the listen actor for: only an
        # acknowledgement of a listen for it is published (publish_listen_for).
        self.listen_want = 0
        # The ids of the listens the listen actor has open (replaced whole by it): the
        # connection routes a notification carrying one of them, and drops the others.
        self.live_listens: frozenset[str] = frozenset()
        # The resources the user subscribed to: the connection's, kept here so that a
        # restarted connection subscribes to them again.
        self.resource_uris: set[str] = set()
        # The tasks polled (task id -> what takes their notifications/tasks), kept here so
        # that a restarted connection listens for them again (docs/tasks.md). Written by the
        # connection only; the callback only hands the params to the I/O loop.
        self.task_watch: dict[str, Any] = {}
        # Once modern, never legacy: set when a handshake settles the modern era; every
        # later handshake (a reconnect, or a restarted connection after a crash) discovers
        # and never falls back to initialize (docs/connection.md, "Era discovery").
        self.once_modern = False
        # The connection's last failed attempt to connect (None once ready): what errors say.
        self.last_failure: Failure | None = None
        # The server log level the caller set (set_logging_level; None: never set): sent in
        # every modern request's _meta, and again to every new legacy session.
        self.log_level: str | None = None
        # Notifications told to the notifier and not yet taken from its mailbox: the
        # connection drops (and counts) one more past max_subscriber_backlog
        # (docs/connection.md, "Floods").
        self.deliveries = Deliveries()
        # The OAuth access token the HTTP transport stamps on every request (written by the
        # OAuth actor only; docs/connection.md, "Authorizing").
        self.token = TokenCell()
        # The last request id the connection allocated: saved when it ends, so a restarted
        # connection goes on from it (the counter is never reset, docs/connection.md,
        # "Requests"; an id never names two requests of one client).
        self.last_id = 0
        # Called with each new status, after it is published (the Hub's view is told this
        # way, docs/hub.md): each must only ``tell`` an actor, never block or raise.
        self.watchers: tuple[Callable[[Status], None], ...] = ()
        # Called with a list's kind ("tools", ...) once a refresh of it was stored, from the
        # connection (the Hub's view is told this way, with no notifier for it to start):
        # each must only ``tell`` an actor, never block or raise.
        self.refreshed: tuple[Callable[[str], None], ...] = ()

    def _notify(self) -> None:
        """Wake every thread waiting now (the caller holds ``_changed``)."""
        cond = self._cond
        if cond is not None:
            self._cond = None
            cond.notify_all()

    def _wait(self, timeout: float) -> None:
        """Wait for the next :meth:`_notify`, at most ``timeout`` s (the caller holds
        ``_changed``, which the wait releases meanwhile)."""
        cond = self._cond
        if cond is None:
            cond = self._cond = threading.Condition(self._changed)
        cond.wait(timeout)

    def publish(self, status: Status) -> None:
        """Replace the status and wake the threads waiting in :meth:`wait` (transitions
        only: never on the request path)."""
        with self._changed:
            self.status = status
            self.transitions += 1
            self._notify()
        for watcher in self.watchers:
            try:
                watcher(status)
            except Exception:  # a watcher only tells: never let it fail the connection
                pass

    def publish_listen(self, honoured: dict[str, Any] | None) -> None:
        """A listen was acknowledged (or lost): wake :meth:`wait_listen` (rare: never on the
        request path)."""
        with self._changed:
            self.listen = honoured
            self._notify()

    def want_listen(self, seq: int) -> None:
        """The connection wants a new filter (number ``seq``): :meth:`wait_listen` waits
        for a listen acknowledged for it."""
        with self._changed:
            self.listen_want = seq
            self.listen = None

    def publish_listen_for(self, seq: int, honoured: dict[str, Any] | None) -> None:
        """The listen actor: a listen for filter number ``seq`` was acknowledged (or lost);
        ignored if the connection already wants a newer filter."""
        with self._changed:
            if seq == self.listen_want:
                self.listen = honoured
                self._notify()

    def wait_listen(self, timeout: float) -> dict[str, Any] | None:
        """Block until a listen is acknowledged; its filter, or None on timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while self.listen is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._wait(remaining)
            return self.listen

    def wait(self, predicate: Callable[[Status], bool], timeout: float) -> Status | None:
        """Block (a caller's thread) until ``predicate(status)`` holds; None on timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate(self.status):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._wait(remaining)
            return self.status


class Deliveries:
    """Notifications told to the notifier (``told``: written by the connection only) and
    taken from its mailbox (``handled``: written by the notifier only); their difference is
    the notifier's backlog. A restarted notifier sets ``handled`` to ``told`` (what its dead
    incarnation held is lost)."""

    __slots__ = ("told", "handled")

    def __init__(self) -> None:
        self.told = 0
        self.handled = 0

    @property
    def backlog(self) -> int:
        return self.told - self.handled
