"""Reply channels: how the connection answers a caller without ever running caller code.

The connection holds one of these per request and calls only ``progress``/``ok``/``fail``,
each of which just hands a value over (a queue put, a ``call_soon_threadsafe``, a future
``set``): progress callbacks and result parsing run in the caller's thread or loop, because
the connection never runs user code (docs/connection.md, "Requests"). ``request_id`` is written by the connection once it numbers the
request, so a caller that gives up can name it in an ``Abandon``.
"""

from __future__ import annotations

import asyncio
import contextlib
from queue import SimpleQueue
from typing import Any

import pykka

from .errors import Error

# Items put on a SyncReply's queue: (tag, value).
PROGRESS = 0
OK = 1
FAIL = 2


class Reply:
    """Base: the connection-facing side of one request's answer."""

    __slots__ = ("request_id", "done")

    def __init__(self) -> None:
        self.request_id: int | None = None
        self.done = False

    def progress(self, params: dict[str, Any]) -> None:
        """A ``notifications/progress`` for this request (params as received)."""

    def ok(self, result: Any) -> None:
        raise NotImplementedError

    def fail(self, error: Error) -> None:
        raise NotImplementedError


class SyncReply(Reply):
    """For a thread blocked in a call: a C-level ``SimpleQueue`` it waits on with a deadline."""

    __slots__ = ("queue", "wants_progress")

    def __init__(self, wants_progress: bool = False) -> None:
        super().__init__()
        self.queue: SimpleQueue[tuple[int, Any]] = SimpleQueue()
        self.wants_progress = wants_progress

    def progress(self, params: dict[str, Any]) -> None:
        if self.wants_progress and not self.done:
            self.queue.put((PROGRESS, params))

    def ok(self, result: Any) -> None:
        if not self.done:
            self.done = True
            self.queue.put((OK, result))

    def fail(self, error: Error) -> None:
        if not self.done:
            self.done = True
            self.queue.put((FAIL, error))


class AsyncReply(Reply):
    """For an asyncio caller: resolves an ``asyncio.Future`` on the caller's own loop."""

    __slots__ = ("loop", "future", "on_progress")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        on_progress: Any = None,
    ) -> None:
        super().__init__()
        self.loop = loop
        self.future = future
        self.on_progress = on_progress

    def progress(self, params: dict[str, Any]) -> None:
        if self.on_progress is not None and not self.done:
            self._call(self.on_progress, params)

    def ok(self, result: Any) -> None:
        if not self.done:
            self.done = True
            self._call(_set_result, self.future, result)

    def fail(self, error: Error) -> None:
        if not self.done:
            self.done = True
            self._call(_set_exception, self.future, error)

    def _call(self, fn: Any, *args: Any) -> None:
        # A closed loop means the caller is gone: nothing to answer.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(fn, *args)


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], error: Error) -> None:
    if not future.done():
        future.set_exception(error)


class FutureReply(Reply):
    """For a Pykka actor caller: a ``pykka.ThreadingFuture`` it can ``get`` when it likes, and
    progress told to an ``ActorRef`` as :class:`ProgressMessage` messages."""

    __slots__ = ("future", "progress_to", "transform")

    def __init__(
        self,
        future: pykka.ThreadingFuture[Any],
        progress_to: pykka.ActorRef[Any] | None = None,
    ) -> None:
        super().__init__()
        self.future = future
        self.progress_to = progress_to

    def progress(self, params: dict[str, Any]) -> None:
        if self.progress_to is not None and not self.done:
            with contextlib.suppress(pykka.ActorDeadError):
                self.progress_to.tell(("conduit_mcp.progress", self.request_id, params))

    def ok(self, result: Any) -> None:
        if not self.done:
            self.done = True
            self.future.set(result)

    def fail(self, error: Error) -> None:
        if not self.done:
            self.done = True
            self.future.set_exception((type(error), error, None))
