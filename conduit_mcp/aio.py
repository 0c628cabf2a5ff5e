"""The asyncio front end: the same API as ``Client``, every request awaitable, never blocking
the caller's loop (the connection answers through ``call_soon_threadsafe`` on that loop)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from typing import TYPE_CHECKING, Any

import pykka

from .actors.events import AwaitReady, Call
from .api import (
    _GRACE,
    _abandon,
    _copy,
    _Front,
    _progress_value,
    _Request,
    _timeout,
)
from .cached import begin_listing, store_walk
from .errors import Error
from .replies import AsyncReply, Reply
from .status import Status

if TYPE_CHECKING:
    from .client import Client


class AsyncClient(_Front[Any]):
    """The same API for asyncio: every request method is awaitable and never blocks the loop.

    ``on_progress`` runs on the caller's loop. Cancelling the awaiting task cancels the
    request at the server.
    """

    def __init__(self, client: Client) -> None:
        self._client = client

    def __repr__(self) -> str:
        return f"<conduit_mcp.AsyncClient {self._client.name!r}>"

    async def await_ready(self, timeout: float = 30.0) -> Status:
        """Wait until ready without blocking the loop."""
        seconds = _timeout(timeout, timeout)
        runtime = self._client._runtime()
        status = runtime.shared.status
        if status.state == "ready":
            return status
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        reply = AsyncReply(loop, future)
        conn = self._client._tell(runtime, AwaitReady(reply, time.monotonic() + seconds))
        return await self._await(future, reply, conn, seconds, "await_ready")

    async def list_all_tools(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Any, ...]:
        """Every tool, following cursors."""
        return await self._list_all("tools", timeout, refresh)

    async def list_all_prompts(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Any, ...]:
        """Every prompt, following cursors."""
        return await self._list_all("prompts", timeout, refresh)

    async def list_all_resources(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Any, ...]:
        """Every resource, following cursors."""
        return await self._list_all("resources", timeout, refresh)

    async def list_all_resource_templates(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Any, ...]:
        """Every resource template, following cursors."""
        return await self._list_all("resource_templates", timeout, refresh)

    async def _list_all(
        self, kind: str, timeout: float | None, refresh: bool = False
    ) -> tuple[Any, ...]:
        runtime = self._client._runtime()
        walk = begin_listing(runtime, kind, timeout, refresh)
        if type(walk) is tuple:
            return walk
        while not walk.done:
            request, remaining = walk.next()
            walk.add(await self._do(request, remaining))
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if store_walk(runtime, walk, AsyncReply(loop, future)):
            # stored before we return, so tool(name) finds it; never failing on it
            with contextlib.suppress(TimeoutError, Error):
                await asyncio.wait_for(future, max(0.0, min(1.0, walk.deadline - time.monotonic())))
        return tuple(walk.items)

    async def _do(self, req: _Request, timeout: float | None, on_progress: Any = None) -> Any:
        runtime = self._client._runtime()
        seconds = _timeout(timeout, runtime.config.request_timeout)
        if on_progress is not None and not callable(on_progress):
            raise Error("argument", "on_progress", "on_progress must be callable")
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        callback = None
        if on_progress is not None:

            def callback(params: dict[str, Any]) -> None:
                on_progress(_progress_value(params))

        reply = AsyncReply(loop, future, callback)
        op = runtime.telemetry.start(req.method, req.params)
        if op is None:  # nothing to record or propagate (no OpenTelemetry SDK)
            conn = self._client._tell(
                runtime,
                Call(
                    req.method, req.params, time.monotonic() + seconds, reply, callback is not None
                ),
            )
            return req.parse(await self._await(future, reply, conn, seconds, req.method))
        raw = None
        try:
            conn = self._client._tell(
                runtime,
                Call(
                    req.method, op.params, time.monotonic() + seconds, reply, callback is not None
                ),
            )
            raw = await self._await(future, reply, conn, seconds, req.method)
            value = req.parse(raw)
        except BaseException as exc:
            op.finish(raw, exc, reply.request_id)
            raise
        op.finish(raw, None, reply.request_id)
        return value

    async def _await(
        self,
        future: asyncio.Future[Any],
        reply: Reply,
        conn: pykka.ActorRef[Any],
        seconds: float,
        what: str,
    ) -> Any:
        # The connection answers `timeout` at the deadline itself; this is only the safety
        # net for a connection that cannot answer. A bare TimerHandle, not asyncio.timeout():
        # measured, the context manager was the largest caller-side cost of a sequential
        # await.
        loop = future.get_loop()
        net = loop.call_at(loop.time() + seconds + _GRACE, _expire, future, reply, conn, what)
        try:
            return await future
        except Error as exc:
            raise _copy(exc) from None
        except BaseException:
            if not reply.done:
                reply.done = True
                _abandon(conn, reply)
            raise
        finally:
            net.cancel()


def _expire(
    future: asyncio.Future[Any], reply: Reply, conn: pykka.ActorRef[Any], what: str
) -> None:
    """The caller's own deadline passed with no answer: give up and tell the connection."""
    if future.done():
        return
    if not reply.done:
        reply.done = True
        _abandon(conn, reply)
    future.set_exception(Error("timeout", "deadline", f"{what} got no answer in time"))
