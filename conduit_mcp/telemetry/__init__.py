"""OpenTelemetry for conduit-mcp: a CLIENT span per request, trace context in
``params._meta``, the ``mcp.client.operation.duration`` histogram, and counters for the
connection's transitions, cancellations and dropped responses (docs/telemetry.md, "Telemetry").

Only ``opentelemetry-api`` is needed. Without an SDK (no provider given, none installed
globally, an empty current context) :meth:`Telemetry.start` returns None after three reads,
and a request pays a few hundred nanoseconds for its telemetry (docs/telemetry.md, "Telemetry").

Providers are per client (``tracer_provider=``, ``meter_provider=``). None means the global
ones, resolved lazily through the API's proxies, so an application that installs its
providers after starting a client is still honoured.

Where each thing runs:

* spans and the histogram: in the caller (its thread, its asyncio loop, or, for
  ``client.futures``, the thread that first ``get()``s the future), because span processors
  and exporters are application code and the connection never runs application code;
* the counters: in the connection actor, as ``Counter.add`` calls, which run no processor or
  exporter code (see :mod:`conduit_mcp.telemetry.metrics`).
"""

from __future__ import annotations

import logging
from typing import Any

from opentelemetry import trace
from opentelemetry.context import get_current
from opentelemetry.trace import ProxyTracer

from ..errors import Error
from ..protocol.messages import PACKAGE_VERSION
from . import attributes
from .attributes import SCOPE
from .metrics import NO_CONNECTION_TELEMETRY, ConnectionTelemetry, Instruments, instruments_for
from .spans import TARGETS, Operation, classify

__all__ = [
    "NO_CONNECTION_TELEMETRY",
    "TARGETS",
    "ConnectionTelemetry",
    "Instruments",
    "Operation",
    "Telemetry",
    "attributes",
    "classify",
]

_log = logging.getLogger("conduit_mcp.telemetry")

# The zero-SDK fast path peeks at the API's "is a global provider installed yet" globals (the
# public getters cost ~1 us: they read os.environ). If a future API release renames them, the
# fast path is simply off and every request takes the general path, which is always correct.
_trace_state: Any = trace
_metrics_state: Any
try:
    from opentelemetry.metrics import _internal as _metrics_state
except ImportError:  # pragma: no cover - a future API layout
    _metrics_state = None
_CAN_PEEK = hasattr(_trace_state, "_TRACER_PROVIDER") and hasattr(_metrics_state, "_METER_PROVIDER")


_proxy_tracer: ProxyTracer | None = None


def _tracer_for(tracer_provider: Any) -> Any:
    """The tracer for ``tracer_provider``. With None and no global provider yet, the API's
    proxy tracer, one for the process: it finds the global provider once one is installed,
    whoever holds it (a fresh one for each client was two objects a client)."""
    global _proxy_tracer
    if tracer_provider is None and _proxy_tracer is not None:
        return _proxy_tracer
    tracer = trace.get_tracer(SCOPE, PACKAGE_VERSION, tracer_provider=tracer_provider)
    if tracer_provider is None and type(tracer) is ProxyTracer:
        _proxy_tracer = tracer
    return tracer


class Telemetry:
    """The telemetry of one client incarnation: its tracer, its instruments, the connection's
    hooks, and what every span says about the transport.

    ``shared`` (a :class:`~conduit_mcp.published.Published`) is read for the negotiated protocol
    version when a request finishes.
    """

    __slots__ = (
        "tracer",
        "instruments",
        "connection",
        "network_transport",
        "_shared",
        "_tracer_proxy",
        "_meter_proxy",
        "server",
    )

    def __init__(
        self,
        tracer_provider: Any = None,
        meter_provider: Any = None,
        *,
        network_transport: str | None = None,
        shared: Any = None,
        server: tuple[str, int] | None = None,
    ) -> None:
        # (server.address, server.port) of an HTTP server; None for stdio.
        self.server = server
        try:
            self.tracer = _tracer_for(tracer_provider)
        except Exception as exc:
            raise Error(
                "config",
                "tracer_provider",
                f"tracer_provider.get_tracer failed ({type(exc).__name__})",
            ) from None
        try:
            self.instruments = instruments_for(meter_provider)
        except Exception as exc:
            raise Error(
                "config",
                "meter_provider",
                f"meter_provider.get_meter failed ({type(exc).__name__})",
            ) from None
        self.connection = ConnectionTelemetry(self.instruments)
        self.network_transport = network_transport
        self._shared = shared
        # True while our instruments are the API's proxies for a global provider not yet
        # installed (then they are no-ops until one is: checked again at every request).
        self._tracer_proxy = (
            _CAN_PEEK and tracer_provider is None and type(self.tracer) is ProxyTracer
        )
        self._meter_proxy = (
            _CAN_PEEK and meter_provider is None and _metrics_state._METER_PROVIDER is None
        )

    def __repr__(self) -> str:
        return f"<Telemetry transport={self.network_transport!r}>"

    def start(self, method: str, params: dict[str, Any] | None) -> Operation | None:
        """Start a request's span (a child of the caller's current context) and clock; send
        ``op.params``, then call ``op.finish(...)`` in the caller.

        None when there is nothing to record or propagate: no SDK behind the tracer or the
        meter, and no span in the caller's context whose trace context the API would pass on.
        """
        traced = not (
            self._tracer_proxy
            and _trace_state._TRACER_PROVIDER is None
            and not get_current()  # an empty context: no parent span to pass on
        )
        if traced or not (self._meter_proxy and _metrics_state._METER_PROVIDER is None):
            return Operation(self, method, params, traced)
        return None

    def protocol_version(self) -> str | None:
        shared = self._shared
        return None if shared is None else shared.status.version
