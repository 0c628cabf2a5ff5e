"""The facade application code calls: ``Client`` (blocking, and the client's lifecycle),
with ``client.aio`` (:mod:`conduit_mcp.aio`) and ``client.futures``
(:mod:`conduit_mcp.futures`), one request API (:mod:`conduit_mcp.api`) behind all three.

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

import time
from collections.abc import Callable
from queue import Empty
from typing import Any

import pykka

from . import tree
from .actors.events import AwaitReady, Call, ReconnectNow
from .aio import AsyncClient
from .api import (
    _GRACE,
    _abandon,
    _copy,
    _Front,
    _name,
    _progress_value,
    _Request,
    _timeout,
)
from .cached import CacheApi, begin_listing, store_walk_and_wait
from .config import build_config
from .errors import Error
from .futures import FutureClient
from .protocol.results import (
    parse_server_info,
)
from .replies import FAIL, OK, SyncReply
from .status import Status
from .types import (
    Progress,
    ServerInfo,
)


class Client(CacheApi, _Front[Any]):
    """A supervised MCP client for one server. Start it with :meth:`start`.

    >>> import sys, conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> with mcp.Client.start(server) as client:
    ...     status = client.await_ready(timeout=10)
    ...     (status.state, status.era), client.call_tool("add", {"a": 1, "b": 2}).text
    (('ready', 'modern'), '3')
    """

    def __init__(self, name: str, runtime: tree.ClientTree | None = None) -> None:
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
        tree.check_transport(transport)
        config = build_config(options)
        if name is not None and (not isinstance(name, str) or not name):
            raise Error("config", "name", "option 'name' must be a non-empty string")
        runtime = tree.ClientTree(name or tree.unique_name(), transport, config)
        tree.register(runtime, replace=False)
        try:
            runtime.start()
        except Exception:
            tree.unregister(runtime)
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
        from .otp.supervisor import ChildSpec

        tree.check_transport(transport)
        config = build_config(options)
        _name(name, "name")

        def start(link: Any) -> pykka.ActorRef[Any]:
            runtime = tree.ClientTree(name, transport, config)
            tree.register(runtime, replace=True)
            return runtime.start(link=link)

        return ChildSpec(
            f"conduit_mcp:{name}",
            start,
            restart=restart,  # type: ignore[arg-type]
            shutdown=config.shutdown_timeout + 5.0,
        )

    @classmethod
    def whereis(cls, name: str) -> Client:
        """A handle on the client registered under ``name`` (it follows restarts)."""
        return cls(name)

    def _runtime(self) -> tree.ClientTree:
        runtime = self._pinned or tree.lookup(self.name)
        if runtime is None:
            raise Error("closed", "not_started", f"no client named {self.name!r} is running")
        return runtime

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the client: pending calls fail with ``closed``, the server process is closed
        (stdin closed, then SIGTERM, then SIGKILL). Idempotent."""
        runtime = self._pinned or tree.lookup(self.name)
        if runtime is None:
            return
        runtime.stop(timeout)
        tree.unregister(runtime)

    close = stop

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    # -- state, read without messaging --------------------------------------------------------

    def status(self) -> Status:
        """The connection's state now (read lock-free; never waits)."""
        runtime = self._pinned or tree.lookup(self.name)
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

    def list_all_tools(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Any, ...]:
        """Every tool, following cursors; ``timeout`` bounds the whole walk. Served from the
        cache while it is fresh (the server's ``ttlMs``, capped by ``max_cache_ttl``; not
        after a ``list_changed``); ``refresh=True`` always asks the server."""
        return self._list_all("tools", timeout, refresh)

    def list_all_prompts(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Any, ...]:
        """Every prompt, following cursors (cached like :meth:`list_all_tools`)."""
        return self._list_all("prompts", timeout, refresh)

    def list_all_resources(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Any, ...]:
        """Every resource, following cursors (cached like :meth:`list_all_tools`)."""
        return self._list_all("resources", timeout, refresh)

    def list_all_resource_templates(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Any, ...]:
        """Every resource template, following cursors (cached like :meth:`list_all_tools`)."""
        return self._list_all("resource_templates", timeout, refresh)

    def _list_all(self, kind: str, timeout: float | None, refresh: bool) -> tuple[Any, ...]:
        runtime = self._runtime()
        walk = begin_listing(runtime, kind, timeout, refresh)
        if type(walk) is tuple:
            return walk
        while not walk.done:
            request, remaining = walk.next()
            walk.add(self._do(request, remaining))
        store_walk_and_wait(runtime, walk)
        return tuple(walk.items)

    def _tell(self, runtime: tree.ClientTree, message: Any) -> pykka.ActorRef[Any]:
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
