"""The caller side of a request's telemetry: one CLIENT span and one duration measurement.

An :class:`Operation` is started and finished in the caller's thread or loop (blocking
``Client``, ``client.aio``) or in the thread that reads the future (``client.futures``);
never in the connection actor, because span processors are application code.

What a span carries (docs/telemetry.md, "Telemetry"): the method, the tool or prompt name, the JSON-RPC
id, the negotiated protocol version, the transport and, on failure, ``error.type``. Never
params, arguments, results, ``_meta``, environment, headers, tokens or session ids, and never
server-supplied text: the status description is our own ``"<kind>: <reason>"`` (the JSON-RPC
error *message* a server sends may echo the arguments, so it is not recorded; callers get it
on the raised ``Error``). No exception is recorded as a span event for the same reason.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from opentelemetry import propagate, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from ..errors import Error
from .attributes import (
    ERROR_TYPE,
    EXECUTE_TOOL,
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROMPT_NAME,
    GEN_AI_TOOL_NAME,
    INPUT_ROUNDS,
    JSONRPC_REQUEST_ID,
    MCP_METHOD_NAME,
    MCP_PROTOCOL_VERSION,
    META,
    NETWORK_TRANSPORT,
    RPC_RESPONSE_STATUS_CODE,
    SERVER_ADDRESS,
    SERVER_PORT,
    TOOL_ERROR,
)

if TYPE_CHECKING:
    from . import Telemetry

_log = logging.getLogger("conduit_mcp.telemetry")
_perf = time.perf_counter
_CLIENT = SpanKind.CLIENT
_inject = propagate.inject
_in_context = trace.set_span_in_context

#: Methods whose span name and attributes carry a target, and the attribute that names it.
#: (``resources/read`` is deliberately absent: a URI may carry identifiers or tokens.)
TARGETS: dict[str, str] = {"tools/call": GEN_AI_TOOL_NAME, "prompts/get": GEN_AI_PROMPT_NAME}


def classify(exc: BaseException) -> tuple[str, str | None, str]:
    """``(error.type, rpc.response.status_code, status description)`` of a failure.

    >>> classify(Error("server", "invalid_params", "bad arguments: {'token': ...}", code=-32602))
    ('-32602', '-32602', 'server: invalid_params')
    >>> classify(Error("timeout", "deadline"))
    ('timeout', None, 'timeout: deadline')
    >>> classify(ValueError("callback said no"))
    ('ValueError', None, 'ValueError')
    """
    if isinstance(exc, Error):
        description = f"{exc.kind}: {exc.reason}"
        if exc.kind == "server" and exc.code is not None:
            code = str(exc.code)
            return code, code, description
        return exc.kind, None, description
    if isinstance(exc, asyncio.CancelledError):
        return "cancelled", None, "cancelled"
    cls = type(exc)
    name = (
        cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
    )
    return name, None, name


def _with_trace_context(params: dict[str, Any] | None, span: Any) -> dict[str, Any] | None:
    """A copy of ``params`` whose ``_meta`` (also copied) carries ``traceparent`` /
    ``tracestate`` (and ``baggage``) for ``span``; the caller's dicts are never mutated.
    A ``_meta`` that is not a mapping is left alone for the connection to refuse."""
    existing = None if params is None else params.get(META)
    if existing is None:
        meta: dict[str, Any] = {}
    elif isinstance(existing, Mapping):
        meta = dict(existing)
    else:
        return params
    _inject(meta, context=_in_context(span))
    if not meta:
        return params
    out = {} if params is None else params.copy()
    out[META] = meta
    return out


class Operation:
    """One request's span (None when not recording) and duration measurement.

    ``params`` are the params to send: the caller's own, or a copy carrying the trace
    context. :meth:`finish` runs at most once.
    """

    __slots__ = ("_tel", "span", "_t0", "_attrs", "_method", "params", "finished")

    def __init__(
        self, tel: Telemetry, method: str, params: dict[str, Any] | None, traced: bool = True
    ) -> None:
        self._tel = tel
        self._method = method
        self.params = params
        self.finished = False
        self.span: Any = None
        key = TARGETS.get(method)
        target = params.get("name") if key is not None and params is not None else None
        attrs: dict[str, Any] = {MCP_METHOD_NAME: method}
        if type(target) is str:
            attrs[key] = target  # type: ignore[index]
            name = f"{method} {target}"
        else:
            name = method
        if method == "tools/call":
            attrs[GEN_AI_OPERATION_NAME] = EXECUTE_TOOL
        if tel.network_transport is not None:
            attrs[NETWORK_TRANSPORT] = tel.network_transport
            server = tel.server
            if server is not None:
                attrs[SERVER_ADDRESS], attrs[SERVER_PORT] = server
        version = tel.protocol_version()  # known at start unless still negotiating
        if version is not None:
            attrs[MCP_PROTOCOL_VERSION] = version
        self._attrs = attrs
        if not traced:  # the tracer is a no-op proxy and there is no parent to pass on
            self._t0 = _perf()
            return
        try:
            # No context= : the parent is the caller's current context (this runs there).
            span = tel.tracer.start_span(name, kind=_CLIENT, attributes=attrs)
            if span.is_recording():
                self.span = span
                self.params = _with_trace_context(params, span)
            elif span.get_span_context().is_valid:
                # Not sampled, or no SDK under a propagated parent: still pass the context on.
                self.params = _with_trace_context(params, span)
        except Exception as exc:  # telemetry never fails a request
            _log.debug("span not started: %s", type(exc).__name__)
        self._t0 = _perf()

    def finish(
        self,
        result: Any,
        exc: BaseException | None,
        request_id: Any,
        *,
        answered: tuple[int, float] | None = None,
        rounds: int = 0,
    ) -> None:
        """End the span and record the duration. ``result`` is the raw result (a
        ``tools/call`` result with ``isError: true`` is ``error.type="tool_error"``), ``exc``
        the failure. ``answered`` is ``(time.time_ns(), time.perf_counter())`` taken when the
        answer arrived, if that was earlier than now (futures): the span ends and the
        duration stops then."""
        if self.finished:
            return
        self.finished = True
        if answered is None:
            end_time = None
            duration = _perf() - self._t0
        else:
            end_time = answered[0]
            duration = answered[1] - self._t0
        tel = self._tel
        attrs = self._attrs
        version = tel.protocol_version()  # the version the answer came under
        if version is not None and attrs.get(MCP_PROTOCOL_VERSION) != version:
            attrs[MCP_PROTOCOL_VERSION] = version
        else:
            version = None  # already on the span
        error_type = code = description = None
        if exc is not None:
            error_type, code, description = classify(exc)
        elif (
            self._method == "tools/call" and type(result) is dict and result.get("isError") is True
        ):
            error_type = description = TOOL_ERROR
        if error_type is not None:
            attrs[ERROR_TYPE] = error_type
            if code is not None:
                attrs[RPC_RESPONSE_STATUS_CODE] = code
        span = self.span
        if span is not None:
            self.span = None
            try:
                late: dict[str, Any] = {}
                if request_id is not None:
                    late[JSONRPC_REQUEST_ID] = str(request_id)
                if rounds:  # modern input_required rounds: still one call, one span
                    late[INPUT_ROUNDS] = rounds
                if version is not None:  # negotiated (or changed) while the request waited
                    late[MCP_PROTOCOL_VERSION] = version
                if error_type is not None:
                    late[ERROR_TYPE] = error_type
                    if code is not None:
                        late[RPC_RESPONSE_STATUS_CODE] = code
                if late:
                    span.set_attributes(late)
                if description is not None:
                    span.set_status(Status(StatusCode.ERROR, description))
                span.end(end_time=end_time)
            except Exception as exc2:
                _log.debug("span not ended: %s", type(exc2).__name__)
        try:
            tel.instruments.duration.record(duration, attrs)
        except Exception as exc3:
            _log.debug("duration not recorded: %s", type(exc3).__name__)
