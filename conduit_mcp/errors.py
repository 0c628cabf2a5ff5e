"""The one exception type of conduit-mcp.

Every failure a user can observe is a :class:`Error` with a ``kind`` from a closed set, so
callers can branch on ``e.kind`` instead of on exception classes or message text. ``reason``
is a short, stable, machine-readable string (``"deadline"``, ``"max_in_flight"``, ...);
``message`` is for people. Neither ever carries a secret: no tool argument, header value,
token or session id is ever put into an Error (see docs/secrets.md).
"""

from __future__ import annotations

from typing import Any, Final, Literal, get_args

#: The documented kinds. A new kind is an API change: document it in docs/errors.md.
Kind = Literal[
    "config",  # an option given at start is invalid (reason names the option)
    "argument",  # an argument to a call is invalid (reason names the argument)
    "closed",  # the client is closed (stopped, gave up, or a fatal negotiation outcome)
    "timeout",  # the request's deadline passed; the server was told to cancel it
    "transport",  # the connection broke while the request was pending; never retried
    "overloaded",  # a limit was hit (max_in_flight, max_queued) or the server said 429
    "auth",  # the server refused the credentials (HTTP 401/403)
    "unavailable",  # the thing asked for cannot be reached right now (e.g. cache_gone)
    "protocol",  # the server broke the protocol (malformed frame, bad result shape)
    "server",  # the server answered with a JSON-RPC error: see ``code`` and ``data``
    "cancelled",  # the caller cancelled the request itself
    "handler",  # the client's own Handler failed a modern input request (raised, bad result)
]
"""The kind of an :class:`Error`: what a caller branches on (docs/errors.md has each one,
its reasons and what to do). A type checker rejects a comparison with a misspelt kind.

>>> import conduit_mcp as mcp
>>> def retry_later(e: mcp.Error) -> bool:
...     return e.kind in ("overloaded", "unavailable")
>>> retry_later(mcp.Error("overloaded", "max_in_flight"))
True
"""

KINDS: Final[frozenset[str]] = frozenset(get_args(Kind))
"""Every :data:`Kind`, as a set, for checks at run time.

>>> import conduit_mcp as mcp
>>> sorted(mcp.KINDS)[:4], len(mcp.KINDS)
(['argument', 'auth', 'cancelled', 'closed'], 12)
"""


class Error(Exception):
    """A conduit-mcp failure: ``kind`` (one of :data:`KINDS`), ``reason`` and ``message``.

    >>> e = Error("timeout", "deadline", "tools/call did not answer within 0.5 s")
    >>> e.kind, e.reason
    ('timeout', 'deadline')
    >>> str(e)
    'timeout (deadline): tools/call did not answer within 0.5 s'

    For kind ``server`` the JSON-RPC error ``code`` and ``data`` of the server's answer are
    kept (``data`` is the server's own payload, shown only on request, never in ``repr``).
    """

    __slots__ = ("kind", "reason", "message", "code", "data")

    kind: Kind
    reason: str
    message: str
    code: int | None
    data: Any

    def __init__(
        self,
        kind: Kind,
        reason: str,
        message: str | None = None,
        *,
        code: int | None = None,
        data: Any = None,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown error kind {kind!r}")
        self.kind = kind
        self.reason = reason
        self.message = message or reason
        self.code = code
        self.data = data
        super().__init__(kind, reason, self.message)

    def __str__(self) -> str:
        code = f" [{self.code}]" if self.code is not None else ""
        return f"{self.kind} ({self.reason}){code}: {self.message}"

    def __repr__(self) -> str:
        code = f", code={self.code}" if self.code is not None else ""
        return f"Error(kind={self.kind!r}, reason={self.reason!r}{code})"

    def __reduce__(self) -> Any:
        return (_rebuild, (self.kind, self.reason, self.message, self.code, self.data))


def _rebuild(kind: Kind, reason: str, message: str, code: int | None, data: Any) -> Error:
    return Error(kind, reason, message, code=code, data=data)
