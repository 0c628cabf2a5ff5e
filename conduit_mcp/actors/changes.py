"""The connection's change tracking: notifications, the cache, refreshes, listens and
resource subscriptions (docs/connection.md, "Notifications", "Cache", "Listens and resource
subscriptions"; docs/cache.md).

A :class:`ChangeTracker` is an object the connection holds (``Connection._changes``), with
its collaborators named in its constructor: the cache (it is the only writer), the published
values, the client's siblings (notifier, refresher, listen), the config, the telemetry
counters, and a narrow port (:class:`ConnectionPort`) for the few things it asks of the
connection (a request id, sending a message, a named timer, the era). The connection routes the change-tracking messages, timeouts, notifications and
life-cycle moments here, and this module decides what they mean.

* **Notifications** (all but progress and cancelled) go to the client's notifier actor, which
  runs subscribers' code; a ``list_changed`` burst is coalesced (the first at once, one
  trailing per 250 ms window: :class:`~conduit_mcp.protocol.coalesce.Coalescer`).
* **The cache** (:class:`~conduit_mcp.cache.Cache`) is written only here: lists a caller
  fetched (:class:`~.events.CacheStore`) and lists the refresher fetched. A ``list_changed``
  marks its lists stale at once; a delivered one refreshes a list that was ever fetched,
  through the refresher actor, at most twice per burst and once a second per list under a
  flood (:class:`~conduit_mcp.protocol.coalesce.RefreshGate`). Losing the connection marks
  every list stale.
* **Listens** (modern era): the filter is the union of what consumers want
  (:func:`~conduit_mcp.protocol.listen.desired_filter`), decided here and told to the
  listen-stream actor (:mod:`.listen`) as a :class:`~.listen.Want` whenever it changes. That
  actor owns the streams (opening, swapping, reopening, at most four) and routes a live
  listen's notifications back here (:class:`~.listen.ListenRouted`), with the
  ``subscriptionId`` removed; a listen whose stream dropped marks the cache stale. A call
  that changes the want is answered once that actor has acted on it
  (:class:`~.listen.WantSeen`), so the caller's next change is announced. Legacy HTTP:
  every session entering ready wants its GET stream, which the same actor keeps open.
* **Resource subscriptions** survive reconnects: modern ones ride on the listen filter,
  legacy ones are ``resources/subscribe`` calls, sent again on every new session.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Hashable
from typing import Any, Protocol, cast

import pykka

from ..cache import Cache
from ..config import Config
from ..errors import Error
from ..notifications import (
    LIST_REFRESHED,
    OWN_PREFIX,
    TOOL_DEFINITION_CHANGED,
    ServerNotification,
)
from ..protocol import listen as lsn
from ..protocol.cache_rules import Kind, ttl_ms
from ..protocol.cache_rules import scope as page_scope
from ..protocol.coalesce import Coalescer, RefreshGate
from ..protocol.server_logs import LOG_METHOD, declared
from ..published import Published
from ..server_logs import ServerLog
from ..status import Era
from ..telemetry import ConnectionTelemetry
from .events import COALESCE, REFRESH, CacheStore, Call, Consumers, SetAuth, WatchTask
from .listen import ListenBack, ListenDropped, ListenRouted, Want, WantSeen
from .notifier import Deliver, Replay
from .refresher import Refresh, Refreshed, RefreshFailed

log = logging.getLogger("conduit_mcp.connection")

_monotonic = time.monotonic

LIST_CHANGED_WINDOW = 0.25
REFRESH_INTERVAL = 1.0


class ConnectionPort(Protocol):
    """What the tracker asks of the connection that holds it (and nothing more)."""

    @property
    def state(self) -> str:
        """The connection's current state (listens are opened only in ``ready``)."""
        ...

    @property
    def era(self) -> Era | None:
        """``"modern"``, ``"legacy"``, or None before the first handshake."""
        ...

    @property
    def version(self) -> str | None:
        """The negotiated protocol version."""
        ...

    def new_id(self) -> int:
        """A fresh integer request id (the connection's counter, never reset)."""
        ...

    def send_internal(
        self, rid: int, method: str, params: dict[str, Any] | None, *, era: Era, version: str
    ) -> None:
        """Send a request of the connection's own (not a caller's)."""
        ...

    def send_raw(self, message: dict[str, Any]) -> None:
        """Send a JSON-RPC message as it is (nothing if there is no transport)."""
        ...

    def set_timeout(self, name: Hashable, seconds: float | None, event: Any) -> None:
        """Arm (``None``: cancel) the connection's named timer ``name``."""
        ...

    def use_credentials(self, spec: Any) -> None:
        """Send the credentials of transport spec ``spec`` from now on."""
        ...


