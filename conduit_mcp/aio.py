"""The asyncio front end: ``Client``'s request methods, each a coroutine that never blocks the
caller's loop (the connection answers through ``call_soon_threadsafe`` on that loop).

>>> import asyncio, sys, conduit_mcp as mcp
>>> async def main() -> str:
...     server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
...     async with mcp.Client.start(server).aio as client:
...         await client.await_ready(timeout=10)
...         return (await client.call_tool("add", {"a": 1, "b": 2})).text
>>> asyncio.run(main())
'3'
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar, cast

import pykka

from . import request as rq
from .actors.events import AwaitReady, Call
from .errors import Error
from .replies import AsyncReply, Reply
from .request import Handle, ListKind, Request
from .status import Status
from .types import (
    CallToolResult,
    CompleteResult,
    GetPromptResult,
    Page,
    Progress,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Tool,
)

R = TypeVar("R")


class AsyncClient:
    """``Client``'s request methods for asyncio: each is a coroutine and never blocks the loop.

    ``on_progress`` runs on the caller's loop. Cancelling the awaiting task cancels the
    request at the server. ``async with client.aio:`` stops the client on exit, and
    ``await client.aio.stop()`` stops it without blocking the loop.
    """

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def __repr__(self) -> str:
        return f"<conduit_mcp.AsyncClient {self._handle.name!r}>"

    # -- lifecycle ----------------------------------------------------------------------------

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.stop()

    async def stop(self, timeout: float = 10.0) -> None:
        """Stop the client (as ``Client.stop``) in a worker thread, so the loop keeps
        running while the actors and the server process shut down. Never raises."""
        await asyncio.get_running_loop().run_in_executor(None, self._handle.stop, timeout)

    async def await_ready(self, timeout: float = 30.0) -> Status:
        """Wait until ready without blocking the loop; the ready status.

        Raises:
            Error: ``timeout``/``deadline``; ``closed`` (stopped or gave up, with the
                reason); ``overloaded``/``max_queued``; ``argument`` for a bad timeout.
        """
        seconds = rq.check_timeout(timeout, timeout)
        deadline = time.monotonic() + seconds
        handle = self._handle
        while True:
            runtime = handle.find()
            if runtime is not None and runtime.shared.status.state == "ready":
                return runtime.shared.status
            loop = asyncio.get_running_loop()
            future: asyncio.Future[Any] = loop.create_future()
            reply = AsyncReply(loop, future)
            message = AwaitReady(reply, deadline, seconds)
            conn = handle.try_tell(message) or await handle.tell_async(message, deadline)
            remaining = max(0.0, deadline - time.monotonic())
            try:
                return cast(
                    Status, await self._await(future, reply, conn, remaining, "await_ready")
                )
            except Error as exc:
                # A name-following handle waits past an incarnation that gave up while an
                # application supervisor replaces it (run off the loop: it may sleep).
                if exc.kind != "closed" or not await asyncio.to_thread(
                    handle.follows_restarts, deadline
                ):
                    raise

    # -- requests -----------------------------------------------------------------------------

    async def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        on_progress: Callable[[Progress], object] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> CallToolResult:
        """Call a tool (see ``Client.call_tool``); ``on_progress`` runs on this loop.

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        return await self._call(
            rq.with_total(rq.call_tool(name, arguments, meta), max_total_timeout),
            timeout,
            on_progress,
        )

    async def list_tools(
        self, cursor: str | None = None, *, timeout: float | None = None
    ) -> Page[Tool]:
        """One page of tools.

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        return await self._call(rq.list_tools(cursor), timeout)

    async def list_prompts(
        self, cursor: str | None = None, *, timeout: float | None = None
    ) -> Page[Prompt]:
        """One page of prompts.

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        return await self._call(rq.list_prompts(cursor), timeout)

    async def list_resources(
        self, cursor: str | None = None, *, timeout: float | None = None
    ) -> Page[Resource]:
        """One page of resources.

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        return await self._call(rq.list_resources(cursor), timeout)

    async def list_resource_templates(
        self, cursor: str | None = None, *, timeout: float | None = None
    ) -> Page[ResourceTemplate]:
        """One page of resource templates.

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        return await self._call(rq.list_resource_templates(cursor), timeout)

    async def read_resource(
        self, uri: str, *, timeout: float | None = None, max_total_timeout: float | None = None
    ) -> ReadResourceResult:
        """``resources/read`` for one URI.

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        return await self._call(rq.with_total(rq.read_resource(uri), max_total_timeout), timeout)

    async def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
    ) -> GetPromptResult:
        """``prompts/get``; prompt arguments are strings.

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        return await self._call(
            rq.with_total(rq.get_prompt(name, arguments), max_total_timeout), timeout
        )

    async def complete(
        self,
        ref: Mapping[str, Any],
        argument: Mapping[str, str],
        *,
        context: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> CompleteResult:
        """``completion/complete`` for a prompt or resource-template argument.

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        return await self._call(rq.complete(ref, argument, context), timeout)

    async def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        on_progress: Callable[[Progress], object] | None = None,
    ) -> dict[str, Any]:
        """Any request by method name; the raw result (a dict).

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        return await self._call(
            rq.with_total(rq.raw(method, params), max_total_timeout), timeout, on_progress
        )

    async def ping(self, *, timeout: float | None = None) -> None:
        """A liveness round trip (``ping``, or ``server/discover`` in the modern era).

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        await self._call(rq.ping(self._handle.status().era), timeout)

    async def subscribe(self, uri: str, *, timeout: float | None = None) -> None:
        """Subscribe to updates of ``uri`` (see ``Client.subscribe``).

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        await self._call(rq.resource_subscription(uri, True), timeout)

    async def unsubscribe(self, uri: str, *, timeout: float | None = None) -> None:
        """Undo :meth:`subscribe`.

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        await self._call(rq.resource_subscription(uri, False), timeout)

    async def list_all_tools(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Tool, ...]:
        """Every tool, following cursors; cached as ``Client.list_all_tools``.

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        return cast("tuple[Tool, ...]", await self._list_all("tools", timeout, refresh))

    async def list_all_prompts(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Prompt, ...]:
        """Every prompt, following cursors.

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        return cast("tuple[Prompt, ...]", await self._list_all("prompts", timeout, refresh))

    async def list_all_resources(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Resource, ...]:
        """Every resource, following cursors.

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        return cast("tuple[Resource, ...]", await self._list_all("resources", timeout, refresh))

    async def list_all_resource_templates(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[ResourceTemplate, ...]:
        """Every resource template, following cursors.

        Raises:
            Error: as ``Client``'s method (its "Errors"); a cancelled task cancels the
                request at the server.
        """
        items = await self._list_all("resource_templates", timeout, refresh)
        return cast("tuple[ResourceTemplate, ...]", items)

    # -- how an awaiting task waits -----------------------------------------------------------

    async def _list_all(
        self, kind: ListKind, timeout: float | None, refresh: bool
    ) -> tuple[Any, ...]:
        walk = rq.begin_listing(self._handle, kind, timeout, refresh)
        if isinstance(walk, tuple):
            return walk
        while not walk.done:
            request, remaining = walk.next()
            walk.add(await self._call(request, remaining))
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        if rq.store_walk(self._handle, walk, AsyncReply(loop, future)):
            # Stored before we return, so tool(name) finds it; never failing on it.
            wait = max(0.0, min(rq.STORE_WAIT, walk.deadline - time.monotonic()))
            with contextlib.suppress(TimeoutError, Error):
                await asyncio.wait_for(future, wait)
        return tuple(walk.items)

    async def _call(
        self,
        req: Request[R],
        timeout: float | None,
        on_progress: Callable[[Progress], object] | None = None,
    ) -> R:
        if on_progress is not None and not callable(on_progress):
            raise Error("argument", "on_progress", "on_progress must be callable")
        handle = self._handle
        seconds, op = rq.begin(handle, req, timeout)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        callback = None
        if on_progress is not None:
            progress = on_progress

            def callback(params: dict[str, Any]) -> None:
                progress(rq.progress_value(params))

        reply = AsyncReply(loop, future, callback)
        wants = callback is not None
        now = time.monotonic()
        deadline = now + seconds
        # A call the handler may pause waits until its max_total_timeout instead.
        total = rq.total_deadline(handle, req, seconds, now)
        wait = seconds if total is None else total - now
        if op is None:  # nothing to record or propagate (no OpenTelemetry SDK)
            call = Call(req.method, req.params, deadline, reply, wants, total=total)
            # Told at once when the connection is there (no coroutine on the hot path).
            conn = handle.try_tell(call) or await handle.tell_async(call, deadline)
            return req.parse(await self._await(future, reply, conn, wait, req.method))
        raw = None
        try:
            call = Call(req.method, op.params, deadline, reply, wants, total=total)
            conn = handle.try_tell(call) or await handle.tell_async(call, deadline)
            raw = await self._await(future, reply, conn, wait, req.method)
            value = req.parse(raw)
        except BaseException as exc:
            op.finish(raw, exc, reply.request_id, rounds=reply.rounds)
            raise
        op.finish(raw, None, reply.request_id, rounds=reply.rounds)
        return value

    @staticmethod
    async def _await(
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
        net = loop.call_at(loop.time() + seconds + rq.GRACE, _expire, future, reply, conn, what)
        try:
            return await future
        except Error as exc:
            raise rq.copy_error(exc) from None
        except BaseException:
            if not reply.done:
                reply.done = True
                rq.abandon(conn, reply)
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
        rq.abandon(conn, reply)
    future.set_exception(Error("timeout", "deadline", f"{what} got no answer in time"))
