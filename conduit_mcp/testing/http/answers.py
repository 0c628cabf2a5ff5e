"""How the scripted HTTP server answers one POST: JSON, an SSE stream, a fault, or a drop.

:class:`ExchangeMixin` (a base of :class:`~conduit_mcp.testing.http.front.HttpFront`) feeds a
POSTed message to its core inside an :class:`~conduit_mcp.testing.http.streams.Exchange`, then
turns what the core emits into the HTTP answer: ``application/json`` with a status derived from the
JSON-RPC error (modern), or ``text/event-stream`` written from the exchange's stream (ids and
``retry`` on legacy streams), or a scripted fault (``http``, ``expire_session``), or an abrupt
close (``drop_stream``). A client closing the answer cancels a modern request. It exists so the
request routing in :mod:`.front` and the answering here each read on their own.
"""

from __future__ import annotations

import asyncio
from typing import Any, NoReturn

import orjson
from aiohttp import web

from ..scripted.options import Config
from ..scripted.protocol import INVALID_REQUEST, LOG_LEVEL_KEY, METHOD_NOT_FOUND, dict_at
from .streams import Exchange, Router, Session, Stream, current_exchange

__all__ = ["MISSING_SESSION", "SESSION_HEADER", "SESSION_NOT_FOUND", "ExchangeMixin"]

SESSION_HEADER = "Mcp-Session-Id"
_MODERN_400 = frozenset({-32700, -32600, -32602, -32020, -32021, -32022})
SSE_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}


