"""``Sse``: the HTTP+SSE transport of MCP 2024-11-05 (deprecated by 2025-03-26, still served).

A subclass of :class:`~.http_spec.Http` because everything but the wire is the same: the
headers, ``bearer``, ``auth`` (a callable or an ``OAuth``), TLS, the limits and timeouts, the
credential identity of the cache, the redaction of reprs. Whatever takes an ``Http`` (the OAuth
actor, ``set_auth``, telemetry) takes an ``Sse``. docs/sse.md describes the transport.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import Error
from .http_spec import Http, describe


@dataclass(frozen=True, slots=True, repr=False)
class Sse(Http):
    """An MCP server on the old HTTP+SSE transport: ``url`` is its event stream (the GET
    endpoint, usually ``.../sse``); the server names the endpoint the messages are POSTed to.

    >>> spec = Sse("http://127.0.0.1:8000/sse", bearer="s3cret")
    >>> spec, "s3cret" in repr(spec)
    (Sse(url='http://127.0.0.1:8000/sse', credential_id=None), False)
    >>> Sse("http://u:pw@127.0.0.1:8000/sse?key=k3y")  # never a password or a query
    Sse(url='http://127.0.0.1:8000/sse', credential_id=None)
    >>> Sse("ws://127.0.0.1/sse")
    Traceback (most recent call last):
      ...
    conduit_mcp.errors.Error: config (sse.url): Sse url must be an http:// or https:// URL

    The options are ``Http``'s (``max_response`` bounds one event of the stream;
    ``stream_idle`` is the longest silence the stream may keep before it counts as lost);
    ``sse_fallback`` is not one: an ``Sse`` speaks nothing else. The stream is the session:
    when it is lost, what is in flight fails with ``transport`` and the client reconnects (a
    new stream, a new ``initialize``). Only the legacy protocol versions are spoken over it
    (2024-11-05 to 2025-11-25).
    """

    #: The connection negotiates among the legacy versions only (no ``server/discover``).
    legacy_only = True

    def __repr__(self) -> str:
        return f"Sse(url={describe(self)!r}, credential_id={self.credential_id!r})"

    def __post_init__(self) -> None:
        if self.sse_fallback is not False:
            raise Error(
                "config",
                "sse.sse_fallback",
                "sse_fallback is an Http option (streamable HTTP first, then SSE); an Sse "
                "speaks only the SSE transport",
            )
        try:
            Http.__post_init__(self)
        except Error as exc:
            # The same checks, in this class's words.
            reason = "sse." + exc.reason.removeprefix("http.")
            raise Error(exc.kind, reason, exc.message.replace("Http", "Sse")) from None
