"""The transport interface and the events a transport tells its connection.

A transport knows bytes and frames, the connection knows JSON-RPC (docs/architecture.md). Every
event carries ``gen``, the connection attempt it belongs to, so a late event from a transport
the connection already dropped is recognised and ignored (like gen_statem's stale timers).
Events are told, never asked: a transport's callbacks run on the I/O loop and must not block.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol


class TransportUp(NamedTuple):
    """The transport can carry messages (the process spawned, the endpoint answered)."""

    gen: int


class Inbound(NamedTuple):
    """Decoded inbound messages, in arrival order (one tell per read, not per message)."""

    gen: int
    messages: list[Any]


class TransportDown(NamedTuple):
    """The transport is gone. ``reason`` is a short stable string (``"exit"``,
    ``"spawn_failed"``, ``"closed"``, ...); ``detail`` is safe to show (an exit code, an
    errno name), never a secret."""

    gen: int
    reason: str
    detail: str | None = None


class FrameProblem(NamedTuple):
    """A frame that could not be used (malformed JSON, over the size limit). The transport
    stays up: one bad line must not take down a connection with calls in flight."""

    gen: int
    reason: str
    detail: Any = None


class Transport(Protocol):
    """What the connection needs of a transport. All methods are called on the connection's
    thread, return at once, and report outcomes later as events told to the connection."""

    kind: str  # "stdio" or "http": picks the probe classifier's rules

    def connect(self) -> None: ...

    def send(self, message: dict[str, Any]) -> None: ...

    def send_answer(self, message: dict[str, Any]) -> None:
        """Send an answer to a server request, or drop it (counted) when the server has not
        taken ``max_answer_backlog`` bytes yet."""
        ...

    def cancel(self, request_id: int | str, reason: str) -> None: ...

    def close(self) -> None: ...

    def stderr(self) -> bytes: ...

    def negotiated(self, era: str, version: str) -> None:
        """The handshake settled ``era``/``version`` (HTTP sends it as a header)."""
        ...

    def wait_closed(self, timeout: float) -> bool:
        """Block up to ``timeout`` until the transport is fully gone (0: just ask)."""
        ...

    def open_stream(
        self,
        tag: str,
        message: dict[str, Any] | None,
        sink: StreamSink,
        last_event_id: str | None = None,
    ) -> None:
        """Open a long-lived stream: for the request ``message`` (a ``subscriptions/listen``
        whose id is ``tag``), or, with None, the legacy HTTP GET stream (resumed after
        ``last_event_id``). Its messages are told to ``sink`` as :class:`StreamMessages`, its
        end as :class:`StreamEnded`. Any thread; returns at once."""
        ...

    def close_stream(self, tag: str) -> None:
        """Close the stream ``tag`` (the server hears a cancellation); nothing more is told
        of it. Any thread; returns at once."""
        ...


# -- HTTP outcomes (docs/connection.md, "HTTP outcomes") ----------------------------------------


class RequestFailed(NamedTuple):
    """The request ``rid`` got an HTTP answer that is not a JSON-RPC answer (401/403, 429,
    5xx, an unusable body, a response over the size limit). ``error`` is what its caller
    sees; ``status``/``body`` let the connection classify a probe (``HttpProbe``). The body
    is the server's and may echo anything: it never goes into a log or a repr."""

    gen: int
    rid: Any
    error: Any
    status: int | None = None
    body: bytes | None = None

    def __repr__(self) -> str:
        return f"RequestFailed(gen={self.gen}, rid={self.rid!r}, status={self.status})"


class StreamBroken(NamedTuple):
    """The response stream of ``rid`` broke before its answer (and, in the legacy era, could
    not be resumed with ``Last-Event-ID``). The request may have run."""

    gen: int
    rid: Any
    detail: str | None = None


class SessionExpired(NamedTuple):
    """Legacy HTTP: the server no longer knows the session (404 for a request carrying it).
    The transport keeps the expired request and re-sends it once the connection has run a
    new ``initialize`` (docs/connection.md, "HTTP outcomes"); ``rid`` is None when the GET stream found it out."""

    gen: int
    rid: Any


# -- long-lived streams (the listen actor's) ---------------------------------------------------


class StreamMessages(NamedTuple):
    """Messages of a long-lived stream, told to the stream's sink (the listen actor), not to
    the connection. ``tag`` is the stream's (its listen request id over HTTP); None over
    stdio, where every listen shares the one pipe and the sink reads the
    ``subscriptionId``."""

    gen: int
    tag: str | None
    messages: list[Any]


class StreamEnded(NamedTuple):
    """A long-lived stream ended without being closed by its sink (the server ended it, it
    broke, the transport closed). ``detail`` is safe to show. ``final``: reopening it cannot
    help (the server offers no stream, the session is gone). The legacy GET stream also
    says what reopening it needs: the server's ``retry`` (ms) and the last event id."""

    gen: int
    tag: str
    detail: str
    final: bool = False
    retry_ms: int | None = None
    last_event_id: str | None = None


class StreamSink(Protocol):
    """Who hears a long-lived stream: an actor ref (``tell`` raises ``ActorDeadError`` once
    it is dead, and the stream then closes itself)."""

    def tell(self, message: Any) -> None: ...
