"""Bookkeeping of the scripted HTTP server: response streams, open exchanges, routing.

The protocol core (:class:`~conduit_mcp.testing.scripted.server.ScriptedMcpServer`) only knows
``emit(msg)``; over HTTP each emitted message must find its way to one HTTP response. A
:class:`Router` does that for one core (the shared modern core, or one legacy
:class:`Session`): responses go to the open POST with that id, subscription notifications to
their listen stream, progress to the stream of the request that carries the token, anything
else to the stream of the request being handled (a context variable set around
``receive``, inherited by the tasks the core spawns), else, in a legacy session, to the GET
stream. A :class:`Stream` keeps its events (bounded) so a legacy client can resume it with
``Last-Event-ID``; writers follow it with :meth:`Stream.after` and :meth:`Stream.changed`.
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import orjson

from ..scripted.protocol import SUBSCRIPTION_KEY, dict_at

if TYPE_CHECKING:
    from ..scripted.rules import Rule
    from ..scripted.server import ScriptedMcpServer

__all__ = ["Exchange", "Router", "Session", "Stream", "current_exchange"]

HISTORY = 1000  # events kept per stream for resumption
STREAMS_KEPT = 200  # streams kept per legacy session for resumption
PENDING = 1000  # messages kept for a legacy session without a GET stream

# The exchange (POST) whose message the core is handling; tasks the core spawns inherit it.
current_exchange: contextvars.ContextVar[Exchange | None] = contextvars.ContextVar(
    "conduit_mcp_testing_exchange", default=None
)

EventFn = Callable[..., None]


@dataclass(slots=True)
class Item:
    """One event of a stream: ``data`` is the JSON text (or a raw garbage line)."""

    seq: int
    data: bytes
    msg: dict[str, Any] | None


class Stream:
    """The events of one SSE response (a POST's, or a legacy session's GET stream).

    ``number`` is None on modern streams (no ids, no resumption); on legacy streams each event
    has the id ``"<number>-<seq>"``. ``finished`` is set once the stream's last event is in
    (the POST's response, or the end of a session); writers end after writing it.
    """

    def __init__(self, number: int | None, kind: str = "post") -> None:
        self.number = number
        self.kind = kind  # post | get
        self.items: collections.deque[Item] = collections.deque(maxlen=HISTORY)
        self.seq = 0
        self.finished = False
        self.writers = 0
        self.abort = False  # close_stdout over HTTP: drop the connection
        self._changed = asyncio.Event()

    def append(self, data: bytes, msg: dict[str, Any] | None) -> None:
        self.seq += 1
        self.items.append(Item(self.seq, data, msg))
        self._wake()

    def finish(self) -> None:
        self.finished = True
        self._wake()

    def _wake(self) -> None:
        self._changed.set()
        self._changed.clear()

    def after(self, seq: int) -> list[Item]:
        return [item for item in self.items if item.seq > seq]

    async def changed(self) -> None:
        """Wait for the next append or finish (check :attr:`seq` first: no lost wake-ups)."""
        await self._changed.wait()

    def event_id(self, seq: int) -> str:
        return f"{self.number}-{seq}"

    def encode(self, item: Item) -> bytes:
        """The SSE event: ``id:`` on legacy streams, then one ``data:`` line."""
        data = item.data.replace(b"\r", b"").replace(b"\n", b" ")
        if self.number is None:
            return b"data: " + data + b"\n\n"
        return b"id: %s\ndata: %s\n\n" % (self.event_id(item.seq).encode(), data)

    def only_error(self) -> bool:
        """Whether the stream holds nothing but one (final) error response."""
        return (
            self.finished
            and len(self.items) == 1
            and self.items[0].msg is not None
            and "error" in self.items[0].msg
        )


@dataclass(slots=True, eq=False)
class Exchange:
    """One POST being answered: its JSON-RPC message, response mode and stream."""

    router: Router
    request_id: Any
    method: str | None
    mode: str  # json | sse
    stream: Stream
    token: Any = None
    rule: Rule | None = None
    fault: asyncio.Future[Rule] | None = None
    drop_after: int | None = None
    dropped: bool = False  # the server aborted the connection (drop_stream)
    attached: bool = True  # the POST's handler still serves it


@dataclass(eq=False)
class Router:
    """Routes what one core emits to the open exchanges of that core."""

    event: EventFn
    legacy: bool
    session_id: str | None = None
    core: ScriptedMcpServer | None = None
    exchanges: dict[Any, Exchange] = field(default_factory=dict)
    tokens: dict[Any, Exchange] = field(default_factory=dict)
    next_stream: int = 0

    def new_stream(self, kind: str = "post") -> Stream:
        if not self.legacy:
            return Stream(None, kind)
        self.next_stream += 1
        return Stream(self.next_stream, kind)

    def open(self, exchange: Exchange) -> None:
        if exchange.request_id is not None:
            self.exchanges[exchange.request_id] = exchange
        if exchange.token is not None:
            self.tokens[exchange.token] = exchange

    def close(self, exchange: Exchange) -> None:
        if self.exchanges.get(exchange.request_id) is exchange:
            del self.exchanges[exchange.request_id]
        if exchange.token is not None and self.tokens.get(exchange.token) is exchange:
            del self.tokens[exchange.token]

    # ---- the core's callbacks ---------------------------------------------------------------

    def emit(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        current = current_exchange.get()
        if current is not None and current.router is not self:
            current = None
        if method is None:  # a response
            rid = msg.get("id")
            target = self.exchanges.get(rid) if type(rid) in (int, str) else None
            if target is None and current is not None and current.attached:
                target = current  # e.g. wrong_id / respond_twice: on the POST being handled
            if target is None:
                self.event("response_dropped", id=rid, session=self.session_id)
                return
            self._deliver(target, msg, final=True)
            return
        params = dict_at(msg, "params")
        meta = dict_at(params, "_meta")
        cancelled = params.get("requestId") if method == "notifications/cancelled" else None
        if SUBSCRIPTION_KEY in meta:
            self._to(self._lookup(self.exchanges, meta[SUBSCRIPTION_KEY]), msg, "no listen")
        elif method == "notifications/progress":
            self._to(self._lookup(self.tokens, params.get("progressToken")), msg, "no request")
        elif type(cancelled) in (int, str) and cancelled in self.exchanges:
            self._deliver(self.exchanges[cancelled], msg, final=True)  # a listen ended
        elif current is not None and current.mode == "sse" and not current.stream.finished:
            self._deliver(current, msg, final=False)
        elif self.legacy:
            self.to_get_stream(msg)
        else:
            reason = "json response" if current is not None else "no stream"
            self.event("notification_dropped", method=method, reason=reason)

    def emit_raw(self, line: bytes) -> None:
        current = current_exchange.get()
        if current is None or current.router is not self or current.stream.finished:
            self.event("raw_dropped", session=self.session_id)
            return
        current.stream.append(line.rstrip(b"\n"), None)
        if current.mode == "json":  # the body: a non-JSON answer
            self._finish(current)

    def close_output(self) -> None:
        current = current_exchange.get()
        if current is not None and current.router is self:
            current.stream.abort = True
            current.stream.finish()
            self.close(current)

    # ---- delivery ---------------------------------------------------------------------------

    @staticmethod
    def _lookup(table: dict[Any, Exchange], key: Any) -> Exchange | None:
        return table.get(key) if type(key) in (int, str) else None

    def _to(self, target: Exchange | None, msg: dict[str, Any], why: str) -> None:
        if target is None:
            self.event("notification_dropped", method=msg.get("method"), reason=why)
        else:
            self._deliver(target, msg, final=False)

    def _deliver(self, target: Exchange, msg: dict[str, Any], *, final: bool) -> None:
        stream = target.stream
        if target.mode == "json":
            if not final:
                self.event("notification_dropped", method=msg.get("method"), reason="json response")
                return
            if stream.finished:
                self.event("response_dropped", id=msg.get("id"), session=self.session_id)
                return
        stream.append(orjson.dumps(msg), msg)
        if final:
            self._finish(target)

    def _finish(self, exchange: Exchange) -> None:
        exchange.stream.finish()
        self.close(exchange)

    def to_get_stream(self, msg: dict[str, Any]) -> None:
        self.event("notification_dropped", method=msg.get("method"), reason="no GET stream")


class Session(Router):
    """A legacy session: its own core, its GET stream and the streams kept for resumption."""

    def __init__(self, event: EventFn, session_id: str) -> None:
        super().__init__(event=event, legacy=True, session_id=session_id)
        self.streams: collections.OrderedDict[int, Stream] = collections.OrderedDict()
        self.get_stream: Stream | None = None
        self.pending: collections.deque[dict[str, Any]] = collections.deque(maxlen=PENDING)

    @property
    def version(self) -> str | None:
        """The negotiated protocol version (None before ``initialize`` is answered)."""
        return None if self.core is None else self.core._legacy_version

    def new_stream(self, kind: str = "post") -> Stream:
        stream = super().new_stream(kind)
        assert stream.number is not None
        self.streams[stream.number] = stream
        while len(self.streams) > STREAMS_KEPT:
            self.streams.popitem(last=False)
        return stream

    def open_get_stream(self) -> Stream:
        """A new GET stream, holding what was buffered while there was none."""
        stream = self.new_stream("get")
        if self.get_stream is not None:
            self.get_stream.finish()
        self.get_stream = stream
        while self.pending:
            msg = self.pending.popleft()
            stream.append(orjson.dumps(msg), msg)
        return stream

    def find(self, last_event_id: str) -> tuple[Stream, int] | None:
        """The stream and sequence number a ``Last-Event-ID`` names (None: unknown)."""
        number, _, seq = last_event_id.partition("-")
        if not (number.isdigit() and seq.isdigit()):
            return None
        stream = self.streams.get(int(number))
        return None if stream is None else (stream, int(seq))

    def to_get_stream(self, msg: dict[str, Any]) -> None:
        stream = self.get_stream
        if stream is not None and not stream.finished:
            if stream.writers == 0:
                self.event("buffered", method=msg.get("method"), session=self.session_id)
            stream.append(orjson.dumps(msg), msg)
            return
        self.event("buffered", method=msg.get("method"), session=self.session_id)
        self.pending.append(msg)

    def end(self) -> None:
        """The session is over (deleted or expired): end every stream."""
        for stream in self.streams.values():
            stream.finish()
        self.exchanges.clear()
        self.tokens.clear()
