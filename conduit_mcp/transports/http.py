"""The streamable HTTP transport, both eras, on aiohttp (MCP spec 2026-07-28 and 2025-11-25,
Transports, "Streamable HTTP").

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
  negotiated ``MCP-Protocol-Version``; once ``notifications/initialized`` was answered the
  GET stream (opened by the listen actor) carries server notifications and requests, and the
  session's requests wait for it to be answered (``LegacySession.streams_ready``); a
  broken response stream is resumed with ``Last-Event-ID`` after the server's ``retry``; a 404 for a request
  carrying the session is a :class:`SessionExpired` (the request is kept and re-sent once
  the connection has initialized again); ``close`` DELETEs the session; cancelling also
  POSTs ``notifications/cancelled`` (in that era a disconnect is not a cancellation).

HTTP outcomes (docs/connection.md, "HTTP outcomes"): 401/403 fail the request with kind
``auth`` (the parsed ``WWW-Authenticate`` challenges in ``Error.data``, never logged); 429
with ``overloaded`` and the server's ``Retry-After`` (never retried here); 5xx and a broken
stream with ``transport``; an unreachable server is :class:`TransportDown`, the reconnect path;
no connection within ``connect_timeout`` (connecting, or waiting for a pooled connection)
fails that request with ``transport``/``connect_timeout`` (it was never sent). A response
body or an SSE event over ``max_response`` is ``protocol``/``response_too_large``.

Pools: requests share one connection pool of ``pool_limit`` connections; the long-lived
streams (the legacy GET stream, modern ``subscriptions/listen``) have their own small pool,
so that they never hold the requests' connections for good.

Long-lived streams for the listen actor (:meth:`HttpTransport.open_stream`): a modern
``subscriptions/listen`` is POSTed on the streams' pool, or the legacy GET stream opened
there, and its messages are told to the listen actor (the sink), never to the connection
(answers to calls in flight excepted: they go straight to their callers); a stream whose
sink is dead closes itself, and a new sink (a restarted listen actor) closes the old one's.
Reopening a stream that ended is the listen actor's (a floor and a backoff).

Credentials: static headers and a bearer token are merged once; an ``auth`` callable is user
code, so it runs on a small worker pool (never on the loop or an actor), bounded by
``auth_timeout``. No header value, token or session id is ever logged or put in a repr.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections import deque
from collections.abc import Mapping
from typing import Any

import aiohttp
import orjson
import pykka

from ..errors import Error
from ..otp.base import safe_tell
from ..otp.flag import Flag
from ..protocol import http_headers as hh
from ..protocol.jsonrpc import (
    HEADER_MISMATCH,
    ErrorResponse,
    Invalid,
    Request,
    Response,
    decode,
    encode_kept,
)
from ..protocol.messages import cancelled
from ..protocol.sse import SseParser
from ..protocol.tls import CLOSED_OVER_TLS, is_tls_failure, tls_detail
from . import loop as io_loop
from .base import (
    FrameProblem,
    Inbound,
    RequestFailed,
    StreamBroken,
    StreamEnded,
    StreamMessages,
    StreamSink,
    TransportDown,
    TransportUp,
)
from .http_dpop import dpop_middleware
from .http_legacy import LegacySession
from .http_pool import Pool
from .http_spec import Http, describe
from .http_token import TokenCell
from .http_wire import (
    ACCEPT,
    BROKEN,
    LISTEN,
    PV_META,
    STREAM_LIMIT,
    Sent,
    StreamState,
    buffered_body,
    call_auth,
    client_failure,
    connect_failure,
    feed,
    http_error,
    not_connected,
    read_body,
    same_origin_only,
    status_error,
    too_many_redirects,
)

log = logging.getLogger("conduit_mcp.http")

__all__ = ["Http", "HttpTransport"]

#: Answers to server requests being POSTed at once, at most; one more is dropped and counted
#: (docs/connection.md, "Floods"): each POST holds a task and a pooled connection's turn.
ANSWER_POSTS = 32
#: Answers that may wait for a POST slot; one more is dropped (and counted), like one past
#: ``max_answer_backlog`` bytes: a flood of tiny answers is bounded in count too.
ANSWER_WAITING = 1024

# A tools/list the transport sends itself to learn header plans (never a connection's id).
_PLANS_ID = "conduit-mcp:header-plans"
_PLAN_PAGES = 20


class HttpTransport:
    """One incarnation of a connection to a streamable HTTP server (a reconnect builds a new
    one; ``memory`` outlives it: the tools' header plans). The legacy era's state and work
    are an object it holds (:class:`~.http_legacy.LegacySession`)."""

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
        max_answer_backlog: int = 1024 * 1024,
        token: TokenCell | None = None,
    ) -> None:
        self._spec = spec
        # The OAuth access token, read once per request (http_token.py); None without OAuth.
        self._token = token
        self.owner = owner  # the connection
        self.gen = gen
        self._pending = pending
        self.url = spec.url
        self.max_response = spec.max_response or max_frame
        self._limit = spec.pool_limit or max_in_flight + 8
        self._static = spec.static_headers()
        self._plain = _plain_headers(spec, self._static, token)
        self._warned: set[str] = set()  # tools already warned about (hidden for x-mcp-header)
        self._plans: dict[str, Any] = (memory if memory is not None else {}).setdefault(
            "header_plans", {}
        )
        self._session: aiohttp.ClientSession | None = None
        # Long-lived streams (the legacy GET stream, modern subscriptions/listen) get their
        # own pool: counted in pool_limit they would hold its connections for good, and a
        # pool_limit of 1 (or 2 with both) would leave no connection for any request. Made
        # by the first stream (streams()): most clients never open one, and a session with
        # its connector costs ~6 KiB and ~50 us a client (benchmarks/many_clients.py).
        self._streams: aiohttp.ClientSession | None = None
        # What the streams' session is made with, set by _open (I/O loop).
        self._makings: tuple[Any, Any, Any] | None = None
        self._pool = Pool(spec.keep_alive, on_connect=self._connected)
        self._stream_pool = Pool(spec.keep_alive, on_connect=self._connected)
        self._timeout = aiohttp.ClientTimeout(
            total=None,
            connect=spec.connect_timeout,
            sock_connect=spec.connect_timeout,
            sock_read=spec.stream_idle,
        )
        self._sent: dict[Any, Sent] = {}
        # Bytes of answers to server requests handed to the loop (connection's thread) and
        # done posting (loop): past max_answer_backlog in between, an answer is dropped and
        # counted (docs/connection.md, "Floods"). One writer each: no lock.
        self._answers_started = 0
        self._answers_done = 0
        self._answer_posts = 0  # answers being POSTed now (loop)
        self._answers_handed = 0  # answers handed to the loop (connection's thread)
        self._answers_finished = 0  # answers posted, or dropped at close (loop)
        # answers waiting for a POST slot, (body, size) (loop)
        self._answer_queue: deque[tuple[bytes, int]] = deque()
        self._max_answers = max_answer_backlog
        self._others: set[asyncio.Task[Any]] = set()
        # The listen actor's streams by tag (their request ids).
        self._listens: dict[str, asyncio.Task[None]] = {}
        self._sink_key: object = None
        self._legacy = LegacySession(self)
        self._closing = False
        self._down = False
        self._gone = Flag()
        # True once a connection to the server was made (TCP, and TLS for https): a probe
        # that timed out before it is no era evidence (docs/tls.md). Written on the loop,
        # read by the connection: one bool, no lock.
        self.connected = False
        # Requests held back while the connection sends a burst (cork/flush; its thread).
        self._corked = False
        self._held: list[tuple[Any, str, bytes, dict[str, str], bool]] = []

    def __repr__(self) -> str:
        # Never a header, a token or the session id.
        return f"<HttpTransport gen={self.gen} url={describe(self._spec)!r}>"

    # -- called from the connection's thread ------------------------------------------------

    def connect(self) -> None:
        io_loop.spawn(self._open())

    def send(self, message: dict[str, Any]) -> None:
        body = encode_kept(message)  # Error("argument") on unserialisable input, before anything
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
        if self._corked:
            self._held.append((rid, method or "", body, headers, modern))
            return
        io_loop.call_soon(self._start, rid, method or "", body, headers, modern)

    def cork(self) -> None:
        """Hold the requests sent from now on until :meth:`flush` (the connection sends a
        burst). Connection's thread, as every ``send``."""
        self._corked = True

    def flush(self) -> None:
        """Hand what :meth:`cork` held to the I/O loop at once: one ``call_soon_threadsafe``
        (one wake-up of the loop) for a burst instead of one each. Connection's thread."""
        self._corked = False
        held = self._held
        if held:
            self._held = []
            io_loop.call_soon(self._start_all, held)

    def _start_all(self, held: list[tuple[Any, str, bytes, dict[str, str], bool]]) -> None:
        for item in held:
            self._start(*item)

    def send_answer(self, message: dict[str, Any]) -> None:
        """An answer to a server request, POSTed like a notification. At most
        :data:`ANSWER_POSTS` are being POSTed at once; the others wait their turn on the loop.
        One that would take the answers waiting or being posted past ``max_answer_backlog``
        bytes, or past :data:`ANSWER_WAITING` waiting, is dropped (and counted), so a server
        that floods requests cannot pile up POSTs or memory. Connection's thread."""
        body = encode_kept(message)
        size = len(body)
        if self._held:
            self.flush()  # the requests held first, in order
        if (
            self._answers_started - self._answers_done + size > self._max_answers
            or self._answers_handed - self._answers_finished >= ANSWER_POSTS + ANSWER_WAITING
        ):
            drops = getattr(self._pending, "drops", None)
            if drops is not None:
                drops.add("answer")
            return
        self._answers_started += size
        self._answers_handed += 1
        io_loop.call_soon(self._queue_answer, body, size)

    def _queue_answer(self, body: bytes, size: int) -> None:
        self._answer_queue.append((body, size))
        self._pump_answers()

    def _pump_answers(self) -> None:
        """Start the waiting answers' POSTs while fewer than :data:`ANSWER_POSTS` run (loop)."""
        queue = self._answer_queue
        while queue and self._answer_posts < ANSWER_POSTS:
            body, size = queue.popleft()
            if self._closing or self._session is None:
                self._answers_done += size
                self._answers_finished += 1
                continue
            self._answer_posts += 1
            # As send() posts a response: no method, so no modern headers (a modern server
            # sends no requests; a legacy session's id goes with it).
            task = asyncio.ensure_future(self._post_other("", body, False))
            self._others.add(task)
            task.add_done_callback(functools.partial(self._answer_posted, size))

    def _answer_posted(self, size: int, task: asyncio.Task[Any]) -> None:
        self._others.discard(task)
        self._answers_done += size
        self._answers_finished += 1
        self._answer_posts -= 1
        self._pump_answers()

    def set_credentials(self, spec: Http) -> None:
        """``Client.set_auth``: the next request carries these (connection thread; each
        field is one reference store the loop reads when it builds a request's headers)."""
        static = spec.static_headers()
        plain = _plain_headers(spec, static, self._token)
        self._static = static
        self._spec = spec
        self._plain = plain

    def cancel(self, request_id: int | str, reason: str) -> None:
        if self._held:
            self.flush()  # a held request must start before its cancellation reaches the loop
        sent = self._sent.get(request_id)
        if sent is not None and not sent.modern:
            # 2025-11-25: a disconnect is not a cancellation; say it.
            self.send(cancelled(request_id, reason))
        io_loop.call_soon(self._cancel_task, request_id)

    def close(self) -> None:
        self._closing = True
        self._held = []  # never started: the connection fails what is pending
        io_loop.spawn(self._close())

    def stderr(self) -> bytes:
        return b""

    def wait_closed(self, timeout: float) -> bool:
        return self._gone.wait(timeout)

    def negotiated(self, era: str, version: str) -> None:
        """In the legacy era the version is sent as ``MCP-Protocol-Version`` on every later
        request (spec 2025-11-25, Transports, "Protocol Version Header")."""
        if era == "legacy":
            self._legacy.negotiated(version)

    def open_stream(
        self,
        tag: str,
        message: dict[str, Any] | None,
        sink: StreamSink,
        last_event_id: str | None = None,
    ) -> None:
        """See :meth:`~.base.Transport.open_stream`: a modern ``subscriptions/listen``, or
        the legacy GET stream, on the streams' own pool."""
        if message is None:
            io_loop.call_soon(self._start_get, tag, sink, last_event_id)
            return
        body = encode_kept(message)
        params = message.get("params")
        meta = params.get("_meta") if type(params) is dict else None
        version = meta.get(PV_META) if type(meta) is dict else None
        headers = hh.request_headers(LISTEN, params, version or "")
        io_loop.call_soon(self._start_listen, tag, body, headers, sink)

    def close_stream(self, tag: str) -> None:
        """Closing a modern stream is its cancellation (spec 2026-07-28)."""
        io_loop.call_soon(self._stop_listen, tag)

    # -- the legacy session's view of its transport (Host; I/O loop) ------------------------

    @property
    def closing(self) -> bool:
        return self._closing

    def requests(self) -> aiohttp.ClientSession:
        assert self._session is not None
        return self._session

    def streams(self) -> aiohttp.ClientSession:
        """The streams' session, made on first use (after ``_open``; I/O loop). ``_close``
        closes it if it was made, whenever that was before its end."""
        streams = self._streams
        if streams is None:
            assert self._makings is not None
            tls, guard, dpop = self._makings
            streams = self._streams = _session(
                self._stream_pool.new_connector(STREAM_LIMIT, ssl=tls),
                self._stream_pool,
                guard,
                self._timeout,
                dpop,
            )
        return streams

    def in_flight(self, rid: Any) -> Sent | None:
        return self._sent.get(rid)

    def forget(self, rid: Any) -> None:
        self._sent.pop(rid, None)

    def resend(self, rid: Any, sent: Sent) -> None:
        sent.task = asyncio.ensure_future(self._request(rid, sent))

    # -- I/O loop: life cycle ---------------------------------------------------------------

    async def _open(self) -> None:
        if self._closing:
            self._gone.set()
            return
        # Nothing ever goes to another origin, whatever a redirect says (http_wire).
        guard = same_origin_only(self.url)
        # Http(ssl=...) or Http(verify=...): the private CA, the client certificate
        # (docs/tls.md); True: the system's CAs.
        tls = self._spec.tls or True
        # Idle connections dropped before the server closes them, and a request the server
        # provably never got (its pooled connection closed first) sent again (http_pool).
        # Under OAuth, a DPoP-bound token's proofs are made per hop (http_dpop).
        dpop = dpop_middleware(self._token) if self._token is not None else None
        self._session = _session(
            self._pool.new_connector(self._limit, ssl=tls), self._pool, guard, self._timeout, dpop
        )
        self._makings = (tls, guard, dpop)
        safe_tell(self.owner, TransportUp(self.gen))

    def _connected(self) -> None:
        """Sets :attr:`connected` once a connection is made (TCP, and TLS for https): told by
        the pools' connectors (a trace signal would cost every request, http_pool)."""
        self.connected = True

    async def _close(self) -> None:
        tasks = [s.task for s in self._sent.values() if s.task is not None]
        tasks.extend(self._others)
        tasks.extend(self._listens.values())
        self._legacy.close()
        for task in tasks:
            task.cancel()
        session = self._session
        try:
            if session is not None and self._legacy.session_id is not None:
                await self._delete_session(session)
        finally:
            if session is not None:
                await session.close()
            if self._streams is not None:
                await self._streams.close()
            self._sent.clear()
            self.report_down("closed", None)
            self._gone.set()

    async def _delete_session(self, session: aiohttp.ClientSession) -> None:
        """End the legacy session (spec 2025-11-25, "Session Management": SHOULD; a 405 is
        fine)."""
        headers = await self.headers(False, {}, session_id=self._legacy.session_id)
        try:
            async with session.delete(
                self.url,
                headers=headers,
                timeout=aiohttp.ClientTimeout(total=self._spec.close_timeout),
            ):
                pass
        except Exception as exc:  # ClientError, TimeoutError, Error, the client's own failure
            log.debug("session DELETE failed: %s", type(exc).__name__)

    def report_down(self, reason: str, detail: str | None) -> None:
        if self._down:
            return
        self._down = True
        safe_tell(self.owner, TransportDown(self.gen, reason, detail))

    # -- I/O loop: requests -----------------------------------------------------------------

    def _start(
        self, rid: Any, method: str, body: bytes, headers: dict[str, str], modern: bool
    ) -> None:
        if self._closing or self._session is None:
            return
        if rid is not None and method:
            sent = Sent(method, body, headers, modern)
            self._sent[rid] = sent
            # The loop's create_task, not ensure_future: its checks and its loop lookup are
            # Python code run for every request (a coroutine is what we have).
            sent.task = asyncio.get_running_loop().create_task(self._request(rid, sent))
        else:
            task = asyncio.ensure_future(self._post_other(method, body, modern))
            self._others.add(task)
            task.add_done_callback(self._others.discard)

    def _cancel_task(self, rid: Any) -> None:
        sent = self._sent.pop(rid, None)
        if sent is not None and sent.task is not None:
            sent.task.cancel()  # closes the response stream: the modern cancellation

    async def headers(
        self,
        modern: bool,
        extra: Mapping[str, str],
        *,
        session_id: str | None,
        initialize: bool = False,
        sent: Sent | None = None,
    ) -> dict[str, str]:
        """The user's headers first (static, then the auth callable's, or the current OAuth
        token, whose version ``sent`` records: a 401 names the token it refused), then the
        protocol's, which they can never override (Accept, Content-Type, the Mcp-* and
        session headers)."""
        headers = self.headers_now(modern, extra, session_id, initialize, sent)
        if headers is not None:
            return headers
        headers = dict(self._static)
        auth = self._spec.callback  # an OAuth is stamped from the cell, not called
        if auth is not None:
            headers.update(await call_auth(auth, self._spec.auth_timeout))
        headers.update(ACCEPT)
        headers.update(extra)
        self._session_headers(headers, modern, session_id, initialize)
        return headers

    def headers_now(
        self,
        modern: bool,
        extra: Mapping[str, str],
        session_id: str | None,
        initialize: bool = False,
        sent: Sent | None = None,
    ) -> dict[str, str] | None:
        """:meth:`headers` without awaiting, when no auth callable has to run (then None).
        Most requests take this way: a coroutine less per request."""
        cell = self._token
        if cell is not None:
            headers = dict(self._static)
            snap = cell.current  # one read: the header and its version agree
            if snap is not None:
                headers["Authorization"] = snap.header
                if sent is not None:
                    sent.token = snap.version
            headers.update(ACCEPT)
        else:
            plain = self._plain  # the static headers and ACCEPT, merged once
            if plain is None:
                return None
            headers = plain.copy()
        headers.update(extra)
        if not modern:
            self._session_headers(headers, modern, session_id, initialize)
        return headers

    def _session_headers(
        self, headers: dict[str, str], modern: bool, session_id: str | None, initialize: bool
    ) -> None:
        """The legacy era's session headers (after the user's: never overridden)."""
        if not modern:
            if session_id is not None:
                headers[hh.MCP_SESSION_ID] = session_id
            version = self._legacy.version
            if version is not None and not initialize:
                headers[hh.MCP_PROTOCOL_VERSION] = version

    async def _post_other(self, method: str, body: bytes, modern: bool) -> None:
        """A notification, or a response to a server request (the server answers 202)."""
        if not modern:
            await self._legacy.post_other(method, body)
            return
        try:
            headers = await self.headers(True, {}, session_id=None)
            async with self.requests().post(self.url, data=body, headers=headers) as resp:
                status = resp.status
            if status >= 400:
                log.debug("%s POST answered HTTP %s", method or "response", status)
        except asyncio.CancelledError:
            raise
        except aiohttp.ClientConnectorError as exc:
            self.report_down(*connect_failure(exc))
        except Exception as exc:  # BROKEN, ClientError, Error, or the client's own failure
            log.debug("%s POST failed: %s", method or "response", type(exc).__name__)

    async def _request(self, rid: Any, sent: Sent) -> None:
        legacy = self._legacy
        if not sent.modern and sent.method != "initialize" and not legacy.streams_are_ready():
            # After the session's standalone GET stream (http_legacy's module docstring).
            await legacy.streams_ready()
            if self._sent.get(rid) is not sent:
                return  # cancelled or failed meanwhile
        if (
            not sent.modern
            and sent.method != "initialize"
            and legacy.renewing
            and legacy.session_id is None
        ):
            legacy.park(rid)  # the session was lost: sent once the new one is usable
            return
        while True:
            stream: StreamState | None = None
            mismatch: ErrorResponse | None = None
            try:
                initialize = sent.method == "initialize"
                session_id = None if initialize or sent.modern else self._legacy.session_id
                headers = self.headers_now(
                    sent.modern, sent.headers, session_id, initialize, sent
                ) or await self.headers(
                    sent.modern,
                    sent.headers,
                    session_id=session_id,
                    initialize=initialize,
                    sent=sent,
                )
                session = self.streams() if sent.method == LISTEN else self.requests()
                async with session.post(self.url, data=sent.body, headers=headers) as resp:
                    stream = StreamState()
                    mismatch = await self._answer(resp, rid, sent, session_id, stream)
            except asyncio.CancelledError:
                raise
            except aiohttp.ClientConnectorError as exc:
                self._sent.pop(rid, None)
                self.report_down(*connect_failure(exc))
            except aiohttp.ConnectionTimeoutError:
                self.fail(rid, not_connected(sent.method))
            except Error as exc:
                self.fail(rid, exc)
            except aiohttp.TooManyRedirects:
                # A redirect loop within the origin: never processed, so not a broken
                # stream (which "may have run").
                self.fail(rid, too_many_redirects(sent.method))
            except BROKEN as exc:
                if stream is None and self.url.startswith("https:"):
                    # Closed before any answer, over TLS: a TLS alert (the server refused
                    # the client's certificate) is tls_failed; a silent close is said so.
                    if is_tls_failure(exc):
                        self._sent.pop(rid, None)
                        self.report_down("tls_failed", tls_detail(exc))
                    elif self._sent.get(rid) is sent:
                        detail = f"{type(exc).__name__}: {CLOSED_OVER_TLS}"
                        await self._broken(rid, sent, stream, detail)
                elif self._sent.get(rid) is sent:
                    await self._broken(rid, sent, stream, type(exc).__name__)
            except Exception as exc:
                # The client's own failure (aiohttp refusing a header value, say): never
                # evidence about the server, so never a status or a broken stream to judge.
                log.debug("%s: the HTTP client failed: %s", sent.method, type(exc).__name__)
                self.fail(rid, client_failure(sent.method, exc))
            finally:
                if self._sent.get(rid) is sent and (stream is None or stream.done):
                    self._sent.pop(rid, None)
            if mismatch is None:
                return
            # Spec 2026-07-28, "Streamable HTTP": on -32020 for Mcp-Param-* the client SHOULD list the tools to
            # learn their schemas, then retry (the server refused it: it never ran). Once.
            sent.relearned = True
            learned = await self._relearn(sent)
            if learned is None or self._sent.get(rid) is not sent:
                self._sent.pop(rid, None)
                self.deliver([mismatch])
                return
            sent.headers = learned

    async def _broken(self, rid: Any, sent: Sent, stream: StreamState | None, detail: str) -> None:
        """A response stream broke before its answer: the legacy session resumes it; a
        modern one cannot be resumed, the connection hears of it."""
        if stream is not None and stream.done:
            return
        if not sent.modern and stream is not None:
            await self._legacy.resume(rid, sent, stream, detail)
            return
        self._sent.pop(rid, None)
        safe_tell(self.owner, StreamBroken(self.gen, rid, detail))

    async def _answer(
        self,
        resp: aiohttp.ClientResponse,
        rid: Any,
        sent: Sent,
        session_id: str | None,
        stream: StreamState,
    ) -> ErrorResponse | None:
        """Route one HTTP answer; returns a ``-32020`` worth retrying with learned headers."""
        status = resp.status
        if 200 <= status < 300:
            if sent.method == "initialize" and not sent.modern:
                self._legacy.new_session(resp, hh.MCP_SESSION_ID)
            if resp.content_type == "text/event-stream":
                await self.read_stream(resp, rid, sent, stream)
                if not stream.done and self._sent.get(rid) is sent:
                    await self._broken(rid, sent, stream, "stream_ended")
                return None
            body = buffered_body(resp, self.max_response)
            if body is None:
                body = await read_body(resp, self.max_response)
            stream.done = True
            if not body:
                if sent.modern:
                    self.fail(
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
            self._legacy.expired(rid, sent, session_id)  # kept: it is re-sent later
            return None
        refused = status_error(sent.method, status, resp.headers)
        if refused is not None:
            if self._token is not None and status in (401, 403):
                # Which token was refused: a refusal of one already replaced never starts a
                # second refresh (docs/connection.md, "Authorizing").
                refused.data["token"] = sent.token
            stream.done = True
            self.fail(rid, refused, status, b"")
            return None
        try:
            body = await read_body(resp, self.max_response)
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
            self.deliver([msg])
            return None
        stream.done = True
        self.fail(rid, http_error(sent.method, status), status, body)
        return None

    async def _relearn(self, sent: Sent) -> dict[str, str] | None:
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
        headers = await self.headers(
            True, hh.request_headers(method, params, version), session_id=None
        )
        async with self.requests().post(self.url, data=body, headers=headers) as resp:
            if resp.status != 200:
                return None
            if resp.content_type != "text/event-stream":
                msg = decode(await read_body(resp, self.max_response))
                return msg.result if type(msg) is Response else None
            parser = SseParser(self.max_response)
            async for chunk in resp.content.iter_any():
                for ev in parser.feed(chunk):
                    got = decode(ev.data) if ev.data else None
                    if isinstance(got, Response) and got.id == _PLANS_ID:
                        return got.result
        return None

    async def read_stream(
        self, resp: aiohttp.ClientResponse, rid: Any, sent: Sent, stream: StreamState
    ) -> None:
        parser = stream.parser or SseParser(self.max_response)
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
                if isinstance(msg, Invalid):
                    safe_tell(self.owner, FrameProblem(self.gen, "malformed", msg.reason))
                    continue
                if isinstance(msg, (Response, ErrorResponse)) and msg.id == rid:
                    stream.done = True
                    if isinstance(msg, Response) and sent.modern and sent.method == "tools/list":
                        msg = self._filter_tools(msg)
                elif type(msg) is Request:
                    msg = msg._replace(related=rid)  # the call it belongs to (its deadline)
                messages.append(msg)
            if messages:
                self.deliver(messages)
            if stream.done:
                return
            if too_large is not None:
                raise too_large

    def _deliver_one(self, body: bytes, rid: Any, sent: Sent) -> None:
        msg = decode(body)
        if isinstance(msg, Invalid):
            self.fail(
                rid,
                Error(
                    "protocol",
                    "bad_body",
                    f"{sent.method}: the response body is not a JSON-RPC message",
                ),
            )
            return
        if isinstance(msg, ErrorResponse) and msg.id != rid:
            msg = msg._replace(id=rid)
        elif isinstance(msg, Response) and sent.modern and sent.method == "tools/list":
            msg = self._filter_tools(msg)
        self.deliver([msg])

    def answer(self, messages: list[Any]) -> list[Any]:
        """Answer the calls in flight that ``messages`` answer; the rest."""
        pending = self._pending
        return pending.deliver(messages) if pending is not None else messages

    def admit(self, messages: list[Any]) -> list[Any]:
        """The flood bound: what of ``messages`` the connection may be told now
        (:meth:`~conduit_mcp.actors.pending.PendingTable.admit`)."""
        pending = self._pending
        return pending.admit(messages) if pending is not None and messages else messages

    def deliver(self, messages: list[Any]) -> None:
        pending = self._pending
        if pending is not None:
            messages = pending.deliver(messages)
            if messages:
                messages = pending.admit(messages)
        if messages:
            safe_tell(self.owner, Inbound(self.gen, messages))

    def fail(
        self, rid: Any, error: Error, status: int | None = None, body: bytes | None = None
    ) -> None:
        self._sent.pop(rid, None)
        safe_tell(self.owner, RequestFailed(self.gen, rid, error, status, body))

    # -- I/O loop: the listen actor's streams -----------------------------------------------

    def _start_listen(
        self, tag: str, body: bytes, headers: dict[str, str], sink: StreamSink
    ) -> None:
        if self._closing or self._session is None or tag in self._listens:
            _tell_sink(sink, StreamEnded(self.gen, tag, "closed"))
            return
        key = getattr(sink, "actor_urn", None) or id(sink)
        if key != self._sink_key:
            # A new sink (a restarted listen actor) supersedes the old: close its streams.
            for task in self._listens.values():
                task.cancel()
            self._sink_key = key
        task = asyncio.ensure_future(self._listen(tag, body, headers, sink))
        self._listens[tag] = task
        task.add_done_callback(lambda _t: self._listens.pop(tag, None))

    def _start_get(self, tag: str, sink: StreamSink, last_event_id: str | None) -> None:
        if self._closing or self._session is None:
            _tell_sink(sink, StreamEnded(self.gen, tag, "closed", final=True))
            return
        self._legacy.open_get(tag, sink, last_event_id)

    def _stop_listen(self, tag: str) -> None:
        if self._legacy.close_get(tag):
            return
        task = self._listens.pop(tag, None)
        if task is not None:
            task.cancel()

    async def _listen(
        self, tag: str, body: bytes, headers: dict[str, str], sink: StreamSink
    ) -> None:
        """One modern listen: POSTed on the streams' pool, its messages told to ``sink``
        (the listen actor), its end too. A dead sink ends it (leaving the ``async with``
        closes the stream, which the server takes as a cancellation)."""
        detail = "ended"
        try:
            stamp = Sent(LISTEN, body, headers, True)  # records the OAuth token's version
            sent = await self.headers(True, headers, session_id=None, sent=stamp)
            async with self.streams().post(self.url, data=body, headers=sent) as resp:
                if resp.status == 401 and self._token is not None:
                    # The token was refused on a listen: the connection authorizes as for a
                    # request (docs/connection.md, "Authorizing"); the listen actor reopens
                    # the stream after its backoff, with the next token.
                    refused = status_error(LISTEN, 401, resp.headers)
                    if refused is not None:
                        refused.data["token"] = stamp.token
                        safe_tell(self.owner, RequestFailed(self.gen, tag, refused, 401, b""))
                if resp.content_type == "text/event-stream" and resp.status == 200:
                    if not await self._listen_events(tag, resp, sink):
                        return  # the sink is dead: nobody to tell
                else:
                    msg = decode(await read_body(resp, self.max_response))
                    if type(msg) is Response or type(msg) is ErrorResponse:
                        _tell_sink(sink, StreamMessages(self.gen, tag, [msg]))
                    else:
                        detail = f"http_{resp.status}"
        except asyncio.CancelledError:
            raise  # closed by its sink: nothing to tell
        except aiohttp.ClientConnectorError as exc:
            detail = "unreachable"
            self.report_down(*connect_failure(exc))
        except Exception as exc:  # BROKEN, ClientError, Error, or the client's own failure
            detail = type(exc).__name__ if not isinstance(exc, Error) else exc.reason
        _tell_sink(sink, StreamEnded(self.gen, tag, detail))

    async def _listen_events(
        self, tag: str, resp: aiohttp.ClientResponse, sink: StreamSink
    ) -> bool:
        """Tell the sink each chunk's messages; False once the sink is dead."""
        parser = SseParser(self.max_response)
        async for chunk in resp.content.iter_any():
            events, too_large = feed(parser, chunk)
            messages = [decode(ev.data) for ev in events if ev.event == "message" and ev.data]
            if messages and not _tell_sink(sink, StreamMessages(self.gen, tag, messages)):
                return False
            if too_large is not None:
                raise too_large
        return True

    def _filter_tools(self, msg: Response) -> Response:
        """Hide tools whose ``x-mcp-header`` annotations break the spec's rules (spec 2026-07-28,
        "Streamable HTTP": the client MUST exclude them), and keep the header plans of the others."""
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


def _session(
    pool_connector: aiohttp.TCPConnector,
    pool: Pool,
    guard: Any,
    timeout: aiohttp.ClientTimeout,
    dpop: Any = None,
) -> aiohttp.ClientSession:
    """A session on ``pool_connector``: the pool's middleware checks each hop with the
    same-origin ``guard`` before it sends it (and maybe sends it again); ``dpop``, innermost,
    proves each sending of it afresh."""
    pool.guard = guard
    middlewares = (pool.middleware,) if dpop is None else (pool.middleware, dpop)
    return aiohttp.ClientSession(connector=pool_connector, timeout=timeout, middlewares=middlewares)


def _plain_headers(
    spec: Http, static: dict[str, str], token: TokenCell | None
) -> dict[str, str] | None:
    """The static headers with the protocol's ``ACCEPT`` over them, merged once for every
    request; None when each request's must be made afresh (an auth callable, a token)."""
    if spec.callback is not None or token is not None:
        return None
    return {**static, **ACCEPT}


def _tell_sink(sink: StreamSink, message: Any) -> bool:
    """Tell a stream's sink; False if it is dead (its stream then closes itself)."""
    try:
        sink.tell(message)
        return True
    except pykka.ActorDeadError:
        return False
