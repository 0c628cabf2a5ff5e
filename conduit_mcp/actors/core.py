"""The state the connection's parts share, declared in one place.

:class:`~conduit_mcp.actors.connection.Connection` is one actor whose state functions are
spread over three modules: :mod:`.connection` (connecting, ready, reconnecting, closed),
:mod:`.handshake` (discovering, initializing) and :mod:`.http_outcomes` (what an HTTP refusal
or a broken stream means). They all inherit :class:`ConnectionCore`, which declares every
attribute they share, with its type and what it holds, and the plumbing they all use
(ids, sending, the transport's life, publishing the status). ``Connection.__init__`` assigns
every attribute declared here; nothing else creates one. What has state of its own is an
object the connection holds: :class:`~.changes.ChangeTracker` (notifications, the cache,
listens, resource subscriptions) and :class:`~.pending.PendingTable` (the calls in flight).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

from ..backoff import GuardedBackoff
from ..config import Config
from ..errors import Error
from ..otp.base import safe_tell
from ..otp.pooled import PooledActor
from ..otp.statem import NextEvent, Statem, Step
from ..protocol import messages as msgs
from ..protocol.failures import Failure
from ..protocol.versions import Mode
from ..published import Published
from ..status import Era, Origin, State, Status
from ..telemetry import ConnectionTelemetry
from ..transports.base import Inbound, Transport
from .admission import LEASE_SECONDS, Gate
from .events import ADMITTED, TURN_LEASE, Call, NeedToken
from .pending import PendingTable

if TYPE_CHECKING:
    from .changes import ChangeTracker, SiblingsPort
    from .serving import ServerWork

log = logging.getLogger("conduit_mcp.connection")

#: The states of a handshake: a connection holds its turn of the gate in them only.
_HANDSHAKING = frozenset({"connecting", "discovering", "initializing"})


#: A state's event handler, ``(connection, kind, event) -> None | state | Step``.
Handler = Callable[[Any, str, Any], Any]
#: A state's dispatch table: the exact type of an event -> its handler.
Handlers = dict[type, Handler]

#: ``(spec, connection ref, generation, config, *, pending, memory) -> Transport``
TransportFactory = Callable[..., Transport]


class ConnectionCore(PooledActor, Statem):
    """Every attribute the connection and its state-function modules share (see the module
    docstring); the state functions themselves are in the subclasses."""

    # -- collaborators, fixed for the actor's life ---------------------------------------------
    _cfg: Config  # the client's validated options
    _shared: Published  # what the connection publishes; outlives a crashed connection
    _tel: ConnectionTelemetry  # O(1) counters on transitions, cancels, drops (never per call)
    _factory: TransportFactory  # builds one transport per connection attempt
    _backoff: GuardedBackoff  # reconnect delays (the user's, guarded)
    _changes: ChangeTracker  # notifications, the cache, listens, resource subscriptions
    _client_info: dict[str, Any]  # sent with every modern request and in initialize
    _capabilities: dict[str, Any]  # idem: the client's capabilities
    _request_caps: dict[str, Any]  # what each request declares (+ tasks, docs/tasks.md)
    _task_rounds: int  # task input rounds so far: their negative ids (docs/tasks.md)
    _mode: Mode  # how eras are negotiated: "auto", "modern" or "legacy" (protocol option)
    _pinned: str | None  # the pinned protocol version (protocol option), or None

    # -- the transport -------------------------------------------------------------------------
    _spec: Any  # the transport spec (Stdio, Http); replaced by set_auth's
    _transport: Transport | None  # the current attempt's transport; None between attempts
    _gen: int  # the transport's generation: events of an older one are ignored
    _memory: dict[str, Any]  # kept across transports (HTTP: the tools' Mcp-Param plans)
    _corked: Any  # the transport holding a burst of requests (connection.receive), or None
    _corked_frames: int  # how many requests it holds
    _gate: Gate | None  # the handshakes' gate of its transport kind (admission.py), or none
    _has_turn: bool  # it holds a turn of the gate: its handshake may run

    # -- requests ------------------------------------------------------------------------------
    _last_id: int  # the request id counter, never reset (a late answer never matches)
    _table: PendingTable  # the calls in flight, shared with the transport's reader
    _pending: dict[Any, Call]  # _table.calls: request id -> Call
    _queued: int  # postponed Calls and AwaitReady waiters (bounded by max_queued)
    _deferred: Error | None  # the error for the calls a lost transport left in flight
    _health_id: int | None  # the id of the health check awaiting its answer

    # -- reconnecting --------------------------------------------------------------------------
    _attempt: int  # consecutive failed attempts (reset when ready has been stable)
    _delay: float  # the backoff before the next attempt
    _reason: str | None  # why the connection is not ready (published in the status)
    _auth_error: Error | None  # the refusal that closed the client (auth_required)
    _last_failure: Failure | None  # the last failed attempt (said in errors; None once ready)
    _degraded: str | None  # why a ready client misses something (published in the status)

    # -- era negotiation -----------------------------------------------------------------------
    _era: Era | None  # the negotiated era; kept while reconnecting
    _version: str | None  # the negotiated protocol version
    _origin: Origin | None  # how the era was chosen (published in the status)
    _next_legacy: bool  # auto mode: the next handshake goes straight to initialize
    _next_origin: Origin | None  # the origin to publish when it does
    _probe_id: int | None  # the server/discover request awaiting its answer
    _probe_offered: str  # the version the probe offers
    _probe_retried: bool  # the probe was re-sent once with a version the server named
    _probing: bool  # auto mode's probe (probe_timeout), not a modern discover
    _late_probe_id: int | None  # a probe that timed out into initialize: its answer still counts
    _modern_hint: bool  # initialize was refused with -32022 naming a modern version
    _init_id: int | None  # the initialize request awaiting its answer
    _init_offered: str  # the legacy version initialize offers
    _legacy_offer: str | None  # a legacy version a -32022 answer named, for initialize
    _siblings: SiblingsPort  # the client's other children (the handler, by id)
    _work: ServerWork  # what the server asks of the client: server requests, input rounds

    # -- authorizing (OAuth only; authorizing.py) ------------------------------------------------
    _oauth: bool  # the spec carries an OAuth: a 401 authorizes instead of failing
    _auth_seq: int  # numbers the NeedToken asks; an answer to an older one is ignored
    _auth_ask: NeedToken | None  # the ask awaiting its answer (told again to a restarted actor)
    _auth_resume: str  # the state a token leads back to: ready, discovering or initializing
    _auth_user: bool  # a person must authorize: requests fail at once
    _auth_call: Call | None  # the request a step-up is for (fails alone past its limit)
    _auth_refusals: tuple[int, int]  # (transport gen, handshakes refused for a current token)

    # -- the port ServerWork uses (serving.ServingPort) ------------------------------------------

    @property
    def gen(self) -> int:
        return self._gen

    def in_flight(self, rid: Any) -> Call | None:
        try:
            return self._pending.get(rid)
        except TypeError:
            return None

    def calls_in_flight(self) -> list[Call]:
        return list(self._pending.values())

    def tell_handler(self, message: Any) -> bool:
        return self._siblings.tell("handler", message)

    # -- the port the ChangeTracker uses (changes.ConnectionPort) -------------------------------

    @property
    def era(self) -> Era | None:
        return self._era

    @property
    def version(self) -> str | None:
        return self._version

    def new_id(self) -> int:
        self._last_id += 1
        return self._last_id

    def send_internal(
        self, rid: int, method: str, params: dict[str, Any] | None, *, era: Era, version: str
    ) -> None:
        self.send_raw(
            msgs.request(
                rid,
                method,
                params,
                era=era,
                version=version,
                client_info=self._client_info,
                capabilities=self._capabilities,
            )
        )

    def send_raw(self, message: dict[str, Any]) -> None:
        transport = self._transport
        if transport is not None:
            transport.send(message)

    def send_answer(self, message: dict[str, Any]) -> None:
        """An answer to a server request: the transport drops it (and counts it) when the
        server has not taken ``max_answer_backlog`` bytes yet (docs/connection.md, "Floods")."""
        transport = self._transport
        if transport is not None:
            transport.send_answer(message)

    def cancel_at_transport(self, rid: Any, reason: str) -> None:
        transport = self._transport
        if transport is not None:
            try:
                transport.cancel(rid, reason)
            except Exception as exc:  # a dying transport must not take the router down
                log.debug("cancel not sent: %s", type(exc).__name__)

    def use_credentials(self, spec: Any) -> None:
        self._spec = spec
        transport = self._transport
        set_credentials = getattr(transport, "set_credentials", None)
        if set_credentials is not None:
            set_credentials(spec)

    # -- the transport's life ------------------------------------------------------------------

    def _start_transport(self) -> None:
        self._drop_transport()
        self._gen += 1
        # A new transport starts with no backlog: what an earlier one told and nobody
        # handled (the listen actor drops a stale stream's messages) no longer counts.
        self._table.resync()
        transport = self._factory(
            self._spec,
            self.actor_ref,
            self._gen,
            self._cfg,
            pending=self._table,
            memory=self._memory,
            token=self._shared.token,
        )
        self._transport = transport
        self._shared.transport = transport
        transport.connect()

    def _drop_transport(self) -> None:
        transport = self._transport
        if transport is not None:
            self._transport = None
            # Kept so stop() can wait for the process to be gone; ones already gone are
            # pruned here, or a long-lived client that reconnects often would keep them all.
            closing = self._shared.closing
            closing[:] = [t for t in closing if not t.wait_closed(0)]
            closing.append(transport)
            try:
                transport.close()
            except Exception as exc:
                log.debug("transport close failed: %s", type(exc).__name__)

    def _transport_kind(self) -> Literal["stdio", "http"]:
        transport = self._transport
        return "http" if transport is not None and transport.kind == "http" else "stdio"

    # -- requests and status -------------------------------------------------------------------

    def _fail_pending(self, error: Error) -> None:
        # The handler's work for this session stops; calls between input rounds fail alike.
        self._work.fail_all(error)
        pending = self._pending
        for rid in list(pending):
            call = pending.pop(rid, None)  # the reader may have answered it meanwhile
            if call is not None:
                self.set_timeout(call, None, None)
                call.reply.fail(error)

    def _take_turn(self) -> bool:
        """A turn to handshake (admission.py): True when it holds one now; else the gate
        tells it ``ADMITTED`` when its turn comes."""
        gate = self._gate
        if gate is None:
            self._has_turn = True
            return True
        ref = self.actor_ref
        self._has_turn = gate.enter(self.actor_urn, lambda: safe_tell(ref, ADMITTED))
        if self._has_turn:
            self.set_timeout(TURN_LEASE, LEASE_SECONDS, TURN_LEASE)
        return self._has_turn

    def _admitted(self) -> bool:
        """``ADMITTED`` arrived: whether the turn is still this connection's (one given
        while it left the line is already back with the gate)."""
        gate = self._gate
        self._has_turn = gate is None or gate.holds(self.actor_urn)
        if self._has_turn and gate is not None:
            self.set_timeout(TURN_LEASE, LEASE_SECONDS, TURN_LEASE)
        return self._has_turn

    def _give_turn(self) -> None:
        gate = self._gate
        if gate is not None:
            gate.leave(self.actor_urn)
            if self._has_turn:
                self.set_timeout(TURN_LEASE, None, None)
        self._has_turn = False

    def _publish(self, state: State, reason: str | None) -> None:
        if state not in _HANDSHAKING:
            self._give_turn()  # the handshake ended, however it ended
        shared = self._shared
        self._tel.transition(shared.status.state if shared.transitions else "none", state, reason)
        shared.publish(
            Status(state, self._era, self._version, reason, self._origin, self._degraded)
        )

    def _route_batch(self, ev: Inbound, handle: Callable[[Any], Any]) -> Any:
        """Route the messages of ``ev`` one by one with ``handle``; the first that changes
        state ends the batch, and the rest is inserted to be handled in the new state."""
        messages = ev.messages
        # Handled, for the reader's flood bound (PendingTable.admit): counted whatever the
        # generation, since the reader counted it when it told it.
        self._table.handled += len(messages)
        if ev.gen != self._gen:
            return None
        for i, m in enumerate(messages):
            step = handle(m)
            if step is not None:
                rest = messages[i + 1 :]
                if not rest:
                    return step
                self._table.handled -= len(rest)  # told again below: counted then
                nxt = NextEvent(Inbound(ev.gen, rest))
                if isinstance(step, str):
                    return Step(step, [nxt])
                return Step(step.state, [*step.actions, nxt])
        return None

    # -- defined by Connection; declared so the state-function modules can call them ---------

    def _lost(self, reason: str, detail: str | None = None) -> Any:
        """The transport is gone: back off and reconnect, or give up."""
        raise NotImplementedError

    def _closed(self, reason: str) -> Any:
        """Close the client with ``reason`` (the transition to ``closed``)."""
        raise NotImplementedError

    def _route(self, m: Any) -> Any:
        """Route one inbound message as ``ready`` does."""
        raise NotImplementedError

    def _unmatched(self, m: Any) -> None:
        """A response no pending call owns (the health check's, or a late one)."""
        raise NotImplementedError

    def _common(self, kind: str, ev: Any) -> Any:
        """The events every state handles alike."""
        raise NotImplementedError

    def _postpone(self, kind: str, ev: Any) -> Any:
        """Postpone a request (or ``await_ready``) until the next state, bounded."""
        raise NotImplementedError

    def _queued_done(self, item: Any) -> None:
        """A postponed request leaves the queue (its count and its deadline timer)."""
        raise NotImplementedError

    def _stop_ready_timers(self) -> None:
        """Cancel ready's own timers (stable, health check)."""
        raise NotImplementedError

    def _handshake_refused(self, ev: Any) -> Any:
        """The handshake's request refused under OAuth: ``authorizing``, or None."""
        raise NotImplementedError
