"""The HTTP transport's small pieces around aiohttp: headers, limits, the error an HTTP
status means, and the worker pool that runs ``auth`` callables (user code).

Kept apart from :mod:`.http` (the transport's life cycle and routing) and
:mod:`.http_legacy` (sessions, resumption, the GET stream) so each reads on its own.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp
from yarl import URL

from ..errors import Error, Kind
from ..protocol.http_status import parse_challenges, parse_retry_after
from ..protocol.sse import SseParser
from ..protocol.tls import tls_detail

PV_META = "io.modelcontextprotocol/protocolVersion"
ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
SSE_ACCEPT = {"Accept": "text/event-stream"}
LISTEN = "subscriptions/listen"
# How often a broken legacy response stream is resumed before it is given up, and the wait
# when the server named no ``retry`` (ms).
RESUME_ATTEMPTS = 3
DEFAULT_RETRY_MS = 1000
# The long-lived streams' own pool: the GET stream, a listen, and room for one of each being
# replaced.
STREAM_LIMIT = 4
# Failures that mean "this response stream broke" (the server may have acted), as opposed
# to "the server cannot be reached" (aiohttp.ClientConnectorError, tested first).
BROKEN = (
    aiohttp.ClientPayloadError,
    aiohttp.ServerDisconnectedError,
    aiohttp.ClientOSError,
    aiohttp.ClientConnectionResetError,  # written to a closing connection
    aiohttp.ClientResponseError,
    aiohttp.http_exceptions.HttpProcessingError,  # LineTooLong and friends: not ClientErrors
    TimeoutError,
)
# Auth callables run here: a callable that hangs keeps its thread (a thread cannot be
# killed; ``auth_timeout`` only stops the wait), so the pool is sized to survive a few.
AUTH_WORKERS = 8

_auth_pool: ThreadPoolExecutor | None = None
_auth_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _auth_pool
    with _auth_lock:
        if _auth_pool is None:
            _auth_pool = ThreadPoolExecutor(
                max_workers=AUTH_WORKERS, thread_name_prefix="conduit-mcp-auth"
            )
        return _auth_pool


def _forget_pool_in_child() -> None:
    # A forked child has the pool object but none of its threads: it would queue forever.
    global _auth_pool, _auth_lock
    _auth_pool = None
    _auth_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)


async def call_auth(auth: Callable[[], Mapping[str, str]], timeout: float) -> Mapping[str, str]:
    """Run an ``auth`` callable off the loop, bounded by ``timeout``; its headers."""
    loop = asyncio.get_running_loop()
    try:
        got = await asyncio.wait_for(loop.run_in_executor(_pool(), auth), timeout)
    except TimeoutError:
        raise Error(
            "auth", "credentials_timeout", "the auth callable did not return within auth_timeout"
        ) from None
    except Exception as exc:
        raise Error(
            "auth", "credentials_failed", f"the auth callable raised {type(exc).__name__}"
        ) from None
    if not isinstance(got, Mapping) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in got.items()
    ):
        raise Error(
            "auth", "credentials_failed", "the auth callable must return a mapping of str to str"
        )
    return got


def status_error(method: str, status: int, headers: Any) -> Error | None:
    """The error a caller sees for an HTTP status that carries no JSON-RPC answer to read:
    401/403 (``auth``, with the parsed challenges), 429 (``overloaded``, with Retry-After).
    None for the others: their body may hold a JSON-RPC error."""
    if status in (401, 403):
        challenges = parse_challenges(headers.getall("WWW-Authenticate", []))
        return Error(
            "auth",
            "unauthorized" if status == 401 else "forbidden",
            f"{method}: the server refused the credentials ({status})",
            data={"status": status, "challenges": challenges},
        )
    if status == 429:
        return Error(
            "overloaded",
            "http_429",
            f"{method}: the server is rate limiting (429)",
            data={"retry_after": parse_retry_after(headers.get("Retry-After"))},
        )
    return None


def same_origin_only(url: str) -> Callable[[aiohttp.ClientRequest], None]:
    """A check of each hop (redirects included; :attr:`~.http_pool.Pool.guard`, run by the
    pool's middleware before the hop is sent) that refuses to send anything to an origin
    other than ``url``'s. aiohttp strips only ``Authorization`` and cookies on a redirect to
    another origin: the user's other headers (an API key), the session id and the
    ``Mcp-Param-*`` headers (tool arguments) would go along. An MCP endpoint has no reason to
    move a POST elsewhere, so such a redirect fails the request (``transport``/``redirect``,
    naming the origin, never its path or query); redirects within the origin are followed
    (aiohttp's bound: 10)."""
    origin = URL(url).origin()

    def check(request: aiohttp.ClientRequest) -> None:
        target = request.url.origin()
        if target != origin:
            raise Error(
                "transport",
                "redirect",
                f"the server redirected the request to another origin ({target}); "
                "conduit-mcp does not follow a redirect across origins (credentials and the "
                "session would go there): if that server is the right one, give its URL to Http",
                data={"origin": str(target)},
            )

    return check


def too_many_redirects(method: str) -> Error:
    """aiohttp followed 10 redirects within the origin and gave up: a loop."""
    return Error(
        "transport",
        "redirect",
        f"{method}: the server redirected the request more than 10 times (a redirect loop); "
        "check the endpoint URL given to Http",
    )


def not_connected(method: str) -> Error:
    """No connection within ``connect_timeout`` (connecting, or waiting for a pooled one):
    the request was never sent, so not a broken stream (which "may have run")."""
    return Error(
        "transport",
        "connect_timeout",
        f"{method}: no connection to the server within connect_timeout; the request was not sent",
    )


def client_failure(method: str, exc: BaseException) -> Error:
    """An exception inside the HTTP client itself (aiohttp refusing a header value, a bug):
    the transport's own failure, never evidence about the server (it may not have sent a
    byte). Only the class is named: the exception's text may quote a header value."""
    return Error(
        "transport",
        "client_error",
        f"{method}: the HTTP client failed ({type(exc).__name__}) before the server answered; "
        "the request may not have been sent",
        data={"exception": type(exc).__name__},
    )


def http_error(method: str, status: int) -> Error:
    """A non-2xx answer with no JSON-RPC error in it: 5xx is ``transport``, else ``protocol``."""
    kind: Kind = "transport" if status >= 500 else "protocol"
    return Error(kind, f"http_{status}", f"{method}: the server answered HTTP {status}")


class Sent:
    """A request in flight: what is needed to resume, re-send or fail it."""

    __slots__ = ("method", "body", "headers", "modern", "resent", "relearned", "task", "token")

    def __init__(self, method: str, body: bytes, headers: dict[str, str], modern: bool) -> None:
        self.method = method
        self.body = body
        self.headers = headers
        self.modern = modern
        self.resent = False
        self.relearned = False  # re-sent once after learning the tools' header plans
        self.task: asyncio.Task[None] | None = None
        self.token = 0  # the version of the OAuth token it was last sent with (0: none)


class StreamState:
    """One response stream: its SSE parser (kept for resumption) and whether it answered."""

    __slots__ = ("parser", "done")

    def __init__(self) -> None:
        self.parser: SseParser | None = None
        self.done = False


def feed(parser: SseParser, chunk: bytes) -> tuple[list[Any], Error | None]:
    """The events a chunk completed, and the error to raise once they are delivered when an
    event went over the limit (the parser keeps the events completed before it in the
    error's ``data``; that is ``response_too_large``, as for a JSON body)."""
    try:
        return parser.feed(chunk), None
    except Error as exc:
        if exc.reason != "event_too_large":
            raise
        events = exc.data if type(exc.data) is list else []
        return events, too_large(f"an SSE event is over max_response ({parser.max_event} bytes)")


def too_large(what: str) -> Error:
    """``protocol``/``response_too_large``, saying which option to raise."""
    return Error(
        "protocol",
        "response_too_large",
        f"{what}; raise Http(max_response=...) (default: the client's max_frame) "
        "to accept larger responses",
    )


def buffered_body(resp: aiohttp.ClientResponse, limit: int) -> bytes | None:
    """The whole body when all of it has arrived already (a short answer comes in the
    packet of its head), taken without awaiting: None when more is to come (then
    :func:`read_body`). Refuses more than ``limit`` bytes as :func:`read_body` does.
    ``read_body``'s iterator and its two awaits cost more than the rest of a short
    answer's reading (benchmarks/http_switches.py)."""
    content = resp.content
    if not content.is_eof():
        return None
    length = resp.content_length
    if length is not None and length > limit:
        raise too_large(f"the response is {length} bytes, over max_response ({limit} bytes)")
    body = content.read_nowait()  # raises what the stream failed with, as reading would
    if len(body) > limit:
        raise too_large(f"the response is over max_response ({limit} bytes)")
    return body


async def read_body(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body, refusing more than ``limit`` bytes (``max_response``)."""
    length = resp.content_length
    if length is not None and length > limit:
        raise too_large(f"the response is {length} bytes, over max_response ({limit} bytes)")
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise too_large(f"the response is over max_response ({limit} bytes)")
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def connect_failure(exc: aiohttp.ClientConnectorError) -> tuple[str, str]:
    """``(reason, detail)`` of a connection that could not be made, for the status and the
    errors: the exception's class and its OS error text, never the URL. A TLS failure is
    ``tls_failed`` with the check that failed (retrying cannot help: http:// against an
    https:// port, a wrong name, an expired or untrusted certificate; docs/tls.md); anything
    else ``unreachable``."""
    name = type(exc).__name__
    if isinstance(exc, (aiohttp.ClientConnectorSSLError, aiohttp.ClientConnectorCertificateError)):
        return "tls_failed", tls_detail(exc)
    os_error = getattr(exc, "os_error", None)
    text = getattr(os_error, "strerror", None)
    return "unreachable", f"{name}: {text}" if text else name
