"""Bounded HTTP for the OAuth calls: every request has a deadline, every body a size limit,
no redirect is followed, and an authorization server's endpoints must be https (loopback
excepted), so a hostile or broken server can neither stall nor grow the client.

The session given should be the OAuth code's own (no default headers, no cookies shared with
the MCP server): a session-wide header, an API key say, would otherwise reach the
authorization server too. Session middlewares are bypassed on every call here.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import orjson

from ..errors import Error
from ..protocol.tls import (
    CLOSED_OVER_TLS,
    CLOSED_OVER_TLS_HINT,
    is_tls_failure,
    tls_detail,
    tls_hint,
)
from .urls import is_loopback, is_secure

#: The longest one OAuth HTTP call may take (seconds), connect to last byte.
HTTP_TIMEOUT = 10.0
#: The largest response body read from a metadata, registration or token endpoint (bytes).
MAX_BODY = 256 * 1024


# A connection closed before any answer: over https, what a server that requires a client
# certificate does to a client without one (docs/tls.md).
_CLOSED = (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError)

#: ``Error.data`` of a failure to reach an authorization server at all (a timeout, a refused
#: connection): worth trying again later, unlike a refusal, so the connection backs off and
#: reconnects instead of closing (docs/connection.md, "Authorizing").
UNREACHABLE: dict[str, Any] = {"unreachable": True}


def unreachable_data(url: str, detail: str) -> dict[str, Any]:
    """:data:`UNREACHABLE` with where (``url``'s origin, never a userinfo, path or query)
    and what the last attempt met (an exception's class and OS error text, or a timeout).

    >>> unreachable_data("https://u:p@as.example:8443/token?x=1", "TimeoutError")
    {'unreachable': True, 'origin': 'https://as.example:8443', 'detail': 'TimeoutError'}
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = f":{parts.port}" if parts.port is not None else ""
    except ValueError:
        port = ""
    return {**UNREACHABLE, "origin": f"{parts.scheme}://{host}{port}", "detail": detail}


def is_unreachable(data: Any) -> bool:
    """Whether an error's ``data`` says its server could not be reached at all."""
    return isinstance(data, dict) and data.get("unreachable") is True


def _failure(exc: aiohttp.ClientError) -> str:
    """The exception's class and its OS error text (never the URL it may quote)."""
    os_error = getattr(exc, "os_error", None)
    text = getattr(os_error, "strerror", None)
    return f"{type(exc).__name__}: {text}" if isinstance(text, str) and text else type(exc).__name__


def require_secure(url: Any, what: str, reason: str) -> str:
    """``url`` when it is an https (or loopback http) URL, else ``Error("auth", reason)``."""
    if not isinstance(url, str) or not is_secure(url):
        raise Error(
            "auth",
            reason,
            f"the {what} must be an https URL (http only to 127.0.0.1, ::1 or localhost)",
        )
    return url


class Response:
    """A bounded response: the status, the headers that matter (``dpop_nonce``: a
    ``DPoP-Nonce`` header, RFC 9449 section 8), the parsed JSON body (a dict, or None when
    the body is not a JSON object)."""

    __slots__ = ("status", "json", "content_type", "dpop_nonce")

    def __init__(
        self,
        status: int,
        json: dict[str, Any] | None,
        content_type: str,
        dpop_nonce: str | None = None,
    ) -> None:
        self.status = status
        self.json = json
        self.content_type = content_type
        self.dpop_nonce = dpop_nonce

    def __repr__(self) -> str:  # the body may hold tokens
        return f"Response(status={self.status})"


async def _read(resp: aiohttp.ClientResponse, limit: int, what: str, reason: str) -> bytes:
    """The whole body, to its end, or ``Error`` past ``limit`` bytes. One ``read(n)`` would
    return only what has arrived so far (a body written in two segments, a large one), so
    the chunks are gathered until the end; the caller's deadline bounds the wait."""
    if resp.content_length is not None and resp.content_length > limit:
        raise Error("auth", reason, f"the {what} answered more than {limit} bytes")
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise Error("auth", reason, f"the {what} answered more than {limit} bytes")
        chunks.append(chunk)
    return b"".join(chunks)


async def request(
    session: aiohttp.ClientSession,
    method: str,
    url: str,
    *,
    what: str,
    reason: str,
    headers: Mapping[str, str] | None = None,
    data: str | None = None,
    json: Any = None,
    timeout: float = HTTP_TIMEOUT,
    limit: int = MAX_BODY,
) -> Response:
    """One bounded call: no redirects, ``timeout`` for the whole exchange, at most ``limit``
    body bytes. A network failure or a timeout is ``Error("auth", reason)`` naming ``what``
    (never the body or the headers, which may hold secrets)."""
    sent = {"Accept": "application/json", **(headers or {})}
    body: bytes | None = None
    if json is not None:
        body = orjson.dumps(json)
        sent["Content-Type"] = "application/json"
    elif data is not None:
        body = data.encode()
        sent["Content-Type"] = "application/x-www-form-urlencoded"
    seen: dict[str, bool] = {}  # {"fresh": True} once on a new connection (connection_trace)
    try:
        async with asyncio.timeout(timeout):
            # No middleware: an MCP session's (a token stamper, a redirect guard) must never
            # touch a request to an authorization server.
            async with session.request(
                method,
                url,
                headers=sent,
                data=body,
                allow_redirects=False,
                middlewares=(),
                trace_request_ctx=seen,
            ) as resp:
                raw = await _read(resp, limit, what, reason)
                content_type = resp.headers.get("Content-Type", "")
                dpop_nonce = resp.headers.get("DPoP-Nonce")
                status = resp.status
    except TimeoutError:
        raise Error(
            "auth",
            reason,
            f"the {what} did not answer within {timeout} s",
            data=unreachable_data(url, f"no answer within {timeout} s"),
        ) from None
    except (aiohttp.ClientConnectorCertificateError, aiohttp.ClientConnectorSSLError) as e:
        raise tls_error(url, e) from None
    except aiohttp.ClientError as e:
        if url.startswith("https:") and is_tls_failure(e):  # an alert: a refused certificate
            raise tls_error(url, e) from None
        if url.startswith("https:") and isinstance(e, _CLOSED) and seen.get("fresh"):
            # A new connection, its handshake done, closed before any answer: a refusal
            # of the client's certificate (or its absence), not a server that is down.
            raise tls_error(url, None) from None
        raise Error(
            "auth",
            reason,
            f"the {what} could not be reached ({type(e).__name__})",
            data=unreachable_data(url, _failure(e)),
        ) from None
    parsed: dict[str, Any] | None = None
    if raw:
        try:
            value = orjson.loads(raw)
        except orjson.JSONDecodeError:
            value = None
        if isinstance(value, dict):
            parsed = value
    return Response(status, parsed, content_type, dpop_nonce)


def connection_trace() -> aiohttp.TraceConfig:
    """A trace for the OAuth session (``ClientSession(trace_configs=[connection_trace()])``):
    it tells :func:`request` that a request opened a new connection, so that one closed
    after its TLS handshake before any answer is named (a refused client certificate)
    rather than taken for a server that is down. Without it that close is ``unreachable``."""

    async def made(_session: Any, ctx: Any, _params: Any) -> None:
        holder = getattr(ctx, "trace_request_ctx", None)
        if isinstance(holder, dict):
            holder["fresh"] = True

    trace = aiohttp.TraceConfig()
    trace.on_connection_create_end.append(made)
    return trace


def tls_error(url: str, exc: BaseException | None) -> Error:
    """``Error("auth", "tls_failed")`` naming the authorization server's origin and the
    check that failed: retrying cannot help (a wrong name, an expired or untrusted
    certificate), so no ``UNREACHABLE`` marker, and the client closes at once instead of
    backing off (docs/tls.md).

    >>> import ssl
    >>> e = ssl.SSLCertVerificationError(1, "x")
    >>> e.verify_code, e.verify_message = 18, "self-signed certificate"
    >>> print(tls_error("https://u:pw@as.example:8443/token?x=1", e).message)
    the authorization server https://as.example:8443 failed TLS verification (self_signed: self-signed certificate): the server's certificate is self-signed: trust it with Http(verify='its-certificate.pem'), or give the server a certificate from a trusted CA
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    where = f"{parts.scheme}://{host}" + (f":{parts.port}" if parts.port else "")
    if exc is None:
        return Error(
            "auth",
            "tls_failed",
            f"the authorization server {where} {CLOSED_OVER_TLS}: {CLOSED_OVER_TLS_HINT}",
            data={"origin": where, "detail": "closed_over_tls"},
        )
    detail = tls_detail(exc)
    return Error(
        "auth",
        "tls_failed",
        f"the authorization server {where} failed TLS verification ({detail}): {tls_hint(detail)}",
        data={"origin": where, "detail": detail},
    )


__all__ = [
    "HTTP_TIMEOUT",
    "connection_trace",
    "MAX_BODY",
    "Response",
    "is_loopback",
    "is_secure",
    "is_unreachable",
    "request",
    "require_secure",
    "tls_error",
]
