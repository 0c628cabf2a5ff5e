"""The transport interface and the events a transport tells its connection.

A transport knows bytes and frames, the connection knows JSON-RPC (STYLE, "aiohttp"). Every
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

    def cancel(self, request_id: int | str, reason: str) -> None: ...

    def close(self) -> None: ...

    def stderr(self) -> bytes: ...

    def wait_closed(self, timeout: float) -> bool:
        """Block up to ``timeout`` until the transport is fully gone (0: just ask)."""
        ...
