"""The Streamable HTTP front of the scripted MCP server: both eras on ``/mcp``, with faults.

``python -m conduit_mcp.testing --http --port N`` serves ``http://127.0.0.1:N/mcp`` with
aiohttp.web and prints ``listening <port>`` once it accepts connections. Modern (2026-07-28)
POSTs go to one shared core; each legacy ``initialize`` makes a session with its own core.
It is a strict server, meant to catch a client breaking the transport rules; what it answers
is documented in ``docs/testing.md`` ("Streamable HTTP"). Routing emitted messages to
responses lives in :mod:`.streams`, answering one POST in :mod:`.answers`, header
checks in :mod:`.headers`, the subprocess handle in :mod:`.process`.

Closing a modern response stream cancels its request (the core gets a
``notifications/cancelled``); that needs ``handler_cancellation=True`` on the runner: aiohttp
3.14 otherwise lets a handler run on after its client went away.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import secrets
import signal
import sys
import time
from typing import TYPE_CHECKING, Any

import orjson
from aiohttp import web

from ..common.event_log import EventLog, bump_start_counter
from ..common.tls import server_context
from ..scripted.options import Config
from ..scripted.protocol import INVALID_REQUEST, PARSE_ERROR, is_modern_version
from ..scripted.rules import HTTP_FAULTS, Rule
from ..scripted.server import ScriptedMcpServer
from .answers import (
    MISSING_SESSION,
    SESSION_HEADER,
    SESSION_NOT_FOUND,
    SSE_HEADERS,
    Dropped,
    ExchangeMixin,
    accepts,
    json_response,
    rpc_error,
)
from .headers import HEADER_MISMATCH, header_mismatch
from .streams import Router, Session, current_exchange

if TYPE_CHECKING:
    from .oauth_guard import OAuthGuard

__all__ = ["HttpFront", "serve_http"]


class HttpFront(ExchangeMixin):
    """The aiohttp application: one modern router and the legacy sessions."""

    def __init__(self, config: Config, log: EventLog | None, start: int) -> None:
        self.config = config
        self._log = log
        self._start = start
        self._pid = os.getpid()
        self.port = 0
        self.sessions: dict[str, Session] = {}
        self.modern: Router | None = None
        if config.era != "legacy":
            self.modern = Router(event=self.event, legacy=False)
            modern = dataclasses.replace(config, era="modern")
            modern.legacy_versions = config.legacy_versions  # for --advertise-legacy
            self.modern.core = self._core(modern, self.modern)
        self._legacy_config = dataclasses.replace(config, era="legacy")
        self.guard: OAuthGuard | None = None
        if config.require_oauth is not None:
            # Imported here: its DPoP checks load joserfc, a fifth of this server's start
            # (~50 of ~290 ms, measured with -X importtime), and most servers need no OAuth.
            from .oauth_guard import OAuthGuard

            self.guard = OAuthGuard(config, lambda: self.port, self.event)

    # ---- plumbing ---------------------------------------------------------------------------

    def event(self, name: str, **fields: Any) -> None:
        if self._log is not None:
            self._log.write({"t": time.monotonic(), "pid": self._pid, "event": name, **fields})

    def _core(self, config: Config, router: Router) -> ScriptedMcpServer:
        log = self._log
        return ScriptedMcpServer(
            config,
            router.emit,
            emit_raw=router.emit_raw,
            close_output=router.close_output,
            exit=os._exit,
            log=log.write if log is not None else None,
            start_number=self._start,
            rule_hook=self._on_rule,
            fault=self._on_fault,
            open_stream=self._on_open_stream,
        )

    def _on_open_stream(self) -> None:
        exchange = current_exchange.get()
        if exchange is not None and exchange.request_id is not None:
            exchange.mode = "sse"

    def _on_rule(self, rule: Rule) -> None:
        exchange = current_exchange.get()
        if exchange is None:
            return
        exchange.rule = rule
        if rule.drop_stream is not None:
            exchange.drop_after = rule.drop_stream
        if rule.terminal in HTTP_FAULTS:
            exchange.fault = asyncio.get_running_loop().create_future()

    def _on_fault(self, rule: Rule, request_id: Any) -> None:
        exchange = current_exchange.get()
        if exchange is not None and exchange.fault is not None and not exchange.fault.done():
            exchange.fault.set_result(rule)

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware], client_max_size=64 << 20)
        app.router.add_post("/mcp", self.post)
        app.router.add_get("/mcp", self.get)
        app.router.add_delete("/mcp", self.delete)
        paths = [
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource/mcp",
        ]
        if self.guard is not None:
            paths = self.guard.metadata_paths()
        for path in paths:
            app.router.add_get(path, self.resource_metadata)
        if self.guard is not None:
            app.router.add_post("/admin/oauth", self.guard.admin)
        app.on_response_prepare.append(self._on_prepare)
        return app

    async def _on_prepare(self, request: web.Request, response: web.StreamResponse) -> None:
        self._log_http(request, response.status)

    def _log_http(self, request: web.Request, status: int | None) -> None:
        if request.get("logged"):
            return
        request["logged"] = True
        self.event(
            "http",
            verb=request.method,
            path=request.path,
            status=status,
            headers=_logged_headers(request.headers),
            session=request.get("session", request.headers.get(SESSION_HEADER)),
            **{k: request[k] for k in ("oauth", "oauth_refused") if k in request},
        )

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        try:
            refused = self._refuse(request)
            if refused is not None:
                return refused
            if self.guard is not None and request.path == "/mcp":
                refused = await self.guard.check(request)
                if refused is not None:
                    return refused
            response: web.StreamResponse = await handler(request)
            return response
        except Dropped:
            self._log_http(request, None)
            raise asyncio.CancelledError from None  # the connection is gone already
        except asyncio.CancelledError:
            self._log_http(request, None)
            raise

    def _refuse(self, request: web.Request) -> web.Response | None:
        origin = request.headers.get("Origin")
        if origin is not None and origin.split("://")[-1].split(":")[0] not in (
            "127.0.0.1",
            "localhost",
        ):
            return json_response(rpc_error(INVALID_REQUEST, "Forbidden: invalid Origin", None), 403)
        token = self.config.require_bearer
        if token is None or request.path != "/mcp":
            return None
        if request.headers.get("Authorization") == f"Bearer {token}":
            return None
        scheme = "https" if self.config.tls_cert else "http"
        metadata = f"{scheme}://127.0.0.1:{self.port}/.well-known/oauth-protected-resource"
        challenge = f'Bearer resource_metadata="{metadata}", scope="mcp"'
        return web.Response(status=401, headers={"WWW-Authenticate": challenge})

    async def resource_metadata(self, request: web.Request) -> web.StreamResponse:
        if self.guard is not None:
            return await self.guard.metadata_answer(request)
        body = {
            "resource": f"{'https' if self.config.tls_cert else 'http'}://127.0.0.1:{self.port}/mcp",
            "authorization_servers": [],
            "scopes_supported": ["mcp"],
            "bearer_methods_supported": ["header"],
        }
        return json_response(orjson.dumps(body))

    def _session(self, request: web.Request) -> Session | web.Response:
        """The legacy session a request names, or the answer refusing it."""
        sid = request.headers.get(SESSION_HEADER)
        if sid is None:
            return json_response(MISSING_SESSION, 400)
        session = self.sessions.get(sid)
        if session is None:
            return json_response(SESSION_NOT_FOUND, 404)
        request["session"] = sid
        version = request.headers.get("MCP-Protocol-Version")
        if version is not None and session.version is not None and version != session.version:
            message = f"Bad Request: Unsupported protocol version: {version}"
            return json_response(rpc_error(INVALID_REQUEST, message), 400, {SESSION_HEADER: sid})
        return session

    # ---- POST -------------------------------------------------------------------------------

    async def post(self, request: web.Request) -> web.StreamResponse:
        if not accepts(request, "application/json", "text/event-stream"):
            message = (
                "Not Acceptable: Client must accept both application/json and text/event-stream"
            )
            return json_response(rpc_error(INVALID_REQUEST, message, None), 406)
        if request.content_type != "application/json":
            message = "Unsupported Media Type: Content-Type must be application/json"
            return json_response(rpc_error(INVALID_REQUEST, message, None), 415)
        try:
            msg = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            self.event("parse_error", session=request.headers.get(SESSION_HEADER))
            return json_response(rpc_error(PARSE_ERROR, "Parse error", None), 400)
        if type(msg) is not dict:
            message = "Invalid Request: one JSON-RPC message per POST"
            return json_response(rpc_error(INVALID_REQUEST, message, None), 400)
        era = self.config.era
        if era != "modern" and request.headers.get(SESSION_HEADER) is not None:
            session = self._session(request)
            if isinstance(session, web.Response):
                return session
            return await self._exchange(request, session, msg)
        if era != "modern" and msg.get("method") == "initialize" and "id" in msg:
            return await self._exchange(request, self._new_session(request), msg)
        version = request.headers.get("MCP-Protocol-Version")
        if era == "legacy" or (era == "both" and not (version and is_modern_version(version))):
            return json_response(MISSING_SESSION, 400)
        assert self.modern is not None and self.modern.core is not None
        if "method" not in msg:
            message = "Invalid Request: modern clients send no JSON-RPC responses"
            return json_response(rpc_error(INVALID_REQUEST, message, msg.get("id")), 400)
        if "id" in msg and msg["method"] != "initialize":
            why = header_mismatch(request.headers, msg, self._tool_schema)
            if why is not None:
                self.event("header_mismatch", id=msg.get("id"), reason=why)
                return json_response(rpc_error(HEADER_MISMATCH, why, msg.get("id")), 400)
        return await self._exchange(request, self.modern, msg)

    def _tool_schema(self, name: str) -> Any:
        assert self.modern is not None and self.modern.core is not None
        for tool in self.modern.core._tools_list:
            if tool["name"] == name:
                return tool["inputSchema"]
        return None

    def _new_session(self, request: web.Request) -> Session:
        sid = secrets.token_hex(16)
        session = Session(self.event, sid)
        session.core = self._core(self._legacy_config, session)
        self.sessions[sid] = session
        request["session"] = sid
        self.event("session_created", session=sid)
        return session

    async def get(self, request: web.Request) -> web.StreamResponse:
        if self.config.era == "modern":
            return web.Response(status=405, headers={"Allow": "POST"})
        session = self._session(request)
        if isinstance(session, web.Response):
            return session
        if not accepts(request, "text/event-stream"):
            message = "Not Acceptable: Client must accept text/event-stream"
            return json_response(rpc_error(INVALID_REQUEST, message, None), 406)
        if self.config.end_get_streams:  # a churning server: retry, then the end at once
            churn = web.StreamResponse(headers={**SSE_HEADERS, **self._headers(session)})
            await churn.prepare(request)
            await churn.write(b"retry: %d\n\n" % self.config.sse_retry_ms)
            await churn.write_eof()
            return churn
        last = request.headers.get("Last-Event-ID")
        if last is not None:
            found = session.find(last)
            if found is None:
                message = f"Bad Request: unknown Last-Event-ID {last!r}"
                return json_response(
                    rpc_error(INVALID_REQUEST, message), 400, self._headers(session)
                )
            stream, after = found
            if stream.kind == "get":
                session.get_stream = stream
            self.event(
                "stream_resumed",
                last_event_id=last,
                stream=stream.number,
                session=session.session_id,
            )
        else:
            current = session.get_stream
            if current is not None and current.writers and not current.finished:
                message = "Conflict: Only one SSE stream is allowed per session"
                return json_response(
                    rpc_error(INVALID_REQUEST, message), 409, self._headers(session)
                )
            stream, after = session.open_get_stream(), 0
        try:
            return await self._sse_answer(request, session, None, stream, after)
        except asyncio.CancelledError:
            self.event(
                "stream_closed_by_client", id=None, stream=stream.number, session=session.session_id
            )
            raise

    async def delete(self, request: web.Request) -> web.Response:
        if self.config.era == "modern":
            return web.Response(status=405, headers={"Allow": "POST"})
        session = self._session(request)
        if isinstance(session, web.Response):
            return session
        self._forget(session, "session_deleted")
        assert session.core is not None
        session.core.cancel_all()
        return web.Response(status=200)


def _logged_headers(headers: Any) -> dict[str, str]:
    """The request's headers for the log, but a task's ``Mcp-Name`` (its id: a bearer-like
    secret, ext-tasks) is replaced by ``<task id>``."""
    out = {k.lower(): v for k, v in headers.items()}
    if "mcp-name" in out and out.get("mcp-method", "").startswith("tasks/"):
        out["mcp-name"] = "<task id>"
    return out


async def serve_http(config: Config) -> int:
    """Serve ``/mcp`` until killed (or SIGTERM); return the exit code."""
    log = EventLog(config.log_path) if config.log_path else None
    start = bump_start_counter(config.script_path + ".starts") if config.script_path else 1
    front = HttpFront(config, log, start)
    front.event(
        "started",
        start=start,
        era=config.era,
        modern_versions=list(config.modern_versions),
        legacy_versions=list(config.legacy_versions),
        argv=sys.argv[1:],
        cwd=os.getcwd(),
        transport="http",
    )
    if config.stderr_noise:
        for i in range(config.stderr_noise):
            print(
                f"conduit_mcp.testing noise line {i}: lorem ipsum dolor sit amet", file=sys.stderr
            )
    stop = asyncio.get_running_loop().create_future()

    def on_sigterm() -> None:
        front.event("sigterm", ignored=config.ignore_sigterm)
        if not config.ignore_sigterm and not stop.done():
            stop.set_result(None)

    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, on_sigterm)
    if config.startup_delay > 0:
        await asyncio.sleep(config.startup_delay)
    runner = web.AppRunner(front.app(), handler_cancellation=True, access_log=None)
    await runner.setup()
    tls = server_context(config.tls_cert, config.tls_key, config.tls_client_ca)
    site = web.TCPSite(runner, "127.0.0.1", config.port, reuse_address=True, ssl_context=tls)
    await site.start()
    front.port = runner.addresses[0][1]
    if config.port_file:
        tmp = config.port_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(str(front.port))
        os.replace(tmp, config.port_file)
    front.event("listening", port=front.port)
    print(f"listening {front.port}", flush=True)
    await stop
    front.event("exit", code=0, reason="sigterm")
    os._exit(0)  # open streams need no goodbye; the tests kill and restart freely
