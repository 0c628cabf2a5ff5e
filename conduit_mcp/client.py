"""The facade application code calls: ``Client`` (blocking), ``client.aio`` (asyncio) and
``client.futures`` (Pykka futures), one core behind all three.

The caller side of a request lives here (seed 000's ``ConduitMcp.Client.Request``): it tells
the connection, then waits in the caller's own thread or loop for progress and the reply;
progress callbacks and result parsing run here, never in the connection. A caller that gives
up (its wait ran out, its task was cancelled, Ctrl-C) tells the connection ``Abandon`` so the
server is told to cancel.

Telemetry (README, "Telemetry") is caller-side too: each front end starts the request's
CLIENT span (a child of the caller's current context) and puts its trace context into a copy
of ``params._meta`` before telling the connection, then ends the span and records
``mcp.client.operation.duration`` in the caller, after the answer (``client.futures``: in
the thread that first ``get()``s the future, timed at the answer's arrival).
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Callable, Mapping
from queue import Empty
from typing import Any, Generic, TypeVar

import pykka

from . import runtime as rt
from .actors.connection import Abandon, AwaitReady, Call, ReconnectNow
from .config import build_config
from .errors import Error
from .protocol.results import (
    parse_call_tool,
    parse_complete,
    parse_get_prompt,
    parse_page,
    parse_progress,
    parse_read_resource,
    parse_server_info,
)
from .replies import FAIL, OK, AsyncReply, FutureReply, Reply, SyncReply
from .status import Status
from .telemetry import Operation
from .types import (
    CallToolResult,
    CompleteResult,
    GetPromptResult,
    Page,
    Progress,
    ReadResourceResult,
    ServerInfo,
)

T = TypeVar("T")

# How long a blocked caller waits past its deadline for the connection's own `timeout`
# answer (which comes after the server was told to cancel) before giving up by itself.
_GRACE = 1.0
# A server whose cursors never end would make list_all_* loop forever.
MAX_PAGES = 1000

_LISTS = {
    "tools": "tools/list",
    "prompts": "prompts/list",
    "resources": "resources/list",
    "resource_templates": "resources/templates/list",
}


def _copy(error: Error) -> Error:
    # One Error instance may be shared by every request a broken connection failed; each
    # caller raises its own copy so tracebacks of different threads never mix.
    return Error(error.kind, error.reason, error.message, code=error.code, data=error.data)


def _timeout(value: float | None, default: float) -> float:
    if value is None:
        return default
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise Error("argument", "timeout", "timeout must be a positive number of seconds")
    return float(value)


def _name(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise Error("argument", what, f"{what} must be a non-empty string")
    return value


def _mapping(value: Any, what: str) -> dict[str, Any] | None:
    if value is None:
        return None
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise Error("argument", what, f"{what} must be a mapping with string keys")
    return dict(value)


def _progress_value(params: dict[str, Any]) -> Progress:
    parsed = parse_progress(params)
    if parsed is None:
        return Progress(0.0, None, None)
    return parsed[1]


class _Request:
    """A request description shared by the three front ends."""

    __slots__ = ("method", "params", "parse")

    def __init__(
        self, method: str, params: dict[str, Any] | None, parse: Callable[[Any], Any]
    ) -> None:
        self.method = method
        self.params = params
        self.parse = parse


def _identity(result: Any) -> Any:
    return result


def _none(result: Any) -> None:
    return None


def _tool_call(name: str, arguments: Any, meta: Any) -> _Request:
    params: dict[str, Any] = {"name": _name(name, "name")}
    args = _mapping(arguments, "arguments")
    if args is not None:
        params["arguments"] = args
    extra = _mapping(meta, "meta")
    if extra:
        params["_meta"] = extra
    return _Request("tools/call", params, parse_call_tool)


def _page_request(kind: str, cursor: str | None) -> _Request:
    if cursor is not None and not isinstance(cursor, str):
        raise Error("argument", "cursor", "cursor must be a string or None")
    params = None if cursor is None else {"cursor": cursor}

    def parse(result: Any) -> Page:
        return parse_page(kind, result)

    return _Request(_LISTS[kind], params, parse)


def _prompt_request(name: str, arguments: Any) -> _Request:
    params: dict[str, Any] = {"name": _name(name, "name")}
    args = _mapping(arguments, "arguments")
    if args is not None:
        if not all(isinstance(v, str) for v in args.values()):
            raise Error("argument", "arguments", "prompt arguments must be strings")
        params["arguments"] = args
    return _Request("prompts/get", params, parse_get_prompt)


def _complete_request(ref: Any, argument: Any, context: Any) -> _Request:
    ref_ = _mapping(ref, "ref")
    arg = _mapping(argument, "argument")
    if not ref_ or ref_.get("type") not in ("ref/prompt", "ref/resource"):
        raise Error("argument", "ref", "ref must be {'type': 'ref/prompt'|'ref/resource', ...}")
    if not arg or not isinstance(arg.get("name"), str) or not isinstance(arg.get("value"), str):
        raise Error("argument", "argument", "argument must be {'name': str, 'value': str}")
    params: dict[str, Any] = {"ref": ref_, "argument": arg}
    ctx = _mapping(context, "context")
    if ctx is not None:
        params["context"] = ctx
    return _Request("completion/complete", params, parse_complete)


class _Front(Generic[T]):
    """The API surface, written once; each front end supplies ``_do`` (how to wait)."""

    _client: Client

    def _do(
        self, req: _Request, timeout: float | None, on_progress: Any = None
    ) -> Any:  # pragma: no cover - each front end overrides
        raise NotImplementedError

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        on_progress: Any = None,
        meta: Mapping[str, Any] | None = None,
    ) -> Any:
        """Call a tool; a result with ``is_error`` is a result, not an exception."""
        return self._do(_tool_call(name, arguments, meta), timeout, on_progress)

    def list_tools(self, cursor: str | None = None, *, timeout: float | None = None) -> Any:
        """One page of tools (``Page.next_cursor`` is None on the last page)."""
        return self._do(_page_request("tools", cursor), timeout)

    def list_prompts(self, cursor: str | None = None, *, timeout: float | None = None) -> Any:
        """One page of prompts."""
        return self._do(_page_request("prompts", cursor), timeout)

    def list_resources(self, cursor: str | None = None, *, timeout: float | None = None) -> Any:
        """One page of resources."""
        return self._do(_page_request("resources", cursor), timeout)

    def list_resource_templates(
        self, cursor: str | None = None, *, timeout: float | None = None
    ) -> Any:
        """One page of resource templates."""
        return self._do(_page_request("resource_templates", cursor), timeout)

    def read_resource(self, uri: str, *, timeout: float | None = None) -> Any:
        """``resources/read`` for one URI."""
        return self._do(
            _Request("resources/read", {"uri": _name(uri, "uri")}, parse_read_resource), timeout
        )

    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
    ) -> Any:
        """``prompts/get``; prompt arguments are strings (spec)."""
        return self._do(_prompt_request(name, arguments), timeout)

    def complete(
        self,
        ref: Mapping[str, Any],
        argument: Mapping[str, str],
        *,
        context: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Any:
        """``completion/complete`` for a prompt or resource-template argument."""
        return self._do(_complete_request(ref, argument, context), timeout)

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        on_progress: Any = None,
    ) -> Any:
        """Any request by method name; returns the raw result (a dict)."""
        return self._do(
            _Request(_name(method, "method"), _mapping(params, "params"), _identity),
            timeout,
            on_progress,
        )

    def ping(self, *, timeout: float | None = None) -> Any:
        """A liveness round trip: ``ping`` in the legacy era, ``server/discover`` in the modern
        one (which has no ping)."""
        status = self._client.status()
        method = "server/discover" if status.era == "modern" else "ping"
        return self._do(_Request(method, None, _none), timeout)


class Client(_Front[Any]):
    """A supervised MCP client for one server. Start it with :meth:`start`.

    >>> import sys, conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> with mcp.Client.start(server) as client:
    ...     status = client.await_ready(timeout=10)
    ...     (status.state, status.era), client.call_tool("add", {"a": 1, "b": 2}).text
    (('ready', 'modern'), '3')
    """

    def __init__(self, name: str, runtime: rt.Runtime | None = None) -> None:
        self._client = self
        self.name = name
        self._pinned = runtime
        self.aio = AsyncClient(self)
        self.futures = FutureClient(self)

    def __repr__(self) -> str:
        return f"<conduit_mcp.Client {self.name!r} {self.status().state}>"

    # -- lifecycle ----------------------------------------------------------------------------

    @classmethod
    def start(cls, transport: Any, *, name: str | None = None, **options: Any) -> Client:
        """Start a client; returns at once (connecting runs in the connection actor).

        Every option is validated here; a bad one raises ``Error("config", <option>)``.
        """
        rt.check_transport(transport)
        config = build_config(options)
        if name is not None and (not isinstance(name, str) or not name):
            raise Error("config", "name", "option 'name' must be a non-empty string")
        runtime = rt.Runtime(name or rt.unique_name(), transport, config)
        rt.register(runtime, replace=False)
        try:
            runtime.start()
        except Exception:
            rt.unregister(runtime)
            raise
        return cls(runtime.name, runtime)

    @classmethod
    def child_spec(
        cls,
        transport: Any,
        *,
        name: str,
        restart: str = "permanent",
        **options: Any,
    ) -> Any:
        """A ``ChildSpec`` to run this client under an application's own ``Supervisor``.

        Each (re)start builds a fresh client tree registered under ``name``; get a handle
        with ``Client.whereis(name)``: it follows restarts. With ``on_give_up="stop"`` a
        client that gives up reconnecting exits, so that supervisor starts a fresh one.
        """
        from .actors.supervisor import ChildSpec

        rt.check_transport(transport)
        config = build_config(options)
        _name(name, "name")

        def start(link: Any) -> pykka.ActorRef[Any]:
            runtime = rt.Runtime(name, transport, config)
            rt.register(runtime, replace=True)
            return runtime.start(link=link)

        return ChildSpec(f"conduit_mcp:{name}", start, restart=restart,  # type: ignore[arg-type]
                         shutdown=config.shutdown_timeout + 5.0)

    @classmethod
    def whereis(cls, name: str) -> Client:
        """A handle on the client registered under ``name`` (it follows restarts)."""
        return cls(name)

    def _runtime(self) -> rt.Runtime:
        runtime = self._pinned or rt.lookup(self.name)
        if runtime is None:
            raise Error("closed", "not_started", f"no client named {self.name!r} is running")
        return runtime

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the client: pending calls fail with ``closed``, the server process is closed
        (stdin closed, then SIGTERM, then SIGKILL). Idempotent."""
        runtime = self._pinned or rt.lookup(self.name)
        if runtime is None:
            return
        runtime.stop(timeout)
        rt.unregister(runtime)

    close = stop

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- state, read without messaging --------------------------------------------------------

    def status(self) -> Status:
        """The connection's state now (read lock-free; never waits)."""
        runtime = self._pinned or rt.lookup(self.name)
        if runtime is None or (runtime.stopped.is_set() and not runtime.alive()):
            return Status("closed", reason="stopped")
        status = runtime.shared.status
        if not runtime.alive() and status.state != "closed":
            return Status("closed", status.era, status.version, "stopped", status.origin)
        return status

    def server_info(self) -> ServerInfo | None:
        """What the server said about itself in the handshake (None before that)."""
        return parse_server_info(self._runtime().shared.server_info)

    def server_capabilities(self) -> dict[str, Any] | None:
        """The capabilities the server declared (None before the handshake)."""
        caps = self._runtime().shared.capabilities
        return dict(caps) if caps is not None else None

    def instructions(self) -> str | None:
        """The server's ``instructions`` text, if it sent one."""
        return self._runtime().shared.instructions

    def stderr(self) -> bytes:
        """The last bytes a stdio server wrote to stderr (bounded by ``Stdio.stderr_limit``)."""
        transport = self._runtime().shared.transport
        return transport.stderr() if transport is not None else b""

    # -- waiting ------------------------------------------------------------------------------

    def wait_for_state(self, state: str | Callable[[Status], bool], timeout: float = 5.0) -> Status:
        """Block until the status is in ``state`` (or ``state(status)`` is true), without
        messaging the connection: for supervisors, dashboards and tests. ``Error("timeout")``
        if it does not happen in time."""
        seconds = _timeout(timeout, timeout)
        predicate = state if callable(state) else (lambda s: s.state == state)
        status = self._runtime().shared.wait(predicate, seconds)
        if status is None:
            raise Error("timeout", "deadline", f"state {state!r} not reached in {seconds} s")
        return status

    def await_ready(self, timeout: float = 30.0) -> Status:
        """Block until the connection is ready; ``Error("timeout")`` or ``Error("closed")``."""
        timeout = _timeout(timeout, timeout)
        runtime = self._runtime()
        deadline = time.monotonic() + timeout
        status = runtime.shared.status
        if status.state == "ready":
            return status
        reply = SyncReply()
        conn = self._tell(runtime, AwaitReady(reply, deadline))
        return self._wait(reply, deadline, None, conn, "await_ready")

    def reconnect(self, timeout: float = 10.0) -> None:
        """Leave ``closed`` and connect again (attempts start from zero); in ``reconnecting``
        it cuts the backoff wait short; otherwise it does nothing."""
        runtime = self._runtime()
        reply = SyncReply()
        deadline = time.monotonic() + _timeout(timeout, timeout)
        conn = self._tell(runtime, ReconnectNow(reply))
        self._wait(reply, deadline, None, conn, "reconnect")

    # -- the blocking front end ---------------------------------------------------------------

    def list_all_tools(self, *, timeout: float | None = None) -> tuple[Any, ...]:
        """Every tool, following cursors; ``timeout`` bounds the whole walk."""
        return self._list_all("tools", timeout)

    def list_all_prompts(self, *, timeout: float | None = None) -> tuple[Any, ...]:
        """Every prompt, following cursors."""
        return self._list_all("prompts", timeout)

    def list_all_resources(self, *, timeout: float | None = None) -> tuple[Any, ...]:
        """Every resource, following cursors."""
        return self._list_all("resources", timeout)

    def list_all_resource_templates(self, *, timeout: float | None = None) -> tuple[Any, ...]:
        """Every resource template, following cursors."""
        return self._list_all("resource_templates", timeout)

    def _list_all(self, kind: str, timeout: float | None) -> tuple[Any, ...]:
        runtime = self._runtime()
        deadline = time.monotonic() + _timeout(timeout, runtime.config.request_timeout)
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Error("timeout", "deadline", f"listing {kind} took past its deadline")
            page: Page = self._do(_page_request(kind, cursor), remaining)
            items.extend(page.items)
            if page.next_cursor is None:
                return tuple(items)
            cursor = page.next_cursor
        raise Error("protocol", "too_many_pages", f"{kind} list has more than {MAX_PAGES} pages")

    def _tell(self, runtime: rt.Runtime, message: Any) -> pykka.ActorRef[Any]:
        conn = runtime.connection()
        try:
            conn.tell(message)
        except pykka.ActorDeadError:
            raise Error("closed", "stopped", f"client {self.name!r} is not running") from None
        return conn

    def _do(self, req: _Request, timeout: float | None, on_progress: Any = None) -> Any:
        runtime = self._runtime()
        seconds = _timeout(timeout, runtime.config.request_timeout)
        if on_progress is not None and not callable(on_progress):
            raise Error("argument", "on_progress", "on_progress must be callable")
        deadline = time.monotonic() + seconds
        reply = SyncReply(on_progress is not None)
        op = runtime.telemetry.start(req.method, req.params)
        if op is None:  # nothing to record or propagate (no OpenTelemetry SDK)
            conn = self._tell(
                runtime, Call(req.method, req.params, deadline, reply, on_progress is not None)
            )
            return req.parse(self._wait(reply, deadline, on_progress, conn, req.method))
        raw = None
        try:
            conn = self._tell(
                runtime, Call(req.method, op.params, deadline, reply, on_progress is not None)
            )
            raw = self._wait(reply, deadline, on_progress, conn, req.method)
            value = req.parse(raw)
        except BaseException as exc:
            op.finish(raw, exc, reply.request_id)
            raise
        op.finish(raw, None, reply.request_id)
        return value

    def _wait(
        self,
        reply: SyncReply,
        deadline: float,
        on_progress: Callable[[Progress], Any] | None,
        conn: pykka.ActorRef[Any],
        what: str,
    ) -> Any:
        get = reply.queue.get
        try:
            while True:
                remaining = deadline + _GRACE - time.monotonic()
                try:
                    tag, value = get(timeout=remaining) if remaining > 0 else get(block=False)
                except Empty:
                    raise Error("timeout", "deadline", f"{what} got no answer in time") from None
                if tag == OK:
                    return value
                if tag == FAIL:
                    raise _copy(value)
                if on_progress is not None:
                    on_progress(_progress_value(value))
        except BaseException:
            # Our own wait ran out, a progress callback raised, or Ctrl-C: tell the
            # connection so the server is asked to cancel (no-op if already answered).
            if not reply.done:
                reply.done = True
                _abandon(conn, reply)
            raise


