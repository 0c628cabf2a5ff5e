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
from typing import Any

import aiohttp
import orjson
import pykka

from ..errors import Error
from ..otp.base import safe_tell
from ..protocol import http_headers as hh
from ..protocol.jsonrpc import HEADER_MISMATCH, ErrorResponse, Invalid, Response, decode, encode
from ..protocol.messages import cancelled
from ..protocol.sse import SseParser
from . import loop as io_loop
from .base import FrameProblem, Inbound, RequestFailed, TransportDown, TransportUp
from .http_legacy import LegacySession
from .http_spec import Http, describe
from .http_wire import (
    ACCEPT,
    BROKEN,
    LISTEN,
    PV_META,
    STREAM_LIMIT,
    StreamState,
    call_auth,
    feed,
    http_error,
    read_body,
    status_error,
)

log = logging.getLogger("conduit_mcp.http")

__all__ = ["Http", "HttpTransport"]

# A tools/list the transport sends itself to learn header plans (never a connection's id).
_PLANS_ID = "conduit-mcp:header-plans"
_PLAN_PAGES = 20


class _Sent:
    """A request in flight: what is needed to resume, re-send or fail it."""

    __slots__ = ("method", "body", "headers", "modern", "resent", "relearned", "task")

    def __init__(self, method: str, body: bytes, headers: dict[str, str], modern: bool) -> None:
        self.method = method
        self.body = body
        self.headers = headers
        self.modern = modern
        self.resent = False
        self.relearned = False  # re-sent once after learning the tools' header plans
        self.task: asyncio.Task[None] | None = None


