"""The facade application code calls: ``Client`` (blocking, and the client's lifecycle), with
``client.aio`` (:mod:`conduit_mcp.aio`) and ``client.futures`` (:mod:`conduit_mcp.futures`).
The three share one caller-side request layer (:mod:`conduit_mcp.request`) and have the same
request methods, declared once in ``scripts/fronts_client.py`` and generated into each; each
differs only in how its caller waits.

A blocking call tells the connection, then waits in the caller's own thread for progress and
the reply; progress callbacks and result parsing run here, never in the connection. A caller
that gives up (its wait ran out, a progress callback raised, Ctrl-C) tells the connection
``Abandon`` so the server is told to cancel (docs/connection.md, "Requests").

Telemetry is caller-side too (docs/telemetry.md): the caller starts the request's CLIENT
span (a child of its current context), puts its trace context into a copy of
``params._meta`` before telling the connection, then ends the span and records
``mcp.client.operation.duration`` after the answer.
"""

from __future__ import annotations

import queue
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, Unpack, cast

import pykka

from . import request as rq
from . import subscriptions, tree
from . import tasks as tk
from . import validation as vd
from .actors.events import Call, ReconnectNow, RootsChanged
from .actors.oauth import Authorize
from .aio import AsyncClient
from .config import ClientOptions, build_config
from .errors import Error
from .futures import FutureClient
from .protocol.results import parse_server_info
from .protocol.server_logs import LoggingLevel
from .protocol.skills import LoadedSkill, Skill
from .replies import SyncReply
from .request import Handle, ListKind, Request
from .status import State, Status
from .tasks import TaskHandle
from .transports.http_spec import Http
from .transports.inprocess_spec import InProcess
from .transports.stdio_spec import Stdio
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
    ServerInfo,
    Tool,
)

if TYPE_CHECKING:
    from .cache import Cache
    from .otp.supervisor import ChildSpec, RestartType

R = TypeVar("R")

#: What a request method raises, for the docstrings below.


