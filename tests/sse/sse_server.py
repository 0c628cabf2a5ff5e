"""A small HTTP+SSE MCP server (2024-11-05 transport) on aiohttp, with hostile modes.

Not a test module. It runs in a thread of the test process on 127.0.0.1 and records what it
received, so tests can assert what a client sent (and did not send). ``GET /sse`` opens a
session's stream (its first event names ``/messages/?session_id=...``, or what ``endpoint``
says); ``POST /messages/`` takes one JSON-RPC message and answers ``202``, the answer going
on the stream. Tools: ``add``, ``slow`` (``seconds``), ``drop`` (the server ends the stream
instead of answering), ``big`` (``size`` bytes of text), ``flood`` (``count`` log
notifications first), ``ping_flood`` (``count`` pings, not waited for), ``ping_me`` (the server pings the client and answers once the client's
answer came back), ``forget`` (answers, then forgets the session: the next POST gets 404), ``drip`` (the stream
starts an event and drips it a byte at a time, never finishing it: the session stalls).
"""

from __future__ import annotations

import asyncio
import itertools
import threading
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import web

VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
DRIP = b"\0drip"  # queued: the stream starts an event it never finishes
TOOLS = ["add", "slow", "drop", "big", "flood", "ping_flood", "ping_me", "forget", "drip"]


class _Session:
    def __init__(self) -> None:
        self.queue: asyncio.Queue[bytes | None] = asyncio.Queue()
        self.answers: dict[Any, asyncio.Future[Any]] = {}


