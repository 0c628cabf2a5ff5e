"""The handshake states of the connection: ``discovering`` (the modern probe and its
classification, docs/connection.md, "Era discovery") and ``initializing`` (the legacy handshake).

A mixin of :class:`~conduit_mcp.actors.connection.Connection`, split out because negotiation
is one seam of its own: the pure rules live in :mod:`conduit_mcp.protocol.negotiation`; this
module only sends the probes and acts on the decisions.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar, Literal

from ..errors import Error
from ..otp.statem import StateTimeout, Step
from ..protocol import messages as msgs
from ..protocol.failures import Failure
from ..protocol.jsonrpc import (
    ErrorResponse,
    Response,
)
from ..protocol.negotiation import (
    Close,
    HttpProbe,
    KeepWaiting,
    Legacy,
    Modern,
    ProbeError,
    ProbeExit,
    ProbeResult,
    ProbeTimeout,
    Reconnect,
    Rediscover,
    check_initialize,
    classify_initialize_refusal,
    classify_probe,
)
from ..protocol.tasks import request_capabilities
from ..protocol.versions import LATEST_LEGACY, LATEST_MODERN, era_of
from ..transports.base import Inbound, RequestFailed, StreamBroken, TransportDown
from .core import ConnectionCore, Handlers
from .events import STATE_TIMEOUT, transport_error

log = logging.getLogger("conduit_mcp.connection")


class HandshakeStates(ConnectionCore):
    """discovering and initializing (see the module docstring)."""

    def _handshake_state(self) -> str:
        self._late_probe_id = None  # a new transport: the old probe's answer cannot come
        if self._shared.once_modern or self._modern_hint:
            return "discovering"
        if self._mode == "legacy":
            self._origin = "pinned"
            return "initializing"
        if self._mode == "auto" and self._next_legacy:
            self._next_legacy = False
            self._origin = self._next_origin or "prior"
            return "initializing"
        return "discovering"

    # -- discovering --------------------------------------------------------------------------

    def enter_discovering(self, old: str) -> list[Any]:
        self._publish("discovering", None)
        self._probe_retried = False
        self._probe_offered = (
            self._pinned if self._pinned and era_of(self._pinned) == "modern" else LATEST_MODERN
        )
        self._probing = (
            self._mode == "auto" and not self._shared.once_modern and not self._modern_hint
        )
        return [StateTimeout(self._send_discover(), STATE_TIMEOUT)]

    def _send_discover(self) -> float:
        self._probe_id = self.new_id()
        self.send_internal(
            self._probe_id, msgs.DISCOVER, None, era="modern", version=self._probe_offered
        )
        return self._cfg.probe_timeout if self._probing else self._cfg.request_timeout

    def on_discovering(self, kind: str, ev: Any) -> Any:
        handler = self._IN_DISCOVERING.get(type(ev))
        return self._common(kind, ev) if handler is None else handler(self, kind, ev)

    def _discovering_inbound(self, kind: str, ev: Inbound) -> Any:
        return self._route_batch(ev, self._discovering_message)

    def _discovering_refused(self, kind: str, ev: RequestFailed) -> Any:
        if ev.gen != self._gen or ev.rid != self._probe_id:
            return self._common(kind, ev)
        self._probe_id = None
        if ev.error.kind == "auth":
            authorizing = self._handshake_refused(ev)  # OAuth: a token, then probe again
            if authorizing is not None:
                return authorizing
            self._auth_error = ev.error
        if ev.status is None:
            # no HTTP answer to judge (the auth callable failed, a body over the limit)
            self._drop_transport()
            return self._lost(ev.error.reason)
        return self._classified(HttpProbe(ev.status, ev.body))

    def _discovering_broken(self, kind: str, ev: StreamBroken) -> Any:
        if ev.gen != self._gen or ev.rid != self._probe_id:
            return self._common(kind, ev)
        self._probe_id = None
        self._drop_transport()
        return self._lost("stream_broken", ev.detail)

    def _discovering_down(self, kind: str, ev: TransportDown) -> Any:
        if ev.gen != self._gen:
            return None
        self._fail_pending(transport_error(ev.reason, ev.detail))
        return self._classified(ProbeExit(), lost=(ev.reason, ev.detail))

    def _discovering_named(self, kind: str, ev: str) -> Any:
        if kind == "state_timeout":
            never = self._never_connected()
            if never is not None:
                return never
            return self._classified(ProbeTimeout())
        return self._common(kind, ev)

    def _never_connected(self) -> Any:
        """A handshake deadline passed before any connection to the server was made (a TLS
        handshake that never completes, say): a transport failure, never era evidence
        (docs/tls.md); back off and reconnect. None when a connection was made."""
        transport = self._transport
        if transport is None or getattr(transport, "connected", True):
            return None
        tls = getattr(transport, "url", "").startswith("https:")
        detail = "the TLS handshake did not complete" if tls else "no TCP connection"
        log.warning("no connection to the server before the handshake's deadline")
        self._drop_transport()
        return self._lost("connect_timeout", detail)

    def _discovering_message(self, m: Any) -> Any:
        mid = getattr(m, "id", None)
        if mid is not None and mid == self._probe_id and type(m) in (Response, ErrorResponse):
            self._probe_id = None
            if type(m) is Response:
                return self._classified(ProbeResult(m.result))
            return self._classified(ProbeError(m.code, m.message, m.data))
        return self._route(m)

    def _probe_decision(self, result: Any) -> Any:
        return classify_probe(
            ProbeResult(result),
            self._transport_kind(),
            mode="auto",
            offered=self._probe_offered,
            retried=self._probe_retried,
        )

    def _classified(self, outcome: Any, lost: tuple[str, str | None] | None = None) -> Any:
        mode: Literal["auto", "modern"] = (
            "modern" if (self._mode == "modern" or self._shared.once_modern) else "auto"
        )
        decision = classify_probe(
            outcome,
            self._transport_kind(),
            mode=mode,
            offered=self._probe_offered,
            retried=self._probe_retried,
        )
        if type(decision) is Modern:
            self._modern_hint = False
            self._era, self._version = "modern", decision.version
            self._origin = "pinned" if self._mode == "modern" else "probe"
            self._shared.once_modern = True
            info = decision.info
            self._shared.server_info = info.server_info
            self._shared.capabilities = info.capabilities
            self._shared.instructions = info.instructions
            self._request_caps = request_capabilities(
                self._capabilities, self._cfg.tasks, info.capabilities
            )
            return "ready"
        if type(decision) is Rediscover:
            self._probe_retried = True
            self._probe_offered = decision.version
            return Step(None, [StateTimeout(self._send_discover(), STATE_TIMEOUT)])
        if type(decision) is Legacy:
            # A probe that only timed out may still be answered by a slow modern server:
            # its late result is modern evidence (docs/connection.md, "Era discovery").
            self._late_probe_id = self._probe_id if type(outcome) is ProbeTimeout else None
            self._probe_id = None
            self._origin = "probe"
            self._legacy_offer = decision.version  # a -32022 may name the legacy version to use
            return "initializing"
        if type(decision) is Reconnect:
            if decision.next_legacy and self._mode == "auto" and not self._shared.once_modern:
                self._next_legacy = True
                self._next_origin = "prior"
            self._drop_transport()
            reason, detail = lost or (decision.reason, None)
            return self._lost(reason, detail)
        if type(decision) is Close:
            return self._closed(decision.reason)
        # AuthRequired: credentials are the OAuth issue's work; until then a refusal closes.
        return self._closed("auth_required")

    # -- initializing -------------------------------------------------------------------------

    def enter_initializing(self, old: str) -> list[Any]:
        self._publish("initializing", None)
        offered = self._pinned if self._pinned and era_of(self._pinned) == "legacy" else None
        self._init_offered = offered or self._legacy_offer or LATEST_LEGACY
        self._legacy_offer = None
        self._init_id = self.new_id()
        params = msgs.initialize_params(self._init_offered, self._capabilities, self._client_info)
        self.send_raw(
            {"jsonrpc": "2.0", "id": self._init_id, "method": "initialize", "params": params}
        )
        return [StateTimeout(self._cfg.request_timeout, STATE_TIMEOUT)]

    def on_initializing(self, kind: str, ev: Any) -> Any:
        handler = self._IN_INITIALIZING.get(type(ev))
        return self._common(kind, ev) if handler is None else handler(self, kind, ev)

    def _initializing_inbound(self, kind: str, ev: Inbound) -> Any:
        return self._route_batch(ev, self._initializing_message)

    def _initializing_failed(self, kind: str, ev: RequestFailed | StreamBroken) -> Any:
        if ev.gen != self._gen or ev.rid != self._init_id:
            return self._common(kind, ev)
        self._init_id = None
        error = ev.error if type(ev) is RequestFailed else None
        if error is not None and error.kind == "auth":
            authorizing = self._handshake_refused(ev)
            if authorizing is not None:
                return authorizing
            self._auth_error = error
            return self._closed("auth_required")
        if error is not None and error.reason == "endpoint_origin":
            # The SSE stream pointed the POSTs at another origin: nothing was sent there, and
            # no retry can help (docs/sse.md).
            origin = error.data.get("origin") if type(error.data) is dict else None
            self._last_failure = self._shared.last_failure = Failure("endpoint_origin", origin)
            return self._closed("endpoint_origin")
        if error is not None and error.kind == "protocol":
            log.warning("unusable initialize answer: %s", error.reason)
            self._last_failure = self._shared.last_failure = Failure(
                "initialize_refused", error.reason
            )
            return self._closed("initialize_refused")
        self._drop_transport()
        if error is None:
            return self._lost("stream_broken", getattr(ev, "detail", None))
        return self._lost(error.reason)

    def _initializing_down(self, kind: str, ev: TransportDown) -> Any:
        if ev.gen != self._gen:
            return None
        self._fail_pending(transport_error(ev.reason, ev.detail))
        return self._lost(ev.reason, ev.detail)

    def _initializing_named(self, kind: str, ev: str) -> Any:
        if kind == "state_timeout":
            never = self._never_connected()
            if never is not None:
                return never
            self._drop_transport()
            return self._lost("initialize_timeout")
        return self._common(kind, ev)

    def _initializing_message(self, m: Any) -> Any:
        mid = getattr(m, "id", None)
        if mid is not None and mid == self._late_probe_id and type(m) in (Response, ErrorResponse):
            self._late_probe_id = None
            if type(m) is Response and type(self._probe_decision(m.result)) is Modern:
                # The probe's late answer: a slow modern server. Ready in the modern era;
                # the initialize answer, when it comes, is dropped as no longer pending.
                self._init_id = None
                log.info("the server answered server/discover late; it is modern")
                return self._classified(ProbeResult(m.result))
            return None  # a late error or a non-discover result: initialize decides
        if mid is not None and mid == self._init_id and type(m) in (Response, ErrorResponse):
            self._init_id = None
            if type(m) is ErrorResponse:
                self._last_failure = self._shared.last_failure = Failure(
                    "initialize_refused", f"JSON-RPC error {m.code}"
                )
                if self._mode == "auto" and not self._pinned:
                    verdict = classify_initialize_refusal(
                        m.code, m.data, probe_outstanding=self._late_probe_id is not None
                    )
                    if type(verdict) is Rediscover:
                        log.info("initialize refused with -32022 naming a modern version")
                        self._modern_hint = True
                        self._late_probe_id = None
                        return "discovering"
                    if type(verdict) is KeepWaiting:
                        log.info("initialize refused; waiting for the late server/discover")
                        return None
                log.warning("server refused initialize (code %s)", m.code)
                return self._closed("initialize_refused")
            try:
                info = check_initialize(m.result, self._init_offered)
            except Error as exc:
                log.warning("unusable initialize result: %s", exc.reason)
                return self._closed(exc.reason)
            self._era, self._version = "legacy", info.version
            self._request_caps = self._capabilities
            self._shared.server_info = info.server_info
            self._shared.capabilities = info.capabilities
            self._shared.instructions = info.instructions
            if self._transport is not None:
                self._transport.negotiated("legacy", info.version)
            self.send_raw(msgs.initialized())
            return "ready"
        return self._route(m)

    # -- the dispatch tables: event type -> handler (as in connection.py) -------------------

    _IN_DISCOVERING: ClassVar[Handlers] = {
        Inbound: _discovering_inbound,
        RequestFailed: _discovering_refused,
        StreamBroken: _discovering_broken,
        TransportDown: _discovering_down,
        str: _discovering_named,
    }
    _IN_INITIALIZING: ClassVar[Handlers] = {
        Inbound: _initializing_inbound,
        RequestFailed: _initializing_failed,
        StreamBroken: _initializing_failed,
        TransportDown: _initializing_down,
        str: _initializing_named,
    }
