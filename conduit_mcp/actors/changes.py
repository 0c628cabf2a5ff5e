"""The connection's change tracking: notifications, the cache, refreshes, listens and
resource subscriptions (seed 000 "Notifications", "Change notifications", "Cache"; seed 003).

A mixin of :class:`~conduit_mcp.actors.connection.Connection`, like :mod:`.handshake`: the
connection routes a server notification here, and this module decides what it means.

* **Notifications** (all but progress and cancelled) go to the client's notifier actor, which
  runs subscribers' code; a ``list_changed`` burst is coalesced (the first at once, one
  trailing per 250 ms window: :class:`~conduit_mcp.protocol.coalesce.Coalescer`).
* **The cache** (:class:`~conduit_mcp.cache.Cache`) is written only here: lists a caller
  fetched (:class:`~.events.CacheStore`) and lists the refresher fetched. A ``list_changed``
  marks its lists stale at once; a delivered one refreshes a list that was ever fetched,
  through the refresher actor, at most twice per burst and once a second per list under a
  flood (:class:`~conduit_mcp.protocol.coalesce.RefreshGate`). Losing the connection marks
  every list stale.
* **Listens** (modern era): one ``subscriptions/listen`` whose filter is the union of what
  consumers want (:func:`~conduit_mcp.protocol.listen.desired_filter`); a new filter opens a
  new listen and closes the old one once the new one is acknowledged; a listen that ends is
  reopened after the backoff (one that dropped also marks the cache stale); at most four.
  Notifications are routed only for a live listen, with the ``subscriptionId`` removed.
* **Resource subscriptions** survive reconnects: modern ones ride on the listen filter,
  legacy ones are ``resources/subscribe`` calls, sent again on every new session.

Why no actor per listen (DESIGN lists ``Listen x0..4``): a listen is one long-lived request
on the connection's own transport; its notifications arrive on the same reader as every
other message. An actor would add a thread per stream to forward what the connection routes
anyway, against the target of a thousand clients per process.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pykka

from ..cache import Cache
from ..errors import Error
from ..notifications import LIST_REFRESHED, TOOL_DEFINITION_CHANGED, ServerNotification
from ..protocol import listen as lsn
from ..protocol.cache_rules import scope as page_scope
from ..protocol.cache_rules import ttl_ms
from ..protocol.coalesce import Coalescer, RefreshGate
from .events import COALESCE, LISTEN_REOPEN, REFRESH, CacheStore, Call, Consumers, SetAuth
from .notifier import Deliver, Replay
from .refresher import Refresh, Refreshed, RefreshFailed

log = logging.getLogger("conduit_mcp.connection")

_monotonic = time.monotonic

#: seed 000: "At most four listens exist at once."
MAX_LISTENS = 4
LIST_CHANGED_WINDOW = 0.25
REFRESH_INTERVAL = 1.0


class _Listen:
    __slots__ = ("filter", "acked", "seq")

    def __init__(self, filter: dict[str, Any], seq: int) -> None:
        self.filter = filter
        self.acked = False
        self.seq = seq


class ChangeTracking:
    """See the module docstring."""

    def _init_changes(self, client_name: str, siblings: Any, credential: str | None) -> None:
        self._client_name = client_name
        self._siblings = siblings
        self._cache = Cache(credential, heard=self._table.changed_at)
        self._shared.cache = self._cache
        self._coalescer = Coalescer(LIST_CHANGED_WINDOW)
        self._gate = RefreshGate(REFRESH_INTERVAL)
        self._consumers: dict[Any, frozenset[str] | None] = {}
        self._fetched: set[str] = set()
        self._changed_at: dict[str, float] = {}
        # Kept in Shared: it outlives a crashed connection (its successor subscribes again).
        self._resource_uris: set[str] = self._shared.resource_uris
        self._listens: dict[Any, _Listen] = {}
        self._listen_filter: dict[str, Any] = {}
        self._listen_attempt = 0
        self._listen_seq = 0
        self._quiet: set[int] = set()  # internal requests whose answers nobody waits for
        # A restarted connection (after a crash) starts with no consumers, but the notifier
        # kept its subscribers: it tells them back (Consumers), so this one listens for them.
        notifier = self._siblings_get("notifier")
        if notifier is not None:
            try:
                notifier.tell(Replay(self.actor_ref))
            except pykka.ActorDeadError:
                pass

    # -- messages from the API and the refresher ---------------------------------------------

    def _changes_event(self, ev: Any) -> bool:
        """Handle the change-tracking messages (any state); False if ``ev`` is not one."""
        t = type(ev)
        if t is CacheStore:
            self._store(ev.kind, ev.items, ev.pages, ev.fetched_at, ev.credential)
            if ev.reply is not None:
                ev.reply.ok(None)
            return True
        if t is Refreshed:
            self._refresh_done(ev.kind, "ok")
            stored = self._store(ev.kind, ev.items, ev.pages, ev.fetched_at, ev.credential)
            self._deliver(LIST_REFRESHED, {"kind": ev.kind, "stored": stored})
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
        if t is SetAuth:
            self._set_auth(ev)
            return True
        return False

    def _changes_timeout(self, ev: Any) -> bool:
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
        if ev == LISTEN_REOPEN:
            self._update_listen()
            return True
        return False

    def _arm(self, name: str, deadline: float | None, now: float) -> None:
        if deadline is None:
            self.set_timeout(name, None, None)
        else:
            self.set_timeout(name, max(0.0, deadline - now), name)

    # -- server notifications ------------------------------------------------------------------

    def _on_notification(self, method: str, params: Any) -> None:
        if method == "notifications/cancelled":
            # seed 000 / mcp-spec §6: a server may end a listen with a cancellation instead
            # of a final result; both are "subscription ended".
            rid = params.get("requestId") if type(params) is dict else None
            if self._is_listen(rid):
                self._listen_ended(rid, dropped=False)
            return
        sid = lsn.subscription_id(params)
        if sid is not None:
            if not self._is_listen(sid):
                self._tel.dropped()
                return  # a listen we closed, or never opened: not routed (seed 000)
            if method == lsn.ACKNOWLEDGED:
                self._listen_acked(sid, params)
                return
            params = lsn.without_subscription(params)
        elif method == lsn.ACKNOWLEDGED:
            return
        kinds = lsn.STALE_KINDS.get(method)
        if kinds is None:
            self._deliver(method, params)
            return
        now = _monotonic()
        for kind in kinds:
            self._changed_at[kind] = now
            self._cache.mark_stale(kind)  # at once; the refresh waits for the delivery
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
        # Nobody subscribed, and no notifier: nothing to tell (the notifier is started by the
        # first subscription; checked too, as a restarted connection learns its consumers
        # from it a moment after it starts).
        if not self._consumers and self._siblings_get("notifier") is None:
            return
        note = ServerNotification(
            self._client_name, method, params if type(params) is dict else None
        )
        self._tel.notification(method)
        self._siblings.tell("notifier", Deliver((note,)))

    def _siblings_get(self, child_id: str) -> Any:
        get = getattr(self._siblings, "get", None)
        return get(child_id) if get is not None else None

    # -- the cache -----------------------------------------------------------------------------

    def _store(
        self,
        kind: str,
        items: tuple[Any, ...],
        pages: list[Any],
        fetched_at: float,
        credential: str | None,
    ) -> bool:
        """Write a fetched list (seed 003's rules); True if it is now the cached one."""
        first = kind not in self._fetched
        self._fetched.add(kind)
        if first:
            self._update_listen()  # a cached list is a consumer of its list_changed
        current = self._cache.entry(kind)
        if current is not None and current.fetched_at > fetched_at:
            # A walk that started before the cached list's (a refresh that answered after a
            # caller's listing): its answer may be older, and it would be served as fresh.
            return False
        raws = [p for p in pages if isinstance(p, dict)]
        result = self._cache.put(
            kind,
            items,
            fetched_at=fetched_at,
            ttl_ms=ttl_ms(raws),
            scope=page_scope(raws),
            max_ttl=self._cfg.max_cache_ttl,
            credential=credential,
        )
        if result.stored and self._changed_at.get(kind, float("-inf")) >= fetched_at:
            # fetched before a list_changed we already heard of: it may be the old list
            self._cache.mark_stale(kind)
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
            "refresher", Refresh(kind, self._cache.credential, self._cfg.request_timeout)
        )
        if not sent:
            self._gate.finished(kind, now)

    def _refresh_done(self, kind: str, outcome: str) -> None:
        now = _monotonic()
        self._tel.refresh(kind, outcome)
        self._gate.finished(kind, now)
        self._arm(REFRESH, self._gate.next_deadline(), now)

    def _set_auth(self, ev: SetAuth) -> None:
        self._spec = ev.spec
        transport = self._transport
        if transport is not None and hasattr(transport, "set_credentials"):
            transport.set_credentials(ev.spec)
        # seed 003: every private list is deleted at once on a credential change.
        self._cache.set_credential(ev.spec.credential())
        if ev.reply is not None:
            ev.reply.ok(None)

    # -- connection life cycle -----------------------------------------------------------------

    def _changes_ready(self) -> None:
        """Entering ready: listen (modern), or subscribe the resources again (legacy)."""
        self._listen_attempt = 0
        if self._era == "modern":
            self._update_listen()
            return
        for uri in sorted(self._resource_uris):
            rid = self._new_id()
            self._quiet.add(rid)
            self._send_raw(
                {
                    "jsonrpc": "2.0",
                    "id": rid,
                    "method": "resources/subscribe",
                    "params": {"uri": uri},
                }
            )

    def _changes_lost(self) -> None:
        """The connection is gone (or leaving ready): its listens with it; lists are stale."""
        self._listens.clear()
        self._listen_filter = {}
        self._quiet.clear()
        self._unpublish_listen()
        self.set_timeout(LISTEN_REOPEN, None, None)
        self._cache.mark_stale()

    def _changes_closed(self) -> None:
        self._cache.close()

    # -- resource subscriptions ----------------------------------------------------------------

    def _resource_call(self, call: Call) -> bool:
        """``resources/subscribe``/``unsubscribe`` from the API: remembered, so they survive
        reconnects. Modern: answered here and carried by the listen filter. Legacy: False,
        the call is sent to the server as it is."""
        params = call.params or {}
        uri = params.get("uri")
        if type(uri) is not str:
            return False
        subscribe = call.method == "resources/subscribe"
        if (
            subscribe
            and self._era == "modern"
            and not lsn.advertised(self._shared.capabilities, "resources", "subscribe")
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
        if self._era != "modern":
            return False
        call.reply.ok({})
        self._update_listen()
        return True

    # -- listens (modern) ------------------------------------------------------------------------

    def _is_listen(self, rid: Any) -> bool:
        try:
            return rid in self._listens
        except TypeError:  # an unhashable id from a broken server
            return False

    def _update_listen(self) -> None:
        if self._era != "modern" or self.state != "ready":
            return
        want = lsn.desired_filter(
            self._shared.capabilities,
            cached_kinds=self._fetched,
            subscriber_methods=self._consumers.values(),
            resource_uris=self._resource_uris,
        )
        if want == self._listen_filter:
            return
        # await_listening waits from now on: what the consumers want is not listened for yet
        self._unpublish_listen()
        if not want:
            for rid in list(self._listens):
                self._close_listen(rid)
            self._listen_filter = {}
            return
        if len(self._listens) >= MAX_LISTENS:
            return  # re-evaluated when one ends or is acknowledged
        rid = self._new_id()
        self._listen_seq += 1
        self._listens[rid] = _Listen(want, self._listen_seq)
        self._listen_filter = want
        self._send_internal(
            rid, lsn.LISTEN, {"notifications": want}, era="modern", version=self._version or ""
        )

    def _listen_acked(self, rid: Any, params: Any) -> None:
        listen = self._listens[rid]
        listen.acked = True
        self._listen_attempt = 0
        honoured = params.get("notifications") if type(params) is dict else None
        if honoured != listen.filter:
            log.info("the server honours only part of the listen filter")
        if listen.filter is self._listen_filter:  # the newest: what consumers want now
            self._shared.publish_listen(dict(honoured) if type(honoured) is dict else {})
        # seed 000: the old listen closes once the new one is acknowledged.
        for other, older in list(self._listens.items()):
            if older.seq < listen.seq:
                self._close_listen(other)
        self._update_listen()

    def _unpublish_listen(self) -> None:
        if self._shared.listen is not None:
            self._shared.publish_listen(None)

    def _close_listen(self, rid: Any) -> None:
        self._listens.pop(rid, None)
        transport = self._transport
        if transport is not None:
            try:
                transport.cancel(rid, "listen_closed")
            except Exception as exc:
                log.debug("listen cancel not sent: %s", type(exc).__name__)

    def _listen_ended(self, rid: Any, *, dropped: bool) -> None:
        """The server ended a listen (a final result, an error, ``notifications/cancelled``)
        or its stream dropped: reopen after the backoff (seed 000)."""
        listen = self._listens.pop(rid, None)
        if listen is None:
            return
        if dropped:
            self._cache.mark_stale()  # notifications may have been missed
        if listen.filter is self._listen_filter:
            self._listen_filter = {}
            self._unpublish_listen()
            self._listen_attempt += 1
            delay = self._backoff(self._listen_attempt)
            self.set_timeout(LISTEN_REOPEN, delay, LISTEN_REOPEN)

    def _listen_answer(self, m: Any) -> bool:
        """A response to a listen or a quiet request: consumed here."""
        mid = m.id
        if self._is_listen(mid):
            self._listen_ended(mid, dropped=False)
            return True
        if type(mid) is int and mid in self._quiet:
            self._quiet.discard(mid)
            return True
        return False
