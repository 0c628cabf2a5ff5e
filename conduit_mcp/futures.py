"""The Pykka front end: ``Client``'s request methods, each returning a ``pykka.Future`` at
once, so an actor calling it never blocks its own thread.

A request made from a Pykka actor is watched (:mod:`conduit_mcp.caller_watch`): if that actor
dies before the answer, the request is cancelled at the server (``caller_down``), as it is for
a blocked thread or a cancelled task that gives up.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar, cast

import pykka

from . import request as rq
from .actors.events import AwaitReady, Call
from .caller_watch import WATCH
from .errors import Error
from .otp._pykka import calling_actor_stopped
from .replies import FutureReply
from .request import Handle, ListKind, Request
from .status import Status
from .telemetry import Operation
from .types import (
    CallToolResult,
    CompleteResult,
    GetPromptResult,
    Page,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Tool,
)

R = TypeVar("R")


# The few jobs that must wait somewhere other than the caller's actor thread: a list_all_*
# walk (one page after another) and a call made while a supervised client is (re)starting.
_pool_lock = threading.Lock()
_pool: ThreadPoolExecutor | None = None


def _submit(job: Callable[[], None]) -> None:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(4, thread_name_prefix="conduit-mcp-futures")
        pool = _pool
    pool.submit(job)


_callers = threading.local()


def _calling_actor_stopped() -> threading.Event | None:
    """The calling actor's ``actor_stopped`` event (None off an actor's thread), found once
    per thread: a thread belongs to one actor for its whole life."""
    try:
        return cast("threading.Event | None", _callers.stopped)
    except AttributeError:
        _callers.stopped = stopped = calling_actor_stopped()
        return stopped


class FutureClient:
    """``Client``'s request methods for Pykka actors: each returns a ``pykka.Future`` at
    once, so an actor never blocks its own thread; ``get()`` it later, or from elsewhere.

    ``on_progress`` here is a ``pykka.ActorRef``: it is told
    ``("conduit_mcp.progress", request_id, params)`` for each progress notification.
    """

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def __repr__(self) -> str:
        return f"<conduit_mcp.FutureClient {self._handle.name!r}>"

    def await_ready(self, timeout: float = 30.0) -> pykka.Future[Status]:
        """A future of the ready status.

        Raises:
            Error: at once, ``argument`` for a bad timeout, ``closed`` when the client is
                stopped. From ``get()``: ``timeout``, ``closed`` (with the reason),
                ``overloaded``/``max_queued``.
        """
        seconds = rq.check_timeout(timeout, timeout)
        future: pykka.ThreadingFuture[Any] = pykka.ThreadingFuture()
        runtime = self._handle.find()
        if runtime is not None and runtime.shared.status.state == "ready":
            future.set(runtime.shared.status)
            return future
        if self._handle.pinned is None:
            # A name-following handle may wait past an incarnation that gave up: in a
            # worker thread, never the caller's.
            handle = self._handle

            def wait() -> None:
                try:
                    future.set(rq.await_ready_blocking(handle, seconds))
                except BaseException as exc:
                    future.set_exception((type(exc), exc, exc.__traceback__))

            _submit(wait)
            return future
        deadline = time.monotonic() + seconds
        reply = FutureReply(future)
        self._send(AwaitReady(reply, deadline, seconds), reply, deadline)
        return future

    # -- requests -----------------------------------------------------------------------------

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        on_progress: pykka.ActorRef[Any] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> pykka.Future[CallToolResult]:
        """Call a tool (see ``Client.call_tool``); progress is told to ``on_progress``.

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._call(
            rq.with_total(rq.call_tool(name, arguments, meta), max_total_timeout),
            timeout,
            on_progress,
        )

    def list_tools(
        self, cursor: str | None = None, *, timeout: float | None = None
    ) -> pykka.Future[Page[Tool]]:
        """One page of tools.

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._call(rq.list_tools(cursor), timeout)

    def list_prompts(
        self, cursor: str | None = None, *, timeout: float | None = None
    ) -> pykka.Future[Page[Prompt]]:
        """One page of prompts.

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._call(rq.list_prompts(cursor), timeout)

    def list_resources(
        self, cursor: str | None = None, *, timeout: float | None = None
    ) -> pykka.Future[Page[Resource]]:
        """One page of resources.

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._call(rq.list_resources(cursor), timeout)

    def list_resource_templates(
        self, cursor: str | None = None, *, timeout: float | None = None
    ) -> pykka.Future[Page[ResourceTemplate]]:
        """One page of resource templates.

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._call(rq.list_resource_templates(cursor), timeout)

    def read_resource(
        self, uri: str, *, timeout: float | None = None, max_total_timeout: float | None = None
    ) -> pykka.Future[ReadResourceResult]:
        """``resources/read`` for one URI.

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._call(rq.with_total(rq.read_resource(uri), max_total_timeout), timeout)

    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
    ) -> pykka.Future[GetPromptResult]:
        """``prompts/get``; prompt arguments are strings.

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._call(rq.with_total(rq.get_prompt(name, arguments), max_total_timeout), timeout)

    def complete(
        self,
        ref: Mapping[str, Any],
        argument: Mapping[str, str],
        *,
        context: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> pykka.Future[CompleteResult]:
        """``completion/complete`` for a prompt or resource-template argument.

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._call(rq.complete(ref, argument, context), timeout)

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        on_progress: pykka.ActorRef[Any] | None = None,
    ) -> pykka.Future[dict[str, Any]]:
        """Any request by method name; a future of the raw result (a dict).

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._call(
            rq.with_total(rq.raw(method, params), max_total_timeout), timeout, on_progress
        )

    def ping(self, *, timeout: float | None = None) -> pykka.Future[None]:
        """A liveness round trip (``ping``, or ``server/discover`` in the modern era).

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._call(rq.ping(self._handle.status().era), timeout)

    def subscribe(self, uri: str, *, timeout: float | None = None) -> pykka.Future[None]:
        """Subscribe to updates of ``uri`` (see ``Client.subscribe``).

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._call(rq.resource_subscription(uri, True), timeout)

    def unsubscribe(self, uri: str, *, timeout: float | None = None) -> pykka.Future[None]:
        """Undo :meth:`subscribe`.

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._call(rq.resource_subscription(uri, False), timeout)

    def list_all_tools(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> pykka.Future[tuple[Tool, ...]]:
        """Every tool, following cursors; cached as ``Client.list_all_tools``. The pages are
        fetched one after another by a worker thread, never the caller's.

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._list_all("tools", timeout, refresh)

    def list_all_prompts(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> pykka.Future[tuple[Prompt, ...]]:
        """Every prompt, following cursors.

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._list_all("prompts", timeout, refresh)

    def list_all_resources(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> pykka.Future[tuple[Resource, ...]]:
        """Every resource, following cursors.

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._list_all("resources", timeout, refresh)

    def list_all_resource_templates(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> pykka.Future[tuple[ResourceTemplate, ...]]:
        """Every resource template, following cursors.

        Raises:
            Error: at once ``argument`` or ``closed``; from ``get()``, as ``Client``'s
                method (its "Errors").
        """
        return self._list_all("resource_templates", timeout, refresh)

    # -- how a future is answered -------------------------------------------------------------

    def _list_all(self, kind: ListKind, timeout: float | None, refresh: bool) -> pykka.Future[Any]:
        walk = rq.begin_listing(self._handle, kind, timeout, refresh)
        out: pykka.ThreadingFuture[Any] = pykka.ThreadingFuture()
        if isinstance(walk, tuple):
            out.set(walk)
            return out
        page_walk = walk
        caller = _calling_actor_stopped()

        def run() -> None:
            try:
                while not page_walk.done:
                    if caller is not None and caller.is_set():
                        return  # the calling actor died: nobody waits for the rest
                    request, remaining = page_walk.next()
                    page_walk.add(self._call(request, remaining).get(timeout=remaining + rq.GRACE))
                rq.store_walk_and_wait(self._handle, page_walk)
            except pykka.Timeout:
                out.set_exception(_timeout_info(kind))
                return
            except BaseException as exc:
                out.set_exception((type(exc), exc, exc.__traceback__))
                return
            out.set(tuple(page_walk.items))

        _submit(run)
        return out

    def _call(
        self,
        req: Request[R],
        timeout: float | None,
        on_progress: pykka.ActorRef[Any] | None = None,
    ) -> pykka.Future[R]:
        if on_progress is not None and not isinstance(on_progress, pykka.ActorRef):
            raise Error("argument", "on_progress", "on_progress must be a pykka.ActorRef here")
        seconds, op = rq.begin(self._handle, req, timeout)
        future: pykka.ThreadingFuture[Any] = pykka.ThreadingFuture()
        wants = on_progress is not None
        now = time.monotonic()
        deadline = now + seconds
        total = rq.total_deadline(self._handle, req, seconds, now)
        if op is None:  # nothing to record or propagate (no OpenTelemetry SDK)
            plain = FutureReply(future, on_progress)
            call = Call(req.method, req.params, deadline, plain, wants, total=total)
            self._send(call, plain, deadline)
            return future.map(req.parse)
        reply = _TimedFutureReply(future, on_progress)
        try:
            call = Call(req.method, op.params, deadline, reply, wants, total=total)
            self._send(call, reply, deadline)
        except BaseException as exc:
            op.finish(None, exc, None)
            raise
        return cast("pykka.Future[R]", _finishing(future, reply, op, req.parse))

    def _send(self, message: Call | AwaitReady, reply: FutureReply, deadline: float) -> None:
        """Tell the connection; watch the calling actor, if any, until the answer."""
        stopped = _calling_actor_stopped()
        conn = self._handle.try_tell(message)
        if conn is not None:
            if stopped is not None:
                WATCH.watch(stopped, reply, conn)
            return
        if not self._handle.in_window():
            self._handle.tell_now(message)  # raises why the client is not there
            return
        # A supervised client is (re)starting: wait for it in a worker, not in this actor.
        handle = self._handle

        def later() -> None:
            try:
                conn = handle.tell(message, deadline)
            except Error as exc:
                reply.fail(exc)
                return
            if stopped is not None:
                WATCH.watch(stopped, reply, conn)

        _submit(later)


def _timeout_info(kind: str) -> tuple[type[BaseException], BaseException, None]:
    error = Error("timeout", "deadline", f"listing {kind} took past its deadline")
    return (Error, error, None)


class _TimedFutureReply(FutureReply):
    """A ``FutureReply`` that notes when the answer arrived (two clock reads in the
    connection: no user code), so the span and duration can end at that instant although
    they are finished later, in the thread that reads the future."""

    __slots__ = ("answered",)

    def __init__(
        self, future: pykka.ThreadingFuture[Any], progress_to: pykka.ActorRef[Any] | None
    ) -> None:
        super().__init__(future, progress_to)
        self.answered: tuple[int, float] | None = None

    def ok(self, result: Any) -> None:
        if not self.done:
            self.answered = (time.time_ns(), time.perf_counter())
        super().ok(result)

    def fail(self, error: Error) -> None:
        if not self.done:
            self.answered = (time.time_ns(), time.perf_counter())
        super().fail(error)


def _finishing(
    inner: pykka.ThreadingFuture[Any],
    reply: _TimedFutureReply,
    op: Operation,
    parse: Callable[[Any], Any],
) -> pykka.ThreadingFuture[Any]:
    """A future of ``parse(result)`` whose first ``get()`` also ends the request's span and
    records its duration, timed at the answer's arrival.

    The work runs in a get hook, so in the thread that calls ``get()``. Not when the answer
    arrives: that happens in the connection actor, which must not run span processors
    (application code). A future that is never read never ends its span (it is never
    exported).
    """

    def get(timeout: float | None) -> Any:
        try:
            raw = inner.get(timeout=timeout)
        except pykka.Timeout:
            raise  # our own wait ran out: the request is still going
        except BaseException as exc:
            if reply.answered is not None:  # the answer was a failure (not an interrupt)
                op.finish(None, exc, reply.request_id, answered=reply.answered)
            raise
        try:
            value = parse(raw)
        except BaseException as exc:
            op.finish(raw, exc, reply.request_id, answered=reply.answered, rounds=reply.rounds)
            raise
        op.finish(raw, None, reply.request_id, answered=reply.answered, rounds=reply.rounds)
        return value

    out: pykka.ThreadingFuture[Any] = pykka.ThreadingFuture()
    out.set_get_hook(get)
    return out
