"""The legacy era's session work for the HTTP transport (mcp-spec §10; seed 000 "HTTP
outcomes"): resuming a broken response stream with ``Last-Event-ID``, a session the server
lost (the expired requests kept and re-sent once a new ``initialize`` is done), the POSTs
that carry notifications and responses, and the GET stream for server-to-client messages.

A mixin of :class:`~conduit_mcp.transports.http.HttpTransport`; everything runs on the I/O
loop except :meth:`LegacySession.negotiated`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import aiohttp

from ..errors import Error
from ..otp.base import safe_tell
from ..protocol.jsonrpc import Invalid, decode
from ..protocol.sse import SseParser
from .base import FrameProblem, SessionExpired, StreamBroken
from .http_wire import (
    BROKEN,
    DEFAULT_RETRY_MS,
    GET_ATTEMPTS,
    RESUME_ATTEMPTS,
    SSE_ACCEPT,
    StreamState,
    feed,
)

log = logging.getLogger("conduit_mcp.http")


class LegacySession:
    """See the module docstring. State lives on the transport (``_session_id``,
    ``_legacy_version``, ``_expired``, ``_get_task``, ``_sent``)."""

    async def _broken(self, rid: Any, sent: Any, stream: StreamState | None, detail: str) -> None:
        """A response stream broke before its answer. Legacy: resume it with the last event
        id (mcp-spec §10); otherwise, or if that fails, tell the connection."""
        if stream is not None and stream.done:
            return
        parser = stream.parser if stream is not None else None
        if not sent.modern and parser is not None and parser.last_event_id is not None:
            assert stream is not None
            for _ in range(RESUME_ATTEMPTS):
                await asyncio.sleep((parser.retry or DEFAULT_RETRY_MS) / 1000)
                if self._closing or self._sent.get(rid) is not sent:
                    return
                try:
                    headers = await self._headers(
                        False,
                        {**SSE_ACCEPT, "Last-Event-ID": parser.last_event_id},
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
                except (*BROKEN, aiohttp.ClientError):
                    continue
                if stream.done:
                    self._sent.pop(rid, None)
                    return
        self._sent.pop(rid, None)
        safe_tell(self._owner, StreamBroken(self._gen, rid, detail))

    def _session_expired(self, rid: Any, sent: Any, session_id: str) -> None:
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
        if not self._forget_session(session_id, rid) and self._session_id is not None:
            self._resend_expired()  # a new session already exists

    def _forget_session(self, session_id: str, rid: Any) -> bool:
        """The server lost ``session_id``. The first to find out forgets it and tells the
        connection, which runs a new initialize (expired requests wait for it, seed 000
        "HTTP outcomes"); False if the session was already forgotten or replaced."""
        if self._session_id != session_id:
            return False
        self._session_id = None
        self._stop_get_stream()
        safe_tell(self._owner, SessionExpired(self._gen, rid))
        return True

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
                self._forget_session(session_id, None)
                return
            if status >= 400:
                log.debug("%s POST answered HTTP %s", method or "response", status)
        except asyncio.CancelledError:
            raise
        except aiohttp.ClientConnectorError as exc:
            self._report_down("unreachable", type(exc).__name__)
            return
        except (*BROKEN, aiohttp.ClientError, Error) as exc:
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
        while not self._closing and failures < GET_ATTEMPTS and session_id == self._session_id:
            headers_extra = dict(SSE_ACCEPT)
            if parser.last_event_id is not None:
                headers_extra["Last-Event-ID"] = parser.last_event_id
            try:
                headers = await self._headers(False, headers_extra, session_id=session_id)
                assert self._streams is not None
                async with self._streams.get(self._url, headers=headers) as resp:
                    if resp.status == 404 and session_id is not None:
                        self._forget_session(session_id, None)
                        return
                    if resp.status != 200 or resp.content_type != "text/event-stream":
                        return  # 405: the server offers no stream; that is allowed
                    failures = 0
                    async for chunk in resp.content.iter_any():
                        messages = []
                        events, too_large = feed(parser, chunk)
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
            except (*BROKEN, aiohttp.ClientError, Error) as exc:
                log.debug("GET stream broke: %s", type(exc).__name__)
                if isinstance(exc, Error) and exc.reason == "response_too_large":
                    parser = SseParser(self._max)  # a failed parser stays failed
            failures += 1
            if failures >= GET_ATTEMPTS:
                # Server-to-client messages outside requests stop here: say so.
                log.warning(
                    "the server's GET stream failed %d times in a row; not reopened "
                    "until the next session",
                    failures,
                )
                return
            await asyncio.sleep((parser.retry or DEFAULT_RETRY_MS) / 1000)

    def negotiated(self, era: str, version: str) -> None:
        """The connection tells the negotiated version: in the legacy era it is sent as
        ``MCP-Protocol-Version`` on every later request (mcp-spec §10). Connection thread:
        a plain assignment, read by the loop when it builds the next request's headers."""
        if era == "legacy":
            self._legacy_version = version
