"""The streamable HTTP transport, both eras, on aiohttp (mcp-spec §7 and §10).

One POST per message. The answer is JSON or an SSE stream (request-related notifications,
then the response); either way its messages go through the same fast path as stdio's
(:class:`~conduit_mcp.actors.pending.PendingTable`), and the rest is told to the connection.
Everything here runs on the shared I/O loop, except ``send``/``cancel``/``close``/``connect``,
which the connection calls from its own thread and which only compute headers and hand work
to the loop.

Era differences, decided per message (a modern request carries its version in ``_meta``):

* **modern**: ``MCP-Protocol-Version`` (= the ``_meta`` version), ``Mcp-Method``, ``Mcp-Name``
  and ``Mcp-Param-*`` headers; no session, no GET stream; cancelling closes the stream; tools
  whose ``x-mcp-header`` annotations are invalid are removed from ``tools/list`` results
  (with a warning) and the header plans of the others kept for ``tools/call``.
* **legacy**: the ``Mcp-Session-Id`` from the ``initialize`` answer is sent back, with the
  negotiated ``MCP-Protocol-Version``; after ``notifications/initialized`` the GET stream
  carries server notifications and requests, resumed with ``Last-Event-ID`` after the
  server's ``retry``; a broken response stream is resumed the same way; a 404 for a request
  carrying the session is a :class:`SessionExpired` (the request is kept and re-sent once
  the connection has initialized again); ``close`` DELETEs the session; cancelling also
  POSTs ``notifications/cancelled`` (in that era a disconnect is not a cancellation).

HTTP outcomes (issue 3; seed 000 "HTTP outcomes"): 401/403 fail the request with kind
``auth`` (the parsed ``WWW-Authenticate`` challenges in ``Error.data``, never logged); 429
with ``overloaded`` and the server's ``Retry-After`` (never retried here); 5xx and a broken
stream with ``transport``; an unreachable server is :class:`TransportDown`, the reconnect path;
no connection within ``connect_timeout`` (connecting, or waiting for a pooled connection)
fails that request with ``transport``/``connect_timeout`` (it was never sent). A response
body or an SSE event over ``max_response`` is ``protocol``/``response_too_large``.

Pools: requests share one connection pool of ``pool_limit`` connections; the long-lived
streams (the legacy GET stream, modern ``subscriptions/listen``) have their own small pool,
so that they never hold the requests' connections for good.

Credentials: static headers and a bearer token are merged once; an ``auth`` callable is user
code, so it runs on a small worker pool (never on the loop or an actor), bounded by
``auth_timeout``. No header value, token or session id is ever logged or put in a repr.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import aiohttp
import pykka

from ..actors.base import safe_tell
from ..errors import Error
from ..protocol import http_headers as hh
from ..protocol.http_status import parse_challenges, parse_retry_after
from ..protocol.jsonrpc import ErrorResponse, Invalid, Response, decode, encode
from ..protocol.messages import cancelled
from ..protocol.sse import SseParser
from . import loop as io
from .base import (
    FrameProblem,
    Inbound,
    RequestFailed,
    SessionExpired,
    StreamBroken,
    TransportDown,
    TransportUp,
)
from .http_spec import Http, describe

log = logging.getLogger("conduit_mcp.http")

__all__ = ["Http", "HttpTransport"]

_PV_META = "io.modelcontextprotocol/protocolVersion"
_ACCEPT = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
_SSE_ACCEPT = {"Accept": "text/event-stream"}
# How often a legacy stream is resumed before it is given up, and the wait when the server
# named no ``retry`` (ms).
_RESUME_ATTEMPTS = 3
_GET_ATTEMPTS = 5
_DEFAULT_RETRY_MS = 1000
# The long-lived streams' own pool (see HttpTransport._streams): the GET stream, a listen,
# and room for one of each being replaced.
_LISTEN = "subscriptions/listen"
_STREAM_LIMIT = 4
# Failures that mean "this response stream broke" (the server may have acted), as opposed
# to "the server cannot be reached" (aiohttp.ClientConnectorError, tested first).
_BROKEN = (
    aiohttp.ClientPayloadError,
    aiohttp.ServerDisconnectedError,
    aiohttp.ClientOSError,
    aiohttp.ClientResponseError,
    aiohttp.http_exceptions.HttpProcessingError,  # LineTooLong and friends: not ClientErrors
    TimeoutError,
)

_auth_pool: ThreadPoolExecutor | None = None
_auth_lock = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _auth_pool
    with _auth_lock:
        if _auth_pool is None:
            _auth_pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="conduit-mcp-auth")
        return _auth_pool


class _Sent:
    """A request in flight: what is needed to resume, re-send or fail it."""

    __slots__ = ("method", "body", "headers", "modern", "resent", "task")

    def __init__(self, method: str, body: bytes, headers: dict[str, str], modern: bool) -> None:
        self.method = method
        self.body = body
        self.headers = headers
        self.modern = modern
        self.resent = False
        self.task: asyncio.Task[None] | None = None


class HttpTransport:
    """One incarnation of a connection to a streamable HTTP server (a reconnect builds a new
    one; ``memory`` outlives it: the tools' header plans)."""

    kind = "http"

    def __init__(
        self,
        spec: Http,
        owner: pykka.ActorRef[Any],
        gen: int,
        *,
        max_frame: int,
        max_in_flight: int,
        pending: Any = None,
        memory: dict[str, Any] | None = None,
    ) -> None:
        self._spec = spec
        self._owner = owner
        self._gen = gen
        self._pending = pending
        self._url = spec.url
        self._max = spec.max_response or max_frame
        self._limit = spec.pool_limit or max_in_flight + 8
        self._base = {**_ACCEPT, **spec.static_headers()}
        self._plans: dict[str, Any] = (memory if memory is not None else {}).setdefault(
            "header_plans", {}
        )
        self._session: aiohttp.ClientSession | None = None
        # Long-lived streams (the legacy GET stream, modern subscriptions/listen) get their
        # own pool: counted in pool_limit they would hold its connections for good, and a
        # pool_limit of 1 (or 2 with both) would leave no connection for any request.
        self._streams: aiohttp.ClientSession | None = None
        self._timeout = aiohttp.ClientTimeout(
            total=None,
            connect=spec.connect_timeout,
            sock_connect=spec.connect_timeout,
            sock_read=spec.stream_idle,
        )
        self._sent: dict[Any, _Sent] = {}
        self._others: set[asyncio.Task[Any]] = set()
        self._session_id: str | None = None
        self._legacy_version: str | None = None
        self._expired: list[Any] = []
        self._get_task: asyncio.Task[None] | None = None
        self._closing = False
        self._down = False
        self._gone = threading.Event()

    def __repr__(self) -> str:
        # Never a header, a token or the session id.
        return f"<HttpTransport gen={self._gen} url={describe(self._spec)!r}>"

    # -- called from the connection's thread ------------------------------------------------

    def connect(self) -> None:
        io.submit(self._open())

    def send(self, message: dict[str, Any]) -> None:
        body = encode(message)  # Error("argument") on unserialisable input, before anything
        method = message.get("method")
        rid = message.get("id")
        params = message.get("params")
        meta = params.get("_meta") if type(params) is dict else None
        version = meta.get(_PV_META) if type(meta) is dict else None
        headers: dict[str, str]
        if version is not None and method is not None:
            headers = hh.request_headers(method, params, version)
            if method == "tools/call" and self._plans:
                plan = self._plans.get(params.get("name"))  # type: ignore[union-attr]
                if plan:
                    headers.update(hh.param_headers(plan, params.get("arguments")))  # type: ignore[union-attr]
            modern = True
        else:
            headers = {}
            modern = False
        io.call_soon(self._start, rid, method or "", body, headers, modern)

    def set_credentials(self, spec: Http) -> None:
        """``Client.set_auth``: the next request carries these (connection thread; each
        field is one reference store the loop reads when it builds a request's headers)."""
        self._base = {**_ACCEPT, **spec.static_headers()}
        self._spec = spec

    def cancel(self, request_id: int | str, reason: str) -> None:
        sent = self._sent.get(request_id)
        if sent is not None and not sent.modern:
            # 2025-11-25: a disconnect is not a cancellation; say it.
            self.send(cancelled(request_id, reason))
        io.call_soon(self._cancel_task, request_id)

    def close(self) -> None:
        self._closing = True
        io.submit(self._close())

    def stderr(self) -> bytes:
        return b""

    def wait_closed(self, timeout: float) -> bool:
        return self._gone.wait(timeout)

    # -- I/O loop: life cycle ---------------------------------------------------------------

    async def _open(self) -> None:
        if self._closing:
            self._gone.set()
            return
        connector = aiohttp.TCPConnector(limit=self._limit, limit_per_host=0)
        self._session = aiohttp.ClientSession(connector=connector, timeout=self._timeout)
        streams = aiohttp.TCPConnector(limit=_STREAM_LIMIT, limit_per_host=0)
        self._streams = aiohttp.ClientSession(connector=streams, timeout=self._timeout)
        safe_tell(self._owner, TransportUp(self._gen))

    async def _close(self) -> None:
        tasks = [s.task for s in self._sent.values() if s.task is not None]
        tasks.extend(self._others)
        if self._get_task is not None:
            tasks.append(self._get_task)
        for task in tasks:
            task.cancel()
        session = self._session
        try:
            if session is not None and self._session_id is not None:
                await self._delete_session(session)
        finally:
            if session is not None:
                await session.close()
            if self._streams is not None:
                await self._streams.close()
            self._sent.clear()
            self._report_down("closed", None)
            self._gone.set()

    async def _delete_session(self, session: aiohttp.ClientSession) -> None:
        """End the legacy session (mcp-spec §10: SHOULD; a 405 is fine)."""
        headers = await self._headers(False, {}, session_id=self._session_id)
        try:
            async with session.delete(
                self._url,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=self._spec.close_timeout),
            ):
                pass
        except (aiohttp.ClientError, TimeoutError, Error) as exc:
            log.debug("session DELETE failed: %s", type(exc).__name__)

    def _report_down(self, reason: str, detail: str | None) -> None:
        if self._down:
            return
        self._down = True
        safe_tell(self._owner, TransportDown(self._gen, reason, detail))

    # -- I/O loop: requests -----------------------------------------------------------------

    def _start(
        self, rid: Any, method: str, body: bytes, headers: dict[str, str], modern: bool
    ) -> None:
        if self._closing or self._session is None:
            return
        if rid is not None and method:
            sent = _Sent(method, body, headers, modern)
            self._sent[rid] = sent
            sent.task = asyncio.ensure_future(self._request(rid, sent))
        else:
            task = asyncio.ensure_future(self._post_other(method, body, modern))
            self._others.add(task)
            task.add_done_callback(self._others.discard)

    def _cancel_task(self, rid: Any) -> None:
        sent = self._sent.pop(rid, None)
        if sent is not None and sent.task is not None:
            sent.task.cancel()  # closes the response stream: the modern cancellation

    async def _headers(
        self,
        modern: bool,
        extra: Mapping[str, str],
        *,
        session_id: str | None,
        initialize: bool = False,
    ) -> dict[str, str]:
        headers = dict(self._base)
        headers.update(extra)
        if not modern:
            if session_id is not None:
                headers[hh.MCP_SESSION_ID] = session_id
            if self._legacy_version is not None and not initialize:
                headers[hh.MCP_PROTOCOL_VERSION] = self._legacy_version
        auth = self._spec.auth
        if auth is not None:
            headers.update(await self._call_auth(auth))
        return headers

    async def _call_auth(self, auth: Any) -> Mapping[str, str]:
        loop = asyncio.get_running_loop()
        try:
            got = await asyncio.wait_for(
                loop.run_in_executor(_pool(), auth), self._spec.auth_timeout
            )
        except TimeoutError:
            raise Error(
                "auth",
                "credentials_timeout",
                "the auth callable did not return within auth_timeout",
            ) from None
        except Exception as exc:
            raise Error(
                "auth", "credentials_failed", f"the auth callable raised {type(exc).__name__}"
            ) from None
        if not isinstance(got, Mapping) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in got.items()
        ):
            raise Error(
                "auth",
                "credentials_failed",
                "the auth callable must return a mapping of str to str",
            )
        return got

    async def _request(self, rid: Any, sent: _Sent) -> None:
        stream: _StreamState | None = None
        try:
            initialize = sent.method == "initialize"
            session_id = None if initialize else self._session_id
            headers = await self._headers(
                sent.modern, sent.headers, session_id=session_id, initialize=initialize
            )
            session = self._streams if sent.method == _LISTEN else self._session
            assert session is not None
            async with session.post(self._url, data=sent.body, headers=headers) as resp:
                stream = _StreamState()
                await self._answer(resp, rid, sent, session_id, stream)
        except asyncio.CancelledError:
            raise
        except aiohttp.ClientConnectorError as exc:
            self._sent.pop(rid, None)
            self._report_down("unreachable", type(exc).__name__)
        except aiohttp.ConnectionTimeoutError:
            # No connection within connect_timeout (connecting, or waiting for a pooled one):
            # the request was never sent, so it is not a broken stream (which "may have run").
            self._fail(
                rid,
                Error(
                    "transport",
                    "connect_timeout",
                    f"{sent.method}: no connection to the server within "
                    "connect_timeout; the request was not sent",
                ),
            )
        except Error as exc:
            self._fail(rid, exc)
        except _BROKEN as exc:
            if self._sent.get(rid) is sent:
                await self._broken(rid, sent, stream, type(exc).__name__)
        finally:
            if self._sent.get(rid) is sent and (stream is None or stream.done):
                self._sent.pop(rid, None)

    async def _answer(
        self,
        resp: aiohttp.ClientResponse,
        rid: Any,
        sent: _Sent,
        session_id: str | None,
        stream: _StreamState,
    ) -> None:
        status = resp.status
        if 200 <= status < 300:
            if sent.method == "initialize" and not sent.modern:
                self._new_session(resp)
            if resp.content_type == "text/event-stream":
                await self._read_stream(resp, rid, sent, stream)
                if not stream.done and self._sent.get(rid) is sent:
                    await self._broken(rid, sent, stream, "stream_ended")
                return
            body = await _read_body(resp, self._max)
            stream.done = True
            if not body:
                if sent.modern:
                    self._fail(
                        rid,
                        Error(
                            "protocol",
                            "no_response",
                            f"{sent.method}: the server answered without a body",
                        ),
                    )
                return  # legacy: the answer may still come on the GET stream
            self._deliver_one(body, rid, sent)
            return
        if status == 404 and session_id is not None and not sent.modern:
            self._session_expired(rid, sent, session_id)  # kept: it is re-sent later
            return
        stream.done = True
        if status in (401, 403):
            challenges = parse_challenges(resp.headers.getall("WWW-Authenticate", []))
            reason = "unauthorized" if status == 401 else "forbidden"
            self._fail(
                rid,
                Error(
                    "auth",
                    reason,
                    f"{sent.method}: the server refused the credentials ({status})",
                    data={"status": status, "challenges": challenges},
                ),
                status,
                b"",
            )
            return
        if status == 429:
            retry_after = parse_retry_after(resp.headers.get("Retry-After"))
            self._fail(
                rid,
                Error(
                    "overloaded",
                    "http_429",
                    f"{sent.method}: the server is rate limiting (429)",
                    data={"retry_after": retry_after},
                ),
                status,
                b"",
            )
            return
        body = await _read_body(resp, self._max)
        msg = decode(body) if body else None
        if type(msg) is ErrorResponse:
            # The transport, not the id, says which request an HTTP error answers (mcp 1.30
            # answers id "server-error"; others null).
            self._deliver([msg if msg.id == rid else msg._replace(id=rid)])
            return
        kind = "transport" if status >= 500 else "protocol"
        self._fail(
            rid,
            Error(kind, f"http_{status}", f"{sent.method}: the server answered HTTP {status}"),
            status,
            body,
        )

    def _new_session(self, resp: aiohttp.ClientResponse) -> None:
        sid = resp.headers.get(hh.MCP_SESSION_ID)
        if sid is not None and not (sid.isascii() and sid.isprintable() and sid):
            sid = None  # spec: visible ASCII only; anything else is not echoed
        self._session_id = sid

    async def _read_stream(
        self, resp: aiohttp.ClientResponse, rid: Any, sent: _Sent, stream: _StreamState
    ) -> None:
        parser = stream.parser or SseParser(self._max)
        stream.parser = parser
        async for chunk in resp.content.iter_any():
            events, too_large = _feed(parser, chunk)
            if too_large is not None and not events:
                raise too_large
            if not events:
                continue
            messages = []
            for ev in events:
                if ev.event != "message" or not ev.data:
                    continue
                msg = decode(ev.data)
                if type(msg) is Invalid:
                    safe_tell(self._owner, FrameProblem(self._gen, "malformed", msg.reason))
                    continue
                t = type(msg)
                if (t is Response or t is ErrorResponse) and msg.id == rid:
                    stream.done = True
                    if t is Response and sent.modern and sent.method == "tools/list":
                        msg = self._filter_tools(msg)
                messages.append(msg)
            if messages:
                self._deliver(messages)
            if stream.done:
                return
            if too_large is not None:
                raise too_large

    def _deliver_one(self, body: bytes, rid: Any, sent: _Sent) -> None:
        msg = decode(body)
        t = type(msg)
        if t is Invalid:
            self._fail(
                rid,
                Error(
                    "protocol",
                    "bad_body",
                    f"{sent.method}: the response body is not a JSON-RPC message",
                ),
            )
            return
        if t is ErrorResponse and msg.id != rid:
            msg = msg._replace(id=rid)
        elif t is Response and sent.modern and sent.method == "tools/list":
            msg = self._filter_tools(msg)
        self._deliver([msg])

    def _deliver(self, messages: list[Any]) -> None:
        pending = self._pending
        if pending is not None:
            messages = pending.deliver(messages)
        if messages:
            safe_tell(self._owner, Inbound(self._gen, messages))

    def _fail(
        self, rid: Any, error: Error, status: int | None = None, body: bytes | None = None
    ) -> None:
        self._sent.pop(rid, None)
        safe_tell(self._owner, RequestFailed(self._gen, rid, error, status, body))

    def _filter_tools(self, msg: Response) -> Response:
        """Hide tools whose ``x-mcp-header`` annotations break the spec's rules (mcp-spec §7:
        the client MUST exclude them), and keep the header plans of the others."""
        result = msg.result
        tools = result.get("tools") if type(result) is dict else None
        if type(tools) is not list:
            return msg
        kept, dropped, plans = hh.filter_tools(tools)
        self._plans.update(plans)
        for name, reason in dropped:
            self._plans.pop(name, None)
            log.warning("hiding tool %r: invalid x-mcp-header annotation (%s)", name, reason)
        if not dropped:
            return msg
        return msg._replace(result={**result, "tools": kept})

    # -- I/O loop: broken streams, sessions -------------------------------------------------

    async def _broken(
        self, rid: Any, sent: _Sent, stream: _StreamState | None, detail: str
    ) -> None:
        """A response stream broke before its answer. Legacy: resume it with the last event
        id (mcp-spec §10); otherwise, or if that fails, tell the connection."""
        if stream is not None and stream.done:
            return
        parser = stream.parser if stream is not None else None
        if not sent.modern and parser is not None and parser.last_event_id is not None:
            assert stream is not None
            for _ in range(_RESUME_ATTEMPTS):
                await asyncio.sleep((parser.retry or _DEFAULT_RETRY_MS) / 1000)
                if self._closing or self._sent.get(rid) is not sent:
                    return
                try:
                    headers = await self._headers(
                        False,
                        {**_SSE_ACCEPT, "Last-Event-ID": parser.last_event_id},
                        session_id=self._session_id,
                    )
                    assert self._session is not None
                    async with self._session.get(self._url, headers=headers) as resp:
                        if resp.status != 200 or resp.content_type != "text/event-stream":
                            break
                        await self._read_stream(resp, rid, sent, stream)
                except asyncio.CancelledError:
                    raise
                except Error as exc:
                    if exc.reason == "response_too_large":
                        self._fail(rid, exc)  # resuming would meet the same event again
                        return
                    continue
                except (*_BROKEN, aiohttp.ClientError):
                    continue
                if stream.done:
                    self._sent.pop(rid, None)
                    return
        self._sent.pop(rid, None)
        safe_tell(self._owner, StreamBroken(self._gen, rid, detail))

    def _session_expired(self, rid: Any, sent: _Sent, session_id: str) -> None:
        if sent.resent:
            self._fail(
                rid,
                Error(
                    "transport",
                    "session_expired",
                    f"{sent.method}: the server lost the session twice",
                ),
            )
            return
        self._expired.append(rid)
        if self._session_id == session_id:
            # The first to find out: forget the session and tell the connection, which runs a
            # new initialize; the expired requests wait for it (seed 000 "HTTP outcomes").
            self._session_id = None
            self._stop_get_stream()
            safe_tell(self._owner, SessionExpired(self._gen, rid))
        elif self._session_id is not None:
            self._resend_expired()  # a new session already exists

    def _resend_expired(self) -> None:
        expired, self._expired = self._expired, []
        for rid in expired:
            sent = self._sent.get(rid)
            if sent is None:
                continue  # cancelled or timed out meanwhile
            sent.resent = True
            sent.task = asyncio.ensure_future(self._request(rid, sent))

    async def _post_other(self, method: str, body: bytes, modern: bool) -> None:
        """A notification, or a response to a server request: the server answers 202."""
        try:
            session_id = self._session_id
            headers = await self._headers(modern, {}, session_id=session_id)
            assert self._session is not None
            async with self._session.post(self._url, data=body, headers=headers) as resp:
                status = resp.status
            if status == 404 and session_id is not None and not modern:
                if self._session_id == session_id:
                    self._session_id = None
                    self._stop_get_stream()
                    safe_tell(self._owner, SessionExpired(self._gen, None))
                return
            if status >= 400:
                log.debug("%s POST answered HTTP %s", method or "response", status)
        except asyncio.CancelledError:
            raise
        except aiohttp.ClientConnectorError as exc:
            self._report_down("unreachable", type(exc).__name__)
            return
        except (*_BROKEN, aiohttp.ClientError, Error) as exc:
            log.debug("%s POST failed: %s", method or "response", type(exc).__name__)
        if method == "notifications/initialized" and not self._closing:
            # The session is usable now: re-send what expired, open the GET stream.
            self._resend_expired()
            self._start_get_stream()

    # -- I/O loop: the legacy GET stream ----------------------------------------------------

    def _start_get_stream(self) -> None:
        self._stop_get_stream()
        self._get_task = asyncio.ensure_future(self._get_stream())

    def _stop_get_stream(self) -> None:
        task, self._get_task = self._get_task, None
        if task is not None:
            task.cancel()

    async def _get_stream(self) -> None:
        """Server-to-client messages outside any request (mcp-spec §10), kept open: after a
        drop it is resumed with ``Last-Event-ID`` once the server's ``retry`` has passed."""
        parser = SseParser(self._max)
        failures = 0
        session_id = self._session_id
        while not self._closing and failures < _GET_ATTEMPTS and session_id == self._session_id:
            headers_extra = dict(_SSE_ACCEPT)
            if parser.last_event_id is not None:
                headers_extra["Last-Event-ID"] = parser.last_event_id
            try:
                headers = await self._headers(False, headers_extra, session_id=session_id)
                assert self._streams is not None
                async with self._streams.get(self._url, headers=headers) as resp:
                    if resp.status == 404 and session_id is not None:
                        if self._session_id == session_id:
                            self._session_id = None
                            safe_tell(self._owner, SessionExpired(self._gen, None))
                        return
                    if resp.status != 200 or resp.content_type != "text/event-stream":
                        return  # 405: the server offers no stream; that is allowed
                    failures = 0
                    async for chunk in resp.content.iter_any():
                        messages = []
                        events, too_large = _feed(parser, chunk)
                        for ev in events:
                            if ev.event != "message" or not ev.data:
                                continue
                            msg = decode(ev.data)
                            if type(msg) is Invalid:
                                safe_tell(
                                    self._owner, FrameProblem(self._gen, "malformed", msg.reason)
                                )
                            else:
                                messages.append(msg)
                        if messages:
                            self._deliver(messages)
                        if too_large is not None:
                            raise too_large
            except asyncio.CancelledError:
                raise
            except aiohttp.ClientConnectorError as exc:
                self._report_down("unreachable", type(exc).__name__)
                return
            except (*_BROKEN, aiohttp.ClientError, Error) as exc:
                log.debug("GET stream broke: %s", type(exc).__name__)
            failures += 1
            await asyncio.sleep((parser.retry or _DEFAULT_RETRY_MS) / 1000)

    def negotiated(self, era: str, version: str) -> None:
        """The connection tells the negotiated version: in the legacy era it is sent as
        ``MCP-Protocol-Version`` on every later request (mcp-spec §10). Connection thread:
        a plain assignment, read by the loop when it builds the next request's headers."""
        if era == "legacy":
            self._legacy_version = version