def _abandon(conn: pykka.ActorRef[Any], reply: Reply, reason: str = "caller_down") -> None:
    try:
        conn.tell(Abandon(reply, reason))
    except pykka.ActorDeadError:
        pass


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

    async def list_all_tools(self, *, timeout: float | None = None) -> tuple[Any, ...]:
        """Every tool, following cursors."""
        return await self._list_all("tools", timeout)

    async def list_all_prompts(self, *, timeout: float | None = None) -> tuple[Any, ...]:
        """Every prompt, following cursors."""
        return await self._list_all("prompts", timeout)

    async def list_all_resources(self, *, timeout: float | None = None) -> tuple[Any, ...]:
        """Every resource, following cursors."""
        return await self._list_all("resources", timeout)

    async def list_all_resource_templates(
        self, *, timeout: float | None = None
    ) -> tuple[Any, ...]:
        """Every resource template, following cursors."""
        return await self._list_all("resource_templates", timeout)

    async def _list_all(self, kind: str, timeout: float | None) -> tuple[Any, ...]:
        runtime = self._client._runtime()
        deadline = time.monotonic() + _timeout(timeout, runtime.config.request_timeout)
        items: list[Any] = []
        cursor: str | None = None
        for _ in range(MAX_PAGES):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise Error("timeout", "deadline", f"listing {kind} took past its deadline")
            page: Page = await self._do(_page_request(kind, cursor), remaining)
            items.extend(page.items)
            if page.next_cursor is None:
                return tuple(items)
            cursor = page.next_cursor
        raise Error("protocol", "too_many_pages", f"{kind} list has more than {MAX_PAGES} pages")

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
                Call(req.method, req.params, time.monotonic() + seconds, reply,
                     callback is not None),
            )
            return req.parse(await self._await(future, reply, conn, seconds, req.method))
        raw = None
        try:
            conn = self._client._tell(
                runtime,
                Call(req.method, op.params, time.monotonic() + seconds, reply,
                     callback is not None),
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
        try:
            async with asyncio.timeout(seconds + _GRACE):
                return await future
        except TimeoutError:
            if not reply.done:
                reply.done = True
                _abandon(conn, reply)
            raise Error("timeout", "deadline", f"{what} got no answer in time") from None
        except Error as exc:
            raise _copy(exc) from None
        except BaseException:
            if not reply.done:
                reply.done = True
                _abandon(conn, reply)
            raise


class FutureClient(_Front[Any]):
    """The same API for Pykka actors: every request method returns a ``pykka.Future`` at
    once, so an actor never blocks its own thread; ``get()`` it later, or from elsewhere.

    ``on_progress`` here is a ``pykka.ActorRef``: it is told
    ``("conduit_mcp.progress", request_id, params)`` for each progress notification.
    """

    def __init__(self, client: Client) -> None:
        self._client = client

    def __repr__(self) -> str:
        return f"<conduit_mcp.FutureClient {self._client.name!r}>"

    def _do(self, req: _Request, timeout: float | None, on_progress: Any = None) -> Any:
        runtime = self._client._runtime()
        seconds = _timeout(timeout, runtime.config.request_timeout)
        if on_progress is not None and not isinstance(on_progress, pykka.ActorRef):
            raise Error("argument", "on_progress", "on_progress must be a pykka.ActorRef here")
        future: pykka.ThreadingFuture[Any] = pykka.ThreadingFuture()
        op = runtime.telemetry.start(req.method, req.params)
        if op is None:  # nothing to record or propagate (no OpenTelemetry SDK)
            self._client._tell(
                runtime,
                Call(req.method, req.params, time.monotonic() + seconds,
                     FutureReply(future, on_progress), on_progress is not None),
            )
            return future.map(req.parse)
        reply = _TimedFutureReply(future, on_progress)
        try:
            self._client._tell(
                runtime,
                Call(req.method, op.params, time.monotonic() + seconds, reply,
                     on_progress is not None),
            )
        except BaseException as exc:
            op.finish(None, exc, None)
            raise
        return _finishing(future, reply, op, req.parse)


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
    """Like ``inner.map(parse)`` (a get hook: it runs in the thread calling ``get()``), and
    the first ``get()`` after the answer also ends the span and records the duration, timed
    at the answer's arrival. Why here and not when the answer arrives: that happens in the
    connection actor, which must not run span processors (application code). A future that
    is never read never ends its span (it is never exported)."""

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
            op.finish(raw, exc, reply.request_id, answered=reply.answered)
            raise
        op.finish(raw, None, reply.request_id, answered=reply.answered)
        return value

    out: pykka.ThreadingFuture[Any] = pykka.ThreadingFuture()
    out.set_get_hook(get)
    return out


# Typed aliases for readers of results.
__all__ = [
    "AsyncClient",
    "CallToolResult",
    "Client",
    "CompleteResult",
    "FutureClient",
    "GetPromptResult",
    "ReadResourceResult",
]
