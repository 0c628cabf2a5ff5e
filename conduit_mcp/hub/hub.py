"""``Hub``: every server of an ``mcpServers`` config behind one supervised client.

See docs/hub.md. The facade reads the board (lock-free) and calls the member ``Client``
that serves the name; the actors behind it are the hub supervisor (one client tree per
server, restarted with backoff) and the view actor (the single writer of the merged view).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Unpack

import pykka

from .. import request as rq
from .. import tree
from ..client import Client
from ..config import ClientOptions
from ..errors import Error
from ..otp.base import PING
from ..protocol.server_logs import LoggingLevel
from ..status import Status
from ..transports.http_spec import Http
from ..transports.inprocess_spec import InProcess
from ..transports.stdio_spec import Stdio
from ..types import (
    CallToolResult,
    CompleteResult,
    GetPromptResult,
    Progress,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Tool,
)
from . import levels, ready, routing, transports
from .board import Board, Member, ServerDown
from .config import HubConfig, ServerEntry, check_name, load_config, parse_entry
from .fronts import AsyncHub, FutureHub
from .names import Qualify, Unqualify, check_naming
from .notify import Subscription
from .ready import Servers
from .supervisor import AddMember, HubSupervisor, RemoveMember
from .view import Collision

__all__ = ["Hub"]

_counter = itertools.count(1)


class Hub:
    """Every server of a config behind one client; start it with :meth:`start`.

    >>> import sys, conduit_mcp as mcp
    >>> server = {"command": sys.executable, "args": ["-m", "conduit_mcp.testing"]}
    >>> config = {"mcpServers": {"a": server, "b": server, "gone": {"command": "/no/such"}}}
    >>> with mcp.Hub.start(config) as hub:
    ...     _ = hub.await_ready(timeout=20, servers=["a", "b"])
    ...     hub.call_tool("a.add", {"a": 1, "b": 2}).text, hub.tool("b.echo").name
    ...     try:
    ...         hub.call_tool("gone.add", {"a": 1, "b": 2})
    ...     except mcp.Error as e:
    ...         print(e.kind, e.reason)
    ('3', 'b.echo')
    unavailable server_not_ready

    Errors: every call raises :class:`~conduit_mcp.Error`: ``unavailable``/
    ``server_not_ready`` at once for a server that is not ready (``data``: ``server``,
    ``state``, ``reason``); ``argument``/``unknown_server``, ``unknown_tool``,
    ``unknown_prompt``, ``unknown_resource`` with the closest names (``data["closest"]``);
    and, from the member, every kind ``Client`` raises.
    """

    aio: AsyncHub
    """The same calls for asyncio."""
    futures: FutureHub
    """The same calls for Pykka actors (each returns a ``pykka.Future``)."""

    def __init__(self, board: Board, supervisor: pykka.ActorRef[Any], defaults: Any) -> None:
        self._board = board
        self._supervisor = supervisor
        self._defaults = defaults
        self.name = board.name
        self.aio = AsyncHub(board)
        self.futures = FutureHub(board)

    def __repr__(self) -> str:
        return f"<conduit_mcp.Hub {self.name!r} servers={list(self._board.order)}>"

    # -- lifecycle ----------------------------------------------------------------------------

    @classmethod
    def start(
        cls,
        config: HubConfig | str | os.PathLike[str] | Mapping[str, Any],
        *,
        separator: str = ".",
        qualify: Qualify | None = None,
        unqualify: Unqualify | None = None,
        name_pattern: str | None = None,
        on_server_down: ServerDown = "hide",
        on_authorize: Callable[[str, str], object] | None = None,
        max_restarts: int = 5,
        max_seconds: float = 60.0,
        restart_base: float = 0.5,
        restart_cap: float = 30.0,
        list_timeout: float = 30.0,
        environ: Mapping[str, str] | None = None,
        **options: Unpack[ClientOptions],
    ) -> Hub:
        """Start a client per server and the merged view; returns at once (no server is
        waited for: see :meth:`await_ready`).

        Args:
            config: a :class:`HubConfig`, a path, a JSON string or a mapping
                (:func:`~conduit_mcp.load_config`).
            separator: between the server's name and its tool's (``files.read``).
            qualify, unqualify: replace the naming (``unqualify`` must undo ``qualify``).
            name_pattern: qualified names must match it (``conduit_mcp.hub.MODEL_SAFE``);
                one that does not is left out of the view (reachable by tuple).
            on_server_down: ``"hide"`` a down server's items from the view, or ``"keep"``.
            on_authorize: ``on_authorize(server, url)`` for every OAuth entry.
            max_restarts, max_seconds: a member that gives up more often is left closed.
            restart_base, restart_cap: the full-jitter backoff of a member's restart.
            list_timeout: bounds one fetch of a member's lists.
            **options: client options for every member (an entry's ``"conduit"`` wins).

        Raises:
            Error: ``config`` (``servers.<name>.<key>``, or the option's name).
        """
        naming = check_naming(separator, qualify, unqualify, name_pattern)
        if on_server_down not in ("hide", "keep"):
            raise Error("config", "on_server_down", "on_server_down must be 'hide' or 'keep'")
        if not isinstance(max_restarts, int) or max_restarts < 0 or max_seconds <= 0:
            raise Error("config", "max_restarts", "need max_restarts >= 0 and max_seconds > 0")
        for key, value in (
            ("restart_base", restart_base),
            ("restart_cap", restart_cap),
            ("list_timeout", list_timeout),
        ):
            if not isinstance(value, (int, float)) or not value > 0:
                raise Error("config", key, f"option {key!r} must be a number > 0")
        if on_authorize is not None and not callable(on_authorize):
            raise Error("config", "on_authorize", "on_authorize must be a function (server, url)")
        cfg = (
            config
            if isinstance(config, HubConfig)
            else load_config(config, environ=environ, separator=separator)
        )
        board = Board(f"hub-{next(_counter)}", naming, on_server_down, float(list_timeout))
        defaults = _Defaults(dict(options), on_authorize, separator)
        members = [defaults.member(entry) for entry in cfg.servers.values()]
        supervisor = HubSupervisor.start(
            board,
            members,
            max_restarts=max_restarts,
            max_seconds=max_seconds,
            restart_base=restart_base,
            restart_cap=restart_cap,
        )
        try:
            supervisor.ask(PING, timeout=30.0)
        except (pykka.ActorDeadError, pykka.Timeout) as exc:
            for ref in (supervisor, board.view_ref):
                if ref is not None:
                    ref.stop(block=False)
            _stop_members(list(board.members.values()), 10.0)
            raise Error("unavailable", "start_failed", "the hub's actors failed to start") from exc
        return cls(board, supervisor, defaults)

    def stop(self, timeout: float = 10.0) -> None:
        """Stop every member (their servers are closed) and the hub's actors. Idempotent;
        never raises."""
        board = self._board
        if board.stopped:
            return
        board.stopped = True
        for subscription in list(board.subscriptions.values()):
            subscription.detach_all()
        try:
            self._supervisor.stop(block=True, timeout=timeout)
        except (pykka.Timeout, pykka.ActorDeadError):
            pass
        _stop_members(list(board.members.values()), timeout)

    close = stop

    def __enter__(self) -> Hub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # -- state --------------------------------------------------------------------------------

    def status(self) -> dict[str, Status]:
        """Each server's :class:`~conduit_mcp.Status`, in config order (read lock-free)."""
        return ready.status(self._board)

    def servers(self) -> tuple[str, ...]:
        """The servers' names, in config order."""
        return self._board.order

    def client(self, server: str) -> Any:
        """The member ``Client`` of ``server`` now (a restart makes a new one).

        Raises:
            Error: ``argument``/``unknown_server``; ``unavailable``/``server_not_ready`` while
                the hub waits to start it again.
        """
        found = self._board.members.get(server)
        if found is None:
            raise routing.unknown("unknown_server", "server", str(server), self._board.order)
        if found.client is None:
            routing.ready(found)
        return found.client

    def restarts(self) -> dict[str, int]:
        """How many times the hub started each server again after its client gave up."""
        members = self._board.members
        return {n: members[n].restarts for n in self._board.order if n in members}

    def server_of(self, client_name: str) -> str | None:
        """The server a member's client name belongs to (``HandlerContext.client_name``)."""
        return self._board.server_of(client_name)

    def await_ready(self, timeout: float = 30.0, servers: Servers = "any") -> dict[str, Status]:
        """Block until ``"any"`` server, ``"all"`` of them, or the named ones are ready with
        their lists in the view; returns :meth:`status`.

        Raises:
            Error: ``timeout``/``deadline`` naming the servers not ready and why;
                ``argument`` for a bad timeout or an unknown server name.
        """
        return ready.await_ready(self._board, timeout, servers)

    def wait_for(self, predicate: Callable[[Hub], bool], timeout: float = 5.0) -> None:
        """Block until ``predicate(hub)`` holds (checked after each change of the view or of
        the servers, and at least every 50 ms): e.g. until a tool a server announced is in
        the view. ``predicate`` runs in this thread.

        Raises:
            Error: ``timeout``/``deadline``; ``argument`` for a bad timeout.
        """
        seconds = rq.check_timeout(timeout, timeout)
        if not self._board.wait(lambda: predicate(self), seconds):
            raise Error("timeout", "deadline", f"the condition did not hold within {seconds} s")

    # -- the merged view: lock-free reads -----------------------------------------------------

    def tools(self) -> tuple[Tool, ...]:
        """Every ready server's tools, names qualified, in config order (a snapshot)."""
        return self._board.view.tools

    def tool(self, name: str) -> Tool | None:
        """The tool with this qualified name in the view, or None."""
        return self._board.view.tool_index.get(name)

    def prompts(self) -> tuple[Prompt, ...]:
        """Every ready server's prompts, names qualified."""
        return self._board.view.prompts

    def prompt(self, name: str) -> Prompt | None:
        """The prompt with this qualified name in the view, or None."""
        return self._board.view.prompt_index.get(name)

    def resources(self) -> tuple[Resource, ...]:
        """Every ready server's resources (URIs as listed)."""
        return self._board.view.resources

    def resource_templates(self) -> tuple[ResourceTemplate, ...]:
        """Every ready server's resource templates."""
        return self._board.view.resource_templates

    def route(self, name: str) -> tuple[str, str] | None:
        """``(server, name)`` of a qualified tool name in the view, or None."""
        return self._board.view.tool_routes.get(name)

    def resource_server(self, uri: str) -> str | None:
        """The server that listed ``uri``, or None."""
        return self._board.view.resource_routes.get(uri)

    def collisions(self) -> tuple[Collision, ...]:
        """Names two servers' items share in the view (the first server keeps the name)."""
        return self._board.view.collisions

    def misnamed(self) -> tuple[tuple[str, str], ...]:
        """``(server, name)`` of the items left out because their qualified name was
        refused (``name_pattern``, or an ``unqualify`` that does not undo ``qualify``)."""
        return self._board.view.misnamed

    # -- routed calls -----------------------------------------------------------------------------

    # BEGIN GENERATED requests
    # Generated by scripts/gen_fronts.py from scripts/fronts_hub.py, the one source of these
    # methods in Hub, AsyncHub and FutureHub (docs/architecture.md, "Adding a request method").
    # Do not edit: change the spec and run `.venv/bin/python scripts/gen_fronts.py` (`make lint`
    # fails while this is stale).

    def call_tool(
        self,
        name: str | tuple[str, str],
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None,
        on_progress: Callable[[Progress], object] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> CallToolResult:
        """Call a tool by its qualified name (``"files.read"``) or ``(server, name)``, on the
        server that lists it; its result (one with ``is_error`` is a result). ``on_progress``
        runs in this thread for each progress notification; if it raises, the request is
        cancelled and the exception propagates.

        Raises:
            Error: ``unavailable``/``server_not_ready`` at once for a server that is not ready
                (``data``: ``server``, ``state``, ``reason``); ``argument``/``unknown_server``,
                ``unknown_tool``, ``unknown_prompt`` or ``unknown_resource`` with the closest
                names (``data["closest"]``); ``closed``/``stopped`` after the hub's ``stop()``;
                then what the member ``Client`` raises (its "Errors").
        """
        client, tool = routing.tool(self._board, name)
        return client.call_tool(
            tool,
            arguments,
            timeout=timeout,
            max_total_timeout=max_total_timeout,
            reset_timeout_on_progress=reset_timeout_on_progress,
            on_progress=on_progress,
            meta=meta,
        )

    def get_prompt(
        self,
        name: str | tuple[str, str],
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None,
    ) -> GetPromptResult:
        """``prompts/get`` by qualified name or ``(server, name)``.

        Raises:
            Error: ``unavailable``/``server_not_ready`` at once for a server that is not ready
                (``data``: ``server``, ``state``, ``reason``); ``argument``/``unknown_server``,
                ``unknown_tool``, ``unknown_prompt`` or ``unknown_resource`` with the closest
                names (``data["closest"]``); ``closed``/``stopped`` after the hub's ``stop()``;
                then what the member ``Client`` raises (its "Errors").
        """
        client, prompt = routing.prompt(self._board, name)
        return client.get_prompt(
            prompt,
            arguments,
            timeout=timeout,
            max_total_timeout=max_total_timeout,
            reset_timeout_on_progress=reset_timeout_on_progress,
        )

    def read_resource(
        self,
        uri: str | tuple[str, str],
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None,
    ) -> ReadResourceResult:
        """``resources/read``, sent to the server that listed ``uri`` (the first in config order
        when two did), or to the server of ``(server, uri)``.

        Raises:
            Error: ``unavailable``/``server_not_ready`` at once for a server that is not ready
                (``data``: ``server``, ``state``, ``reason``); ``argument``/``unknown_server``,
                ``unknown_tool``, ``unknown_prompt`` or ``unknown_resource`` with the closest
                names (``data["closest"]``); ``closed``/``stopped`` after the hub's ``stop()``;
                then what the member ``Client`` raises (its "Errors").
        """
        client, target = routing.resource(self._board, uri)
        return client.read_resource(
            target,
            timeout=timeout,
            max_total_timeout=max_total_timeout,
            reset_timeout_on_progress=reset_timeout_on_progress,
        )

    def complete(
        self,
        ref: Mapping[str, Any],
        argument: Mapping[str, str],
        *,
        context: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> CompleteResult:
        """``completion/complete``: a ``ref/prompt`` names its prompt qualified, a
        ``ref/resource`` a template as a server listed it.

        Raises:
            Error: ``unavailable``/``server_not_ready`` at once for a server that is not ready
                (``data``: ``server``, ``state``, ``reason``); ``argument``/``unknown_server``,
                ``unknown_tool``, ``unknown_prompt`` or ``unknown_resource`` with the closest
                names (``data["closest"]``); ``closed``/``stopped`` after the hub's ``stop()``;
                then what the member ``Client`` raises (its "Errors").
        """
        client, own = routing.completion_ref(self._board, ref)
        return client.complete(own, argument, context=context, timeout=timeout)

    def request(
        self,
        server: str,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None,
        on_progress: Callable[[Progress], object] | None = None,
    ) -> dict[str, Any]:
        """Any request to one server by method name; its raw result (a dict). ``on_progress``
        runs in this thread for each progress notification; if it raises, the request is
        cancelled and the exception propagates.

        Raises:
            Error: ``unavailable``/``server_not_ready`` at once for a server that is not ready
                (``data``: ``server``, ``state``, ``reason``); ``argument``/``unknown_server``,
                ``unknown_tool``, ``unknown_prompt`` or ``unknown_resource`` with the closest
                names (``data["closest"]``); ``closed``/``stopped`` after the hub's ``stop()``;
                then what the member ``Client`` raises (its "Errors").
        """
        client = routing.member(self._board, server)
        return client.request(
            method,
            params,
            timeout=timeout,
            max_total_timeout=max_total_timeout,
            reset_timeout_on_progress=reset_timeout_on_progress,
            on_progress=on_progress,
        )

    def subscribe(self, uri: str | tuple[str, str], *, timeout: float | None = None) -> None:
        """Subscribe to updates of a resource at the server that listed it (or of
        ``(server, uri)``); its ``notifications/resources/updated`` reach the hub's subscribers
        tagged with that server.

        Raises:
            Error: ``unavailable``/``server_not_ready`` at once for a server that is not ready
                (``data``: ``server``, ``state``, ``reason``); ``argument``/``unknown_server``,
                ``unknown_tool``, ``unknown_prompt`` or ``unknown_resource`` with the closest
                names (``data["closest"]``); ``closed``/``stopped`` after the hub's ``stop()``;
                then what the member ``Client`` raises (its "Errors").
        """
        client, target = routing.resource(self._board, uri)
        client.subscribe(target, timeout=timeout)

    def unsubscribe(self, uri: str | tuple[str, str], *, timeout: float | None = None) -> None:
        """Undo :meth:`subscribe`.

        Raises:
            Error: ``unavailable``/``server_not_ready`` at once for a server that is not ready
                (``data``: ``server``, ``state``, ``reason``); ``argument``/``unknown_server``,
                ``unknown_tool``, ``unknown_prompt`` or ``unknown_resource`` with the closest
                names (``data["closest"]``); ``closed``/``stopped`` after the hub's ``stop()``;
                then what the member ``Client`` raises (its "Errors").
        """
        client, target = routing.resource(self._board, uri)
        client.unsubscribe(target, timeout=timeout)

    # END GENERATED requests

    # -- server logs --------------------------------------------------------------------------

    def set_logging_level(
        self, level: LoggingLevel, *, timeout: float | None = None
    ) -> dict[str, Error | None]:
        """Ask every server for its log messages at ``level`` and above (as
        ``Client.set_logging_level``), and keep that level for every member from now
        on: one that is connecting takes it when it is ready, and one the hub starts later (a
        restart, ``add_server``, ``reload``) starts with it, over its own ``log_level``
        option. The ready members are asked at once, together.

        Returns each server's outcome, in config order: None when it took the level, else
        the :class:`~conduit_mcp.Error` it gave: ``unavailable``/``server_not_ready`` for a
        server not ready now (the level is kept for it), ``unavailable``/``not_supported`` for
        a legacy server that declares no ``logging``, or what its call raised (``timeout``,
        ``closed``, ``transport``, ...).

        >>> import sys, conduit_mcp as mcp
        >>> server = {"command": sys.executable, "args": ["-m", "conduit_mcp.testing"]}
        >>> quiet = {**server, "args": [*server["args"], "--no-logging"]}
        >>> config = {"mcpServers": {"a": server, "b": quiet, "gone": {"command": "/no/such"}}}
        >>> with mcp.Hub.start(config, protocol="legacy") as hub:
        ...     _ = hub.await_ready(timeout=20, servers=["a", "b"])
        ...     for server, error in hub.set_logging_level("warning").items():
        ...         print(server, error and (error.kind, error.reason))
        a None
        b ('unavailable', 'not_supported')
        gone ('unavailable', 'server_not_ready')

        Raises:
            Error: ``argument``/``level`` for a level not one of the eight (nothing is kept),
                ``argument``/``timeout``; ``closed``/``stopped`` for a stopped hub.
        """
        targets = levels.keep(self._board, level, timeout)
        futures = [
            (name, client.futures.set_logging_level(level, timeout=timeout))
            for name, client in levels.asked(targets)
        ]
        return levels.outcomes(targets, levels.collect(futures, None))

    # -- notifications ------------------------------------------------------------------------

    def subscribe_notifications(
        self,
        subscriber: Any,
        methods: Iterable[str] | None = None,
        *,
        servers: Iterable[str] | None = None,
    ) -> None:
        """Deliver every member's server notifications (as ``Client.subscribe_notifications``)
        as :class:`~conduit_mcp.HubNotification` tagged with the server; ``servers`` limits
        it to those. Members the hub starts later (a restart, ``add_server``) deliver too.

        Raises:
            Error: ``argument``/``subscriber`` or ``methods``.
        """
        key = _key(subscriber)
        if key in self._board.subscriptions:
            self.unsubscribe_notifications(subscriber)
        subscription = Subscription(subscriber, methods, servers)
        board = self._board
        # Replaced whole: the supervisor reads it when it starts a member, without a lock.
        board.subscriptions = {**board.subscriptions, key: subscription}
        for name, found in board.members.items():
            if found.client is not None:
                subscription.attach(name, found.client)

    def unsubscribe_notifications(self, subscriber: Any) -> None:
        """Stop delivering to ``subscriber`` (no-op if it was not subscribed)."""
        board = self._board
        remaining = dict(board.subscriptions)
        subscription = remaining.pop(_key(subscriber), None)
        board.subscriptions = remaining
        if subscription is not None:
            subscription.detach_all()

    # -- change at run time -------------------------------------------------------------------

    def add_server(
        self,
        name: str,
        entry: Mapping[str, Any] | Stdio | Http | InProcess,
        timeout: float = 10.0,
        **options: Unpack[ClientOptions],
    ) -> None:
        """Start another server (a config entry, or ``Stdio``/``Http``/``Sse``/``InProcess``
        with ``options``);
        one already running under ``name`` is replaced (and stopped). Returns at once.

        Raises:
            Error: ``config``/``servers.<name>.<key>``.
        """
        check_name(name, self._defaults.separator)
        if isinstance(entry, (Stdio, Http, InProcess)):
            found = self._defaults.member_of(name, entry, dict(options))
        elif isinstance(entry, Mapping):
            if options:
                raise Error(
                    "config",
                    f"servers.{name}.conduit",
                    'give a config entry\'s options under its "conduit" key',
                )
            found = self._defaults.member(parse_entry(name, entry, os.environ))
        else:
            raise Error(
                "config",
                f"servers.{name}",
                "an entry is a config mapping, Stdio(...), Http(...), Sse(...) or InProcess(...)",
            )
        old = self._ask(AddMember(found), timeout)
        if old is not None:
            _stop_members([old], timeout)

    def remove_server(self, name: str, timeout: float = 10.0) -> None:
        """Stop the server ``name`` and take its items out of the view.

        Raises:
            Error: ``argument``/``unknown_server``.
        """
        if name not in self._board.members:
            raise routing.unknown("unknown_server", "server", name, self._board.order)
        old = self._ask(RemoveMember(name), timeout)
        if old is not None:
            _stop_members([old], timeout)

    def reload(
        self,
        config: HubConfig | str | os.PathLike[str] | Mapping[str, Any],
        timeout: float = 10.0,
        *,
        environ: Mapping[str, str] | None = None,
    ) -> dict[str, list[str]]:
        """Apply a new config: servers no longer in it stop, new ones start, changed ones
        restart; unchanged ones keep their connections. Returns what was done
        (``{"added": [...], "removed": [...], "restarted": [...], "kept": [...]}``).

        Raises:
            Error: ``config`` (nothing is changed then).
        """
        cfg = (
            config
            if isinstance(config, HubConfig)
            else load_config(config, environ=environ, separator=self._defaults.separator)
        )
        current = self._board.members
        new_members = {n: self._defaults.member(e) for n, e in cfg.servers.items()}
        done: dict[str, list[str]] = {"added": [], "removed": [], "restarted": [], "kept": []}
        stopping: list[Member] = []
        for name in list(current):
            if name not in new_members:
                old = self._ask(RemoveMember(name), timeout)
                if old is not None:
                    stopping.append(old)
                done["removed"].append(name)
        for name, found in new_members.items():
            old_member = current.get(name)
            if old_member is not None and old_member.entry == found.entry:
                done["kept"].append(name)
                continue
            old = self._ask(AddMember(found), timeout)
            if old is not None:
                stopping.append(old)
            done["restarted" if old_member is not None else "added"].append(name)
        _stop_members(stopping, timeout)
        return done

    def _ask(self, message: Any, timeout: float) -> Any:
        try:
            return self._supervisor.ask(message, timeout=timeout)
        except pykka.ActorDeadError:
            raise Error("closed", "stopped", "the hub is stopped") from None
        except pykka.Timeout:
            raise Error(
                "timeout", "deadline", f"the hub did not answer within {timeout} s"
            ) from None


def _key(subscriber: Any) -> Any:
    try:
        hash(subscriber)
        return subscriber
    except TypeError:
        return id(subscriber)


class _Defaults:
    """What every member gets: the hub's client options and OAuth callback."""

    def __init__(
        self,
        options: dict[str, Any],
        on_authorize: Callable[[str, str], object] | None,
        separator: str,
    ) -> None:
        from ..config import build_config

        options.setdefault("on_give_up", "stop")  # the hub restarts a member that gives up
        build_config(options)  # the hub's own options: config/<option> before any entry
        self.options = options
        self.on_authorize = on_authorize
        self.separator = separator

    def member(self, entry: ServerEntry) -> Member:
        check_name(entry.name, self.separator)
        spec, config = transports.build(entry, self.options, self.on_authorize)
        return Member(entry.name, entry, spec, _keyed(config, entry.name))

    def member_of(self, name: str, spec: Any, options: dict[str, Any]) -> Member:
        from ..config import build_config

        tree.check_transport(spec)
        try:
            config = build_config({**self.options, **options})
        except Error as exc:
            raise Error("config", f"servers.{name}.{exc.reason}", exc.message) from None
        return Member(name, None, spec, _keyed(config, name))


def _keyed(config: Any, server: str) -> Any:
    from dataclasses import replace

    from .telemetry import keyed_provider

    provider = keyed_provider(config.tracer_provider, server)
    return config if provider is None else replace(config, tracer_provider=provider)


def _stop_members(members: list[Member], timeout: float) -> None:
    """Stop member clients concurrently (``Client.stop_all``), bounded by ``timeout`` in all."""
    Client.stop_all([m.client for m in members if m.client is not None], timeout)