class Client:
    """A supervised MCP client for one server. Start it with :meth:`start`.

    >>> import sys, conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> with mcp.Client.start(server) as client:
    ...     status = client.await_ready(timeout=10)
    ...     (status.state, status.era), client.call_tool("add", {"a": 1, "b": 2}).text
    (('ready', 'modern'), '3')

    The cache, notifications and credentials (``tool(name)``, ``subscribe_notifications``,
    ``set_auth``):

    >>> import queue
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing", "--ttl-ms", "60000"])
    >>> with mcp.Client.start(server) as client:
    ...     _ = client.await_ready(timeout=10)
    ...     notes = queue.Queue()
    ...     client.subscribe_notifications(notes, methods=[mcp.LIST_REFRESHED])
    ...     names = {t.name for t in client.list_all_tools()}   # fetched, then cached
    ...     client.tool("add").name, client.list_all_tools() == client.cached_tools()
    ...     _ = client.call_tool("add_tool", {"name": "fresh_tool"})  # the server announces it
    ...     notes.get(timeout=10).params["kind"], client.tool("fresh_tool").name
    ('add', True)
    ('tools', 'fresh_tool')

    Errors: every request method (here and on ``aio`` and ``futures``) raises
    :class:`~conduit_mcp.Error` with one of these kinds: ``argument`` for a bad argument
    (before anything is sent); ``timeout``/``deadline`` when no answer came in time (the
    server was told to cancel); ``overloaded`` (``max_in_flight``, ``max_queued``, HTTP 429);
    ``closed`` when the client is stopped or gave up (``stopped``, ``max_reconnects``, ...);
    ``transport`` when the connection broke while the request was pending (never retried);
    ``unavailable``/``connection_crashed`` when it was queued as the connection crashed (safe
    to retry); ``auth`` (HTTP 401/403); ``server`` for a JSON-RPC error (``code``,
    ``data``); ``protocol`` for a malformed result.
    """

    aio: AsyncClient
    """The same request methods for asyncio (:class:`~conduit_mcp.aio.AsyncClient`)."""
    futures: FutureClient
    """The same request methods for Pykka actors (:class:`~conduit_mcp.futures.FutureClient`)."""

    def __init__(self, name: str, runtime: tree.ClientTree | None = None) -> None:
        self.name = name
        self._handle = Handle(name, runtime)
        self.aio = AsyncClient(self._handle)
        self.futures = FutureClient(self._handle)
        #: The tasks kept in the client's ``task_store``: ``unfinished()``, ``resume(record)``
        #: (docs/tasks.md).
        self.tasks = tk.Tasks(self._handle)

    def __repr__(self) -> str:
        return f"<conduit_mcp.Client {self.name!r} {self.status().state}>"

    # -- lifecycle ----------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        transport: Stdio | Http | InProcess,
        *,
        name: str | None = None,
        **options: Unpack[ClientOptions],
    ) -> Client:
        """Start a client; it returns at once (connecting runs in the connection actor).

        Args:
            transport: ``Stdio(...)``, ``Http(...)``, ``Sse(...)`` or ``InProcess(...)``.
            name: the registry name (``Client.whereis(name)``); a unique one by default.
            **options: see :class:`~conduit_mcp.config.ClientOptions` (docs/limits.md).

        Raises:
            Error: ``config`` with the option's name as reason (``unknown_option`` for a
                misspelt one, ``name`` for a name a running client has); ``unavailable``/
                ``start_failed`` if the client's actors could not start.
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
        transport: Stdio | Http | InProcess,
        *,
        name: str,
        restart: RestartType = "permanent",
        **options: Unpack[ClientOptions],
    ) -> ChildSpec:
        """A ``ChildSpec`` to run this client under an application's own ``Supervisor``.

        Each (re)start builds a fresh client tree registered under ``name``; get a handle
        with ``Client.whereis(name)``: it follows restarts, and its calls wait through the
        start and restart windows (bounded by each call's deadline). With
        ``on_give_up="stop"`` a client that gives up reconnecting exits, so that supervisor
        starts a fresh one.

        Raises:
            Error: ``config`` for a bad option, transport or name (checked here, once).
        """
        from .otp.supervisor import ChildSpec

        tree.check_transport(transport)
        config = build_config(options)
        tree.check_era(transport, config)
        rq.check_name(name, "name")

        def start(link: Any) -> pykka.ActorRef[Any]:
            runtime = tree.ClientTree(name, transport, config)
            tree.register(runtime, replace=True)
            return runtime.start(link=link)

        return ChildSpec(
            f"conduit_mcp:{name}", start, restart=restart, shutdown=config.shutdown_timeout + 5.0
        )

    @classmethod
    def whereis(cls, name: str) -> Client:
        """A handle on the client registered under ``name``.

        It follows restarts: each call finds the current incarnation, and waits (bounded by
        its deadline) while an application supervisor starts or restarts it. This never
        raises: a name nobody runs is found out by the handle's first call.
        """
        return cls(name)

    def _runtime(self) -> tree.ClientTree:
        # For tests that reach into the tree; the front ends use their Handle.
        return self._handle.tree()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the client: pending calls fail with ``closed``, the server process is closed
        (stdin closed, then SIGTERM, then SIGKILL). Idempotent; never raises."""
        self._handle.stop(timeout)

    close = stop

    @classmethod
    def stop_all(cls, clients: Iterable[Client], timeout: float = 10.0) -> None:
        """Stop many clients at once, bounded by ``timeout`` in all: each stops as
        :meth:`stop` stops it, but their stops overlap instead of running one after another
        (a gateway holding thousands of connections shuts down in seconds, not minutes).
        Idempotent; never raises.

        >>> import sys, conduit_mcp as mcp
        >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
        >>> clients = [mcp.Client.start(server) for _ in range(3)]
        >>> mcp.Client.stop_all(clients, timeout=10)
        >>> {client.status().state for client in clients}
        {'closed'}
        """
        handles = [client._handle for client in clients]
        runtimes = [rt for rt in (h.runtime() for h in handles) if rt is not None]
        tree.stop_all(runtimes, timeout)
        for runtime in runtimes:
            tree.unregister(runtime)

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- state, read without messaging --------------------------------------------------------

    def status(self) -> Status:
        """The connection's state now (read lock-free; never waits, never raises)."""
        return self._handle.status()

    def server_info(self) -> ServerInfo | None:
        """What the server said about itself in the handshake (None before that).

        Raises:
            Error: ``closed``/``not_started`` if no client runs under this name.
        """
        return parse_server_info(self._handle.tree().shared.server_info)

    def server_capabilities(self) -> dict[str, Any] | None:
        """The capabilities the server declared (None before the handshake).

        Raises:
            Error: ``closed``/``not_started`` if no client runs under this name.
        """
        caps = self._handle.tree().shared.capabilities
        return dict(caps) if caps is not None else None

    def instructions(self) -> str | None:
        """The server's ``instructions`` text, if it sent one.

        Raises:
            Error: ``closed``/``not_started`` if no client runs under this name.
        """
        return self._handle.tree().shared.instructions

    def stderr(self) -> bytes:
        """The last bytes a stdio server wrote to stderr (bounded by ``Stdio.stderr_limit``).

        Raises:
            Error: ``closed``/``not_started`` if no client runs under this name.
        """
        transport = self._handle.tree().shared.transport
        return cast(bytes, transport.stderr()) if transport is not None else b""

    # -- waiting ------------------------------------------------------------------------------

    def wait_for_state(
        self, state: State | Callable[[Status], bool], timeout: float = 5.0
    ) -> Status:
        """Block until the status is in ``state`` (or ``state(status)`` is true), without
        messaging the connection: for supervisors, dashboards and tests.

        Raises:
            Error: ``timeout``/``deadline`` if it does not happen in time; ``argument`` for
                a bad timeout; ``closed``/``not_started`` if no client runs under this name.
        """
        seconds = rq.check_timeout(timeout, timeout)
        predicate = state if callable(state) else (lambda s: s.state == state)
        status = self._handle.tree().shared.wait(predicate, seconds)
        if status is None:
            raise Error("timeout", "deadline", f"state {state!r} not reached in {seconds} s")
        return status

    def reconnect(self, timeout: float = 10.0) -> None:
        """Leave ``closed`` and connect again (attempts start from zero); in ``reconnecting``
        it cuts the backoff wait short; otherwise it does nothing.

        Raises:
            Error: ``closed``/``stopped`` if the client is stopped; ``timeout`` if the
                connection did not take it in time.
        """
        deadline = time.monotonic() + rq.check_timeout(timeout, timeout)
        reply = SyncReply()
        conn = self._handle.tell(ReconnectNow(reply), deadline)
        rq.wait_blocking(reply, deadline, None, conn, "reconnect")

    def roots_changed(self) -> None:
        """Tell the server that what the handler's ``list_roots`` returns has changed, so it
        asks again: ``notifications/roots/list_changed`` in the legacy era, when the client
        declares ``roots``. The modern era has no such notification (a server asks for roots
        in each request that needs them), and a client not ``ready`` has nothing to tell: the
        next session's server asks anyway. Never waits.

        Raises:
            Error: ``closed``/``stopped`` if the client is not running.
        """
        self._handle.tell_now(RootsChanged())

    # -- requests -----------------------------------------------------------------------------

    # BEGIN GENERATED requests
    # Generated by scripts/gen_fronts.py from scripts/fronts_client.py, the one source of these
    # methods in Client, AsyncClient and FutureClient (docs/architecture.md, "Adding a request
    # method"). Do not edit: change the spec and run `.venv/bin/python scripts/gen_fronts.py`
    # (`make lint` fails while this is stale).

    def await_ready(self, timeout: float = 30.0) -> Status:
        """The ready status, once the connection is ready.

        A handle from :meth:`~conduit_mcp.Client.whereis` waits through the client's start and
        restart windows, and past an incarnation that gave up while an application supervisor
        replaces it.

        Raises:
            Error: ``timeout``/``deadline``; ``closed`` (the client is stopped or gave up, with
                the reason); ``overloaded``/``max_queued``; ``argument`` for a bad timeout.
        """
        return self._await_ready(rq.check_timeout(timeout, timeout))

    def call_tool(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None,
        on_progress: Callable[[Progress], object] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> CallToolResult:
        """Call a tool; its result. A result with ``is_error`` is a result, not an exception:
        the tool ran and failed. A tool that declares an ``outputSchema`` has its
        ``structuredContent`` checked against it (``validate_output``; with
        ``validate_arguments``, the arguments too, before anything is sent).
        ``reset_timeout_on_progress`` (else the client's option): each progress report restarts
        ``timeout``, ``max_total_timeout`` bounding the whole call. ``on_progress`` runs in this
        thread for each progress notification; if it raises, the request is cancelled and the
        exception propagates.

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors");
                ``protocol``/``invalid_structured_content`` for a result that does not match the
                tool's ``outputSchema``; ``argument``/``invalid_arguments`` (with
                ``validate_arguments``).
        """
        return self._call_tool(
            rq.with_total(
                rq.call_tool(name, arguments, meta), max_total_timeout, reset_timeout_on_progress
            ),
            timeout,
            on_progress,
        )

    def start_task(
        self,
        name: str,
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> TaskHandle:
        """Call a tool as a task and return at once with its :class:`TaskHandle` (``status()``,
        ``wait()``, ``result()``, ``cancel()``, ``record``), polled in the background without a
        thread of its own (docs/tasks.md). A task is asked for whenever the tool supports one
        (2025-11-25: ``execution.taskSupport`` ``"required"`` or ``"optional"``; the modern
        Tasks extension: declared, the server decides); a server that answers at once gives a
        handle that is already completed. ``timeout`` bounds the call that creates the task, not
        the task.

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors");
                ``argument``/``invalid_arguments`` (with ``validate_arguments``).
        """
        return self._start_task(rq.call_tool(name, arguments, meta), timeout)

    def list_tools(self, cursor: str | None = None, *, timeout: float | None = None) -> Page[Tool]:
        """One page of tools (``Page.next_cursor`` is None on the last page).

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors").
        """
        return self._call(rq.list_tools(cursor), timeout)

    def list_prompts(
        self, cursor: str | None = None, *, timeout: float | None = None
    ) -> Page[Prompt]:
        """One page of prompts.

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors").
        """
        return self._call(rq.list_prompts(cursor), timeout)

    def list_resources(
        self, cursor: str | None = None, *, timeout: float | None = None
    ) -> Page[Resource]:
        """One page of resources.

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors").
        """
        return self._call(rq.list_resources(cursor), timeout)

    def list_resource_templates(
        self, cursor: str | None = None, *, timeout: float | None = None
    ) -> Page[ResourceTemplate]:
        """One page of resource templates.

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors").
        """
        return self._call(rq.list_resource_templates(cursor), timeout)

    def read_resource(
        self,
        uri: str,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None,
    ) -> ReadResourceResult:
        """``resources/read`` for one URI. ``reset_timeout_on_progress`` (else the client's
        option): each progress report restarts ``timeout``, ``max_total_timeout`` bounding the
        whole call.

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors").
        """
        return self._call(
            rq.with_total(rq.read_resource(uri), max_total_timeout, reset_timeout_on_progress),
            timeout,
        )

    def get_prompt(
        self,
        name: str,
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None,
    ) -> GetPromptResult:
        """``prompts/get``; prompt arguments are strings (MCP spec, Server Features, "Prompts").
        ``reset_timeout_on_progress`` (else the client's option): each progress report restarts
        ``timeout``, ``max_total_timeout`` bounding the whole call.

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors").
        """
        return self._call(
            rq.with_total(
                rq.get_prompt(name, arguments), max_total_timeout, reset_timeout_on_progress
            ),
            timeout,
        )

    def complete(
        self,
        ref: Mapping[str, Any],
        argument: Mapping[str, str],
        *,
        context: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> CompleteResult:
        """``completion/complete`` for a prompt or resource-template argument.

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors").
        """
        return self._call(rq.complete(ref, argument, context), timeout)

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None,
        on_progress: Callable[[Progress], object] | None = None,
    ) -> dict[str, Any]:
        """Any request by method name; its raw result (a dict), for a method this client has no
        typed call for. ``reset_timeout_on_progress`` (else the client's option): each progress
        report restarts ``timeout``, ``max_total_timeout`` bounding the whole call.
        ``on_progress`` runs in this thread for each progress notification; if it raises, the
        request is cancelled and the exception propagates.

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors").
        """
        return self._call(
            rq.with_total(rq.raw(method, params), max_total_timeout, reset_timeout_on_progress),
            timeout,
            on_progress,
        )

    def ping(self, *, timeout: float | None = None) -> None:
        """A liveness round trip: ``ping`` in the legacy era, ``server/discover`` in the modern
        one (which has no ping).

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors").
        """
        self._call(rq.ping(self._handle.status().era), timeout)

    def subscribe(self, uri: str, *, timeout: float | None = None) -> None:
        """Subscribe to ``notifications/resources/updated`` for ``uri``. Kept across reconnects:
        sent again on every new session (legacy ``resources/subscribe``) or carried by every
        listen (modern).

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors").
        """
        self._call(rq.resource_subscription(uri, True), timeout)

    def unsubscribe(self, uri: str, *, timeout: float | None = None) -> None:
        """Undo :meth:`subscribe`.

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors").
        """
        self._call(rq.resource_subscription(uri, False), timeout)

    def set_logging_level(self, level: LoggingLevel, *, timeout: float | None = None) -> None:
        """Receive the server's log messages at ``level`` and above (``debug``, ``info``,
        ``notice``, ``warning``, ``error``, ``critical``, ``alert``, ``emergency``). They go to
        Python logging on ``conduit_mcp.server.<client name>`` and to the handler's
        ``handle_log``. Kept across reconnects: legacy ``logging/setLevel``, sent again to every
        new session; modern: ``_meta["io.modelcontextprotocol/logLevel"]`` on every request from
        now on (a call's own ``_meta`` one wins).

        Raises:
            Error: ``argument``/``level`` for a level not in that list;
                ``unavailable``/``not_supported`` when a legacy server declares no ``logging``
                capability; otherwise as any request: ``argument``, ``timeout``, ``overloaded``,
                ``closed``, ``transport``, ``unavailable``, ``auth``, ``server`` or ``protocol``
                (``Client``'s "Errors").
        """
        self._call(rq.set_logging_level(level), timeout)

    def list_all_tools(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Tool, ...]:
        """Every tool, following cursors; ``timeout`` bounds the whole walk. Served from the
        cache while it is fresh (the server's ``ttlMs``, capped by ``max_cache_ttl``; not after
        a ``list_changed``); ``refresh=True`` always asks the server.

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors");
                ``protocol``/``too_many_pages`` past 1000 pages.
        """
        return self._list_all("tools", timeout, refresh)

    def list_all_prompts(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Prompt, ...]:
        """Every prompt, following cursors (cached like :meth:`list_all_tools`).

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors");
                ``protocol``/``too_many_pages`` past 1000 pages.
        """
        return self._list_all("prompts", timeout, refresh)

    def list_all_resources(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Resource, ...]:
        """Every resource, following cursors (cached like :meth:`list_all_tools`).

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors");
                ``protocol``/``too_many_pages`` past 1000 pages.
        """
        return self._list_all("resources", timeout, refresh)

    def list_all_resource_templates(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[ResourceTemplate, ...]:
        """Every resource template, following cursors (cached like :meth:`list_all_tools`).

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors");
                ``protocol``/``too_many_pages`` past 1000 pages.
        """
        return self._list_all("resource_templates", timeout, refresh)

    def list_skills(
        self, *, timeout: float | None = None, refresh: bool = False
    ) -> tuple[Skill, ...]:
        """Every skill the server serves (the skills extension, ``skills/list``), following
        cursors; cached like :meth:`list_all_tools`. Reads no file of any skill: a skill's files
        are read by :meth:`load_skill`, when it is needed (docs/skills.md).

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors");
                ``protocol``/``too_many_pages`` past 1000 pages;
                ``unavailable``/``not_supported`` when the server does not declare the
                ``io.modelcontextprotocol/skills`` extension; ``protocol``/``bad_result`` for a
                malformed entry (a file outside the skill's directory, a bad digest, a name that
                is not the URI's last segment).
        """
        return self._list_all("skills", timeout, refresh)

    def get_skill(self, uri: str, *, timeout: float | None = None) -> Skill:
        """One skill's entry by the URI of its ``SKILL.md`` (``skills/get``): for a skill named
        by the server's instructions or by the user, which a listing may not hold, or to refresh
        one entry.

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors");
                ``server`` (-32602) for a URI that is no skill of the server;
                ``unavailable``/``not_supported`` as :meth:`list_skills`.
        """
        return self._call(rq.get_skill(uri), timeout)

    def load_skill(
        self, skill: Skill, *, timeout: float | None = None, max_bytes: int = 16_777_216
    ) -> LoadedSkill:
        """Read every file of ``skill`` and verify it against the skill's entry before returning
        any of it: ``SKILL.md`` first, then the other files, one ``resources/read`` each; every
        file's byte length and ``sha256:`` digest, and ``SKILL.md``'s frontmatter field by
        field. The first file that fails stops the load (nothing after it is read). ``timeout``
        bounds the whole load; a skill over 512 files or ``max_bytes`` in all (the extension's
        limits: 16 MiB) is declined before anything is read.

        Raises:
            Error: ``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
                ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors");
                ``protocol``/``skill_mismatch`` for a file whose size, digest or frontmatter is
                not what the entry says (the message names the file and what differed, never its
                content); ``protocol``/``skill_too_large`` over the limits;
                ``protocol``/``skill_dynamic`` for a skill whose server publishes no digests;
                ``argument``/``skill`` or ``max_bytes``.
        """
        return self._load_skill(rq.begin_skill_load(self._handle, skill, timeout, max_bytes))

    # END GENERATED requests

    # -- the cache: reads that never fetch and never message ----------------------------------

    def cached_tools(self) -> tuple[Tool, ...] | None:
        """The cached tools, fresh or not (None if never fetched, or private to other
        credentials); never asks the server.

        Raises:
            Error: ``unavailable``/``cache_gone`` if the connection is gone;
                ``closed``/``not_started`` if no client runs under this name.
        """
        return self._cache().items("tools")

    def cached_prompts(self) -> tuple[Prompt, ...] | None:
        """The cached prompts (see :meth:`cached_tools`).

        Raises:
            Error: ``unavailable``/``cache_gone`` if the connection is gone;
                ``closed``/``not_started`` if no client runs under this name.
        """
        return self._cache().items("prompts")

    def cached_resources(self) -> tuple[Resource, ...] | None:
        """The cached resources (see :meth:`cached_tools`).

        Raises:
            Error: ``unavailable``/``cache_gone`` if the connection is gone;
                ``closed``/``not_started`` if no client runs under this name.
        """
        return self._cache().items("resources")

    def cached_resource_templates(self) -> tuple[ResourceTemplate, ...] | None:
        """The cached resource templates (see :meth:`cached_tools`).

        Raises:
            Error: ``unavailable``/``cache_gone`` if the connection is gone;
                ``closed``/``not_started`` if no client runs under this name.
        """
        return self._cache().items("resource_templates")

    def tool(self, name: str) -> Tool | None:
        """The cached :class:`~conduit_mcp.types.Tool` named ``name``, or None. A point lookup:
        one item, no copy of the list, no message, no lock.

        Raises:
            Error: ``unavailable``/``cache_gone`` if the connection is gone;
                ``closed``/``not_started`` if no client runs under this name.
        """
        return cast("Tool | None", self._cache().lookup("tools", name))

    def prompt(self, name: str) -> Prompt | None:
        """The cached prompt named ``name``, or None.

        Raises:
            Error: ``unavailable``/``cache_gone`` if the connection is gone;
                ``closed``/``not_started`` if no client runs under this name.
        """
        return cast("Prompt | None", self._cache().lookup("prompts", name))

    def resource(self, uri: str) -> Resource | None:
        """The cached resource with this ``uri``, or None.

        Raises:
            Error: ``unavailable``/``cache_gone`` if the connection is gone;
                ``closed``/``not_started`` if no client runs under this name.
        """
        return cast("Resource | None", self._cache().lookup("resources", uri))

    def resource_template(self, uri_template: str) -> ResourceTemplate | None:
        """The cached resource template with this ``uri_template``, or None.

        Raises:
            Error: ``unavailable``/``cache_gone`` if the connection is gone;
                ``closed``/``not_started`` if no client runs under this name.
        """
        return cast(
            "ResourceTemplate | None", self._cache().lookup("resource_templates", uri_template)
        )

    def cached_skills(self) -> tuple[Skill, ...] | None:
        """The cached skills (see :meth:`cached_tools`; filled by :meth:`list_skills`).

        Raises:
            Error: ``unavailable``/``cache_gone`` if the connection is gone;
        """
        return self._cache().items("skills")

    def _cache(self) -> Cache:
        cache = self._handle.tree().shared.cache
        if cache is None:  # a tree still starting (a supervisor's child_spec)
            raise Error("unavailable", "cache_gone", "the client has no cache yet")
        return cast("Cache", cache)

    # -- notifications and credentials --------------------------------------------------------

    def subscribe_notifications(
        self, subscriber: Any, methods: Iterable[str] | None = None
    ) -> None:
        """Deliver server notifications (all but progress and cancelled) to ``subscriber``,
        in order: a Pykka ``ActorRef`` (told a
        :class:`~conduit_mcp.notifications.ServerNotification`), a callable (run in the
        client's notifier thread, never the connection's), or a queue (``put_nowait``; an
        ``asyncio.Queue`` is filled on its own loop). ``methods`` limits it to those methods.
        A ``list_changed`` burst arrives coalesced: the first at once, then at most one per
        250 ms. In the modern era this also opens a ``subscriptions/listen`` for what the
        server advertises. A dead subscriber is removed. Never waits.

        Raises:
            Error: ``argument``/``subscriber`` or ``methods`` for a bad argument;
                ``closed`` if the client is not running.
        """
        subscriptions.subscribe_notifications(self._handle, subscriber, methods)

    def unsubscribe_notifications(self, subscriber: Any) -> None:
        """Stop delivering to ``subscriber`` (no-op if it was not subscribed).

        Raises:
            Error: ``argument``/``subscriber`` for something that is not a subscriber;
                ``closed``/``not_started`` if no client runs under this name.
        """
        subscriptions.unsubscribe_notifications(self._handle, subscriber)

    def await_listening(self, timeout: float = 5.0) -> dict[str, Any]:
        """Modern era: block until the server acknowledged a ``subscriptions/listen`` and
        return the filter it honours (so a change made after this is not missed). Legacy
        era: ``{}`` at once (notifications need no listen there).

        Raises:
            Error: ``timeout``/``deadline`` if no listen is acknowledged in time (no
                consumer, or the server advertises nothing); ``closed``/``not_started``.
        """
        return subscriptions.await_listening(self._handle, timeout)

    def set_auth(
        self,
        *,
        bearer: str | None = None,
        headers: Mapping[str, str] | None = None,
        auth: Callable[[], Mapping[str, str]] | None = None,
        credential_id: str | None = None,
        timeout: float = 5.0,
    ) -> None:
        """Send other credentials from the next request on (HTTP only). Every private cached
        list is deleted at once (docs/cache.md, "Private results"); public ones are kept.
        The values never appear in a repr, a log or a span.

        Raises:
            Error: ``argument``/``transport`` for a stdio client, ``argument`` for a bad
                value; ``timeout`` if the connection did not apply it in time; ``closed``.
        """
        subscriptions.set_auth(
            self._handle,
            bearer=bearer,
            headers=headers,
            auth=auth,
            credential_id=credential_id,
            timeout=timeout,
        )

    def authorize(self, redirect_url: str, timeout: float = 30.0) -> None:
        """Complete a person's OAuth authorization (``Http(auth=OAuth(...))``): pass the URL
        the authorization server redirected their browser to (the paste-back of a headless
        or remote app; with ``OAuth(loopback=True)`` the client receives it itself). Returns
        once the tokens exist; the requests that failed ``authorization_required`` then
        succeed. ``state`` is checked; the URL never appears in a log or an error
        (docs/connection.md, "Authorizing").

        Raises:
            Error: ``argument``/``no_oauth`` for a client without OAuth,
                ``argument``/``no_authorization`` when no authorization waits for a redirect,
                ``argument``/``redirect_url`` for text that is not a redirect; ``auth``
                (``state_mismatch``, ``issuer_mismatch``, ``authorization_denied``,
                ``token_failed``); ``timeout`` if the tokens did not come in time; ``closed``.
        """
        if not isinstance(redirect_url, str) or not redirect_url:
            raise Error("argument", "redirect_url", "redirect_url must be the redirect's URL")
        seconds = rq.check_timeout(timeout, timeout)
        runtime = self._handle.tree()
        oauth = runtime.registry.get("oauth")
        if oauth is None:
            raise Error(
                "argument",
                "no_oauth",
                "authorize needs a client started with Http(auth=OAuth(...))",
            )
        reply = SyncReply()
        try:
            oauth.tell(Authorize(redirect_url, reply))
        except pykka.ActorDeadError:
            raise Error("closed", "stopped", "the client's OAuth actor is not running") from None
        try:
            _tag, value = reply.queue.get(timeout=seconds)
        except queue.Empty:
            raise Error(
                "timeout", "deadline", f"no tokens within {seconds} s of the redirect"
            ) from None
        if isinstance(value, Error):
            raise value

    # -- how a blocked caller waits -----------------------------------------------------------

    def _await_ready(self, seconds: float) -> Status:
        return rq.await_ready_blocking(self._handle, seconds)

    def _list_all(self, kind: ListKind, timeout: float | None, refresh: bool) -> tuple[Any, ...]:
        walk = rq.begin_listing(self._handle, kind, timeout, refresh)
        if isinstance(walk, tuple):
            return walk
        while not walk.done:
            request, remaining = walk.next()
            walk.add(self._call(request, remaining))
        rq.store_walk_and_wait(self._handle, walk)
        return tuple(walk.items)

    def _load_skill(self, walk: rq.SkillWalk) -> LoadedSkill:
        while not walk.done:
            request, remaining = walk.next()
            walk.add(self._call(request, remaining))
        return walk.loaded()

    def _call_tool(
        self,
        req: Request[CallToolResult],
        timeout: float | None,
        on_progress: Callable[[Progress], object] | None = None,
    ) -> CallToolResult:
        if on_progress is not None and not callable(on_progress):
            raise Error("argument", "on_progress", "on_progress must be callable")
        # The tool's schemas, from the cache or (never listed) fetched first: docs/validation.md.
        checks = vd.find_tool(self._handle, req)
        if isinstance(checks, vd.ListFirst):
            # The listing is a request of its own, with the call's timeout; so is the call.
            tools: tuple[Any, ...] = ()
            try:
                tools = self._list_all("tools", timeout, True)
            except Error as exc:
                vd.listing_failed(self._handle, exc)  # the call goes on unchecked
            checks = vd.from_listing(self._handle, req, tools)
        # A tool call may be answered with a task: polled to its end (docs/tasks.md).
        deadline = tk.deadline_of(self._handle, timeout)
        checked = vd.checked(req, checks)
        tk.with_task_param(self._handle, checked, checks.tool if checks else None)
        out = self._call(tk.keep_task(checked), timeout, on_progress)
        if isinstance(out, tk.TaskAnswer):
            return tk.drive_blocking(self._handle, out, deadline, checked.parse, req)
        return out

    def _start_task(self, req: Request[CallToolResult], timeout: float | None) -> tk.TaskHandle:
        checks = vd.find_tool(self._handle, req)
        if isinstance(checks, vd.ListFirst) or (checks is None and tk.needs_listing(self._handle)):
            tools: tuple[Any, ...] = ()
            try:
                tools = self._list_all("tools", timeout, True)
            except Error as exc:
                vd.listing_failed(self._handle, exc)
            checks = vd.from_listing(self._handle, req, tools)
            tool = tk.listed(tools, req)
        else:
            tool = checks.tool if checks is not None else tk.cached_tool(self._handle, req)
        checked = vd.checked(req, checks)
        tk.with_task_param(self._handle, checked, tool, explicit=True)
        out = self._call(tk.keep_task(checked), timeout)
        return tk.start_handle(
            self._handle, out, checked.parse, tk.tool_name(req), tk.tool_arguments(req)
        )

    def _call(
        self,
        req: Request[R],
        timeout: float | None,
        on_progress: Callable[[Progress], object] | None = None,
    ) -> R:
        if on_progress is not None and not callable(on_progress):
            raise Error("argument", "on_progress", "on_progress must be callable")
        handle = self._handle
        seconds, op = rq.begin(handle, req, timeout)
        now = time.monotonic()
        deadline = now + seconds
        # A call the handler may pause, or progress restart, waits until its
        # max_total_timeout instead: the connection's clock ends it (rq.total_deadline).
        reset = rq.resets(handle, req)
        total = rq.total_deadline(handle, req, seconds, now, reset)
        until = deadline if total is None else total
        wants = on_progress is not None
        reply = SyncReply(wants)
        asks = wants or reset  # a progressToken is sent
        again = seconds if reset else None
        if op is None:  # nothing to record or propagate (no OpenTelemetry SDK)
            call = Call(req.method, req.params, deadline, reply, asks, total=total, reset=again)
            return req.parse(rq.call_blocking(handle, call, until, on_progress, req.method))
        raw = None
        try:
            call = Call(req.method, op.params, deadline, reply, asks, total=total, reset=again)
            raw = rq.call_blocking(handle, call, until, on_progress, req.method)
            value = req.parse(raw)
        except BaseException as exc:
            op.finish(raw, exc, reply.request_id, rounds=reply.rounds)
            raise
        op.finish(raw, None, reply.request_id, rounds=reply.rounds)
        return value


#: The methods only ``Client`` has: the client's lifecycle, state read without messaging,
#: the cache reads, notification subscriptions and credentials (they serve every front end).
CLIENT_ONLY: frozenset[str] = frozenset(
    {
        "start",
        "child_spec",
        "whereis",
        "close",
        "stop_all",
        "status",
        "server_info",
        "server_capabilities",
        "instructions",
        "stderr",
        "wait_for_state",
        "reconnect",
        "roots_changed",
        "authorize",
        "cached_tools",
        "cached_prompts",
        "cached_resources",
        "cached_resource_templates",
        "cached_skills",
        "tool",
        "prompt",
        "resource",
        "resource_template",
        "subscribe_notifications",
        "unsubscribe_notifications",
        "await_listening",
        "set_auth",
        "aio",
        "futures",
        "name",
    }
)
