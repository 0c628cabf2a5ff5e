"""The instruments: the operation-duration histogram and the connection-level counters.

The counters are the connection's one-shot events (transitions, cancellations, dropped
responses: ``docs/porting.md``, "Telemetry events to OpenTelemetry"). They are counted *in the
connection actor*, which must never run user code, so they are OTel metrics counters rather
than spans or span events:
``Counter.add`` only folds the point into an in-process aggregation (a dict update under a
lock in the default SDK); no span processor, exporter or reader code runs synchronously with
it (periodic readers export from their own thread, pull readers on ``collect``). Without an
SDK it is a proxy instrument's ``if``. A span or span event would instead run the
application's span processors on the connection's thread.

Every hook swallows (and logs at DEBUG) an exception, so a broken provider can never take the
connection down.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from opentelemetry import metrics

from ..protocol.messages import PACKAGE_VERSION
from .attributes import (
    CACHE_REFRESHES,
    CONNECTION_TRANSITIONS,
    DROPPED,
    DURATION_BUCKETS,
    FROM,
    KIND,
    METHOD,
    NOTIFICATIONS,
    OPERATION_DURATION,
    OUTCOME,
    REASON,
    REQUEST_CANCELLATIONS,
    RESPONSE_DROPPED,
    SCOPE,
    TO,
    TOOL_DEFINITION_CHANGES,
)

# The connection's own logger: transitions are logged beside its other records.
log = logging.getLogger("conduit_mcp.connection")
_tlog = logging.getLogger("conduit_mcp.telemetry")


class Instruments:
    """The instruments of one client, from its meter provider (None: the global one, through
    a proxy meter that follows a provider set later)."""

    __slots__ = (
        "duration",
        "transitions",
        "cancellations",
        "dropped",
        "notifications",
        "refreshes",
        "tool_changes",
        "overflow",
    )

    def __init__(self, meter_provider: Any = None) -> None:
        meter = metrics.get_meter(SCOPE, PACKAGE_VERSION, meter_provider=meter_provider)
        self.duration = meter.create_histogram(
            OPERATION_DURATION,
            unit="s",
            description="Duration of MCP requests as observed by the caller.",
            explicit_bucket_boundaries_advisory=list(DURATION_BUCKETS),
        )
        self.transitions = meter.create_counter(
            CONNECTION_TRANSITIONS,
            unit="{transition}",
            description="State changes of MCP client connections (from, to, reason).",
        )
        self.cancellations = meter.create_counter(
            REQUEST_CANCELLATIONS,
            unit="{request}",
            description="Requests the client asked the server to cancel (reason).",
        )
        self.dropped = meter.create_counter(
            RESPONSE_DROPPED,
            unit="{response}",
            description="Responses dropped because their request was no longer pending.",
        )
        self.notifications = meter.create_counter(
            NOTIFICATIONS,
            unit="{notification}",
            description="Server notifications delivered to subscribers (method).",
        )
        self.refreshes = meter.create_counter(
            CACHE_REFRESHES,
            unit="{refresh}",
            description="Cache list refreshes (kind, outcome: start, ok, error).",
        )
        self.tool_changes = meter.create_counter(
            TOOL_DEFINITION_CHANGES,
            unit="{tool}",
            description="Tools whose definition changed under the same name.",
        )
        self.overflow = meter.create_counter(
            DROPPED,
            unit="{message}",
            description="Messages a flood made the client drop (kind: inbound, answer, "
            "notification).",
        )


_global_lock = threading.Lock()
_global: Instruments | None = None


def instruments_for(meter_provider: Any = None) -> Instruments:
    """The instruments for ``meter_provider``: with None (the global provider), one set for
    the whole process.

    Through the API's proxy (no global provider yet), each ``get_meter`` made a proxy meter
    that the API keeps for good, and eight proxy instruments: about 1.9 KiB a client, never
    freed (``benchmarks/many_clients.py``). They are the same instruments for every client
    (same scope, names, units; the attributes tell the points apart), and the proxies follow
    a provider installed later, so one set serves all. An explicit provider gets its own
    call: an SDK provider hands the same meter and instruments back anyway.
    """
    global _global
    if meter_provider is not None:
        return Instruments(meter_provider)
    found = _global
    if found is None:
        with _global_lock:
            found = _global
            if found is None:
                found = _global = Instruments(None)
    return found


class ConnectionTelemetry:
    """The O(1) hooks the connection calls on transitions, cancellations and dropped
    responses (never on the per-request path). Attribute values are the connection's own
    fixed strings (states, reasons): no server text, no arguments, no ids."""

    __slots__ = (
        "_transitions",
        "_cancellations",
        "_dropped",
        "_notifications",
        "_refreshes",
        "_tool_changes",
        "_overflow",
    )

    def __init__(self, instruments: Instruments | None) -> None:
        if instruments is None:
            self._transitions = self._cancellations = self._dropped = None
            self._notifications = self._refreshes = self._tool_changes = None
            self._overflow = None
        else:
            self._transitions = instruments.transitions
            self._cancellations = instruments.cancellations
            self._dropped = instruments.dropped
            self._notifications = instruments.notifications
            self._refreshes = instruments.refreshes
            self._tool_changes = instruments.tool_changes
            self._overflow = instruments.overflow

    def transition(self, old: str, new: str, reason: str | None) -> None:
        log.debug("connection %s -> %s (reason %s)", old, new, reason)
        if self._transitions is None:
            return
        attrs = {FROM: old, TO: new}
        if reason is not None:
            attrs[REASON] = reason
        _add(self._transitions, attrs)

    def cancelled(self, reason: str) -> None:
        _add(self._cancellations, {REASON: reason})

    def dropped(self) -> None:
        _add(self._dropped, None)

    def notification(self, method: str) -> None:
        """A notification went to subscribers. ``method`` is the server's method name: a
        short protocol string, never params."""
        _add(self._notifications, {METHOD: method[:100]})

    def refresh(self, kind: str, outcome: str) -> None:
        _add(self._refreshes, {KIND: kind, OUTCOME: outcome})

    def tool_changed(self) -> None:
        _add(self._tool_changes, None)

    def overflow(self, kind: str, count: int) -> None:
        """``count`` messages of ``kind`` dropped by a flood bound (any thread: the I/O
        loop, the connection, the notifier; ``Counter.add`` is thread-safe)."""
        _add(self._overflow, {KIND: kind}, count)


def _add(counter: Any, attrs: dict[str, str] | None, amount: int = 1) -> None:
    if counter is None:
        return
    try:
        counter.add(amount, attrs)
    except Exception as exc:
        _tlog.debug("not counted: %s", type(exc).__name__)


#: Hooks that count nothing (a connection started without a runtime's telemetry).
NO_CONNECTION_TELEMETRY = ConnectionTelemetry(None)
