"""Legacy streamable HTTP: a session's standalone GET stream reaches the server before the
session's requests, and a call whose response stream the server closes is resumed with GET +
``Last-Event-ID`` after the server's ``retry`` (http_legacy's module docstring).

The server here is a small raw aiohttp one that behaves like the official conformance
harness's ``sse-retry`` server: it tells its GETs apart by arrival only, and answers a call
in flight on whatever GET comes while the call waits. A client whose standalone GET arrived
after a call's POST got that call's answer on it (never resumed, no ``Last-Event-ID``); that
is what the ordering prevents.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from typing import Any

import pytest
from aiohttp import web

import conduit_mcp as mcp
from conduit_mcp.transports.http_legacy import GET_FIRST_WAIT

pytestmark = pytest.mark.timeout(60)

RETRY_MS = 200
SID = "session-1"


class HarnessLikeServer:
    """A legacy server on loopback, in its own thread and loop; ``events`` records what
    arrived, with ``time.monotonic()`` (the test's clock too)."""

    def __init__(self, *, get_delay: float = 0.0, get_hangs: bool = False) -> None:
        self.get_delay = get_delay
        self.get_hangs = get_hangs
        self.events: list[dict[str, Any]] = []
        self.pending: Any = None  # the id of the call whose stream was closed
        self.closed_at: float | None = None
        self._ids = 0
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._runner: web.AppRunner | None = None
        self._stop: asyncio.Event | None = None
        self.url = ""

    def __enter__(self) -> HarnessLikeServer:
        self._thread.start()
        assert self._ready.wait(10), "the test server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        stop = self._stop
        assert stop is not None
        self._loop.call_soon_threadsafe(stop.set)
        self._thread.join(10)

    def _run(self) -> None:
        self._loop.run_until_complete(self._serve())

    async def _serve(self) -> None:
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_post("/mcp", self._post)
        app.router.add_get("/mcp", self._get)
        app.router.add_delete("/mcp", self._delete)
        runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/mcp"
        self._ready.set()
        await self._stop.wait()
        await runner.cleanup()

    async def _delete(self, request: web.Request) -> web.Response:
        return web.Response(status=200)

    def _event_id(self) -> str:
        self._ids += 1
        return f"event-{self._ids}"

    def _priming(self) -> bytes:
        return f"id: {self._event_id()}\nretry: {RETRY_MS}\ndata: \n\n".encode()

    async def _post(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        method, rid = body.get("method"), body.get("id")
        self.events.append({"verb": "POST", "method": method, "t": time.monotonic()})
        headers = {"Mcp-Session-Id": SID}
        if rid is None:
            return web.Response(status=202, headers=headers)
        if method == "initialize":
            result: dict[str, Any] = {
                "protocolVersion": "2025-11-25",
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "harness-like", "version": "1"},
            }
        elif method == "tools/list":
            result = {"tools": [{"name": "reconnect", "inputSchema": {"type": "object"}}]}
        elif method == "tools/call":
            # A priming event with retry, then the stream closes: the answer waits for a GET.
            self.pending = rid
            stream = web.StreamResponse(headers={"Content-Type": "text/event-stream", **headers})
            await stream.prepare(request)
            await stream.write(self._priming())
            await asyncio.sleep(0.05)
            self.closed_at = time.monotonic()
            await stream.write_eof()
            return stream
        else:
            result = {}
        answer = {"jsonrpc": "2.0", "id": rid, "result": result}
        return web.json_response(answer, headers=headers)

    async def _get(self, request: web.Request) -> web.StreamResponse:
        self.events.append(
            {
                "verb": "GET",
                "last_event_id": request.headers.get("Last-Event-ID"),
                "t": time.monotonic(),
            }
        )
        if self.get_hangs:
            await asyncio.sleep(3600)  # never answered (cancelled when the client closes it)
        await asyncio.sleep(self.get_delay)
        self.events[-1]["answered"] = time.monotonic()
        stream = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await stream.prepare(request)
        await stream.write(self._priming())
        if self.pending is not None:  # like the harness: any GET may carry the answer
            answer = {"jsonrpc": "2.0", "id": self.pending, "result": {"content": []}}
            answer["result"]["content"] = [{"type": "text", "text": "resumed"}]
            data = json.dumps(answer)
            await stream.write(f"event: message\nid: {self._event_id()}\ndata: {data}\n\n".encode())
            self.pending = None
        await asyncio.sleep(3600)  # open until the client closes it
        return stream

    def gets(self) -> list[dict[str, Any]]:
        return [e for e in self.events if e["verb"] == "GET"]

    def posts(self, method: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["verb"] == "POST" and e["method"] == method]


def start(server: HarnessLikeServer) -> mcp.Client:
    return mcp.Client.start(mcp.Http(server.url), protocol="legacy", request_timeout=10.0)


def test_a_sessions_requests_go_after_its_get_stream_was_answered() -> None:
    # The GET's answer is held back 0.3 s: a call made at once waits for it, then goes.
    with HarnessLikeServer(get_delay=0.3) as server, start(server) as client:
        assert [t.name for t in client.list_tools(timeout=10).items] == ["reconnect"]
        (get,) = server.gets()
        (listed,) = server.posts("tools/list")
        assert get["last_event_id"] is None  # the standalone stream
        assert server.posts("notifications/initialized")[0]["t"] <= get["t"]
        assert listed["t"] >= get.get("answered", float("inf"))


def test_a_call_whose_stream_closes_is_resumed_after_retry_with_last_event_id() -> None:
    # Five sessions, each calling at once: the standalone GET is first every time, so only
    # the resumption carries the answer.
    for _ in range(5):
        with HarnessLikeServer() as server, start(server) as client:
            result = client.call_tool("reconnect", {}, timeout=10)
            assert result.text == "resumed"
            standalone, resumed = server.gets()
            (call,) = server.posts("tools/call")
            assert standalone["last_event_id"] is None and standalone["t"] < call["t"]
            assert resumed["last_event_id"] == "event-2"  # the call's priming event
            assert server.closed_at is not None
            assert resumed["t"] - server.closed_at >= RETRY_MS / 1000 - 0.01


def test_a_get_never_answered_holds_a_sessions_requests_no_longer_than_the_bound() -> None:
    with HarnessLikeServer(get_hangs=True) as server, start(server) as client:
        client.await_ready(timeout=10)
        assert [t.name for t in client.list_tools(timeout=10).items] == ["reconnect"]
        (get,) = server.gets()
        (listed,) = server.posts("tools/list")
        waited = listed["t"] - get["t"]
        # The wait starts before the GET is sent (a few ms earlier): at most the bound.
        assert GET_FIRST_WAIT - 0.5 <= waited <= GET_FIRST_WAIT + 1.0
        # The session's later requests do not wait again.
        before = time.monotonic()
        client.list_tools(timeout=10)
        assert time.monotonic() - before < 1.0