class SiblingsPort(Protocol):
    """The client's lazy children, told by id (:class:`~conduit_mcp.otp.siblings.Siblings`)."""

    def tell(self, child_id: str, message: Any) -> bool: ...

    def get(self, child_id: str) -> pykka.ActorRef[Any] | None: ...


class ChangeTracker:
    """See the module docstring."""

    def __init__(
        self,
        conn: ConnectionPort,
        *,
        cache: Cache,
        published: Published,
        siblings: SiblingsPort,
        config: Config,
        telemetry: ConnectionTelemetry,
        client_name: str,
        handler_notes: Callable[[str, Any], None] | None = None,
    ) -> None:
        self._conn = conn
        self._cache = cache
        self._published = published
        self._siblings = siblings
        self._cfg = config
        self._tel = telemetry
        self._client_name = client_name
        published.cache = cache
        self._coalescer = Coalescer(LIST_CHANGED_WINDOW)
        self._gate = RefreshGate(REFRESH_INTERVAL)
        # who wants which notification methods (None: every method), by subscriber key
        self._consumers: dict[Any, frozenset[str] | None] = {}
        # kinds a caller or the refresher ever fetched: refreshed on list_changed
        self._fetched: set[str] = set()
        # kind -> when its last list_changed was heard (monotonic)
        self._changed_at: dict[str, float] = {}
        # Kept in Published: it outlives a crashed connection (its successor subscribes again).
        self._resource_uris: set[str] = published.resource_uris
        # the filter last told to the listen actor ({}: none)
        self._listen_want: dict[str, Any] = {}
        # legacy HTTP: the session whose GET stream the listen actor keeps open (0: none),
        # numbered by the sessions this connection entered ready with
        self._get_session = 0
        self._sessions = 0
        # The number of the last want told to the listen actor.
        self._told = 0
        # Replies held until the listen actor acted on the want their call changed:
        # (want number, reply, value)
        self._held: list[tuple[int, Any, Any]] = []
        self._quiet: set[int] = set()  # internal requests whose answers nobody waits for
        # A handler taking notifications: told each one delivered, and a listen consumer of
        # every kind (docs/connection.md, "Server-to-client requests").
        self._handler_notes = handler_notes
        # Server log messages also go to Python logging, from the notifier's thread.
        self._server_log = ServerLog(client_name)

    def replay_consumers(self, connection: pykka.ActorRef[Any]) -> None:
        """A restarted connection starts with no consumers, but the notifier kept its
        subscribers: it tells them back (``Consumers``) to ``connection``, which listens for
        them."""
        notifier = self._siblings.get("notifier")
        if notifier is not None:
            try:
                notifier.tell(Replay(connection))
            except pykka.ActorDeadError:
                pass

    # -- messages from the API and the refresher ---------------------------------------------

    def on_event(self, ev: Any) -> bool:
        """Handle a change-tracking message (any state); False if ``ev`` is not one."""
        t = type(ev)
        if t is CacheStore:
            told = self._told
            self._store(ev.kind, ev.items, ev.pages, ev.fetched_at, ev.credential)
            if ev.reply is not None:
                self._answer_after_want(told, ev.reply, None)
            return True
        if t is Refreshed:
            self._refresh_done(ev.kind, "ok")
            stored = self._store(ev.kind, ev.items, ev.pages, ev.fetched_at, ev.credential)
            self._deliver(LIST_REFRESHED, {"kind": ev.kind, "stored": stored})
            for watcher in self._published.refreshed:
                try:
                    watcher(ev.kind)
                except Exception:  # a watcher only tells: never let it fail the connection
                    pass
            return True
        if t is RefreshFailed:
            log.info(
                "refreshing the cached %s failed: %s/%s", ev.kind, ev.error.kind, ev.error.reason
            )
            self._refresh_done(ev.kind, "error")
            return True
        if t is Consumers:
            if ev.add:
                self._consumers[ev.key] = ev.methods
            else:
                self._consumers.pop(ev.key, None)
            self._update_listen()
            return True
        if t is WatchTask:
            if ev.push is not None:
                self._published.task_watch[ev.task_id] = ev.push
            else:
                self._published.task_watch.pop(ev.task_id, None)
            self._update_listen()
            return True
        if t is SetAuth:
            self.set_auth(ev)
            return True
        if t is ListenRouted:
            if ev.gen == self._gen():
                for note in ev.notifications:
                    self.on_notification(note.method, note.params, routed=True)
            return True
        if t is ListenDropped:
            if ev.gen == self._gen():
                self._cache.mark_stale()  # notifications may have been missed
            return True
        if t is ListenBack:
            self._listen_back(ev.restarted)
            return True
        if t is WantSeen:
            self._release(ev.seq)
            return True
        return False

    def on_timeout(self, ev: Any) -> bool:
        """Handle one of the tracker's named timeouts; False if ``ev`` is not one."""
        if ev == COALESCE:
            now = _monotonic()
            for method in self._coalescer.due(now):
                self._delivered_list_changed(method, None)
            self._arm(COALESCE, self._coalescer.next_deadline(), now)
            return True
        if ev == REFRESH:
            now = _monotonic()
            for kind in self._gate.due(now):
                self._start_refresh(kind, now)
            self._arm(REFRESH, self._gate.next_deadline(), now)
            return True
        return False

    def _arm(self, name: str, deadline: float | None, now: float) -> None:
        if deadline is None:
            self._conn.set_timeout(name, None, None)
        else:
            self._conn.set_timeout(name, max(0.0, deadline - now), name)

    def set_auth(self, ev: SetAuth) -> None:
        """``Client.set_auth``: new credentials for the transport; every private list is
        deleted at once (docs/cache.md)."""
        self._conn.use_credentials(ev.spec)
        self._cache.set_credential(ev.spec.credential())
        if ev.reply is not None:
            ev.reply.ok(None)

    def set_identity(self, identity: str | None) -> None:
        """An OAuth token's identity (principal, issuer, resource): the same one keeps the
        private lists, another deletes them at once (docs/cache.md, "Private results")."""
        self._cache.set_credential(identity)

    # -- server notifications ------------------------------------------------------------------

    def on_notification(self, method: str, params: Any, *, routed: bool = False) -> None:
        """A server notification the connection did not route itself, or one of a live
        listen the listen actor ``routed`` here."""
        if method == lsn.CANCELLED or method == lsn.ACKNOWLEDGED:
            return  # for a request of ours (the transport cancels), or a listen's: not routed
        if method.startswith(OWN_PREFIX):
            # A server posing as the client (a forged conduit_mcp/list_refreshed or
            # tool_definition_changed): dropped and counted, never delivered.
            self._tel.dropped()
            return
        if not routed:
            sid = lsn.subscription_id(params)
            if sid is not None:
                # Over stdio a listen's notifications come here, in order with the others;
                # routed only for a listen the listen actor has open, its id removed.
                if not (type(sid) is str and sid in self._published.live_listens):
                    self._tel.dropped()
                    return  # a listen that was closed, or never opened
                params = lsn.without_subscription(params)
        if method == lsn.TASK_STATUS:
            # A task's pushed status: handed to its poll loop (docs/tasks.md); a copy goes
            # to subscribers like any notification.
            task_id = params.get("taskId") if type(params) is dict else None
            push = self._published.task_watch.get(task_id) if type(task_id) is str else None
            if push is not None:
                push(params)
        kinds = lsn.STALE_KINDS.get(method)
        if kinds is None:
            self._deliver(method, params)
            return
        now = _monotonic()
        for kind in kinds:
            self._changed_at[kind] = now
            self._cache.mark_stale(cast(Kind, kind))  # at once; the refresh waits for delivery
        if self._coalescer.offer(method, now):
            self._delivered_list_changed(method, params)
        else:
            self._arm(COALESCE, self._coalescer.next_deadline(), now)

    def _delivered_list_changed(self, method: str, params: Any) -> None:
        self._deliver(method, params)
        for kind in lsn.STALE_KINDS.get(method, ()):
            if kind in self._fetched:
                self._request_refresh(kind)

    def _deliver(self, method: str, params: Any) -> None:
        # The handler's handle_notification takes the server's notifications only; the
        # client's own (conduit_mcp/list_refreshed, .../tool_definition_changed) are for
        # subscribers (docs/handler.md). A server's with that prefix never gets here.
        if self._handler_notes is not None and not method.startswith(OWN_PREFIX):
            self._handler_notes(method, params)
        # Nobody subscribed, and no notifier: nothing to tell (the notifier is started by the
        # first subscription; checked too, as a restarted connection learns its consumers
        # from it a moment after it starts).
        # A server log message is also wanted by Python logging when its level is enabled
        # (the notifier logs it: docs/telemetry.md, "Server logs").
        if (
            not self._consumers
            and self._siblings.get("notifier") is None
            and not (method == LOG_METHOD and self._server_log.wants(params))
        ):
            return
        # Bounded: while the notifier is max_subscriber_backlog behind, dropped and counted
        # (docs/connection.md, "Floods").
        deliveries = self._published.deliveries
        if deliveries.told - deliveries.handled >= self._cfg.max_subscriber_backlog:
            self._tel.overflow("notification", 1)
            return
        note = ServerNotification(self._client_name, method, params if type(params) is dict else {})
        self._tel.notification(method)
        deliveries.told += 1
        self._siblings.tell("notifier", Deliver((note,)))

    # -- the cache -----------------------------------------------------------------------------

    def _store(
        self,
        kind: str,
        items: tuple[Any, ...],
        pages: list[Any],
        fetched_at: float,
        credential: str | None,
    ) -> bool:
        """Write a fetched list (docs/cache.md); True if it is now the cached one."""
        first = kind not in self._fetched
        self._fetched.add(kind)
        if first:
            self._update_listen()  # a cached list is a consumer of its list_changed
        current = self._cache.entry(cast(Kind, kind))
        if current is not None and current.fetched_at > fetched_at:
            # A walk that started before the cached list's (a refresh that answered after a
            # caller's listing): its answer may be older, and it would be served as fresh.
            return False
        raws = [p for p in pages if isinstance(p, dict)]
        result = self._cache.put(
            cast(Kind, kind),
            items,
            fetched_at=fetched_at,
            ttl_ms=ttl_ms(raws),
            scope=page_scope(raws),
            max_ttl=self._cfg.max_cache_ttl,
            credential=credential,
        )
        if result.stored and self._changed_at.get(kind, float("-inf")) >= fetched_at:
            # fetched before a list_changed we already heard of: it may be the old list
            self._cache.mark_stale(cast(Kind, kind))
        for name in result.changed:
            self._tel.tool_changed()
            self._deliver(TOOL_DEFINITION_CHANGED, {"name": name})
        return result.stored

    def _request_refresh(self, kind: str) -> None:
        now = _monotonic()
        at = self._gate.request(kind, now)
        if at is None:
            return  # running or scheduled already: coalesced
        if at <= now:
            self._start_refresh(kind, now)
        self._arm(REFRESH, self._gate.next_deadline(), now)

    def _start_refresh(self, kind: str, now: float) -> None:
        self._gate.started(kind, now)
        self._tel.refresh(kind, "start")
        sent = self._siblings.tell(
            "refresher",
            Refresh(
                kind, self._cache.credential, self._cfg.request_timeout, self._cfg.max_list_bytes
            ),
        )
        if not sent:
            self._gate.finished(kind, now)

    def _refresh_done(self, kind: str, outcome: str) -> None:
        now = _monotonic()
        self._tel.refresh(kind, outcome)
        self._gate.finished(kind, now)
        self._arm(REFRESH, self._gate.next_deadline(), now)

    # -- the connection's life cycle -----------------------------------------------------------

    def ready(self) -> None:
        """Entering ready: listen (modern), or subscribe the resources again (legacy)."""
        if self._conn.era == "modern":
            self._update_listen()
            return
        level = self._published.log_level
        if level is not None and declared(self._published.capabilities):
            # A new session starts at the server's default level: the caller's is set again.
            rid = self._conn.new_id()
            self._quiet.add(rid)
            self._conn.send_raw(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "logging/setLevel",
                    "params": {"level": level},
                }
            )
        for uri in sorted(self._resource_uris):
            rid = self._conn.new_id()
            self._quiet.add(rid)
            self._conn.send_raw(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "resources/subscribe",
                    "params": {"uri": uri},
                }
            )
        self._want_get()

    def lost(self) -> None:
        """The connection is gone (or leaving ready): its listens with it; lists are stale."""
        self._quiet.clear()
        self._release(None)  # no listen goes out on this transport any more
        had_get, self._get_session = self._get_session, 0
        if self._listen_want:
            self._want_listen({})
        elif had_get:
            self._tell_listen()  # the GET stream is closed
        self._cache.mark_stale()

    def closed(self) -> None:
        """The connection stops: its cache answers ``cache_gone`` from now on."""
        self._release(None)
        self._cache.close()

    # -- resource subscriptions ----------------------------------------------------------------

    def resource_call(self, call: Call) -> bool:
        """``resources/subscribe``/``unsubscribe`` from the API: remembered, so they survive
        reconnects. Modern: answered here and carried by the listen filter. Legacy: False,
        the call is sent to the server as it is."""
        params = call.params or {}
        uri = params.get("uri")
        if type(uri) is not str:
            return False
        subscribe = call.method == "resources/subscribe"
        era = self._conn.era
        if (
            subscribe
            and era == "modern"
            and not lsn.advertised(self._published.capabilities, "resources", "subscribe")
        ):
            call.reply.fail(
                Error(
                    "unavailable",
                    "not_supported",
                    "the server does not advertise resources.subscribe",
                )
            )
            return True
        if subscribe:
            self._resource_uris.add(uri)
        else:
            self._resource_uris.discard(uri)
        if era != "modern":
            return False
        told = self._told
        self._update_listen()  # first: await_listening after this call waits for the new want
        self._answer_after_want(told, call.reply, {})
        return True

    # -- listens (modern) ------------------------------------------------------------------------
    # What to listen for is decided here; the listen-stream actor (listen.py) does the rest.

    def _update_listen(self) -> None:
        conn = self._conn
        if conn.era != "modern" or conn.state != "ready":
            return
        self._want_listen(
            lsn.desired_filter(
                self._published.capabilities,
                cached_kinds=self._fetched,
                subscriber_methods=(
                    [*self._consumers.values(), None]
                    if self._handler_notes is not None
                    else self._consumers.values()
                ),
                resource_uris=self._resource_uris,
                task_ids=self._published.task_watch,
            )
        )

    def _want_listen(self, want: dict[str, Any]) -> None:
        """Tell the listen actor a changed want (starting it for a first non-empty one)."""
        if want == self._listen_want:
            return
        self._listen_want = want
        # await_listening waits from now on: what the consumers want is not listened for yet
        self._published.want_listen(self._published.listen_want + 1)
        self._tell_listen()

    def _want_get(self) -> None:
        """Legacy HTTP, entering ready with a (new) session: its GET stream is wanted."""
        transport = self._published.transport
        if transport is None or getattr(transport, "kind", None) != "http":
            return  # stdio has no GET stream
        self._sessions += 1
        self._get_session = self._sessions
        self._tell_listen()

    def _answer_after_want(self, told: int, reply: Any, value: Any) -> None:
        """Answer ``reply`` now, or, if the call told the listen actor a new want, once it
        has acted on it (``WantSeen``): over stdio its listen request is then in the pipe
        before the caller's next request, so a change that request makes is announced."""
        if self._told != told:
            self._held.append((self._told, reply, value))
        else:
            reply.ok(value)

    def _release(self, seq: int | None) -> None:
        """Answer the held replies of wants up to ``seq`` (None: all)."""
        if not self._held:
            return
        keep = []
        for item in self._held:
            if seq is None or item[0] <= seq:
                item[1].ok(item[2])
            else:
                keep.append(item)
        self._held = keep

    def _tell_listen(self) -> None:
        """Tell the listen actor what is wanted now (starting it for a first want)."""
        transport = self._published.transport
        if transport is None:
            return
        wanted = bool(self._listen_want) or self._get_session != 0
        if not wanted and self._siblings.get("listen") is None:
            return  # nothing to close: no need to start the actor
        want = Want(
            self._published.listen_want,
            self._listen_want,
            transport.gen,
            transport,
            self._conn.version or "",
            self._get_session,
        )
        if self._siblings.tell("listen", want):
            self._told = want.seq

    def _listen_back(self, restarted: bool) -> None:
        """A listen actor started: tell it the want again. After a crash of its predecessor
        the cached lists are stale (notifications may have been missed)."""
        if not restarted:
            return  # the first one: it was started with the want
        self._cache.mark_stale()
        want, self._listen_want = self._listen_want, {}
        if want:
            self._want_listen(want)
        elif self._get_session:
            self._tell_listen()

    def _gen(self) -> int | None:
        transport = self._published.transport
        return transport.gen if transport is not None else None

    def listen_answer(self, m: Any) -> bool:
        """A response to a quiet request (nobody waits for it): consumed here."""
        mid = m.id
        if type(mid) is int and mid in self._quiet:
            self._quiet.discard(mid)
            return True
        return False