class SseServer:
    """One server; ``url`` is its stream. ``endpoint(server, session_id)`` overrides the
    endpoint event's data (None: ``/messages/?session_id=...``); ``"drip"`` never sends one
    and drips comments instead. ``token``: every request needs ``Bearer <token>``."""

    def __init__(
        self,
        *,
        endpoint: Callable[[SseServer, str], str] | str | None = None,
        token: str | None = None,
        oauth: str | None = None,
        initialized_delay: float = 0.0,
        redirect_to: str | None = None,
        port: int = 0,
    ) -> None:
        self._endpoint = endpoint
        self.token = token
        self.oauth = oauth  # an authorization server's issuer: tokens checked by introspection
        self.initialized_delay = initialized_delay  # before the 202 to notifications/initialized
        self.redirect_to = redirect_to  # where POST /redirect/ and GET /redirect-sse send
        self.events: list[tuple[str, str]] = []  # ("in", method) on arrival, ("202", method)
        self.requests: list[tuple[str, str]] = []  # (method, path) of every HTTP request
        self.messages: list[dict[str, Any]] = []  # every JSON-RPC message POSTed
        self.headers: list[dict[str, str]] = []  # every request's headers
        self.streams = 0  # GET streams opened
        self._changed = threading.Condition()
        self._ids = itertools.count(1)
        self._tasks: set[asyncio.Task[None]] = set()  # the handlers running (kept referenced)
        self._sessions: dict[str, _Session] = {}
        self.port = port
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        started = threading.Event()
        self._thread = threading.Thread(target=self._run, args=(started,), daemon=True)
        self._thread.start()
        if not started.wait(10):
            raise RuntimeError("the SSE test server did not start")
        self.base = f"http://127.0.0.1:{self.port}"
        self.url = f"{self.base}/sse"

    # -- life -----------------------------------------------------------------------------

    def _run(self, started: threading.Event) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application(middlewares=[self._record])
        app.router.add_get("/sse", self._stream)
        app.router.add_post("/messages/", self._post)
        app.router.add_post("/redirect/", self._redirect)
        app.router.add_get("/redirect-sse", self._redirect)
        app.router.add_get("/.well-known/oauth-protected-resource/sse", self._metadata)
        app.router.add_get("/.well-known/oauth-protected-resource", self._metadata)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", self.port)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        started.set()
        self._loop.run_forever()

    def stop(self) -> None:
        def _end() -> None:
            for session in self._sessions.values():
                session.queue.put_nowait(None)

        self._loop.call_soon_threadsafe(_end)
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def methods(self) -> list[str]:
        return [m.get("method", "<answer>") for m in list(self.messages)]

    # -- HTTP -----------------------------------------------------------------------------

    @web.middleware
    async def _record(self, request: web.Request, handler: Any) -> web.StreamResponse:
        self.requests.append((request.method, request.path))
        self.headers.append(dict(request.headers))
        if self.token is not None and request.headers.get("Authorization") != (
            f"Bearer {self.token}"
        ):
            return web.Response(status=401, headers={"WWW-Authenticate": 'Bearer realm="sse-test"'})
        if (
            self.oauth is not None
            and request.path in ("/sse", "/messages/")
            and not await self._token_ok(request.headers.get("Authorization", ""))
        ):
            challenge = (
                f'Bearer resource_metadata="{self.base}/.well-known/oauth-protected-resource/sse"'
            )
            return web.Response(status=401, headers={"WWW-Authenticate": challenge})
        return await handler(request)  # type: ignore[no-any-return]

    async def _redirect(self, request: web.Request) -> web.Response:
        return web.Response(status=307, headers={"Location": str(self.redirect_to)})

    async def _metadata(self, request: web.Request) -> web.Response:
        doc = {"resource": self.url, "authorization_servers": [self.oauth]}
        return web.Response(body=orjson.dumps(doc), content_type="application/json")

    async def _token_ok(self, header: str) -> bool:
        scheme, _, token = header.partition(" ")
        if scheme.lower() != "bearer" or not token:
            return False
        async with (
            aiohttp.ClientSession() as http,
            http.post(f"{self.oauth}/introspect", data={"token": token}) as resp,
        ):
            answer = await resp.json()
        aud = answer.get("aud")
        return bool(answer.get("active")) and self.url in (aud if isinstance(aud, list) else [aud])

    def wait_message(self, method: str, timeout: float = 10.0) -> bool:
        """Wait (with a deadline) until a message of ``method`` was POSTed."""
        with self._changed:
            return self._changed.wait_for(
                lambda: any(m.get("method") == method for m in self.messages), timeout
            )

    def wait_streams(self, n: int, timeout: float = 10.0) -> bool:
        """Wait (with a deadline) until ``n`` GET streams were opened."""
        with self._changed:
            return self._changed.wait_for(lambda: self.streams >= n, timeout)

    async def _stream(self, request: web.Request) -> web.StreamResponse:
        with self._changed:
            self.streams += 1
            self._changed.notify_all()
        sid = f"sid{next(self._ids)}secret"
        session = self._sessions[sid] = _Session()
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        if self._endpoint == "drip":
            for _ in range(600):  # bounded: a minute at most
                await resp.write(b": drip\n\n")
                await asyncio.sleep(0.1)
            return resp
        data = (
            f"/messages/?session_id={sid}"
            if self._endpoint is None
            else self._endpoint(self, sid)
            if callable(self._endpoint)
            else self._endpoint
        )
        await resp.write(f"event: endpoint\ndata: {data}\n\n".encode())
        try:
            while True:
                item = await session.queue.get()
                if item is None:
                    break
                if item == DRIP:  # an event that never ends: a byte every 50 ms (bounded)
                    await resp.write(b"event: message\ndata: {")
                    for _ in range(600):
                        await resp.write(b" ")
                        await asyncio.sleep(0.05)
                    break
                await resp.write(item)
        finally:
            self._sessions.pop(sid, None)
        return resp

    async def _post(self, request: web.Request) -> web.Response:
        session = self._sessions.get(request.query.get("session_id", ""))
        if session is None:
            return web.Response(status=404, text="Could not find session")
        message = orjson.loads(await request.read())
        with self._changed:
            self.messages.append(message)
            self._changed.notify_all()
        method = message.get("method", "<answer>")
        self.events.append(("in", method))
        if method == "notifications/initialized" and self.initialized_delay:
            await asyncio.sleep(self.initialized_delay)
        self.events.append(("202", method))
        task = asyncio.ensure_future(self._handle(session, request.query["session_id"], message))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)
        return web.Response(status=202, text="Accepted")

    # -- MCP ------------------------------------------------------------------------------

    @staticmethod
    def _send(session: _Session, message: dict[str, Any]) -> None:
        session.queue.put_nowait(b"event: message\ndata: " + orjson.dumps(message) + b"\n\n")

    async def _handle(self, session: _Session, sid: str, m: dict[str, Any]) -> None:
        method, rid, params = m.get("method"), m.get("id"), m.get("params") or {}
        if method is None:  # an answer to our request
            fut = session.answers.pop(rid, None)
            if fut is not None and not fut.done():
                fut.set_result(m)
            return
        if rid is None:
            return  # notifications/initialized, notifications/cancelled: recorded
        result: Any
        if method == "initialize":
            offered = params.get("protocolVersion")
            result = {
                "protocolVersion": offered if offered in VERSIONS else VERSIONS[-1],
                "capabilities": {"tools": {}},
                "serverInfo": {"name": "sse-test", "version": "1.0"},
            }
        elif method == "ping":
            result = {}
        elif method == "tools/list":
            result = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in TOOLS]}
        elif method == "tools/call":
            got = await self._tool(session, sid, params.get("name"), params.get("arguments") or {})
            if got is None:
                return
            result = {"content": [{"type": "text", "text": got}], "isError": False}
        else:
            self._send(
                session,
                {"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": "no"}},
            )
            return
        self._send(session, {"jsonrpc": "2.0", "id": rid, "result": result})
        if method == "tools/call" and params.get("name") == "forget":
            self._sessions.pop(sid, None)

    async def _tool(self, session: _Session, sid: str, name: str, args: dict[str, Any]) -> Any:
        if name == "add":
            return str(args["a"] + args["b"])
        if name == "slow":
            await asyncio.sleep(float(args.get("seconds", 1)))
            return "slept"
        if name == "drop":
            session.queue.put_nowait(None)
            return None
        if name == "drip":
            session.queue.put_nowait(DRIP)
            return None
        if name == "big":
            return "x" * int(args["size"])
        if name == "flood":
            for i in range(int(args["count"])):
                self._send(
                    session,
                    {
                        "jsonrpc": "2.0",
                        "method": "notifications/message",
                        "params": {"level": "info", "data": f"flood {i}"},
                    },
                )
            return "flooded"
        if name == "ping_flood":
            for i in range(int(args["count"])):
                self._send(session, {"jsonrpc": "2.0", "id": f"flood-{i}", "method": "ping"})
            return "sent"
        if name == "ping_me":
            fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
            session.answers["srv-1"] = fut
            self._send(session, {"jsonrpc": "2.0", "id": "srv-1", "method": "ping"})
            answer = await asyncio.wait_for(fut, 10)
            return "pong" if answer.get("result") == {} else "bad answer"
        if name == "forget":
            return "forgotten"  # _handle forgets the session once the answer is queued
        return "unknown tool"


def main() -> None:
    """Serve until killed (the benchmark's light server: ``--port N``, prints ``listening N``)."""
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    server = SseServer(port=args.port)
    print("listening", server.port, flush=True)
    threading.Event().wait()  # until the process is killed


if __name__ == "__main__":
    main()