def rpc_error(code: int, message: str, rid: Any = "server-error") -> bytes:
    return orjson.dumps({"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}})


MISSING_SESSION = rpc_error(INVALID_REQUEST, "Bad Request: Missing session ID")
SESSION_NOT_FOUND = rpc_error(INVALID_REQUEST, "Session not found")


def json_response(
    body: bytes, status: int = 200, headers: dict[str, str] | None = None
) -> web.Response:
    return web.Response(
        body=body, status=status, content_type="application/json", headers=headers or {}
    )


def accepts(request: web.Request, *types: str) -> bool:
    accepted = {
        part.split(";")[0].strip().lower() for part in request.headers.get("Accept", "").split(",")
    }
    if "*/*" in accepted:
        return True
    return all(t in accepted or t.split("/")[0] + "/*" in accepted for t in types)


class Dropped(Exception):
    """The server aborted a response stream on purpose (``drop_stream``)."""


class ExchangeMixin:
    """Answering POSTs; a base of ``HttpFront`` (uses its ``config``, ``sessions``, ``event``)."""

    config: Config
    sessions: dict[str, Session]

    def event(self, name: str, **fields: Any) -> None:
        raise NotImplementedError

    def _headers(self, router: Router) -> dict[str, str]:
        return {} if router.session_id is None else {SESSION_HEADER: router.session_id}

    def _receive(self, router: Router, exchange: Exchange, msg: dict[str, Any]) -> None:
        assert router.core is not None
        token = current_exchange.set(exchange)
        try:
            router.core.receive(msg)
        finally:
            current_exchange.reset(token)

    async def _exchange(
        self, request: web.Request, router: Router, msg: dict[str, Any]
    ) -> web.StreamResponse:
        method = msg.get("method")
        if method is None or "id" not in msg:  # a notification, or a response to the server
            exchange = Exchange(router, None, method, "json", Stream(None))
            self._receive(router, exchange, msg)
            if exchange.fault is not None:
                return await self._fault(router, exchange)
            return web.Response(status=202, headers=self._headers(router))
        params = dict_at(msg, "params")
        meta = dict_at(params, "_meta")
        token = meta.get("progressToken")
        option = self.config.http_response
        sse = method == "subscriptions/listen" or option == "sse"
        if option == "auto" and (token is not None or LOG_LEVEL_KEY in meta):
            sse = True  # it may send progress, or (modern) log messages for this request
        exchange = Exchange(
            router, msg["id"], method, "sse" if sse else "json", router.new_stream(), token
        )
        router.open(exchange)
        self._receive(router, exchange, msg)
        try:
            if exchange.fault is not None:
                return await self._fault(router, exchange)
            if exchange.drop_after is not None:
                exchange.mode = "sse"
            elif exchange.stream.only_error():
                exchange.mode = "json"  # refused at once: an HTTP status says so
            if exchange.mode == "json":
                return await self._json_answer(request, router, exchange)
            return await self._sse_answer(request, router, exchange, exchange.stream, 0)
        except asyncio.CancelledError:
            self._client_gone(router, exchange)
            raise
        finally:
            exchange.attached = False

    def _client_gone(self, router: Router, exchange: Exchange) -> None:
        if exchange.dropped:
            return
        rid = exchange.request_id
        self.event("stream_closed_by_client", id=rid, session=router.session_id)
        if router.legacy and exchange.mode == "sse":
            return  # 2025-11-25: a disconnection is not a cancellation; resumable
        if not exchange.stream.finished:
            router.close(exchange)
            if not router.legacy:
                cancel = {"requestId": rid, "reason": "client closed the response stream"}
                self._receive(
                    router,
                    Exchange(router, None, None, "json", Stream(None)),
                    {"jsonrpc": "2.0", "method": "notifications/cancelled", "params": cancel},
                )

    async def _fault(self, router: Router, exchange: Exchange) -> web.Response:
        assert exchange.fault is not None
        rule = await exchange.fault
        router.close(exchange)
        if rule.terminal == "http":
            spec = rule.arg
            headers = dict(spec["headers"])
            body = spec.get("body")
            if body is None:
                return web.Response(status=spec["status"], headers=headers)
            if isinstance(body, str):
                return web.Response(status=spec["status"], headers=headers, text=body)
            headers.setdefault("Content-Type", "application/json")
            return web.Response(status=spec["status"], headers=headers, body=orjson.dumps(body))
        if isinstance(router, Session):  # expire_session
            self._forget(router, "session_expired")
        return json_response(SESSION_NOT_FOUND, 404)

    async def _json_answer(
        self, request: web.Request, router: Router, exchange: Exchange
    ) -> web.StreamResponse:
        stream = exchange.stream
        while not stream.finished:
            await stream.changed()
        if stream.abort:
            self._abort(request, router, exchange)
        if not stream.items:  # the session ended (DELETE, expire_session) before the answer
            return json_response(SESSION_NOT_FOUND, 404)
        item = stream.items[0]
        status = 200
        if item.msg is not None and "error" in item.msg and not router.legacy:
            code = item.msg["error"].get("code")
            status = 404 if code == METHOD_NOT_FOUND else 400 if code in _MODERN_400 else 200
        return json_response(item.data, status, self._headers(router))

    def _abort(self, request: web.Request, router: Router, exchange: Exchange | None) -> NoReturn:
        if exchange is not None:
            exchange.dropped = True
        rid = None if exchange is None else exchange.request_id
        self.event("stream_dropped", id=rid, session=router.session_id)
        if request.transport is not None:
            request.transport.abort()
        raise Dropped

    async def _sse_answer(
        self,
        request: web.Request,
        router: Router,
        exchange: Exchange | None,
        stream: Stream,
        after: int,
    ) -> web.StreamResponse:
        response = web.StreamResponse(headers={**SSE_HEADERS, **self._headers(router)})
        await response.prepare(request)
        if router.legacy:
            await response.write(b"retry: %d\n\n" % self.config.sse_retry_ms)
        drop_after = exchange.drop_after if exchange is not None else None
        written = 0
        stream.writers += 1
        try:
            while True:
                if (drop_after is not None and written >= drop_after) or stream.abort:
                    self._abort(request, router, exchange)
                if stream.seq > after:
                    item = stream.after(after)[0]
                    after = item.seq
                    await response.write(stream.encode(item))
                    written += 1
                    continue
                if stream.finished:
                    break
                await stream.changed()
        finally:
            stream.writers -= 1
        await response.write_eof()
        return response

    # ---- GET and DELETE (legacy sessions) ---------------------------------------------------

    def _forget(self, session: Session, why: str) -> None:
        if self.sessions.pop(session.session_id or "", None) is not None:
            self.event(why, session=session.session_id)
        session.end()
