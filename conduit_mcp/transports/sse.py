"""The HTTP+SSE transport of MCP 2024-11-05 (Transports, "HTTP with SSE"), on aiohttp.

The client opens one GET event stream at the ``Sse`` URL. Its first event, ``endpoint``,
names the URL the client POSTs every message to (checked first: another origin is refused with
``protocol``/``endpoint_origin`` and nothing at all is sent there, :mod:`conduit_mcp.protocol.
sse_endpoint`); the server answers each POST ``202 Accepted`` and sends the responses,
notifications and its own requests as ``message`` events on the stream. The stream is the
session: once it is lost (ended, broken, silent past ``stream_idle``, an event over
``max_response``, a POST answered 404) the transport is down, and the connection does what it
does for every lost transport: what is in flight fails with ``transport``, it reconnects
with its backoff, and the new transport opens a new stream and initializes again.

:class:`SseTransport` is an :class:`~.http.HttpTransport` with a different wire: the pools,
the same-origin guard on redirects, the headers (static, the auth callable's, the OAuth
token's), the answers' flood bounds, the reprs without secrets and the life cycle are
inherited; the requests' and notifications' POSTs, cancellation (always a
``notifications/cancelled``: this era's only way) and the stream are its own. The stream is
opened by the first message the connection sends (the ``initialize``), so that a 401 on it
is that request's refusal and OAuth works as for streamable HTTP: the connection authorizes
and initializes again, which opens the stream again with the new token.

``Http(url, sse_fallback=True)`` is the same class started in streamable HTTP mode: an
``initialize`` POST answered 400, 404 or 405 switches it to this transport at the same URL
(the spec's backwards-compatibility recipe, 2025-03-26), and the connection's memory keeps
the switch for its next transports.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp
import pykka

from ..errors import Error
from ..otp.base import safe_tell
from ..protocol.jsonrpc import ErrorResponse, Invalid, decode
from ..protocol.messages import cancelled
from ..protocol.sse import SseParser
from ..protocol.sse_endpoint import resolve_endpoint
from . import loop as io_loop
from .base import FrameProblem, StreamBroken
from .http import HttpTransport
from .http_spec import Http, describe
from .http_token import TokenCell
from .http_wire import (
    BROKEN,
    SSE_ACCEPT,
    Sent,
    StreamState,
    client_failure,
    connect_failure,
    feed,
    http_error,
    not_connected,
    read_body,
    status_error,
    too_many_redirects,
)

# The logger of every HTTP transport (docs/telemetry.md).
log = logging.getLogger("conduit_mcp.http")

__all__ = ["FALLBACK_STATUSES", "SseTransport"]

#: What an ``initialize`` POST answered makes ``Http(sse_fallback=True)`` try the SSE
#: transport (spec 2025-03-26, Transports, "Backwards Compatibility").
FALLBACK_STATUSES = frozenset((400, 404, 405))
#: The longest a request waits for the ``notifications/initialized`` POST to be answered
#: (:meth:`SseTransport._request`): servers answer it at once; this bounds the odd one out.
INITIALIZED_WAIT = 2.0
#: Requests a server takes before ``notifications/initialized`` (the spec's lifecycle).
_BEFORE_INITIALIZED = frozenset(("initialize", "ping"))
#: The key in the connection's memory (kept across its transports) saying the URL is SSE.
_MEMORY_KEY = "sse_fallback"


class _Refused(Exception):
    """The stream could not be opened: what each request waiting for the endpoint fails with."""

    def __init__(self, error: Error, status: int | None) -> None:
        super().__init__(error.reason)
        self.error = error
        self.status = status


class SseTransport(HttpTransport):
    """One stream, one session (see the module docstring). ``fallback``: start as streamable
    HTTP and switch on the recipe's statuses (``Http(sse_fallback=True)``)."""

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
        fallback: bool = False,
    ) -> None:
        super().__init__(
            spec,
            owner,
            gen,
            max_frame=max_frame,
            max_in_flight=max_in_flight,
            pending=pending,
            memory=memory,
            max_answer_backlog=max_answer_backlog,
            token=token,
        )
        self._memory = memory if memory is not None else {}
        # Streamable HTTP until an initialize is answered 400/404/405 (fallback only); a
        # URL found to be SSE stays SSE for the connection's later transports.
        self._sse = not fallback or bool(self._memory.get(_MEMORY_KEY))
        # "sse": the listen actor opens no GET stream of its own (changes.py).
        self.kind = "sse" if self._sse else "http"
        self._endpoint: str | None = None  # the checked message endpoint (loop)
        self._opened: asyncio.Future[str] | None = None  # the stream's endpoint, to come
        self._stream: asyncio.Task[None] | None = None
        # Set once the notifications/initialized POST was answered: each message is its own
        # POST, so without the wait a request could reach the server before it (loop).
        self._initialized = asyncio.Event()

    def __repr__(self) -> str:
        # Never a header, a token, or the endpoint (its query is the session id).
        return f"<SseTransport gen={self.gen} url={describe(self._spec)!r} sse={self._sse}>"

    # -- called from the connection's thread ------------------------------------------------

    def cancel(self, request_id: int | str, reason: str) -> None:
        if not self._sse:
            super().cancel(request_id, reason)
            return
        # This era has one way to cancel: the notification (a closed POST is nothing).
        self.send(cancelled(request_id, reason))
        io_loop.call_soon(self._cancel_task, request_id)

    def negotiated(self, era: str, version: str) -> None:
        # The SSE transport has no MCP-Protocol-Version header (it predates it).
        if not self._sse:
            super().negotiated(era, version)

    # -- I/O loop: streamable HTTP first (fallback) -----------------------------------------

    async def _answer(
        self,
        resp: aiohttp.ClientResponse,
        rid: Any,
        sent: Sent,
        session_id: str | None,
        stream: StreamState,
    ) -> ErrorResponse | None:
        if not self._sse and sent.method == "initialize" and resp.status in FALLBACK_STATUSES:
            # Not a streamable HTTP endpoint: the same initialize over the SSE transport.
            # stream.done stays False, so _request keeps the request for the new task.
            log.info("initialize answered HTTP %s: trying the HTTP+SSE transport", resp.status)
            self._sse = True
            self.kind = "sse"
            self._memory[_MEMORY_KEY] = True
            sent.task = asyncio.ensure_future(self._request(rid, sent))
            return None
        return await super()._answer(resp, rid, sent, session_id, stream)

    # -- I/O loop: requests and notifications -----------------------------------------------

    async def _request(self, rid: Any, sent: Sent) -> None:
        if not self._sse:
            await super()._request(rid, sent)
            return
        try:
            endpoint = await self._endpoint_url()
        except _Refused as refused:
            if self._sent.get(rid) is sent:
                self.fail(rid, refused.error, refused.status, b"")
            return
        if sent.method not in _BEFORE_INITIALIZED and not self._initialized.is_set():
            try:
                await asyncio.wait_for(self._initialized.wait(), INITIALIZED_WAIT)
            except TimeoutError:
                self._initialized.set()  # once: the later requests go at once
        if self._sent.get(rid) is not sent:
            return  # cancelled or failed meanwhile
        try:
            headers = await self.headers(False, sent.headers, session_id=None, sent=sent)
            async with self.requests().post(endpoint, data=sent.body, headers=headers) as resp:
                await self._posted(rid, sent, resp)
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
            self.fail(rid, too_many_redirects(sent.method))
        except BROKEN as exc:
            if self._sent.pop(rid, None) is not None:
                # The POST broke: the server may have taken it (its answer would come on the
                # stream), or not; the caller hears it may have run.
                safe_tell(self.owner, StreamBroken(self.gen, rid, type(exc).__name__))
        except Exception as exc:  # the client's own failure (a header value aiohttp refuses)
            log.debug("%s: the HTTP client failed: %s", sent.method, type(exc).__name__)
            self.fail(rid, client_failure(sent.method, exc))

    async def _posted(self, rid: Any, sent: Sent, resp: aiohttp.ClientResponse) -> None:
        """Route the answer to one POST: 2xx is the server taking it (the answer comes on
        the stream), 404 a session the server lost, the rest the request's failure."""
        status = resp.status
        if 200 <= status < 300:
            self._sent.pop(rid, None)
            try:
                await read_body(resp, self.max_response)  # "Accepted", drained for reuse
            except Error:
                pass
            return
        if status == 404:
            self._sent.pop(rid, None)
            self.report_down("session_lost", "the message endpoint answered HTTP 404")
            return
        refused = status_error(sent.method, status, resp.headers)
        if refused is not None:
            if self._token is not None and status in (401, 403):
                refused.data["token"] = sent.token  # which token was refused (http.py)
            self.fail(rid, refused, status, b"")
            return
        try:
            body = await read_body(resp, self.max_response)
        except Error:
            body = b""
        msg = decode(body) if body else None
        if type(msg) is ErrorResponse:
            self._sent.pop(rid, None)
            self.deliver([msg if msg.id == rid else msg._replace(id=rid)])
            return
        self.fail(rid, http_error(sent.method, status), status, body)

    async def _post_other(self, method: str, body: bytes, modern: bool) -> None:
        """A notification, or an answer to a server request."""
        if not self._sse:
            await super()._post_other(method, body, modern)
            return
        try:
            endpoint = await self._endpoint_url()
        except _Refused:
            return  # the request that opened the stream says why
        what = method or "response"
        try:
            headers = await self.headers(False, {}, session_id=None)
            async with self.requests().post(endpoint, data=body, headers=headers) as resp:
                status = resp.status
            if status == 404:
                self.report_down("session_lost", "the message endpoint answered HTTP 404")
            elif status >= 400:
                log.debug("%s POST answered HTTP %s", what, status)
        except asyncio.CancelledError:
            raise
        except aiohttp.ClientConnectorError as exc:
            self.report_down(*connect_failure(exc))
        except Exception as exc:  # BROKEN, ClientError, Error, or the client's own failure
            log.debug("%s POST failed: %s", what, type(exc).__name__)
        finally:
            if method == "notifications/initialized":
                self._initialized.set()  # the session's requests may go now

    # -- I/O loop: the stream ---------------------------------------------------------------

    async def _endpoint_url(self) -> str:
        """The message endpoint, opening the stream first if it is not open (or opening)."""
        if self._endpoint is not None:
            return self._endpoint
        opened = self._opened
        if opened is None:
            opened = self._opened = asyncio.get_running_loop().create_future()
            # Retrieved here even when no request waits any more (no "never retrieved").
            opened.add_done_callback(lambda f: f.cancelled() or f.exception())
            self._stream = asyncio.ensure_future(self._read_stream(opened))
        return await asyncio.shield(opened)

    def _refuse(self, opened: asyncio.Future[str], error: Error, status: int | None) -> None:
        """The stream was refused before it named an endpoint: the requests waiting for it
        fail with ``error``; the next request opens it again (after OAuth, a new token)."""
        if not opened.done():
            opened.set_exception(_Refused(error, status))
        if self._opened is opened and error.reason != "endpoint_origin":
            self._opened = None

    async def _read_stream(self, opened: asyncio.Future[str]) -> None:
        reason, detail = "stream_lost", "the server ended the event stream"
        stamp = Sent("GET", b"", {}, False)  # records the OAuth token's version
        try:
            headers = await self.headers(False, SSE_ACCEPT, session_id=None, sent=stamp)
            async with self.streams().get(self.url, headers=headers) as resp:
                if resp.status != 200:
                    error = status_error("GET", resp.status, resp.headers)
                    if error is not None and self._token is not None and resp.status in (401, 403):
                        error.data["token"] = stamp.token
                    self._refuse(opened, error or _refused_status(resp.status), resp.status)
                    return
                if resp.content_type != "text/event-stream":
                    self._refuse(opened, _not_a_stream(), resp.status)
                    return
                if not await self._events(resp, opened):
                    return  # the endpoint was refused: nothing was sent there
        except asyncio.CancelledError:
            raise  # the transport is closing
        except aiohttp.ClientConnectorError as exc:
            reason, detail = connect_failure(exc)
        except Error as exc:  # an event over max_response, the auth callable, a redirect
            if not opened.done():
                self._refuse(opened, exc, None)
                return
            reason, detail = exc.reason, exc.message
        except aiohttp.TooManyRedirects:
            self._refuse(opened, too_many_redirects("GET"), None)
            return
        except BROKEN as exc:
            detail = f"the event stream broke ({type(exc).__name__})"
            if isinstance(exc, TimeoutError):
                detail = "the event stream was silent for longer than stream_idle"
        except Exception as exc:  # the client's own failure
            self._refuse(opened, client_failure("GET", exc), None)
            return
        if self._closing:
            return
        if not opened.done() and reason == "stream_lost":
            reason = "no_endpoint"
            detail = "the event stream ended before its endpoint event"
        self.report_down(reason, detail)  # the session is gone: the connection reconnects

    async def _events(self, resp: aiohttp.ClientResponse, opened: asyncio.Future[str]) -> bool:
        """Read the stream: the endpoint, then messages for the connection (the answers to
        calls in flight straight to their callers). False if the endpoint was refused."""
        parser = SseParser(self.max_response)
        async for chunk in resp.content.iter_any():
            events, too_large = feed(parser, chunk)
            messages = []
            for ev in events:
                if ev.event == "message":
                    if not ev.data:
                        continue
                    msg = decode(ev.data)
                    if isinstance(msg, Invalid):
                        safe_tell(self.owner, FrameProblem(self.gen, "malformed", msg.reason))
                    else:
                        messages.append(msg)
                elif ev.event == "endpoint" and self._endpoint is None:
                    try:
                        endpoint = resolve_endpoint(self.url, ev.data)
                    except Error as exc:
                        log.warning("refused the SSE stream's endpoint: %s", exc.reason)
                        self._refuse(opened, exc, None)
                        return False
                    self._endpoint = endpoint
                    if not opened.done():
                        opened.set_result(endpoint)
                # A later endpoint event, or any other event type, is ignored.
            if messages:
                self.deliver(messages)
            if too_large is not None:
                raise too_large
        return True

    async def _close(self) -> None:
        task = self._stream
        if task is not None:
            task.cancel()
        await super()._close()


def _refused_status(status: int) -> Error:
    """A GET answered neither 200 nor 401/403/429: 5xx is worth a reconnect (``transport``);
    the rest means the URL is not an SSE stream (``protocol``)."""
    error = http_error("GET", status)
    if error.kind == "protocol":
        return Error(
            "protocol",
            error.reason,
            f"the event stream's GET was answered HTTP {status}: is the URL the server's SSE "
            "endpoint (it usually ends in /sse)?",
        )
    return error


def _not_a_stream() -> Error:
    return Error(
        "protocol",
        "not_event_stream",
        "the server answered the GET with something other than text/event-stream: is the URL "
        "the server's SSE endpoint (it usually ends in /sse)?",
    )