class _StreamState:
    """One response stream: its SSE parser (kept for resumption) and whether it answered."""

    __slots__ = ("parser", "done")

    def __init__(self) -> None:
        self.parser: SseParser | None = None
        self.done = False


def _feed(parser: SseParser, chunk: bytes) -> tuple[list[Any], Error | None]:
    """The events a chunk completed, and the error to raise once they are delivered when an
    event went over the limit (the parser keeps the events completed before it in the
    error's ``data``; issue 3 names that ``response_too_large``, as for a JSON body)."""
    try:
        return parser.feed(chunk), None
    except Error as exc:
        if exc.reason != "event_too_large":
            raise
        events = exc.data if type(exc.data) is list else []
        return events, Error("protocol", "response_too_large", exc.message)


async def _read_body(resp: aiohttp.ClientResponse, limit: int) -> bytes:
    """The whole body, refusing more than ``limit`` bytes (issue 3: a maximum response size)."""
    length = resp.content_length
    if length is not None and length > limit:
        raise Error(
            "protocol",
            "response_too_large",
            f"the response is {length} bytes, over the {limit} byte limit",
        )
    chunks: list[bytes] = []
    size = 0
    async for chunk in resp.content.iter_any():
        size += len(chunk)
        if size > limit:
            raise Error(
                "protocol", "response_too_large", f"the response is over the {limit} byte limit"
            )
        chunks.append(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)
