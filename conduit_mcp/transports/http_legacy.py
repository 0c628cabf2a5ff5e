"""The legacy era's session for the HTTP transport (MCP spec 2025-11-25, Transports,
"Streamable HTTP": "Session Management", "Resumability and Redelivery", "Listening for
Messages from the Server").

A :class:`LegacySession` is an object the transport holds, as httpcore's connection holds
its HTTP/1.1 connection: it keeps the legacy state (the session id, the negotiated version,
the requests that expired with a lost session, the GET stream) and does the legacy work:
resuming a broken response stream with ``Last-Event-ID``, a session the server lost (the
expired requests kept and re-sent once a new ``initialize`` is done), the POSTs that carry
notifications and responses, and the GET stream for server-to-client messages. What it needs
of the transport is named by :class:`Host`. Everything runs on the I/O loop except
:meth:`LegacySession.negotiated`.

The GET stream is opened (and reopened, after a floor and a backoff) by the listen actor
(:mod:`conduit_mcp.actors.listen`) through :meth:`HttpTransport.open_stream
<conduit_mcp.transports.http.HttpTransport.open_stream>`; one GET here is one stream.

A session's requests go out after its first GET stream was answered (:meth:`LegacySession.
streams_ready`), as the official SDK clients order them (they start the GET on the
``notifications/initialized`` answer, before the next request). The spec keeps two kinds of
GET apart: the standalone stream (no ``Last-Event-ID``; "the server MUST NOT send a JSON-RPC
response on the stream unless resuming a stream associated with a previous client request")
and the resumption of a broken response stream (``Last-Event-ID``, after ``retry``). The
listen actor opens the standalone one a few steps after ``ready``, on its own thread: without
the wait it could reach the server after a call's POST, and a server that tells GETs apart
only by arrival (the official conformance harness's ``sse-retry`` server does) takes it for
that call's resumption and answers the call on it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp
import pykka

from ..errors import Error
from ..otp.base import safe_tell
from ..protocol.jsonrpc import decode
from ..protocol.sse import SseParser
from .base import SessionExpired, StreamBroken, StreamEnded, StreamMessages, StreamSink
from .http_wire import (
    DEFAULT_RETRY_MS,
    RESUME_ATTEMPTS,
    SSE_ACCEPT,
    Sent,
    StreamState,
    connect_failure,
    feed,
)

log = logging.getLogger("conduit_mcp.http")

#: The longest a session's request waits for the session's first GET stream to be answered
#: (:meth:`LegacySession.streams_ready`): the listen actor opens it within milliseconds of
#: ``ready`` and servers answer a GET's headers at once; this only bounds the odd one out.
GET_FIRST_WAIT = 2.0


class Host(Protocol):
    """What the legacy session uses of its transport (all on the I/O loop)."""

    gen: int
    owner: pykka.ActorRef[Any]
    url: str
    max_response: int

    @property
    def closing(self) -> bool: ...

    def requests(self) -> aiohttp.ClientSession: ...

    def streams(self) -> aiohttp.ClientSession: ...

    async def headers(
        self,
        modern: bool,
        extra: Mapping[str, str],
        *,
        session_id: str | None,
        initialize: bool = False,
    ) -> dict[str, str]: ...

    async def read_stream(
        self, resp: aiohttp.ClientResponse, rid: Any, sent: Sent, stream: StreamState
    ) -> None: ...

    def in_flight(self, rid: Any) -> Sent | None: ...

    def forget(self, rid: Any) -> None: ...

    def fail(self, rid: Any, error: Error) -> None: ...

    def resend(self, rid: Any, sent: Sent) -> None: ...

    def report_down(self, reason: str, detail: str | None) -> None: ...

    def deliver(self, messages: list[Any]) -> None: ...

    def answer(self, messages: list[Any]) -> list[Any]: ...

    def admit(self, messages: list[Any]) -> list[Any]: ...


class LegacySession:
    """The legacy era's state of one transport; see the module docstring."""

    def __init__(self, host: Host) -> None:
        self._host = host
        # The Mcp-Session-Id of the initialize answer (None: no session, or it was lost).
        self.session_id: str | None = None
        # The negotiated version, sent as MCP-Protocol-Version after initialize.
        self.version: str | None = None
        # Requests the server refused with 404 (session lost): re-sent after initialize.
        self._expired: list[Any] = []
        # The GET stream's task and tag (None: not open).
        self._get_task: asyncio.Task[None] | None = None
        self._get_tag: str | None = None
        # The two events below, made on first use: a transport that never speaks the legacy
        # era (most of them, under protocol="modern") never needs them (~1.7 KiB a client).
        self._usable_event: asyncio.Event | None = None
        self._get_answered_event: asyncio.Event | None = None
        # True from a lost session until the new one is usable: a request that reaches the
        # loop meanwhile (the connection sent it before it heard of the loss) is parked with
        # the expired ones, not sent without a session (the server would refuse it, 400).
        self.renewing = False

    @property
    def _usable(self) -> asyncio.Event:
        """Set once notifications/initialized was answered: the GET stream waits for it."""
        event = self._usable_event
        if event is None:
            event = self._usable_event = asyncio.Event()
        return event

    @property
    def _get_answered(self) -> asyncio.Event:
        """Set once the session's first GET stream was answered (any status) or failed; the
        session's requests wait for it, at most GET_FIRST_WAIT (streams_ready)."""
        event = self._get_answered_event
        if event is None:
            event = self._get_answered_event = asyncio.Event()
        return event

    def negotiated(self, version: str) -> None:
        """Connection thread: a plain assignment, read by the loop when it builds the next
        request's headers."""
        self.version = version

    def new_session(self, resp: aiohttp.ClientResponse, session_header: str) -> None:
        sid = resp.headers.get(session_header)
        if sid is not None and not (sid.isascii() and sid.isprintable() and sid):
            sid = None  # spec: visible ASCII only; anything else is not echoed
        self.session_id = sid

    def close(self) -> None:
        self.stop_get_stream()
        self._get_answered.set()  # nothing waits on a closed transport

    def streams_are_ready(self) -> bool:
        """True once :meth:`streams_ready` would return at once (a request needs no wait,
        nor the coroutine of one)."""
        return self._get_answered.is_set()

    async def streams_ready(self) -> None:
        """Wait (on the loop) until this session's first GET stream was answered, so that the
        server sees the session's standalone stream before any of its requests (module
        docstring). Bounded: a server that holds a GET's headers back, or a GET never opened
        (the listen actor restarting), delays a request by :data:`GET_FIRST_WAIT` at most."""
        if self._get_answered.is_set():
            return
        try:
            await asyncio.wait_for(self._get_answered.wait(), GET_FIRST_WAIT)
        except TimeoutError:
            # Once: the session's later requests go at once.
            self._get_answered.set()
            log.debug("no answer to the GET stream within %.1f s: requests go on", GET_FIRST_WAIT)

    # -- broken response streams ------------------------------------------------------------

    async def resume(self, rid: Any, sent: Sent, stream: StreamState, detail: str) -> None:
        """A response stream broke before its answer: resume it with the last event id
        (spec: "Resumability and Redelivery"); if that fails, tell the connection."""
        host = self._host
        parser = stream.parser
        if parser is not None and parser.last_event_id is not None:
            for _ in range(RESUME_ATTEMPTS):
                await asyncio.sleep((parser.retry or DEFAULT_RETRY_MS) / 1000)
                if host.closing or host.in_flight(rid) is not sent:
                    return
                try:
                    headers = await host.headers(
                        False,
                        {**SSE_ACCEPT, "Last-Event-ID": parser.last_event_id},
                        session_id=self.session_id,
                    )
                    async with host.requests().get(host.url, headers=headers) as resp:
                        if resp.status != 200 or resp.content_type != "text/event-stream":
                            break
                        await host.read_stream(resp, rid, sent, stream)
                except asyncio.CancelledError:
                    raise
                except Error as exc:
                    if exc.reason == "response_too_large":
                        host.fail(rid, exc)  # resuming would meet the same event again
                        return
                    continue
                except Exception:  # BROKEN, ClientError, or the client's own failure
                    continue
                if stream.done:
                    host.forget(rid)
                    return
        host.forget(rid)
        safe_tell(host.owner, StreamBroken(host.gen, rid, detail))

    # -- a lost session ---------------------------------------------------------------------

    def expired(self, rid: Any, sent: Sent, session_id: str) -> None:
        """The server answered 404 to ``rid``, sent with ``session_id``: keep it for re-sending
        once a new session exists, or fail it if it was already re-sent once."""
        if sent.resent:
            self._host.fail(
                rid,
                Error(
                    "transport",
                    "session_expired",
                    f"{sent.method}: the server lost the session twice",
                ),
            )
            return
        self._expired.append(rid)
        if not self.forget_session(session_id, rid) and self.session_id is not None:
            self._resend_expired()  # a new session already exists

    def park(self, rid: Any) -> None:
        """Keep ``rid`` (not sent yet) to send once the new session is usable."""
        self._expired.append(rid)

    def forget_session(self, session_id: str, rid: Any) -> bool:
        """The server lost ``session_id``. The first to find out forgets it and tells the
        connection, which runs a new initialize (expired requests wait for it:
        docs/connection.md, "HTTP outcomes"); False if it was already forgotten or replaced."""
        if self.session_id != session_id:
            return False
        self.session_id = None
        self.renewing = True
        self._usable.clear()
        self._get_answered.clear()  # the new session's requests wait for its GET stream
        self.stop_get_stream()
        safe_tell(self._host.owner, SessionExpired(self._host.gen, rid))
        return True

    def _resend_expired(self) -> None:
        expired, self._expired = self._expired, []
        for rid in expired:
            sent = self._host.in_flight(rid)
            if sent is None:
                continue  # cancelled or timed out meanwhile
            sent.resent = True
            self._host.resend(rid, sent)

    # -- notifications and responses --------------------------------------------------------

    async def post_other(self, method: str, body: bytes) -> None:
        """A notification, or a response to a server request: the server answers 202."""
        host = self._host
        try:
            session_id = self.session_id
            headers = await host.headers(False, {}, session_id=session_id)
            async with host.requests().post(host.url, data=body, headers=headers) as resp:
                status = resp.status
            if status == 404 and session_id is not None:
                self.forget_session(session_id, None)
                return
            if status >= 400:
                log.debug("%s POST answered HTTP %s", method or "response", status)
        except asyncio.CancelledError:
            raise
        except aiohttp.ClientConnectorError as exc:
            host.report_down(*connect_failure(exc))
            return
        except Exception as exc:  # BROKEN, ClientError, Error, or the client's own failure
            log.debug("%s POST failed: %s", method or "response", type(exc).__name__)
        if method == "notifications/initialized" and not host.closing:
            # The session is usable now: re-send what expired; the GET stream may open.
            self.renewing = False
            self._resend_expired()
            self._usable.set()

    # -- the GET stream (opened by the listen actor) -----------------------------------------

    def open_get(self, tag: str, sink: StreamSink, last_event_id: str | None) -> None:
        """Open the GET stream once the session is usable; its messages (less the answers
        to calls in flight, which go straight to their callers) are told to ``sink``, and
        its end, with what reopening it needs (the server's ``retry``, the last event id).
        Reopening, with a floor and a backoff, is the listen actor's."""
        self.stop_get_stream()
        self._get_tag = tag
        self._get_task = asyncio.ensure_future(self._get_stream(tag, sink, last_event_id))

    def close_get(self, tag: str) -> bool:
        """Close the GET stream ``tag``; False if it is not the GET stream."""
        if tag != self._get_tag:
            return False
        self.stop_get_stream()
        return True

    def stop_get_stream(self) -> None:
        task, self._get_task = self._get_task, None
        self._get_tag = None
        if task is not None:
            task.cancel()

    async def _get_stream(self, tag: str, sink: StreamSink, last_event_id: str | None) -> None:
        """Server-to-client messages outside any request (spec 2025-11-25, "Listening for
        Messages from the Server"), resumed with ``Last-Event-ID``."""
        host = self._host
        await self._usable.wait()  # after notifications/initialized has been answered
        parser = SseParser(host.max_response)
        session_id = self.session_id
        end = StreamEnded(host.gen, tag, "ended")
        extra = dict(SSE_ACCEPT)
        if last_event_id is not None:
            extra["Last-Event-ID"] = last_event_id
        try:
            headers = await host.headers(False, extra, session_id=session_id)
            async with host.streams().get(host.url, headers=headers) as resp:
                self._get_answered.set()  # the session's requests may go now
                if resp.status == 404 and session_id is not None:
                    self.forget_session(session_id, None)  # the connection initializes again
                    end = end._replace(detail="session_expired", final=True)
                elif resp.status != 200 or resp.content_type != "text/event-stream":
                    # 405: the server offers no stream; that is allowed
                    end = end._replace(detail=f"http_{resp.status}", final=True)
                else:
                    if not await self._read_get(tag, resp, parser, sink):
                        return  # the sink is dead: nobody to tell
        except asyncio.CancelledError:
            raise  # closed by the sink, or the transport: nothing to tell
        except aiohttp.ClientConnectorError as exc:
            self._get_answered.set()
            host.report_down("unreachable", type(exc).__name__)
            end = end._replace(detail="unreachable", final=True)
        except Exception as exc:  # BROKEN, ClientError, Error, or the client's own failure
            self._get_answered.set()  # no stream to wait for (the listen actor reopens it)
            log.debug("GET stream broke: %s", type(exc).__name__)
            end = end._replace(detail="failed")
        finally:
            if self._get_tag == tag:
                self._get_task = None
                self._get_tag = None
        retry = parser.retry
        _tell(
            sink, end._replace(retry_ms=retry, last_event_id=parser.last_event_id or last_event_id)
        )

    async def _read_get(
        self, tag: str, resp: aiohttp.ClientResponse, parser: SseParser, sink: StreamSink
    ) -> bool:
        """Tell the sink each chunk's messages; False once the sink is dead."""
        host = self._host
        async for chunk in resp.content.iter_any():
            events, too_large = feed(parser, chunk)
            messages = [decode(ev.data) for ev in events if ev.event == "message" and ev.data]
            if messages:
                rest = host.answer(messages)  # answers to calls in flight: to their callers
                # The flood bound (max_inbox): the listen actor tells the rest on to the
                # connection, which counts it handled.
                rest = host.admit(rest)
                if rest and not _tell(sink, StreamMessages(host.gen, tag, rest)):
                    return False
            if too_large is not None:
                raise too_large
        return True


def _tell(sink: StreamSink, message: Any) -> bool:
    try:
        sink.tell(message)
        return True
    except pykka.ActorDeadError:
        return False
