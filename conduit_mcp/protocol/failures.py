"""Why a client could not connect, in words a user can act on: pure functions, no I/O.

The connection records each failed attempt as a :class:`Failure` (the transport's reason, a
detail that is safe to show, and for a stdio server the tail of its stderr) and publishes
the last one. When the client closes, or a caller's wait for ``ready`` runs out, the error
says what the last attempt met and what to change, instead of repeating its reason
(``closed (max_reconnects): the client is closed (max_reconnects)`` said nothing).

What a detail may hold: an exception's class and its OS error text (``FileNotFoundError:
No such file or directory``), an exit code, an HTTP status. Never the server's arguments,
environment, headers or URL query: those may carry credentials. The tail of a stdio
server's stderr is the server's own words, shown because it is usually the answer ("config
file missing"); it is cut to a few lines.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from .tls import CLOSED_OVER_TLS, CLOSED_OVER_TLS_HINT, tls_hint

#: How much of a stdio server's stderr a failure keeps: its last lines, at most this long.
STDERR_TAIL_LINES = 5
STDERR_TAIL_CHARS = 600

#: Spawn errors no retry can fix: the command is missing or cannot be run.
_PERMANENT_SPAWN = ("FileNotFoundError", "PermissionError", "NotADirectoryError")


@dataclass(frozen=True, slots=True)
class Failure:
    """One failed connection attempt."""

    reason: str
    detail: str | None = None
    stderr: str | None = field(default=None, repr=False)

    def data(self) -> dict[str, Any]:
        """The failure as ``Error.data`` members."""
        out: dict[str, Any] = {"last_reason": self.reason}
        if self.detail:
            out["detail"] = self.detail
        if self.stderr:
            out["stderr"] = self.stderr
        return out


def stderr_tail(raw: bytes) -> str | None:
    """The last lines of a server's stderr, decoded leniently and cut; None if empty.

    >>> stderr_tail(b"starting\\nfatal: config file missing\\n")
    'starting\\nfatal: config file missing'
    >>> stderr_tail(b"") is None
    True
    """
    text = raw.decode("utf-8", "replace").strip()
    if not text:
        return None
    lines = text.splitlines()[-STDERR_TAIL_LINES:]
    tail = "\n".join(line.rstrip() for line in lines)
    if len(tail) > STDERR_TAIL_CHARS:
        tail = "..." + tail[-STDERR_TAIL_CHARS:]
    return tail


def is_permanent(failure: Failure) -> bool:
    """True when retrying cannot help: close at once instead of backing off.

    >>> is_permanent(Failure("spawn_failed", "FileNotFoundError: No such file or directory"))
    True
    >>> is_permanent(Failure("exit", "exit code 1"))
    False
    >>> is_permanent(Failure("tls_failed", "ClientConnectorSSLError"))
    True
    """
    if failure.reason == "spawn_failed":
        return (failure.detail or "").startswith(_PERMANENT_SPAWN)
    return failure.reason == "tls_failed"


_HINTS = {
    "spawn_failed": "check the command and its PATH (a stdio server gets a minimal environment "
    "by default: pass env=... or inherit_env=True)",
    "exit": "the server exited; its stderr usually says why",
    "unreachable": "check the URL's host and port, and that the server is listening",
    "connect_timeout": "no connection to the server was made in time (TCP, then TLS for "
    "https): is the server overloaded, or is its port another service's?",
    "initialize_timeout": "the server did not answer initialize within request_timeout",
    "stream_broken": "the server closed the connection before answering",
    "credentials_failed": "the auth callable raised",
    "initialize_refused": "the server refused the initialize handshake (is the URL or command "
    "an MCP server? HTTP endpoints usually end in /mcp)",
    "credentials_timeout": "the auth callable did not return within auth_timeout",
    "endpoint_origin": "the server's SSE stream named a message endpoint on another origin; "
    "nothing was sent there (if that server is the right one, give its URL to Sse)",
    "session_lost": "the SSE session was lost (its stream ended or the server forgot it)",
    "stream_lost": "the SSE stream was lost: the session is gone, the client reconnects",
    "no_endpoint": "the SSE stream ended before it named its message endpoint (is the URL "
    "an HTTP+SSE endpoint? they usually end in /sse)",
    "oauth_unreachable": "the authorization server could not be reached: check that it is "
    "running and reachable from here",
    "unauthorized": "the server refused every new token the authorization server issued: "
    "check their resource (audience) and scopes",
}

_CLOSED = {
    "stopped": "the client was stopped",
    "legacy_server": "the server does not speak the modern protocol, and protocol='modern' "
    "forbids falling back to initialize (use protocol='auto')",
    "no_mutual_version": "the server supports no protocol version this client speaks",
    "version_refused": "the server refused the protocol version it had itself proposed",
    "missing_client_capability": "the server requires a client capability this client did "
    "not declare",
    "header_mismatch": "the server rejected the client's MCP HTTP headers",
    "initialize_refused": "the server refused the initialize handshake (is the URL or command "
    "an MCP server?)",
    "auth_required": "the server refused the credentials",
}


def describe(failure: Failure, hints: Mapping[str, str] | None = None) -> str:
    """One sentence: the failure, its detail, its hint, and the server's last stderr line.

    ``hints`` replaces the hint of the reasons it names: the command line says ``--env`` where
    the library says ``env=...``.

    >>> describe(Failure("http_501"))
    'http_501: the server answered HTTP 501 (is the URL an MCP endpoint? they usually end in /mcp)'
    >>> describe(Failure("tls_failed", "expired: certificate has expired"))
    "tls_failed (expired: certificate has expired): the server's certificate has expired (or this machine's clock is wrong): renew the certificate"
    >>> describe(Failure("exit", "3", "loading\\nfatal: config file missing"))
    'exit (exit code 3): the server exited; its stderr usually says why; its stderr ends with: fatal: config file missing'
    """
    text = failure.reason
    detail = failure.detail
    if failure.reason == "exit" and detail is not None and detail.lstrip("-").isdigit():
        code = int(detail)
        detail = f"killed by signal {-code}" if code < 0 else f"exit code {code}"
    if detail:
        text += f" ({detail})"
    hint: str | None = (hints or {}).get(failure.reason)
    if hint is not None:
        pass  # the caller's own words (the command line's option names)
    elif failure.reason == "tls_failed":
        hint = tls_hint(failure.detail)
    elif failure.reason == "stream_broken" and CLOSED_OVER_TLS in (failure.detail or ""):
        hint = CLOSED_OVER_TLS_HINT
    else:
        hint = _HINTS.get(failure.reason)
    if hint is None and failure.reason.startswith("http_") and failure.reason[5:].isdigit():
        hint = (
            f"the server answered HTTP {failure.reason[5:]} (is the URL an MCP endpoint? "
            "they usually end in /mcp)"
        )
    if hint:
        text += f": {hint}"
    if failure.stderr:
        last = failure.stderr.splitlines()[-1][:200]
        text += f"; its stderr ends with: {last}"
    return text


def closed_message(reason: str, *, attempts: int, limit: int | None, last: Failure | None) -> str:
    """Why the client is closed, and what the last attempt met.

    >>> closed_message("max_reconnects", attempts=4, limit=3,
    ...                last=Failure("unreachable", "Connection refused"))
    "the client gave up after 4 failed attempts to connect (max_reconnects=3); the last one: unreachable (Connection refused): check the URL's host and port, and that the server is listening"
    >>> closed_message("max_reconnects", attempts=1, limit=0, last=None)
    'the client gave up after 1 failed attempt to connect (max_reconnects=0)'
    >>> closed_message("legacy_server", attempts=0, limit=10, last=None)
    "the client is closed: the server does not speak the modern protocol, and protocol='modern' forbids falling back to initialize (use protocol='auto')"
    """
    if reason == "max_reconnects":
        text = (
            f"the client gave up after {attempts} failed attempt{'' if attempts == 1 else 's'} "
            f"to connect (max_reconnects={limit})"
        )
        if last is not None:
            text += f"; the last one: {describe(last)}"
        return text
    if last is not None and reason == last.reason:
        return (
            f"the client is closed: it cannot connect, and retrying cannot help: {describe(last)}"
        )
    return f"the client is closed: {_CLOSED.get(reason, reason)}"


def not_ready_message(
    what: str, seconds: float, option: str, state: str, last: Failure | None
) -> str:
    """A wait for ``ready`` that ran out: the deadline, the option that set it, and why.

    >>> not_ready_message("await_ready", 2.0, "the timeout argument", "reconnecting",
    ...                   Failure("exit", "exit code 1"))
    'await_ready: the client was not ready within 2 s (the timeout argument); it is reconnecting after: exit (exit code 1): the server exited; its stderr usually says why'
    """
    text = f"{what}: the client was not ready within {seconds:g} s ({option}); it is {state}"
    if last is not None:
        text += f" after: {describe(last)}"
    return text
