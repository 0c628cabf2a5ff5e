"""What one OAuth actor keeps on the I/O loop: its HTTP session to authorization servers and
the loopback redirect listener (an aiohttp site on 127.0.0.1). Touched on the loop only, so
no lock."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable
from typing import Any

import aiohttp

__all__ = ["OnLoop"]


class OnLoop:
    """See the module docstring. ``turn`` lets one acquisition run at a time: a superseded
    one finishes (its listener closed) before the next starts."""

    __slots__ = ("_session", "_runner", "_tls", "turn")

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._runner: Any = None
        self._tls = tls  # Http(ssl=/verify=): it serves the authorization server too
        self.turn = asyncio.Lock()

    def session(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None or session.closed:
            from ._http import connection_trace

            connector = aiohttp.TCPConnector(ssl=self._tls or True)
            session = self._session = aiohttp.ClientSession(
                connector=connector, trace_configs=[connection_trace()]
            )
        return session

    async def listen(self, port: int, path: str, got: Callable[[str], None]) -> int:
        """Serve ``path`` on 127.0.0.1:``port`` (0: any); each request's URL goes to
        ``got``. The bound port; ``OSError`` when the port is taken."""
        from aiohttp import web

        from .pages import redirect_page

        await self.stop_listening()

        async def callback(request: web.Request) -> web.Response:
            got(str(request.url))
            status, text = redirect_page(request.query)  # says what happened, and what now
            return web.Response(status=status, text=text, content_type="text/plain")

        app = web.Application()
        app.router.add_get(path, callback)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()  # a port in use: nothing is left behind
            raise
        self._runner = runner
        addresses = runner.addresses  # (host, port) of each bound socket
        return int(addresses[0][1]) if addresses else port

    async def stop_listening(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def close(self) -> None:
        await self.stop_listening()
        session, self._session = self._session, None
        if session is not None:
            await session.close()
