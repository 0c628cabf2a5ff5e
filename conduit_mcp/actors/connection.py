"""The connection: one client's router to one MCP server (docs/connection.md).

A gen_statem-style actor. It allocates request ids, keeps the pending map, enforces
deadlines and limits, and routes responses and progress. It never runs user code: replies go
through :mod:`conduit_mcp.replies` channels, progress callbacks run in the caller's thread,
and the only user function it calls is the guarded ``backoff``.

| State          | Does                                              | Leaves to                     |
|----------------|---------------------------------------------------|-------------------------------|
| connecting     | starts the transport, bounded by request_timeout  | discovering, initializing     |
|                |                                                   | (legacy pin / prior), reconn. |
| discovering    | sends ``server/discover`` (probe_timeout when     | ready (modern), initializing  |
|                | probing in auto mode), classifies the outcome     | (legacy evidence),            |
|                |                                                   | reconnecting, closed          |
| initializing   | legacy ``initialize`` + ``notifications/initialized`` | ready, reconnecting, closed |
| ready          | sends requests; ``stable_after`` resets attempts; | reconnecting, discovering     |
|                | the optional health check                         | (-32022 re-negotiation),      |
|                |                                                   | authorizing (OAuth, 401/403)  |
| authorizing    | OAuth only: the OAuth actor finds or renews a     | ready or the handshake state; |
|                | token; requests wait (fail at once while a person | closed (OAuth failure),       |
|                | must act: ``authorization_required``)             | reconnecting                  |
| reconnecting   | waits ``backoff(attempt)``                        | connecting, closed            |
|                |                                                   | (max_reconnects)              |
| closed         | answers every request ``closed`` at once          | connecting (``reconnect()``)  |

The states are a closed set (``Connection.STATES``, checked when the class is created). The
handshake states (``discovering``, ``initializing``) are in :mod:`.handshake`, what HTTP
refusals and broken streams mean in :mod:`.http_outcomes`, ``authorizing`` in
:mod:`.authorizing`; every attribute these share is
declared in :class:`~.core.ConnectionCore`; the messages and events are in :mod:`.events`.
Each state dispatches an event by its exact type through a class-level table (the
``_IN_<STATE>`` tables at the end of the class, and ``_COMMON`` for what every state handles
alike). Notifications, the cache, refreshes, listens and resource subscriptions are the
:class:`~.changes.ChangeTracker`'s, an object the connection holds.

What outlives a crash of this actor (docs/actor-tree.md): calls in flight fail
``transport``/``connection_crashed`` (they may have run), queued ones
``unavailable``/``connection_crashed`` (never sent); the subscribers are kept by the
notifier, the resource subscriptions and "once modern, never legacy" in
:class:`~conduit_mcp.published.Published`, so the restarted connection carries on with them.

Requests that arrive before ``ready`` are postponed (at most ``max_queued``, counted with
``await_ready`` waiters) and replayed on entering ``ready``, where the deadline is checked
again. Every request has an absolute deadline timer; when it fires the server is told to
cancel and the caller gets ``timeout``. Ids come from a counter never reset, so a late frame
from an earlier attempt can never match a current request. On losing the transport every
in-flight request fails with ``transport``; nothing that may have run is retried.
"""

from __future__ import annotations

import logging
import sys
import time
from dataclasses import replace
from typing import Any, ClassVar

from ..backoff import GuardedBackoff
from ..cache import Cache
from ..config import Config
from ..errors import Error
from ..otp.base import ActorCrashed, Link
from ..otp.statem import NextEvent, Postpone, StateTimeout, Step, Stop
from ..protocol import messages as msgs
from ..protocol.failures import (
    Failure,
    closed_message,
    is_permanent,
    not_ready_message,
    stderr_tail,
)
from ..protocol.failures import describe as describe_failure
from ..protocol.jsonrpc import (
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorResponse,
    Notification,
    Request,
    Response,
    server_error,
)
from ..protocol.server_logs import set_level
from ..protocol.skills import METHODS as SKILL_METHODS
from ..protocol.skills import refusal as skill_refusal
from ..protocol.tasks import task_refusal
from ..protocol.versions import LATEST_LEGACY, LATEST_MODERN
from ..published import Published
from ..telemetry import NO_CONNECTION_TELEMETRY, ConnectionTelemetry
from ..transports.base import (
    FrameProblem,
    Inbound,
    RequestFailed,
    SessionExpired,
    StreamBroken,
    TransportDown,
    TransportUp,
)
from ..transports.http_spec import is_oauth
from .admission import gate_for
from .authorizing import NOT_MINE, AuthorizingStates
from .changes import ChangeTracker, SiblingsPort
from .core import Handlers, TransportFactory
from .events import (
    ADMITTED,
    CONNECT,
    HEALTH,
    HEALTH_TIMEOUT,
    STABLE,
    STATE_TIMEOUT,
    TURN_LEASE,
    Abandon,
    AuthFailed,
    AwaitingUser,
    AwaitReady,
    CacheStore,
    Call,
    Consumers,
    Deadline,
    OAuthBack,
    ReconnectNow,
    RootsChanged,
    RoundRetry,
    Served,
    ServeExpired,
    SetAuth,
    TokenReady,
    WatchTask,
    transport_error,
)
from .handshake import HandshakeStates
from .http_outcomes import HttpOutcomes
from .listen import ListenBack, ListenDropped, ListenRouted, StreamGaveUp, WantSeen
from .pending import Drops, PendingTable
from .refresher import Refreshed, RefreshFailed
from .serving import ServerWork, total_timeout_error, wants_notifications

