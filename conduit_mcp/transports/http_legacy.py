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

The GET stream is reopened after a floor and a backoff: a server that ends every GET at once
with ``retry: 1`` must not get a reconnect per millisecond (docs/connection.md, "HTTP
outcomes").
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from typing import Any, Protocol

import aiohttp
import pykka

from ..errors import Error
from ..otp.base import safe_tell
from ..protocol.jsonrpc import Invalid, decode
from ..protocol.listen import LIVED, reopen_delay
from ..protocol.sse import SseParser
from .base import FrameProblem, SessionExpired, StreamBroken
from .http_wire import (
    BROKEN,
    DEFAULT_RETRY_MS,
    GET_ATTEMPTS,
    RESUME_ATTEMPTS,
    SSE_ACCEPT,
    Sent,
    StreamState,
    feed,
)

log = logging.getLogger("conduit_mcp.http")


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
        # The GET stream's task (None: not open).
        self._get_task: asyncio.Task[None] | None = None
        # Reopens of the GET stream since it was opened for this session (visible in logs).
        self.get_reopens = 0

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
                except (*BROKEN, aiohttp.ClientError):
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

    def forget_session(self, session_id: str, rid: Any) -> bool:
        """The server lost ``session_id``. The first to find out forgets it and tells the
        connection, which runs a new initialize (expired requests wait for it:
        docs/connection.md, "HTTP outcomes"); False if it was already forgotten or replaced."""
        if self.session_id != session_id:
            return False
        self.session_id = None
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
            host.report_down("unreachable", type(exc).__name__)
            return
        except (*BROKEN, aiohttp.ClientError, Error) as exc:
            log.debug("%s POST failed: %s", method or "response", type(exc).__name__)
        if method == "notifications/initialized" and not host.closing:
            # The session is usable now: re-send what expired, open the GET stream.
            self._resend_expired()
            self.start_get_stream()

    # -- the GET stream ---------------------------------------------------------------------

    def start_get_stream(self) -> None:
        self.stop_get_stream()
        self.get_reopens = 0
        self._get_task = asyncio.ensure_future(self._get_stream())

    def stop_get_stream(self) -> None:
        task, self._get_task = self._get_task, None
        if task is not None:
            task.cancel()

    async def _get_stream(self) -> None:
        """Server-to-client messages outside any request, kept open: after an end it is
        resumed with ``Last-Event-ID`` once the server's ``retry`` has passed, but never
        sooner than a floor, and later and later while streams keep ending at once."""
        host = self._host
        parser = SseParser(host.max_response)
        failures = 0  # attempts in a row that failed (an error, a refused GET)
        churn = 0  # ends in a row that came too soon (a failure or a short stream)
        warned = False
        session_id = self.session_id
        while not host.closing and session_id == self.session_id:
            extra = dict(SSE_ACCEPT)
            if parser.last_event_id is not None:
                extra["Last-Event-ID"] = parser.last_event_id
            opened = time.monotonic()
            try:
                headers = await host.headers(False, extra, session_id=session_id)
                async with host.streams().get(host.url, headers=headers) as resp:
                    if resp.status == 404 and session_id is not None:
                        self.forget_session(session_id, None)
                        return
                    if resp.status != 200 or resp.content_type != "text/event-stream":
                        return  # 405: the server offers no stream; that is allowed
                    failures = 0
                    await self._read_get(resp, parser)
            except asyncio.CancelledError:
                raise
            except aiohttp.ClientConnectorError as exc:
                host.report_down("unreachable", type(exc).__name__)
                return
            except (*BROKEN, aiohttp.ClientError, Error) as exc:
                log.debug("GET stream broke: %s", type(exc).__name__)
                failures += 1
                if isinstance(exc, Error) and exc.reason == "response_too_large":
                    parser = SseParser(host.max_response)  # a failed parser stays failed
            if failures >= GET_ATTEMPTS:
                # Server-to-client messages outside requests stop here: say so.
                log.warning(
                    "the server's GET stream failed %d times in a row; not reopened "
                    "until the next session",
                    failures,
                )
                return
            churn = 0 if time.monotonic() - opened >= LIVED else churn + 1
            delay = reopen_delay(parser.retry, churn)
            if churn >= 3 and not warned:
                warned = True
                log.warning(
                    "the server's GET stream keeps ending at once (%d times in a row); "
                    "reopening it after %.1f s, backing off",
                    churn,
                    delay,
                )
            self.get_reopens += 1
            await asyncio.sleep(delay)

    async def _read_get(self, resp: aiohttp.ClientResponse, parser: SseParser) -> None:
        host = self._host
        async for chunk in resp.content.iter_any():
            messages = []
            events, too_large = feed(parser, chunk)
            for ev in events:
                if ev.event != "message" or not ev.data:
                    continue
                msg = decode(ev.data)
                if type(msg) is Invalid:
                    safe_tell(host.owner, FrameProblem(host.gen, "malformed", msg.reason))
                else:
                    messages.append(msg)
            if messages:
                host.deliver(messages)
            if too_large is not None:
                raise too_large
