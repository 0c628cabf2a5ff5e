"""A real HTTP server on loopback for the OAuth library's async parts: an ``aiohttp.web``
app on its own loop thread that answers what each test scripts (metadata documents, a
registration endpoint, a token endpoint) and records every request it received, so tests
assert on what went over the wire."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import parse_qsl

import aiohttp
import pytest
from aiohttp import web
from joserfc.jwk import ECKey, RSAKey

Handler = Callable[["Seen"], Awaitable[web.StreamResponse] | web.StreamResponse]


@dataclass
class Seen:
    """One request the server received."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: bytes
    form: dict[str, str] = field(default_factory=dict)
    json: Any = None
    request: web.Request | None = field(default=None, repr=False)


class FakeServer:
    """Scripted answers by (method, path); anything else is a 404. ``seen`` lists every
    request in arrival order."""

    def __init__(self) -> None:
        self.routes: dict[tuple[str, str], Handler] = {}
        self.seen: list[Seen] = []
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._runner: web.AppRunner | None = None
        self.release = asyncio.Event()  # a stalled handler waits on it (set on stop)

    # scripting -------------------------------------------------------------------------
    def handle(self, method: str, path: str, handler: Handler) -> None:
        self.routes[(method, path)] = handler

    def json(self, path: str, doc: Any, status: int = 200, method: str = "GET") -> None:
        self.handle(method, path, lambda _seen: web.json_response(doc, status=status))

    def paths(self, method: str | None = None) -> list[str]:
        return [s.path for s in self.seen if method is None or s.method == method]

    def requests(self, method: str, path: str) -> list[Seen]:
        return [s for s in self.seen if s.method == method and s.path == path]

    # lifecycle -------------------------------------------------------------------------
    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        body = await request.read()
        seen = Seen(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            headers=dict(request.headers),
            body=body,
            request=request,
        )
        ctype = request.headers.get("Content-Type", "")
        if ctype.startswith("application/x-www-form-urlencoded"):
            seen.form = dict(parse_qsl(body.decode(), keep_blank_values=True))
        elif ctype.startswith("application/json") and body:
            seen.json = await request.json()
        self.seen.append(seen)
        handler = self.routes.get((request.method, request.path))
        if handler is None:
            return web.json_response({"error": "not_found"}, status=404)
        answer = handler(seen)
        if asyncio.iscoroutine(answer):
            answer = await answer
        return answer  # type: ignore[return-value]

    async def _start(self) -> str:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        self._runner = web.AppRunner(app)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return f"http://127.0.0.1:{port}"

    def start(self) -> None:
        self._thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(10)

    def stop(self) -> None:
        async def _stop() -> None:
            self.release.set()
            if self._runner is not None:
                await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(_stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()


@pytest.fixture
def server() -> Iterator[FakeServer]:
    srv = FakeServer()
    srv.start()
    try:
        yield srv
    finally:
        srv.stop()


def run(fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
    """Await ``fn(session, *args, **kwargs)`` with a fresh client session on a fresh loop."""

    async def main() -> Any:
        async with aiohttp.ClientSession() as session:
            return await fn(session, *args, **kwargs)

    return asyncio.run(main())


@pytest.fixture(scope="session")
def rsa_key() -> RSAKey:
    return RSAKey.generate_key(2048)


@pytest.fixture(scope="session")
def ec_key() -> ECKey:
    return ECKey.generate_key("P-256")


def pem(key: RSAKey | ECKey) -> str:
    return key.as_pem(private=True).decode()


def as_metadata(base: str, issuer: str | None = None, **extra: Any) -> dict[str, Any]:
    """A complete RFC 8414 document for an authorization server at ``base``."""
    doc: dict[str, Any] = {
        "issuer": issuer or base,
        "authorization_endpoint": f"{base}/authorize",
        "token_endpoint": f"{base}/token",
        "registration_endpoint": f"{base}/register",
        "response_types_supported": ["code"],
        "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": [
            "none",
            "client_secret_basic",
            "client_secret_post",
            "private_key_jwt",
        ],
    }
    doc.update(extra)
    return {k: v for k, v in doc.items() if v is not None}