log = logging.getLogger("conduit_mcp.connection")

_monotonic = time.monotonic

_RESOURCE_SUBS = frozenset({"resources/subscribe", "resources/unsubscribe"})
#: Handled by the connection in both eras (``_set_log_level``).
SET_LEVEL = "logging/setLevel"

#: The methods :meth:`Connection._send_call` hands to ``_special_call`` first.
_SPECIAL = _RESOURCE_SUBS | {SET_LEVEL} | frozenset(SKILL_METHODS)

#: At most this many requests are held in one burst before they are written (receive()).
CORK_FRAMES = 32

# The messages the ChangeTracker handles, in any state (the listen actor's included).
_CHANGE_EVENTS = (
    CacheStore,
    Refreshed,
    RefreshFailed,
    Consumers,
    SetAuth,
    WatchTask,
    ListenRouted,
    ListenDropped,
    ListenBack,
    WantSeen,
)

__all__ = ["Abandon", "AwaitReady", "Call", "Connection", "ReconnectNow"]


class _NoSiblings:
    """A connection started on its own (tests): nobody to notify, nothing refreshes."""

    def tell(self, child_id: str, message: Any) -> bool:
        return False

    def get(self, child_id: str) -> Any:
        return None


class Connection(AuthorizingStates, HttpOutcomes, HandshakeStates):
    """See the module docstring for the state table."""

    #: The connection's states, a closed set (checked by Statem when the class is created);
    #: the same names as ``Status.state``.
    STATES: ClassVar[tuple[str, ...]] = (
        "connecting",
        "discovering",
        "initializing",
        "ready",
        "authorizing",
        "reconnecting",
        "closed",
    )

    def __init__(
        self,
        transport_spec: Any,
        config: Config,
        shared: Published,
        *,
        transport_factory: TransportFactory,
        link: Link | None = None,
        telemetry: ConnectionTelemetry | None = None,
        client_name: str = "client",
        siblings: SiblingsPort | None = None,
    ) -> None:
        super().__init__(link=link)
        # Every attribute is declared, typed and explained in ConnectionCore (core.py).
        self._tel = telemetry or NO_CONNECTION_TELEMETRY
        self._spec = transport_spec
        self._cfg = config
        self._shared = shared
        self._factory = transport_factory
        self._backoff = GuardedBackoff(config.backoff, config.backoff_base, config.backoff_max)
        self._transport = None
        self._corked = None
        self._corked_frames = 0
        self._gate = gate_for(transport_spec)
        self._has_turn = False
        self._memory = {}
        self._gen = 0
        self._last_id = shared.last_id  # never reset: a crashed predecessor's ids go on
        self._table = PendingTable(config.max_inbox, Drops(self._tel.overflow))
        self._pending = self._table.calls
        self._queued = 0
        self._deferred = None
        self._health_id = None
        self._attempt = 0
        self._delay = 0.0
        self._reason = None
        self._auth_error = None
        self._last_failure = None
        self._degraded = None
        self._era = None
        self._version = None
        self._origin = None
        self._next_legacy = config.prior == "legacy"
        self._next_origin = "prior" if self._next_legacy else None
        self._probe_id = None
        self._probe_offered = LATEST_MODERN
        self._probe_retried = False
        self._probing = False
        self._late_probe_id = None
        self._modern_hint = False
        self._init_id = None
        self._init_offered = LATEST_LEGACY
        self._legacy_offer = None
        self._oauth = is_oauth(getattr(transport_spec, "auth", None))
        self._auth_seq = 0
        self._auth_ask = None
        self._auth_resume = "ready"
        self._auth_user = False
        self._auth_call = None
        self._auth_refusals = (0, 0)
        choice = config.protocol
        # Sse speaks the legacy era only: straight to initialize, never a probe (docs/sse.md).
        legacy_only = getattr(transport_spec, "legacy_only", False) and choice.mode == "auto"
        self._mode = "legacy" if legacy_only else choice.mode
        self._pinned = choice.version
        # The request hot path reads these on every call: keep them flat.
        self._client_info = dict(config.client_info)
        self._capabilities = dict(config.capabilities)
        # What each request declares: the capabilities, plus the Tasks extension in the
        # modern era when the tasks option says so (set at discovery; docs/tasks.md).
        self._request_caps: dict[str, Any] = self._capabilities
        self._task_rounds = 0  # ids of task input rounds (docs/tasks.md)
        self._siblings = siblings or _NoSiblings()
        handler = config.handler
        notes = handler is not None and wants_notifications(handler)
        # Server requests and modern input rounds, answered by the handler actor (serving.py).
        self._work = ServerWork(
            self,
            capabilities=self._capabilities,
            has_handler=handler is not None,
            handler_notes=notes,
            handler_timeout=config.handler_timeout,
            max_total_timeout=config.max_total_timeout,
            max_input_rounds=config.max_input_rounds,
            max_server_requests=config.max_server_requests,
            max_round_inputs=config.max_round_inputs,
        )
        credential = getattr(transport_spec, "credential", None)
        # Notifications, the cache, refreshes, listens, resource subscriptions (changes.py).
        self._changes = ChangeTracker(
            self,
            cache=Cache(
                credential() if callable(credential) else None, heard=self._table.changed_at
            ),
            published=shared,
            siblings=self._siblings,
            config=config,
            telemetry=self._tel,
            client_name=client_name,
            handler_notes=self._work.notify if notes else None,
        )
        self._changes.replay_consumers(self.actor_ref)

    def __repr__(self) -> str:
        return f"<Connection state={getattr(self, 'state', '?')} gen={self._gen}>"

    def receive(self, message: Any) -> Any:
        """The statem's, then the end of a burst: requests sent while more messages waited in
        the mailbox were held by the transport (``_send_call``); they are written at once
        (one syscall over stdio, one hand-off to the I/O loop over HTTP) when the mailbox is
        empty (in a caller's thread, ``tell_here``: at the end of the caller's batch, see
        :meth:`_more_coming`), when a message other than a request was handled, or at
        :data:`CORK_FRAMES` of them, so a request is never held behind more than that many
        others, nor past the next message that is not one. (The one message that skips ``receive``, SafeActor's
        start check ``PING``, comes only before the connection can be ready.)"""
        try:
            return super().receive(message)
        finally:
            if self._corked is not None:
                self._uncork_after(message)

    def _uncork_after(self, message: Any) -> None:
        corked = self._corked
        if corked is not None and (
            type(message) is not Call
            or self._corked_frames >= CORK_FRAMES
            or not self._more_coming()
        ):
            self._corked = None
            self._corked_frames = 0
            try:
                corked.flush()
            except Exception as exc:  # a dying transport must not take the router down
                log.debug("flush failed: %s", type(exc).__name__)

    def _handle_here(self, message: Any) -> None:
        """A request sent by its caller's thread (``tell_here``): what :meth:`receive`
        does with it (the statem's receive and its dispatch to ``on_ready``), without the
        eight frames between (benchmarks/opcodes.py counts a call's). When the statem has
        internal events or zero-time timeouts to handle first, it goes the long way; what
        the send raises fails the actor as it would there."""
        if self._queue or self._timers.has_zero or type(message) is not Call:
            super()._handle_here(message)
            return
        try:
            try:
                self._send_call(message)
                if self._queue or self._timers.has_zero:
                    self._drain()
            finally:
                if self._corked is not None:
                    self._uncork_after(message)
        except Exception:
            self._failed_here(sys.exc_info())
        except BaseException as exc:  # as SafeActor.on_receive
            crashed = ActorCrashed(exc)
            crashed.__cause__ = exc
            self._failed_here((ActorCrashed, crashed, exc.__traceback__))

    def may_run_here(self, message: Any) -> bool:
        """A request told to an idle connection in ``ready`` is sent by the caller's own
        thread (:func:`~conduit_mcp.otp.pooled.tell_here`; ``Handle.try_tell``): sending one
        is short, never blocks (a transport's ``send`` only writes to a non-blocking pipe
        or hands the frame to the I/O loop) and runs no user code."""
        return type(message) is Call and self._state == "ready" and not self._stopping

    def _more_coming(self) -> bool:
        """Whether more requests may follow in this burst: messages wait in the mailbox, or,
        in a caller's thread (tell_here), more of the caller's batch; what others told
        meanwhile then goes to a pool worker, and the caller's frames do not wait for it."""
        left = self.here_left
        return left > 0 if left >= 0 else not self.actor_inbox.empty()

    # -- statem hooks -------------------------------------------------------------------------

    def init_state(self) -> tuple[str, list[Any]]:
        return "connecting", [NextEvent(CONNECT)]

    def terminate(self, reason: BaseException | None) -> None:
        self._shared.last_id = self._last_id  # first: the next incarnation goes on from it
        self._give_turn()  # a stop or a crash mid-handshake gives its turn back
        self._fail_deferred()
        # A crash fails what was in flight as `transport` (it may have run); a stop as `closed`.
        err = (
            Error("closed", "stopped", "the client was stopped")
            if reason is None
            else Error("transport", "connection_crashed", "the connection actor crashed")
        )
        self._fail_pending(err)
        # Queued requests were never sent: after a crash they are safe to send again.
        queued_err = (
            err
            if reason is None
            else Error(
                "unavailable",
                "connection_crashed",
                "the connection actor crashed before this request was sent; it is safe to retry",
            )
        )
        for item in self.remove_postponed(lambda e: isinstance(e, (Call, AwaitReady))):
            item.reply.fail(queued_err)
        # The rest that waits for an answer (a set_auth, a reconnect, a cache store told
        # before the end) is answered too, or its caller would wait out its timeout. After
        # a crash it is done: the next incarnation starts with the credentials set_auth
        # published (ClientTree.spec), connects anyway, and has a new cache.
        for item in self.remove_postponed(
            lambda e: isinstance(e, (SetAuth, ReconnectNow, CacheStore))
        ):
            if item.reply is not None:
                if reason is None:
                    item.reply.fail(err)
                else:
                    item.reply.ok(None)
        self._drop_transport()
        self._changes.closed()
        self._publish("closed", "stopped" if reason is None else "crashed")

    # Each state's events are dispatched by their type through a table (the _IN_<STATE>
    # tables at the end of the class); a type a state's table does not name goes to the
    # events every state handles alike (_COMMON). Named events (timers, CONNECT) are strings:
    # the ``str`` entry handles them by name.

    # -- connecting ---------------------------------------------------------------------------

    def enter_connecting(self, old: str) -> list[Any]:
        self._publish("connecting", self._reason)
        if not self._take_turn():
            return []  # it waits for its turn (admission.py): no deadline runs meanwhile
        return [StateTimeout(self._cfg.request_timeout, STATE_TIMEOUT)]

    def on_connecting(self, kind: str, ev: Any) -> Any:
        handler = self._IN_CONNECTING.get(type(ev))
        return self._common(kind, ev) if handler is None else handler(self, kind, ev)

    def _connecting_named(self, kind: str, ev: str) -> Any:
        if ev == CONNECT:
            if self._has_turn:
                self._start_transport()
            return None  # else ADMITTED starts it
        if ev == ADMITTED:
            if self._has_turn or not self._admitted():
                return None
            self._start_transport()
            return Step(None, [StateTimeout(self._cfg.request_timeout, STATE_TIMEOUT)])
        if kind == "state_timeout":
            self._drop_transport()
            return self._lost("connect_timeout")
        return self._common(kind, ev)

    def _connecting_up(self, kind: str, ev: TransportUp) -> Any:
        if ev.gen != self._gen:
            return None
        return self._handshake_state()

    def _connecting_down(self, kind: str, ev: TransportDown) -> Any:
        if ev.gen != self._gen:
            return None
        return self._lost(ev.reason, ev.detail)

    # -- ready --------------------------------------------------------------------------------

    def enter_ready(self, old: str) -> list[Any]:
        self._reason = None
        self._degraded = None  # a new session opens a new GET stream
        self._last_failure = self._shared.last_failure = None
        self._publish("ready", None)
        cfg = self._cfg
        self.set_timeout(STABLE, cfg.stable_after, STABLE)
        if cfg.health_check is not None:
            self.set_timeout(HEALTH, cfg.health_check, HEALTH)
        if old != "authorizing":  # back from a token: the same session, listening already
            self._changes.ready()
        return []

    def on_ready(self, kind: str, ev: Any) -> Any:
        t = type(ev)
        if t is Call:  # the request hot path: no table lookup, no extra frame
            self._send_call(ev)
            return None
        handler = self._IN_READY.get(t)
        return self._common(kind, ev) if handler is None else handler(self, kind, ev)

    def _ready_call(self, kind: str, ev: Call) -> None:
        self._send_call(ev)

    def _ready_down(self, kind: str, ev: TransportDown) -> Any:
        if ev.gen != self._gen:
            return None
        self._leave_ready()
        # Failed once the new state is published (enter_reconnecting/enter_closed), so
        # a caller who gets `transport` and then asks status() or await_ready() never
        # sees the stale "ready".
        self._deferred = transport_error(ev.reason, ev.detail)
        return self._lost(ev.reason, ev.detail)

    def _ready_await(self, kind: str, ev: AwaitReady) -> None:
        self._queued_done(ev)
        if not ev.reply.done:
            ev.reply.ok(self._shared.status)

    def _ready_session_expired(self, kind: str, ev: SessionExpired) -> Any:
        if ev.gen != self._gen or self._era == "modern":
            return None
        # A legacy session the server lost: a new initialize, without failing what is in
        # flight; the transport re-sends the expired requests once it is done
        # (docs/connection.md, "HTTP outcomes").
        log.info("the server lost the session; initializing a new one")
        self._leave_ready()
        return "initializing"

    def _ready_named(self, kind: str, ev: str) -> Any:
        if kind == "timeout":
            if ev == STABLE:
                self._attempt = 0
                return None
            if ev == HEALTH:
                self._send_health_check()
                return None
            if ev == HEALTH_TIMEOUT:
                log.warning(
                    "health check unanswered within %ss; reconnecting", self._cfg.health_timeout
                )
                self._leave_ready()
                self._drop_transport()
                self._deferred = transport_error("health_check")
                return self._lost("health_check")
        return self._common(kind, ev)

    def _send_health_check(self) -> None:
        self._health_id = rid = self.new_id()
        if self._era == "modern":
            self.send_internal(
                rid, msgs.DISCOVER, None, era="modern", version=self._version or LATEST_MODERN
            )
        else:
            self.send_raw({"jsonrpc": "2.0", "id": rid, "method": "ping"})
        self.set_timeout(HEALTH_TIMEOUT, self._cfg.health_timeout, HEALTH_TIMEOUT)

    def _leave_ready(self) -> None:
        self._degraded = None
        self._changes.lost()
        self._stop_ready_timers()

    def _stop_ready_timers(self) -> None:
        self.set_timeout(STABLE, None, None)
        self.set_timeout(HEALTH, None, None)
        self.set_timeout(HEALTH_TIMEOUT, None, None)
        self._health_id = None

    # -- reconnecting -------------------------------------------------------------------------

    def enter_reconnecting(self, old: str) -> list[Any]:
        self._publish("reconnecting", self._reason)
        self._fail_deferred()
        return [StateTimeout(self._delay, STATE_TIMEOUT)]

    def _fail_deferred(self) -> None:
        """Fail the calls a lost transport left in flight, with its ``transport`` error."""
        error, self._deferred = self._deferred, None
        if error is not None:
            self._fail_pending(error)

    def on_reconnecting(self, kind: str, ev: Any) -> Any:
        handler = self._IN_RECONNECTING.get(type(ev))
        return self._common(kind, ev) if handler is None else handler(self, kind, ev)

    def _reconnecting_named(self, kind: str, ev: str) -> Any:
        if kind == "state_timeout":
            return Step("connecting", [NextEvent(CONNECT)])
        return self._common(kind, ev)

    def _reconnect_now(self, kind: str, ev: ReconnectNow) -> Any:
        if ev.reply is not None:
            ev.reply.ok(None)
        return Step("connecting", [NextEvent(CONNECT)])

    def _lost(self, reason: str, detail: str | None = None) -> Any:
        """The transport is gone (or unusable): back off and reconnect, or give up. The
        failure is kept and published, so that errors say what the last attempt met; one
        that no retry can fix (a missing command, a TLS mismatch) closes at once."""
        self._reason = reason
        if reason in ("exit", "spawn_failed") and detail:
            log.info("server transport down: %s %s", reason, detail)
        failure = Failure(reason, detail, stderr_tail(self._server_stderr()))
        self._last_failure = self._shared.last_failure = failure
        self._attempt += 1
        if is_permanent(failure):
            return self._closed(reason)
        limit = self._cfg.max_reconnects
        if limit is not None and self._attempt > limit:
            return self._closed("max_reconnects")
        self._delay = self._backoff(self._attempt)
        return "reconnecting"

    # -- closed -------------------------------------------------------------------------------

    def _closed(self, reason: str) -> Any:
        self._reason = reason
        self._drop_transport()
        if self._cfg.on_give_up == "stop" and reason == "max_reconnects":
            # A normal exit: the transient connection is not restarted, and being
            # significant it ends the whole client, so a supervisor above starts a new one.
            self._fail_deferred()
            self._fail_pending(Error("closed", reason, "the client gave up reconnecting"))
            return Step("closed", [Stop(None)])
        return "closed"

    def enter_closed(self, old: str) -> list[Any]:
        self._publish("closed", self._reason)
        self._fail_deferred()
        err = self._closed_error()
        self._fail_pending(err)
        for item in self.remove_postponed(lambda e: isinstance(e, (Call, AwaitReady))):
            item.reply.fail(err)
        self._queued = 0
        return []

    def _closed_error(self) -> Error:
        reason = self._reason or "closed"
        auth = self._auth_error
        if reason == "auth_required" and auth is not None:
            # The server refused our credentials: callers see kind auth, with the parsed
            # challenges, not a bare "closed".
            return Error(
                "auth",
                auth.reason,
                f"the server refused the credentials; the client is closed ({reason})",
                data=auth.data,
            )
        if reason == "auth_failed" and auth is not None:
            # OAuth could not get a token (docs/connection.md, "Authorizing").
            return Error("auth", auth.reason, f"{auth.message}; the client is closed ({reason})")
        last = self._last_failure
        if reason == "endpoint_origin" and last is not None:
            # The SSE stream named an endpoint on another origin (docs/sse.md): the refusal's
            # own kind, as auth_required's is auth.
            return Error("protocol", reason, describe_failure(last), data=last.data())
        message = closed_message(
            reason, attempts=self._attempt, limit=self._cfg.max_reconnects, last=last
        )
        data = (
            last.data() if last is not None and reason in ("max_reconnects", last.reason) else None
        )
        return Error("closed", reason, message, data=data)

    def _server_stderr(self) -> bytes:
        """The current (or just closed) transport's stderr: a stdio server's last words."""
        transport = self._transport
        if transport is None and self._shared.closing:
            transport = self._shared.closing[-1]
        try:
            return transport.stderr() if transport is not None else b""
        except Exception:  # a dying transport must not take the router down
            return b""

    def on_closed(self, kind: str, ev: Any) -> Any:
        handler = self._IN_CLOSED.get(type(ev))
        return self._common(kind, ev) if handler is None else handler(self, kind, ev)

    def _closed_refuse(self, kind: str, ev: Call | AwaitReady) -> None:
        ev.reply.fail(self._closed_error())

    def _closed_reconnect(self, kind: str, ev: ReconnectNow) -> Any:
        self._attempt = 0
        self._last_failure = self._shared.last_failure = None
        self._reason = None
        self._auth_error = None
        if ev.reply is not None:
            ev.reply.ok(None)
        return Step("connecting", [NextEvent(CONNECT)])

    def _closed_inbound(self, kind: str, ev: Inbound) -> None:
        self._table.handled += len(ev.messages)  # read, so counted (PendingTable.admit)

    def _closed_named(self, kind: str, ev: str) -> Any:
        if kind == "timeout":
            return None  # a timer armed before closing
        return self._common(kind, ev)

    # -- events every state handles alike -----------------------------------------------------

    def _common_stream_gave_up(self, kind: str, ev: StreamGaveUp) -> None:
        """The listen actor gave the legacy GET stream up: still ready (requests work), but
        server-to-client messages outside requests are lost until the next session; say so
        in the status."""
        if ev.gen != self._gen or self.state != "ready":
            return
        self._degraded = "get_stream_given_up"
        self._shared.publish(replace(self._shared.status, degraded=self._degraded))

    def _common(self, kind: str, ev: Any) -> Any:
        handler = self._COMMON.get(type(ev))
        if handler is None:
            return self._unexpected(kind, ev)
        return handler(self, kind, ev)

    def _unexpected(self, kind: str, ev: Any) -> None:
        log.warning("connection ignored an unexpected %s event of type %s", kind, type(ev).__name__)

    def _ignore(self, kind: str, ev: Any) -> None:
        return None

    def _postpone(self, kind: str, ev: Call | AwaitReady) -> Any:
        """A request (or ``await_ready``) before ``ready``: postponed, counted, and bounded by
        its deadline and ``max_queued``."""
        if not ev.queued:
            if ev.reply.done:
                return None
            if self._queued >= self._cfg.max_queued:
                ev.reply.fail(
                    Error(
                        "overloaded",
                        "max_queued",
                        f"more than max_queued={self._cfg.max_queued} requests "
                        "are waiting for the connection",
                    )
                )
                return None
            self._queued += 1
            ev.queued = True
            remaining = ev.deadline - _monotonic()
            self.set_timeout(ev, remaining, Deadline(ev))
        return Step(None, [Postpone()])

    def _common_deadline(self, kind: str, ev: Deadline) -> None:
        self._on_deadline(ev.item)

    def _common_abandon(self, kind: str, ev: Abandon) -> None:
        self._on_abandon(ev)

    def _common_inbound(self, kind: str, ev: Inbound) -> Any:
        return self._route_batch(ev, self._route)

    def _common_request_failed(self, kind: str, ev: RequestFailed) -> Any:
        if ev.gen != self._gen:
            return None
        if self._oauth and ev.error.kind == "auth":
            step = self._auth_refused(ev)
            if step is not NOT_MINE:
                return step
        self._request_failed(ev)
        return None

    def _common_stream_broken(self, kind: str, ev: StreamBroken) -> Any:
        if ev.gen == self._gen:
            return self._stream_broken(ev)
        return None

    def _common_frame_problem(self, kind: str, ev: FrameProblem) -> None:
        if ev.gen == self._gen:
            log.warning("dropped an unusable frame from the server: %s", ev.reason)

    def _common_reconnect_now(self, kind: str, ev: ReconnectNow) -> None:
        if ev.reply is not None:
            ev.reply.ok(None)

    def _to_changes(self, kind: str, ev: Any) -> None:
        self._changes.on_event(ev)

    def _common_named(self, kind: str, ev: str) -> None:
        if ev == ADMITTED:
            # A turn given while it was leaving the line, or a late one: back to the gate
            # unless a handshake of its own runs (then it holds one anyway).
            if self.state not in ("connecting", "discovering", "initializing"):
                self._give_turn()
            return None
        if ev == TURN_LEASE:
            self._give_turn()  # a slow handshake goes on without its turn (admission.py)
            return None
        if kind == "timeout":
            if ev in (STABLE, HEALTH, HEALTH_TIMEOUT):
                return None  # armed in ready, fired elsewhere: ready cancels them on leaving
            if self._changes.on_timeout(ev):
                return None
        return self._unexpected(kind, ev)

    def _forget_answered(self) -> None:
        # Calls the transport's reader answered (pending.py): only their timers are left.
        answered = self._table.answered
        cancel = self._timers.cancel
        while answered:
            cancel(answered.popleft())

    def _queued_done(self, item: Any) -> None:
        if item.queued:
            item.queued = False
            self._queued -= 1
            self.set_timeout(item, None, None)

    def _on_deadline(self, item: Call | AwaitReady) -> None:
        if self._table.answered:
            self._forget_answered()
        reply = item.reply
        rid = reply.request_id
        if type(item) is Call and item.clock.reset is not None and not reply.done:
            # reset_timeout_on_progress: a report since the timer was armed moved the
            # deadline (the clock's rule, protocol/clock.py): wait on until then.
            again = item.clock.expire(_monotonic())
            if again is not None:
                self.set_timeout(item, again, Deadline(item))
                return
        if type(item) is Call and rid is not None and self._pending.pop(rid, None) is item:
            self._cancel_at_server(rid, "timeout")
            cut = item.clock.cut_by_total()
            self._work.call_ended(rid)  # its stream is closed: the work it carried stops
            if cut:  # paused for the handler or kept alive by progress: max_total_timeout
                reply.fail(total_timeout_error(item))
                return
            reply.fail(
                Error(
                    "timeout",
                    "deadline",
                    f"{item.method} got no answer before its deadline (the call's timeout, or "
                    "request_timeout by default); the server was asked to cancel it",
                )
            )
            return
        if type(item) is Call and self._work.deadline(item):
            return  # between two input rounds
        removed = self.remove_postponed(lambda e: e is item)
        if removed:
            self._queued_done(item)
            reply.fail(self._not_ready_error(item))

    def _not_ready_error(self, item: Call | AwaitReady) -> Error:
        """A request or ``await_ready`` that waited for ``ready`` past its deadline: say how
        long, which option set it, and what the connection met meanwhile."""
        last = self._last_failure
        state = self._shared.status.state
        if isinstance(item, AwaitReady):
            seconds = item.seconds
            what, option = "await_ready", "its timeout argument"
        else:
            seconds = None
            what, option = item.method, "the call's timeout, or request_timeout by default"
        data = last.data() if last is not None else None
        if seconds is None:
            text = f"{what} waited for the connection past its deadline ({option}); it is {state}"
            if last is not None:
                text += f" after: {describe_failure(last)}"
            return Error("timeout", "deadline", text, data=data)
        return Error(
            "timeout", "deadline", not_ready_message(what, seconds, option, state, last), data=data
        )

    def _on_abandon(self, ev: Abandon) -> None:
        reply = ev.reply
        rid = reply.request_id
        if rid is not None:
            call = self._pending.pop(rid, None)
            if call is not None:
                self.set_timeout(call, None, None)
                self._cancel_at_server(rid, ev.reason)
                self._work.call_ended(rid)
                reply.done = True
                return
            if self._work.abandon(rid):
                return  # between two input rounds: the handler's work for it stops
        removed = self.remove_postponed(lambda e: getattr(e, "reply", None) is reply)
        for item in removed:
            self._queued_done(item)
        reply.done = True

    def _cancel_at_server(self, rid: int, reason: str) -> None:
        self._tel.cancelled(reason)
        self.cancel_at_transport(rid, reason)

    # -- the request path (hot) ---------------------------------------------------------------

    def _send_call(self, call: Call) -> None:
        if self._table.answered:
            self._forget_answered()
        if call.queued:
            self._queued_done(call)
        reply = call.reply
        if reply.done:
            return  # the caller gave up while it was queued: never sent
        # The deadline first: a resource (un)subscription past it must change nothing, as
        # no request past it is sent (docs/connection.md, "Listens and resource
        # subscriptions").
        remaining = call.deadline - _monotonic()
        if remaining <= 0 and call.clock.reset is not None:  # progress may have moved it
            remaining = call.clock.left(_monotonic())
        if remaining <= 0:
            reply.fail(
                Error(
                    "timeout",
                    "deadline",
                    f"{call.method} waited for the connection past its deadline",
                )
            )
            return
        if (call.inputs is not None or call.method in _SPECIAL) and self._special_call(call):
            return
        pending = self._pending
        if len(pending) >= self._cfg.max_in_flight:
            reply.fail(
                Error(
                    "overloaded",
                    "max_in_flight",
                    f"max_in_flight={self._cfg.max_in_flight} requests are already in flight",
                )
            )
            return
        self._last_id += 1
        rid = self._last_id
        message = msgs.request(
            rid,
            call.method,
            call.params,
            era=self._era or "legacy",
            version=self._version or LATEST_LEGACY,
            client_info=self._client_info,
            capabilities=self._request_caps,
            progress_token=rid if call.progress else None,
            log_level=self._shared.log_level,
        )
        # In the table before it is sent: a server on another thread (InProcess, or a fast
        # stdio one) can answer, and report progress, before send returns; progress for an
        # id the reader does not know yet would be lost.
        reply.request_id = rid
        pending[rid] = call
        transport = self._transport
        if self._corked is None:
            if self._more_coming():
                # More requests may follow in this burst: hold this one (receive() flushes)
                cork = getattr(transport, "cork", None)
                if cork is not None:
                    cork()
                    self._corked = transport
                    self._corked_frames = 1
        elif self._corked is transport:
            self._corked_frames += 1
        reads_here = getattr(transport, "reads_here", False)
        try:
            # ready always has a transport: no None check on the hot path
            if reads_here:
                # its caller may read the answer (wait_here, or its loop: read_on), and the
                # pipe may be taken for it before the frame is written (send_call)
                reply.pipe = transport
                transport.send_call(message, reply)  # type: ignore[union-attr]
            else:
                transport.send(message)  # type: ignore[union-attr]
        except Error as exc:
            pending.pop(rid, None)
            reply.fail(exc)
            return
        self.set_timeout(call, remaining, Deadline(call))

    def _special_call(self, call: Call) -> bool:
        """A request :meth:`_send_call` does not simply send (a task's input requests, a
        resource (un)subscription, ``logging/setLevel``, a skills method): True if it was
        handled here."""
        if call.inputs is not None:
            self._task_inputs(call)
            return True
        method = call.method
        if method in _RESOURCE_SUBS and self._changes.resource_call(call):
            return True
        if method == SET_LEVEL and self._set_log_level(call):
            return True
        if method in SKILL_METHODS:
            # Sent only to a server that declared the skills extension (docs/skills.md).
            refused = skill_refusal(method, self._shared.capabilities)
            if refused is not None:
                call.reply.fail(refused)
                return True
        return False

    def _task_inputs(self, call: Call) -> None:
        """A task's input requests (docs/tasks.md, "Input while it runs"): run as a modern
        input round, under the same trust rules and bounds as an ``input_required`` result
        (serving.py), keyed by an id of its own; the round's retry is the ``tasks/update``
        carrying the answers, sent by the normal request path."""
        inputs, call.inputs = call.inputs, None
        # Negative ids: never one of the requests' (they count up from 1).
        self._task_rounds += 1
        rid = -self._task_rounds
        call.reply.request_id = rid
        answered = {"resultType": "input_required", "inputRequests": inputs}
        if not self._work.on_result(call, rid, answered):
            call.reply.ok({})

    def _set_log_level(self, call: Call) -> bool:
        """``logging/setLevel`` from the API (docs/telemetry.md, "Server logs"): refused here
        (legacy) when the server declares no ``logging``; else the level is kept (sent again
        to every new legacy session, and in every modern request's ``_meta``). Modern:
        answered here, as the era has no setLevel. Legacy: False, the call is sent as it is."""
        level, refusal = set_level(call.params, self._shared.capabilities, self._era)
        if refusal is not None:
            call.reply.fail(refusal)
            return True
        self._shared.log_level = level
        if self._era == "modern":
            call.reply.ok({})
            return True
        return False

    def _route(self, m: Any) -> Any:
        t = type(m)
        if t is Response:
            call = self._pending.pop(m.id, None)
            if call is None:
                if not self._changes.listen_answer(m):
                    self._unmatched(m)
                return None
            self.set_timeout(call, None, None)
            result = m.result
            # A modern result that is not complete (input_required, or unknown): the reader
            # left it here (pending.py); serving.py runs the round or fails the call.
            if type(result) is dict and "resultType" in result:
                if result["resultType"] == "task":
                    # A task (docs/tasks.md): the caller polls it; only a tools/call that
                    # declared the extension may get one (ext-tasks, "Supported Methods").
                    refusal = task_refusal(call.method, self._request_caps)
                    if refusal is not None:
                        call.reply.fail(refusal)
                    else:
                        call.reply.ok(result)
                    return None
                if self._work.on_result(call, m.id, result):
                    return None
            call.reply.ok(result)
            return None
        if t is ErrorResponse:
            call = self._pending.pop(m.id, None)
            if call is None:
                if not self._changes.listen_answer(m):
                    self._unmatched(m)
                return None
            self.set_timeout(call, None, None)
            if (
                m.code == UNSUPPORTED_PROTOCOL_VERSION
                and self._era == "modern"
                and not call.retried
            ):
                # A ready modern connection re-discovers; the request is retried once
                # (docs/connection.md, "Era discovery")
                retry = call.again()
                call.reply.request_id = None
                if self.state == "ready":
                    self._leave_ready()
                    return Step("discovering", [NextEvent(retry, kind="cast")])
                return Step(None, [NextEvent(retry, kind="cast")])
            call.reply.fail(server_error(m, call.method))
            return None
        if t is Notification:
            # Progress never gets here: the transport's reader routes it (pending.py).
            if m.method == "notifications/cancelled" and self._work.server_cancelled(m.params):
                return None  # a server request of the server's own, stopped
            self._changes.on_notification(m.method, m.params)
            return None
        if t is Request:
            self._server_request(m)
            return None
        return None

    def _unmatched(self, m: Any) -> None:
        mid = m.id
        if mid is not None and mid == self._health_id:
            self._health_id = None
            self.set_timeout(HEALTH_TIMEOUT, None, None)
            if self._cfg.health_check is not None:
                self.set_timeout(HEALTH, self._cfg.health_check, HEALTH)
            return
        # A late answer (timed out, abandoned, or from an earlier attempt): dropped.
        self._tel.dropped()
        log.debug("dropped a response for a request no longer pending (id %r)", mid)

    def _server_request(self, m: Any) -> None:
        # Answers are bounded by max_answer_backlog: one the server has no room for is
        # dropped and counted (docs/connection.md, "Floods"). A modern server sends no
        # requests (it asks through input_required results): refused.
        if self._era == "modern":
            self.send_answer(
                {
                    "jsonrpc": "2.0",
                    "id": m.id,
                    "error": {"code": -32601, "message": "Method not found"},
                }
            )
            return
        self._work.server_request(m, m.related)

    def _ready_roots_changed(self, kind: str, ev: RootsChanged) -> None:
        # Legacy only: a modern server asks for roots in each request that needs them.
        roots = self._capabilities.get("roots")
        if self._era != "modern" and isinstance(roots, dict) and roots.get("listChanged"):
            self.send_raw({"jsonrpc": "2.0", "method": "notifications/roots/list_changed"})

    def _common_served(self, kind: str, ev: Served) -> Any:
        return self._resend(self._work.served(ev))

    def _common_serve_expired(self, kind: str, ev: ServeExpired) -> None:
        self._work.expired(ev)

    def _common_round_retry(self, kind: str, ev: RoundRetry) -> Any:
        return self._resend(self._work.retry_due(ev))

    def _resend(self, call: Call | None) -> Any:
        """Send a call's next input round as a new request: in ``ready`` at once, else
        postponed like any call (docs/connection.md, "Server-to-client requests")."""
        if call is None:
            return None
        return Step(None, [NextEvent(call, kind="cast")])

    # -- the dispatch tables: event type -> handler (see "connecting" above) -----------------

    _IN_CONNECTING: ClassVar[Handlers] = {
        str: _connecting_named,
        TransportUp: _connecting_up,
        TransportDown: _connecting_down,
    }
    _IN_READY: ClassVar[Handlers] = {
        Call: _ready_call,  # on_ready checks Call before the table (the hot path)
        Inbound: _common_inbound,
        TransportDown: _ready_down,
        AwaitReady: _ready_await,
        SessionExpired: _ready_session_expired,
        RootsChanged: _ready_roots_changed,
        str: _ready_named,
    }
    _IN_RECONNECTING: ClassVar[Handlers] = {
        str: _reconnecting_named,
        ReconnectNow: _reconnect_now,
    }
    _IN_CLOSED: ClassVar[Handlers] = {
        Call: _closed_refuse,
        AwaitReady: _closed_refuse,
        ReconnectNow: _closed_reconnect,
        Abandon: _ignore,
        Deadline: _ignore,  # a request's timer armed before closing
        str: _closed_named,
        Inbound: _closed_inbound,
        TransportDown: _ignore,
        TransportUp: _ignore,
        FrameProblem: _ignore,
    }
    _COMMON: ClassVar[Handlers] = {
        Call: _postpone,
        AwaitReady: _postpone,
        Deadline: _common_deadline,
        Abandon: _common_abandon,
        Inbound: _common_inbound,
        RequestFailed: _common_request_failed,
        StreamBroken: _common_stream_broken,
        SessionExpired: _ignore,  # only ready starts a new session; the handshake makes one
        FrameProblem: _common_frame_problem,
        TransportUp: _ignore,  # a stale generation's news
        TransportDown: _ignore,
        ReconnectNow: _common_reconnect_now,
        StreamGaveUp: _common_stream_gave_up,
        RootsChanged: _ignore,  # not ready: the next session's server asks anyway
        Served: _common_served,
        ServeExpired: _common_serve_expired,
        RoundRetry: _common_round_retry,
        TokenReady: AuthorizingStates._common_token,
        AwaitingUser: _ignore,  # answers to an ask the state left behind
        AuthFailed: _ignore,
        OAuthBack: _ignore,
        str: _common_named,
        **dict.fromkeys(_CHANGE_EVENTS, _to_changes),
    }