class HttpTransport(LegacySession):
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
        self._static = spec.static_headers()
        self._warned: set[str] = set()  # tools already warned about (hidden for x-mcp-header)
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
        io_loop.submit(self._open())

    def send(self, message: dict[str, Any]) -> None:
        body = encode(message)  # Error("argument") on unserialisable input, before anything
        method = message.get("method")
        rid = message.get("id")
        params = message.get("params")
        meta = params.get("_meta") if type(params) is dict else None
        version = meta.get(PV_META) if type(meta) is dict else None
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
        io_loop.call_soon(self._start, rid, method or "", body, headers, modern)

    def set_credentials(self, spec: Http) -> None:
        """``Client.set_auth``: the next request carries these (connection thread; each
        field is one reference store the loop reads when it builds a request's headers)."""
        self._static = spec.static_headers()
        self._spec = spec

    def cancel(self, request_id: int | str, reason: str) -> None:
        sent = self._sent.get(request_id)
        if sent is not None and not sent.modern:
            # 2025-11-25: a disconnect is not a cancellation; say it.
            self.send(cancelled(request_id, reason))
        io_loop.call_soon(self._cancel_task, request_id)

    def close(self) -> None:
        self._closing = True
        io_loop.submit(self._close())

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
        streams = aiohttp.TCPConnector(limit=STREAM_LIMIT, limit_per_host=0)
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
        """The user's headers first (static, then the auth callable's), then the protocol's,
        which they can never override (Accept, Content-Type, the Mcp-* and session headers)."""
        headers = dict(self._static)
        auth = self._spec.auth
        if auth is not None:
            headers.update(await call_auth(auth, self._spec.auth_timeout))
        headers.update(ACCEPT)
        headers.update(extra)
        if not modern:
            if session_id is not None:
                headers[hh.MCP_SESSION_ID] = session_id
            if self._legacy_version is not None and not initialize:
                headers[hh.MCP_PROTOCOL_VERSION] = self._legacy_version
        return headers

    async def _request(self, rid: Any, sent: _Sent) -> None:
        while True:
            stream: StreamState | None = None
            mismatch: ErrorResponse | None = None
            try:
                initialize = sent.method == "initialize"
                session_id = None if initialize else self._session_id
                headers = await self._headers(
                    sent.modern, sent.headers, session_id=session_id, initialize=initialize
                )
                session = self._streams if sent.method == LISTEN else self._session
                assert session is not None
                async with session.post(self._url, data=sent.body, headers=headers) as resp:
                    stream = StreamState()
                    mismatch = await self._answer(resp, rid, sent, session_id, stream)
            except asyncio.CancelledError:
                raise
            except aiohttp.ClientConnectorError as exc:
                self._sent.pop(rid, None)
                self._report_down("unreachable", type(exc).__name__)
            except aiohttp.ConnectionTimeoutError:
                # No connection within connect_timeout (connecting, or waiting for a pooled
                # one): never sent, so not a broken stream (which "may have run").
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
            except BROKEN as exc:
                if self._sent.get(rid) is sent:
                    await self._broken(rid, sent, stream, type(exc).__name__)
            finally:
                if self._sent.get(rid) is sent and (stream is None or stream.done):
                    self._sent.pop(rid, None)
            if mismatch is None:
                return
            # mcp-spec §7: on -32020 for Mcp-Param-* the client SHOULD list the tools to
            # learn their schemas, then retry (the server refused it: it never ran). Once.
            sent.relearned = True
            headers = await self._relearn(sent)
            if headers is None or self._sent.get(rid) is not sent:
                self._sent.pop(rid, None)
                self._deliver([mismatch])
                return
            sent.headers = headers

    async def _answer(
        self,
        resp: aiohttp.ClientResponse,
        rid: Any,
        sent: _Sent,
        session_id: str | None,
        stream: StreamState,
    ) -> ErrorResponse | None:
        """Route one HTTP answer; returns a ``-32020`` worth retrying with learned headers."""
        status = resp.status
        if 200 <= status < 300:
            if sent.method == "initialize" and not sent.modern:
                self._new_session(resp)
            if resp.content_type == "text/event-stream":
                await self._read_stream(resp, rid, sent, stream)
                if not stream.done and self._sent.get(rid) is sent:
                    await self._broken(rid, sent, stream, "stream_ended")
                return None
            body = await read_body(resp, self._max)
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
                return None  # legacy: the answer may still come on the GET stream
            self._deliver_one(body, rid, sent)
            return None
        if status == 404 and session_id is not None and not sent.modern:
            self._session_expired(rid, sent, session_id)  # kept: it is re-sent later
            return None
        refused = status_error(sent.method, status, resp.headers)
        if refused is not None:
            stream.done = True
            self._fail(rid, refused, status, b"")
            return None
        try:
            body = await read_body(resp, self._max)
        except Error:
            body = b""  # an error page over the limit: the status says enough
        msg = decode(body) if body else None
        if type(msg) is ErrorResponse:
            # The transport, not the id, says which request an HTTP error answers (mcp 1.30
            # answers id "server-error"; others null).
            msg = msg if msg.id == rid else msg._replace(id=rid)
            if (
                msg.code == HEADER_MISMATCH
                and sent.modern
                and sent.method == "tools/call"
                and not sent.relearned
            ):
                return msg  # stream.done stays False: _request keeps the request
            stream.done = True
            self._deliver([msg])
            return None
        stream.done = True
        self._fail(rid, http_error(sent.method, status), status, body)
        return None

    async def _relearn(self, sent: _Sent) -> dict[str, str] | None:
        """List the tools (every page) to learn their ``x-mcp-header`` plans, and return the
        re-sent call's headers; None if that cannot help."""
        try:
            params = orjson.loads(sent.body)["params"]
            meta = {
                k: v
                for k, v in params["_meta"].items()
                if k == PV_META or k.startswith("io.modelcontextprotocol/client")
            }
            version = meta[PV_META]
            cursor: str | None = None
            for _ in range(_PLAN_PAGES):
                list_params: dict[str, Any] = {"_meta": meta}
                if cursor is not None:
                    list_params["cursor"] = cursor
                result = await self._fetch("tools/list", list_params, version)
                tools = result.get("tools") if type(result) is dict else None
                if type(tools) is not list:
                    return None
                self._filter_tools(Response(_PLANS_ID, result))
                cursor = result.get("nextCursor")
                if type(cursor) is not str:
                    break
            plan = self._plans.get(params.get("name"))
            if not plan:
                return None
            headers = hh.request_headers("tools/call", params, version)
            headers.update(hh.param_headers(plan, params.get("arguments")))
            return headers
        except (Error, KeyError, TypeError, ValueError, aiohttp.ClientError, *BROKEN) as exc:
            log.debug("could not learn the tools' header plans: %s", type(exc).__name__)
            return None

    async def _fetch(self, method: str, params: dict[str, Any], version: str) -> Any:
        """One request of the transport's own (modern), answered as JSON or SSE: its result."""
        body = orjson.dumps({"jsonrpc": "2.0", "id": _PLANS_ID, "method": method, "params": params})
        headers = await self._headers(
            True, hh.request_headers(method, params, version), session_id=None
        )
        assert self._session is not None
        async with self._session.post(self._url, data=body, headers=headers) as resp:
            if resp.status != 200:
                return None
            if resp.content_type != "text/event-stream":
                msg = decode(await read_body(resp, self._max))
                return msg.result if type(msg) is Response else None
            parser = SseParser(self._max)
            async for chunk in resp.content.iter_any():
                for ev in parser.feed(chunk):
                    msg = decode(ev.data) if ev.data else None
                    if type(msg) is Response and msg.id == _PLANS_ID:
                        return msg.result
        return None

    def _new_session(self, resp: aiohttp.ClientResponse) -> None:
        sid = resp.headers.get(hh.MCP_SESSION_ID)
        if sid is not None and not (sid.isascii() and sid.isprintable() and sid):
            sid = None  # spec: visible ASCII only; anything else is not echoed
        self._session_id = sid

    async def _read_stream(
        self, resp: aiohttp.ClientResponse, rid: Any, sent: _Sent, stream: StreamState
    ) -> None:
        parser = stream.parser or SseParser(self._max)
        stream.parser = parser
        async for chunk in resp.content.iter_any():
            events, too_large = feed(parser, chunk)
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
            if name not in self._warned:  # once per tool, not on every listing
                self._warned.add(name)
                log.warning("hiding tool %r: invalid x-mcp-header annotation (%s)", name, reason)
        if not dropped:
            return msg
        return msg._replace(result={**result, "tools": kept})
