"""The remote hub: a tenant's Hub on one or more hosts, with the Hub's methods on all three
front ends (``hub``, ``hub.aio``, ``hub.futures``; the routed calls rendered from
``scripts/fronts_cluster.py``).

A call is sent, as plain data, to the host that holds its server (the qualified name's
prefix, a ``(server, name)`` tuple's first part, a resource's owner in the hosts' views);
the caller's ``on_progress`` runs on the caller's side, fed by progress messages. Reads
(``tools()``, ``status()``, ...) ask the hosts for their views: one message per host.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import threading
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import replace
from typing import Any, cast

import pykka

from ..errors import Error
from ..hub.notify import HubNotification
from ..protocol.results import parse_page
from ..protocol.server_logs import LoggingLevel, check_level
from ..request import check_timeout
from ..status import Status
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
from . import protocol as p
from .channel import Channel, Sink

__all__ = ["AsyncRemoteHub", "FutureRemoteHub", "RemoteHub"]

#: A notification subscriber's queue on the caller's side (past it, notifications drop).
MAX_NOTES = 10_000


def _guard(args: Mapping[str, Any]) -> float:
    """How long a caller waits at most for an outcome: the host answers every call (its own
    deadline, or ``host_lost``), so this only bounds a wait on an engine that went silent."""
    longest = max(
        (
            float(v)
            for k in ("timeout", "max_total_timeout")
            if isinstance(v := args.get(k), (int, float))
        ),
        default=60.0,
    )
    return max(longest, 60.0) * 2 + 30.0


class _Core:
    """What the three front ends share: the hosts' channels and where each server is."""

    def __init__(
        self,
        tenant: str,
        channels: list[Channel],
        placement: dict[str, Channel],
        separator: str,
    ) -> None:
        self.tenant = tenant
        self.channels = channels
        self.placement = placement
        self.separator = separator
        self.stopped = False
        self.subscribers: dict[int, tuple[Any, Any, Any]] = {}
        self._notes: queue.Queue[HubNotification] = queue.Queue(MAX_NOTES)
        self._notifier: threading.Thread | None = None
        self._lock = threading.Lock()

    def channel_for(self, op: str, args: Mapping[str, Any]) -> Channel:
        if self.stopped:
            raise Error("closed", "stopped", "the cluster's hub was stopped")
        channels = self.channels
        if len(channels) == 1:
            return channels[0]
        server = self._server_of(op, args)
        return self.placement.get(server, channels[0]) if server is not None else channels[0]

    def _server_of(self, op: str, args: Mapping[str, Any]) -> str | None:
        if op == "request":
            server = args.get("server")
            return server if isinstance(server, str) else None
        if op == "complete":
            ref = args.get("ref")
            name = ref.get("name") if isinstance(ref, Mapping) else None
            return name.split(self.separator, 1)[0] if isinstance(name, str) else None
        key = (
            args.get("uri")
            if op in ("read_resource", "subscribe", "unsubscribe")
            else args.get("name")
        )
        if isinstance(key, tuple) and key:
            return str(key[0])
        if not isinstance(key, str):
            return None
        if op in ("read_resource", "subscribe", "unsubscribe"):
            for view in self.views():
                owner = view.get("owners", {}).get(key)
                if owner is not None:
                    return str(owner)
            return None
        return key.split(self.separator, 1)[0]

    def views(self) -> list[dict[str, Any]]:
        return [c.handle.views() for c in self.channels]

    def notify(self, note: dict[str, Any]) -> None:
        with contextlib.suppress(queue.Full):
            self._notes.put_nowait(HubNotification(note["server"], note["method"], note["params"]))

    def subscribe(self, subscriber: Any, methods: Any, servers: Any) -> None:
        if not (callable(subscriber) or isinstance(subscriber, (queue.Queue, queue.SimpleQueue))):
            raise Error(
                "argument",
                "subscriber",
                "a remote hub's subscriber is a queue.Queue or a callable taking one "
                "HubNotification (it runs in the hub's notifier thread, on the caller's side)",
            )
        for name, value in (("methods", methods), ("servers", servers)):
            if value is not None and (
                isinstance(value, str) or not all(isinstance(v, str) for v in value)
            ):
                raise Error("argument", name, f"{name} must be a list of strings or None")
        with self._lock:
            self.subscribers[id(subscriber)] = (
                subscriber,
                frozenset(methods) if methods is not None else None,
                frozenset(servers) if servers is not None else None,
            )
            if self._notifier is None:
                self._notifier = threading.Thread(
                    target=self._notify_loop,
                    name=f"conduit-cluster-notes-{self.tenant}",
                    daemon=True,
                )
                self._notifier.start()
        for channel in self.channels:
            channel.notes = self.notify
            channel.handle.notes(channel.caller, None, None)

    def _notify_loop(self) -> None:
        while not self.stopped:
            try:
                note = self._notes.get(timeout=1.0)
            except queue.Empty:
                continue
            for subscriber, methods, servers in list(self.subscribers.values()):
                if methods is not None and note.method not in methods:
                    continue
                if servers is not None and note.server not in servers:
                    continue
                try:
                    if callable(subscriber):
                        subscriber(note)
                    else:
                        subscriber.put_nowait(note)
                except Exception:  # a subscriber's failure is its own, never the hub's
                    pass


# -- sinks: how an outcome reaches each kind of caller -----------------------------------------


class _Waiter(Sink):
    __slots__ = ("q",)

    def __init__(self) -> None:
        self.q: queue.SimpleQueue[tuple[str, Any]] = queue.SimpleQueue()

    def ok(self, value: Any) -> None:
        self.q.put(("ok", value))

    def fail(self, error: Error) -> None:
        self.q.put(("error", error))

    def progress(self, value: Progress) -> None:
        self.q.put(("progress", value))


class _AsyncSink(Sink):
    __slots__ = ("future", "loop", "on_progress")

    def __init__(self, loop: asyncio.AbstractEventLoop, on_progress: Any) -> None:
        self.loop = loop
        self.future: asyncio.Future[Any] = loop.create_future()
        self.on_progress = on_progress

    def _set(self, value: Any, error: Error | None) -> None:
        def apply() -> None:
            if self.future.done():
                return
            if error is not None:
                self.future.set_exception(error)
            else:
                self.future.set_result(value)

        with contextlib.suppress(RuntimeError):  # the loop closed: nobody waits
            self.loop.call_soon_threadsafe(apply)

    def ok(self, value: Any) -> None:
        self._set(value, None)

    def fail(self, error: Error) -> None:
        self._set(None, error)

    def progress(self, value: Progress) -> None:
        if self.on_progress is not None:
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self.on_progress, value)


class _FutureSink(Sink):
    __slots__ = ("cid", "future", "on_progress")

    def __init__(self, on_progress: Any) -> None:
        self.future: pykka.ThreadingFuture[Any] = pykka.ThreadingFuture()
        self.on_progress = on_progress
        self.cid = 0

    def ok(self, value: Any) -> None:
        self.future.set(value)

    def fail(self, error: Error) -> None:
        self.future.set_exception((type(error), error, None))

    def progress(self, value: Progress) -> None:
        if self.on_progress is not None:
            params = {"progress": value.progress, "total": value.total, "message": value.message}
            with contextlib.suppress(pykka.ActorDeadError):
                self.on_progress.tell(("conduit_mcp.progress", self.cid, params))


def _check_progress(on_progress: Any, futures: bool) -> None:
    if on_progress is None:
        return
    if futures and not isinstance(on_progress, pykka.ActorRef):
        raise Error(
            "argument", "on_progress", "on the futures front end on_progress is a pykka.ActorRef"
        )
    if not futures and not callable(on_progress):
        raise Error("argument", "on_progress", "on_progress must be a callable taking a Progress")


# -- reads shared by the front ends -------------------------------------------------------------


def _items(kind: str, views: list[dict[str, Any]]) -> tuple[Any, ...]:
    out: list[Any] = []
    for view in views:
        for entry in view.get(kind, ()):
            if kind in ("tools", "prompts"):
                name, raw = entry
                page = parse_page(kind, {kind: [raw]})  # type: ignore[arg-type]
                out.extend(replace(item, name=name) for item in page.items)
            else:
                listed = "resourceTemplates" if kind == "resource_templates" else kind
                out.extend(parse_page(kind, {listed: [entry]}).items)  # type: ignore[arg-type]
    return tuple(out)


def _status(views: list[dict[str, Any]]) -> dict[str, Status]:
    found: dict[str, Status] = {}
    for view in views:
        for name, data in view.get("status", {}).items():
            found[name] = Status(**data)
    return found


def _await_ready(core: _Core, timeout: float, servers: Any) -> dict[str, Status]:
    if not isinstance(timeout, (int, float)) or timeout <= 0:
        raise Error("argument", "timeout", "timeout must be a number of seconds > 0")
    for channel in core.channels:
        wanted: Any = servers
        if isinstance(servers, (list, tuple)):
            wanted = [s for s in servers if core.placement.get(s) is channel]
            if not wanted:
                continue
        elif servers == "any" and channel is not core.channels[0]:
            continue
        answer = channel.handle.await_ready(float(timeout), wanted)
        if answer.get("error") is not None:
            raise p.error_of(answer["error"])
    return _status(core.views())


# -- set_logging_level: every host, each its own members -----------------------------------------

Levels = dict[str, Error | None]


def _levels_send(core: _Core, level: Any, timeout: Any, make: Callable[[], Sink]) -> list[Any]:
    """Check like the Hub (``argument``/``level``, ``timeout``; ``closed``/``stopped``), then
    send ``set_logging_level`` to every host (each applies it to its members of this
    tenant, and keeps it for them); per host ``(channel, cid, sink)`` or ``(channel, None,
    error)`` for one that took no message."""
    check_level(level)
    check_timeout(timeout, 1.0)
    if core.stopped:
        raise Error("closed", "stopped", "the cluster's hub was stopped")
    sent: list[Any] = []
    for channel in core.channels:
        channel.log_level = level  # kept: sent again to a host started again
        sink = make()
        try:
            cid = channel.send("set_logging_level", {"level": level, "timeout": timeout}, sink)
        except Error as exc:
            sent.append((channel, None, exc))
            continue
        sent.append((channel, cid, sink))
    return sent


def _levels_merge(core: _Core, answers: Mapping[int, Any]) -> Levels:
    """Each server's outcome in config order, from its host's answer (a host that failed:
    its error, for each of its servers)."""
    out: Levels = {}
    for name, channel in core.placement.items():
        got = answers.get(id(channel))
        if isinstance(got, Error):
            out[name] = got
        elif isinstance(got, Mapping) and name in got:
            out[name] = got[name]
        else:
            out[name] = Error(
                "protocol", "host_reply", f"host {channel.name!r} sent no outcome for {name!r}"
            )
    return out


def _silent(channel: Channel) -> Error:
    return Error("timeout", "host_silent", f"host {channel.name!r} sent no outcome")


class RemoteHub:
    """A tenant's hub on its hosts, from :meth:`conduit_mcp.Cluster.hub`: the Hub's calls,
    reads and waits, with the same parameters; values cross as plain data.

    Errors: what :class:`~conduit_mcp.Hub` raises, and ``unavailable``/``host_lost`` for a
    call in flight on a host that died (never sent again), ``unavailable``/``host_down``
    once a host will not return.
    """

    aio: AsyncRemoteHub
    """The same calls for asyncio."""
    futures: FutureRemoteHub
    """The same calls for Pykka actors (each returns a ``pykka.Future``)."""

    def __init__(self, core: _Core, on_stop: Callable[[RemoteHub], None] | None = None) -> None:
        self._core = core
        self._on_stop = on_stop
        self.tenant = core.tenant
        self.aio = AsyncRemoteHub(core)
        self.futures = FutureRemoteHub(core)

    def __repr__(self) -> str:
        return f"<conduit_mcp.cluster.RemoteHub {self.tenant!r} hosts={self.hosts()}>"

    def __enter__(self) -> RemoteHub:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _call(self, op: str, args: dict[str, Any], on_progress: Any) -> Any:
        _check_progress(on_progress, futures=False)
        channel = self._core.channel_for(op, args)
        waiter = _Waiter()
        cid = channel.send(op, args, waiter, progress=on_progress is not None, inline=True)
        guard = _guard(args)
        while True:
            try:
                kind, value = waiter.q.get(timeout=guard)
            except queue.Empty:
                channel.cancel(cid)
                raise Error(
                    "timeout",
                    "host_silent",
                    f"host {channel.name!r} sent no outcome in {guard:.0f} s",
                ) from None
            if kind == "ok":
                return value
            if kind == "error":
                raise value
            try:
                on_progress(value)
            except BaseException:
                channel.cancel(cid)
                raise

    # -- reads --------------------------------------------------------------------------------

    def hosts(self) -> tuple[str, ...]:
        """The names of this tenant's hosts (named actors: another caller finds them)."""
        return tuple(c.name for c in self._core.channels)

    def servers(self) -> tuple[str, ...]:
        """The servers' names, in config order."""
        return tuple(self._core.placement)

    def host_of(self, server: str) -> str | None:
        """The host that holds ``server``."""
        found = self._core.placement.get(server)
        return found.name if found is not None else None

    def status(self) -> dict[str, Status]:
        """Each server's :class:`~conduit_mcp.Status` (one message per host)."""
        return _status(self._core.views())

    def restarts(self) -> dict[str, int]:
        """Per server, how many times its hub member was started again on its host."""
        found: dict[str, int] = {}
        for view in self._core.views():
            found.update(view.get("restarts", {}))
        return found

    def tools(self) -> tuple[Tool, ...]:
        """Every ready server's tools, with their qualified names."""
        return _items("tools", self._core.views())

    def tool(self, name: str) -> Tool | None:
        """One tool by qualified name (None when absent)."""
        return next((t for t in self.tools() if t.name == name), None)

    def prompts(self) -> tuple[Prompt, ...]:
        """Every ready server's prompts, with their qualified names."""
        return _items("prompts", self._core.views())

    def prompt(self, name: str) -> Prompt | None:
        """One prompt by qualified name (None when absent)."""
        return next((t for t in self.prompts() if t.name == name), None)

    def resources(self) -> tuple[Resource, ...]:
        """Every ready server's resources."""
        return _items("resources", self._core.views())

    def resource_templates(self) -> tuple[ResourceTemplate, ...]:
        """Every ready server's resource templates."""
        return _items("resource_templates", self._core.views())

    def await_ready(self, timeout: float = 30.0, servers: Any = "any") -> dict[str, Status]:
        """Block until ``"any"`` server (of the first host), ``"all"`` of them, or the named
        ones are ready on their hosts; returns :meth:`status`.

        Raises:
            Error: ``timeout``/``deadline`` naming the servers not ready and why.
        """
        return _await_ready(self._core, timeout, servers)

    def set_logging_level(
        self, level: LoggingLevel, *, timeout: float | None = None
    ) -> dict[str, Error | None]:
        """As ``Hub.set_logging_level``: every host asks its members of this tenant for
        their servers' log messages at ``level`` and above, and keeps the level for them
        (members still connecting, restarted later, and a host started again). The hosts
        are asked together; each server's outcome, in config order: None when it took the
        level, else its :class:`~conduit_mcp.Error` (``unavailable``/``server_not_ready``,
        ``not_supported``, ...; ``unavailable``/``host_lost`` for each server of a host that
        died under the message).

        Raises:
            Error: ``argument``/``level`` (nothing is sent), ``argument``/``timeout``;
                ``closed``/``stopped`` after the hub's ``stop()``.
        """
        sent = _levels_send(self._core, level, timeout, _Waiter)
        deadline = time.monotonic() + _guard({"timeout": timeout})
        answers: dict[int, Any] = {}
        for channel, cid, sink in sent:
            if cid is None:
                answers[id(channel)] = sink
                continue
            try:
                _kind, value = sink.q.get(timeout=max(0.0, deadline - time.monotonic()))
            except queue.Empty:
                channel.cancel(cid)
                value = _silent(channel)
            answers[id(channel)] = value
        return _levels_merge(self._core, answers)

    def subscribe_notifications(
        self, subscriber: Any, methods: list[str] | None = None, servers: list[str] | None = None
    ) -> None:
        """Deliver the servers' notifications as :class:`~conduit_mcp.HubNotification` to a
        ``queue.Queue`` or a callable (run in this hub's notifier thread, on the caller's
        side: nothing callable crosses to a host)."""
        self._core.subscribe(subscriber, methods, servers)

    def unsubscribe_notifications(self, subscriber: Any) -> None:
        """Stop delivering to ``subscriber``."""
        self._core.subscribers.pop(id(subscriber), None)

    def stop(self) -> None:
        """Stop this caller's channels (its calls on the hosts are cancelled) and, when this
        caller started them, the hosts. Idempotent."""
        if self._core.stopped:
            return
        self._core.stopped = True
        for channel in self._core.channels:
            channel.close()
        if self._on_stop is not None:
            self._on_stop(self)

    close = stop

    # -- routed calls -------------------------------------------------------------------------

    # BEGIN GENERATED requests
    # Generated by scripts/gen_fronts.py from scripts/fronts_cluster.py, the one source of these
    # methods in RemoteHub, AsyncRemoteHub and FutureRemoteHub (docs/architecture.md, "Adding a
    # request method"). Do not edit: change the spec and run `.venv/bin/python
    # scripts/gen_fronts.py` (`make lint` fails while this is stale).

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
                then what the member ``Client`` raises (its "Errors");
                ``unavailable``/``host_lost`` when the host's process died with the call in
                flight (it may have run: never sent again), ``unavailable``/``host_down`` when
                the host will not come back; ``argument`` for an argument that cannot cross to a
                host (only JSON values do).
        """
        return cast(
            "CallToolResult",
            self._call(
                "call_tool",
                {
                    "name": name,
                    "arguments": arguments,
                    "timeout": timeout,
                    "max_total_timeout": max_total_timeout,
                    "reset_timeout_on_progress": reset_timeout_on_progress,
                    "meta": meta,
                },
                on_progress,
            ),
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
                then what the member ``Client`` raises (its "Errors");
                ``unavailable``/``host_lost`` when the host's process died with the call in
                flight (it may have run: never sent again), ``unavailable``/``host_down`` when
                the host will not come back; ``argument`` for an argument that cannot cross to a
                host (only JSON values do).
        """
        return cast(
            "GetPromptResult",
            self._call(
                "get_prompt",
                {
                    "name": name,
                    "arguments": arguments,
                    "timeout": timeout,
                    "max_total_timeout": max_total_timeout,
                    "reset_timeout_on_progress": reset_timeout_on_progress,
                },
                None,
            ),
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
                then what the member ``Client`` raises (its "Errors");
                ``unavailable``/``host_lost`` when the host's process died with the call in
                flight (it may have run: never sent again), ``unavailable``/``host_down`` when
                the host will not come back; ``argument`` for an argument that cannot cross to a
                host (only JSON values do).
        """
        return cast(
            "ReadResourceResult",
            self._call(
                "read_resource",
                {
                    "uri": uri,
                    "timeout": timeout,
                    "max_total_timeout": max_total_timeout,
                    "reset_timeout_on_progress": reset_timeout_on_progress,
                },
                None,
            ),
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
                then what the member ``Client`` raises (its "Errors");
                ``unavailable``/``host_lost`` when the host's process died with the call in
                flight (it may have run: never sent again), ``unavailable``/``host_down`` when
                the host will not come back; ``argument`` for an argument that cannot cross to a
                host (only JSON values do).
        """
        return cast(
            "CompleteResult",
            self._call(
                "complete",
                {"ref": ref, "argument": argument, "context": context, "timeout": timeout},
                None,
            ),
        )

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
                then what the member ``Client`` raises (its "Errors");
                ``unavailable``/``host_lost`` when the host's process died with the call in
                flight (it may have run: never sent again), ``unavailable``/``host_down`` when
                the host will not come back; ``argument`` for an argument that cannot cross to a
                host (only JSON values do).
        """
        return cast(
            "dict[str, Any]",
            self._call(
                "request",
                {
                    "server": server,
                    "method": method,
                    "params": params,
                    "timeout": timeout,
                    "max_total_timeout": max_total_timeout,
                    "reset_timeout_on_progress": reset_timeout_on_progress,
                },
                on_progress,
            ),
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
                then what the member ``Client`` raises (its "Errors");
                ``unavailable``/``host_lost`` when the host's process died with the call in
                flight (it may have run: never sent again), ``unavailable``/``host_down`` when
                the host will not come back; ``argument`` for an argument that cannot cross to a
                host (only JSON values do).
        """
        cast("None", self._call("subscribe", {"uri": uri, "timeout": timeout}, None))

    def unsubscribe(self, uri: str | tuple[str, str], *, timeout: float | None = None) -> None:
        """Undo :meth:`subscribe`.

        Raises:
            Error: ``unavailable``/``server_not_ready`` at once for a server that is not ready
                (``data``: ``server``, ``state``, ``reason``); ``argument``/``unknown_server``,
                ``unknown_tool``, ``unknown_prompt`` or ``unknown_resource`` with the closest
                names (``data["closest"]``); ``closed``/``stopped`` after the hub's ``stop()``;
                then what the member ``Client`` raises (its "Errors");
                ``unavailable``/``host_lost`` when the host's process died with the call in
                flight (it may have run: never sent again), ``unavailable``/``host_down`` when
                the host will not come back; ``argument`` for an argument that cannot cross to a
                host (only JSON values do).
        """
        cast("None", self._call("unsubscribe", {"uri": uri, "timeout": timeout}, None))

    # END GENERATED requests


class AsyncRemoteHub:
    """:class:`RemoteHub`'s calls for asyncio (``await hub.aio.call_tool(...)``)."""

    def __init__(self, core: _Core) -> None:
        self._core = core

    def __repr__(self) -> str:
        return f"<conduit_mcp.cluster.AsyncRemoteHub {self._core.tenant!r}>"

    async def await_ready(self, timeout: float = 30.0, servers: Any = "any") -> dict[str, Status]:
        """As ``RemoteHub.await_ready``; the loop runs on while it waits (in a worker thread)."""
        return await asyncio.to_thread(_await_ready, self._core, timeout, servers)

    async def set_logging_level(
        self, level: LoggingLevel, *, timeout: float | None = None
    ) -> dict[str, Error | None]:
        """As ``RemoteHub.set_logging_level``: the hosts are asked together, awaited on
        this loop.

        Raises:
            Error: ``argument``/``level`` or ``timeout``; ``closed``/``stopped``.
        """
        loop = asyncio.get_running_loop()
        sent = _levels_send(self._core, level, timeout, lambda: _AsyncSink(loop, None))
        deadline = loop.time() + _guard({"timeout": timeout})
        answers: dict[int, Any] = {}
        try:
            for channel, cid, sink in sent:
                if cid is None:
                    answers[id(channel)] = sink
                    continue
                try:
                    # asyncio.timeout, not wait_for (which on Python 3.11 can lose a cancel
                    # that comes as the answer does: aio.py, _list_all)
                    async with asyncio.timeout(max(0.0, deadline - loop.time())):
                        answers[id(channel)] = await asyncio.shield(sink.future)
                except Error as exc:
                    answers[id(channel)] = exc
                except TimeoutError:
                    channel.cancel(cid)
                    answers[id(channel)] = _silent(channel)
        except asyncio.CancelledError:
            for channel, cid, _ in sent:
                if cid is not None:
                    channel.cancel(cid)
            raise
        return _levels_merge(self._core, answers)

    async def _call(self, op: str, args: dict[str, Any], on_progress: Any) -> Any:
        _check_progress(on_progress, futures=False)
        channel = self._core.channel_for(op, args)
        sink = _AsyncSink(asyncio.get_running_loop(), on_progress)
        cid = channel.send(op, args, sink, progress=on_progress is not None)
        try:
            async with asyncio.timeout(_guard(args)):  # not wait_for: see set_logging_level
                return await asyncio.shield(sink.future)
        except asyncio.CancelledError:
            channel.cancel(cid)
            raise
        except TimeoutError:
            channel.cancel(cid)
            raise Error(
                "timeout", "host_silent", f"host {channel.name!r} sent no outcome"
            ) from None

    # BEGIN GENERATED requests
    # Generated by scripts/gen_fronts.py from scripts/fronts_cluster.py, the one source of these
    # methods in RemoteHub, AsyncRemoteHub and FutureRemoteHub (docs/architecture.md, "Adding a
    # request method"). Do not edit: change the spec and run `.venv/bin/python
    # scripts/gen_fronts.py` (`make lint` fails while this is stale).

    async def call_tool(
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
        runs on this loop for each progress notification (an exception it raises goes to the
        loop's exception handler).

        Raises:
            Error: ``unavailable``/``server_not_ready`` at once for a server that is not ready
                (``data``: ``server``, ``state``, ``reason``); ``argument``/``unknown_server``,
                ``unknown_tool``, ``unknown_prompt`` or ``unknown_resource`` with the closest
                names (``data["closest"]``); ``closed``/``stopped`` after the hub's ``stop()``;
                then what the member ``Client`` raises (its "Errors");
                ``unavailable``/``host_lost`` when the host's process died with the call in
                flight (it may have run: never sent again), ``unavailable``/``host_down`` when
                the host will not come back; ``argument`` for an argument that cannot cross to a
                host (only JSON values do). Cancelling the awaiting task gives the call up (a
                request is cancelled at the server).
        """
        return await cast(
            "Awaitable[CallToolResult]",
            self._call(
                "call_tool",
                {
                    "name": name,
                    "arguments": arguments,
                    "timeout": timeout,
                    "max_total_timeout": max_total_timeout,
                    "reset_timeout_on_progress": reset_timeout_on_progress,
                    "meta": meta,
                },
                on_progress,
            ),
        )

    async def get_prompt(
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
                then what the member ``Client`` raises (its "Errors");
                ``unavailable``/``host_lost`` when the host's process died with the call in
                flight (it may have run: never sent again), ``unavailable``/``host_down`` when
                the host will not come back; ``argument`` for an argument that cannot cross to a
                host (only JSON values do). Cancelling the awaiting task gives the call up (a
                request is cancelled at the server).
        """
        return await cast(
            "Awaitable[GetPromptResult]",
            self._call(
                "get_prompt",
                {
                    "name": name,
                    "arguments": arguments,
                    "timeout": timeout,
                    "max_total_timeout": max_total_timeout,
                    "reset_timeout_on_progress": reset_timeout_on_progress,
                },
                None,
            ),
        )

    async def read_resource(
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
                then what the member ``Client`` raises (its "Errors");
                ``unavailable``/``host_lost`` when the host's process died with the call in
                flight (it may have run: never sent again), ``unavailable``/``host_down`` when
                the host will not come back; ``argument`` for an argument that cannot cross to a
                host (only JSON values do). Cancelling the awaiting task gives the call up (a
                request is cancelled at the server).
        """
        return await cast(
            "Awaitable[ReadResourceResult]",
            self._call(
                "read_resource",
                {
                    "uri": uri,
                    "timeout": timeout,
                    "max_total_timeout": max_total_timeout,
                    "reset_timeout_on_progress": reset_timeout_on_progress,
                },
                None,
            ),
        )

    async def complete(
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
                then what the member ``Client`` raises (its "Errors");
                ``unavailable``/``host_lost`` when the host's process died with the call in
                flight (it may have run: never sent again), ``unavailable``/``host_down`` when
                the host will not come back; ``argument`` for an argument that cannot cross to a
                host (only JSON values do). Cancelling the awaiting task gives the call up (a
                request is cancelled at the server).
        """
        return await cast(
            "Awaitable[CompleteResult]",
            self._call(
                "complete",
                {"ref": ref, "argument": argument, "context": context, "timeout": timeout},
                None,
            ),
        )

    async def request(
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
        runs on this loop for each progress notification (an exception it raises goes to the
        loop's exception handler).

        Raises:
            Error: ``unavailable``/``server_not_ready`` at once for a server that is not ready
                (``data``: ``server``, ``state``, ``reason``); ``argument``/``unknown_server``,
                ``unknown_tool``, ``unknown_prompt`` or ``unknown_resource`` with the closest
                names (``data["closest"]``); ``closed``/``stopped`` after the hub's ``stop()``;
                then what the member ``Client`` raises (its "Errors");
                ``unavailable``/``host_lost`` when the host's process died with the call in
                flight (it may have run: never sent again), ``unavailable``/``host_down`` when
                the host will not come back; ``argument`` for an argument that cannot cross to a
                host (only JSON values do). Cancelling the awaiting task gives the call up (a
                request is cancelled at the server).
        """
        return await cast(
            "Awaitable[dict[str, Any]]",
            self._call(
                "request",
                {
                    "server": server,
                    "method": method,
                    "params": params,
                    "timeout": timeout,
                    "max_total_timeout": max_total_timeout,
                    "reset_timeout_on_progress": reset_timeout_on_progress,
                },
                on_progress,
            ),
        )

    async def subscribe(self, uri: str | tuple[str, str], *, timeout: float | None = None) -> None:
        """Subscribe to updates of a resource at the server that listed it (or of
        ``(server, uri)``); its ``notifications/resources/updated`` reach the hub's subscribers
        tagged with that server.

        Raises:
            Error: ``unavailable``/``server_not_ready`` at once for a server that is not ready
                (``data``: ``server``, ``state``, ``reason``); ``argument``/``unknown_server``,
                ``unknown_tool``, ``unknown_prompt`` or ``unknown_resource`` with the closest
                names (``data["closest"]``); ``closed``/``stopped`` after the hub's ``stop()``;
                then what the member ``Client`` raises (its "Errors");
                ``unavailable``/``host_lost`` when the host's process died with the call in
                flight (it may have run: never sent again), ``unavailable``/``host_down`` when
                the host will not come back; ``argument`` for an argument that cannot cross to a
                host (only JSON values do). Cancelling the awaiting task gives the call up (a
                request is cancelled at the server).
        """
        await cast(
            "Awaitable[None]", self._call("subscribe", {"uri": uri, "timeout": timeout}, None)
        )

    async def unsubscribe(
        self, uri: str | tuple[str, str], *, timeout: float | None = None
    ) -> None:
        """Undo :meth:`subscribe`.

        Raises:
            Error: ``unavailable``/``server_not_ready`` at once for a server that is not ready
                (``data``: ``server``, ``state``, ``reason``); ``argument``/``unknown_server``,
                ``unknown_tool``, ``unknown_prompt`` or ``unknown_resource`` with the closest
                names (``data["closest"]``); ``closed``/``stopped`` after the hub's ``stop()``;
                then what the member ``Client`` raises (its "Errors");
                ``unavailable``/``host_lost`` when the host's process died with the call in
                flight (it may have run: never sent again), ``unavailable``/``host_down`` when
                the host will not come back; ``argument`` for an argument that cannot cross to a
                host (only JSON values do). Cancelling the awaiting task gives the call up (a
                request is cancelled at the server).
        """
        await cast(
            "Awaitable[None]", self._call("unsubscribe", {"uri": uri, "timeout": timeout}, None)
        )

    # END GENERATED requests


class FutureRemoteHub:
    """:class:`RemoteHub`'s calls for Pykka actors: each returns a ``pykka.Future``."""

    def __init__(self, core: _Core) -> None:
        self._core = core

    def __repr__(self) -> str:
        return f"<conduit_mcp.cluster.FutureRemoteHub {self._core.tenant!r}>"

    def await_ready(
        self, timeout: float = 30.0, servers: Any = "any"
    ) -> pykka.Future[dict[str, Status]]:
        """As ``RemoteHub.await_ready``; the future is set from a worker thread."""
        future: pykka.ThreadingFuture[dict[str, Status]] = pykka.ThreadingFuture()

        def run() -> None:
            try:
                future.set(_await_ready(self._core, timeout, servers))
            except Error as exc:
                future.set_exception((type(exc), exc, None))

        threading.Thread(target=run, name="conduit-cluster-ready", daemon=True).start()
        return future

    def set_logging_level(
        self, level: LoggingLevel, *, timeout: float | None = None
    ) -> pykka.Future[dict[str, Error | None]]:
        """As ``RemoteHub.set_logging_level``: the hosts are asked at once; ``get()``
        collects their outcomes (in the thread that calls it).

        Raises:
            Error: at once ``argument``/``level`` or ``timeout``, ``closed``/``stopped``.
        """
        core = self._core
        sent = _levels_send(core, level, timeout, lambda: _FutureSink(None))
        guard = _guard({"timeout": timeout})

        def collect(wait: float | None) -> dict[str, Error | None]:
            deadline = time.monotonic() + (guard if wait is None else wait)
            answers: dict[int, Any] = {}
            for channel, cid, sink in sent:
                if cid is None:
                    answers[id(channel)] = sink
                    continue
                try:
                    answers[id(channel)] = sink.future.get(
                        timeout=max(0.0, deadline - time.monotonic())
                    )
                except Error as exc:
                    answers[id(channel)] = exc
                except pykka.Timeout:
                    if wait is not None:
                        raise  # the caller's own get(timeout=...): as any pykka future's
                    channel.cancel(cid)
                    answers[id(channel)] = _silent(channel)
            return _levels_merge(core, answers)

        out: pykka.ThreadingFuture[dict[str, Error | None]] = pykka.ThreadingFuture()
        out.set_get_hook(collect)
        return out

    def _call(self, op: str, args: dict[str, Any], on_progress: Any) -> pykka.Future[Any]:
        _check_progress(on_progress, futures=True)
        channel = self._core.channel_for(op, args)
        sink = _FutureSink(on_progress)
        sink.cid = channel.send(op, args, sink, progress=on_progress is not None)
        return sink.future

    # BEGIN GENERATED requests
    # Generated by scripts/gen_fronts.py from scripts/fronts_cluster.py, the one source of these
    # methods in RemoteHub, AsyncRemoteHub and FutureRemoteHub (docs/architecture.md, "Adding a
    # request method"). Do not edit: change the spec and run `.venv/bin/python
    # scripts/gen_fronts.py` (`make lint` fails while this is stale).

    def call_tool(
        self,
        name: str | tuple[str, str],
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None,
        on_progress: pykka.ActorRef[Any] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> pykka.Future[CallToolResult]:
        """Call a tool by its qualified name (``"files.read"``) or ``(server, name)``, on the
        server that lists it; its result (one with ``is_error`` is a result). ``on_progress`` is
        a ``pykka.ActorRef``, told ``("conduit_mcp.progress", request_id, params)`` for each
        progress notification.

        Raises:
            Error: at once ``argument`` (a value that cannot cross) or ``closed``; from
                ``get()``: ``unavailable``/``server_not_ready`` at once for a server that is not
                ready (``data``: ``server``, ``state``, ``reason``);
                ``argument``/``unknown_server``, ``unknown_tool``, ``unknown_prompt`` or
                ``unknown_resource`` with the closest names (``data["closest"]``);
                ``closed``/``stopped`` after the hub's ``stop()``; then what the member
                ``Client`` raises (its "Errors"); ``unavailable``/``host_lost`` when the host's
                process died with the call in flight (it may have run: never sent again),
                ``unavailable``/``host_down`` when the host will not come back; ``argument`` for
                an argument that cannot cross to a host (only JSON values do).
        """
        return cast(
            "pykka.Future[CallToolResult]",
            self._call(
                "call_tool",
                {
                    "name": name,
                    "arguments": arguments,
                    "timeout": timeout,
                    "max_total_timeout": max_total_timeout,
                    "reset_timeout_on_progress": reset_timeout_on_progress,
                    "meta": meta,
                },
                on_progress,
            ),
        )

    def get_prompt(
        self,
        name: str | tuple[str, str],
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None,
    ) -> pykka.Future[GetPromptResult]:
        """``prompts/get`` by qualified name or ``(server, name)``.

        Raises:
            Error: at once ``argument`` (a value that cannot cross) or ``closed``; from
                ``get()``: ``unavailable``/``server_not_ready`` at once for a server that is not
                ready (``data``: ``server``, ``state``, ``reason``);
                ``argument``/``unknown_server``, ``unknown_tool``, ``unknown_prompt`` or
                ``unknown_resource`` with the closest names (``data["closest"]``);
                ``closed``/``stopped`` after the hub's ``stop()``; then what the member
                ``Client`` raises (its "Errors"); ``unavailable``/``host_lost`` when the host's
                process died with the call in flight (it may have run: never sent again),
                ``unavailable``/``host_down`` when the host will not come back; ``argument`` for
                an argument that cannot cross to a host (only JSON values do).
        """
        return cast(
            "pykka.Future[GetPromptResult]",
            self._call(
                "get_prompt",
                {
                    "name": name,
                    "arguments": arguments,
                    "timeout": timeout,
                    "max_total_timeout": max_total_timeout,
                    "reset_timeout_on_progress": reset_timeout_on_progress,
                },
                None,
            ),
        )

    def read_resource(
        self,
        uri: str | tuple[str, str],
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None,
    ) -> pykka.Future[ReadResourceResult]:
        """``resources/read``, sent to the server that listed ``uri`` (the first in config order
        when two did), or to the server of ``(server, uri)``.

        Raises:
            Error: at once ``argument`` (a value that cannot cross) or ``closed``; from
                ``get()``: ``unavailable``/``server_not_ready`` at once for a server that is not
                ready (``data``: ``server``, ``state``, ``reason``);
                ``argument``/``unknown_server``, ``unknown_tool``, ``unknown_prompt`` or
                ``unknown_resource`` with the closest names (``data["closest"]``);
                ``closed``/``stopped`` after the hub's ``stop()``; then what the member
                ``Client`` raises (its "Errors"); ``unavailable``/``host_lost`` when the host's
                process died with the call in flight (it may have run: never sent again),
                ``unavailable``/``host_down`` when the host will not come back; ``argument`` for
                an argument that cannot cross to a host (only JSON values do).
        """
        return cast(
            "pykka.Future[ReadResourceResult]",
            self._call(
                "read_resource",
                {
                    "uri": uri,
                    "timeout": timeout,
                    "max_total_timeout": max_total_timeout,
                    "reset_timeout_on_progress": reset_timeout_on_progress,
                },
                None,
            ),
        )

    def complete(
        self,
        ref: Mapping[str, Any],
        argument: Mapping[str, str],
        *,
        context: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> pykka.Future[CompleteResult]:
        """``completion/complete``: a ``ref/prompt`` names its prompt qualified, a
        ``ref/resource`` a template as a server listed it.

        Raises:
            Error: at once ``argument`` (a value that cannot cross) or ``closed``; from
                ``get()``: ``unavailable``/``server_not_ready`` at once for a server that is not
                ready (``data``: ``server``, ``state``, ``reason``);
                ``argument``/``unknown_server``, ``unknown_tool``, ``unknown_prompt`` or
                ``unknown_resource`` with the closest names (``data["closest"]``);
                ``closed``/``stopped`` after the hub's ``stop()``; then what the member
                ``Client`` raises (its "Errors"); ``unavailable``/``host_lost`` when the host's
                process died with the call in flight (it may have run: never sent again),
                ``unavailable``/``host_down`` when the host will not come back; ``argument`` for
                an argument that cannot cross to a host (only JSON values do).
        """
        return cast(
            "pykka.Future[CompleteResult]",
            self._call(
                "complete",
                {"ref": ref, "argument": argument, "context": context, "timeout": timeout},
                None,
            ),
        )

    def request(
        self,
        server: str,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None,
        on_progress: pykka.ActorRef[Any] | None = None,
    ) -> pykka.Future[dict[str, Any]]:
        """Any request to one server by method name; its raw result (a dict). ``on_progress`` is
        a ``pykka.ActorRef``, told ``("conduit_mcp.progress", request_id, params)`` for each
        progress notification.

        Raises:
            Error: at once ``argument`` (a value that cannot cross) or ``closed``; from
                ``get()``: ``unavailable``/``server_not_ready`` at once for a server that is not
                ready (``data``: ``server``, ``state``, ``reason``);
                ``argument``/``unknown_server``, ``unknown_tool``, ``unknown_prompt`` or
                ``unknown_resource`` with the closest names (``data["closest"]``);
                ``closed``/``stopped`` after the hub's ``stop()``; then what the member
                ``Client`` raises (its "Errors"); ``unavailable``/``host_lost`` when the host's
                process died with the call in flight (it may have run: never sent again),
                ``unavailable``/``host_down`` when the host will not come back; ``argument`` for
                an argument that cannot cross to a host (only JSON values do).
        """
        return cast(
            "pykka.Future[dict[str, Any]]",
            self._call(
                "request",
                {
                    "server": server,
                    "method": method,
                    "params": params,
                    "timeout": timeout,
                    "max_total_timeout": max_total_timeout,
                    "reset_timeout_on_progress": reset_timeout_on_progress,
                },
                on_progress,
            ),
        )

    def subscribe(
        self, uri: str | tuple[str, str], *, timeout: float | None = None
    ) -> pykka.Future[None]:
        """Subscribe to updates of a resource at the server that listed it (or of
        ``(server, uri)``); its ``notifications/resources/updated`` reach the hub's subscribers
        tagged with that server.

        Raises:
            Error: at once ``argument`` (a value that cannot cross) or ``closed``; from
                ``get()``: ``unavailable``/``server_not_ready`` at once for a server that is not
                ready (``data``: ``server``, ``state``, ``reason``);
                ``argument``/``unknown_server``, ``unknown_tool``, ``unknown_prompt`` or
                ``unknown_resource`` with the closest names (``data["closest"]``);
                ``closed``/``stopped`` after the hub's ``stop()``; then what the member
                ``Client`` raises (its "Errors"); ``unavailable``/``host_lost`` when the host's
                process died with the call in flight (it may have run: never sent again),
                ``unavailable``/``host_down`` when the host will not come back; ``argument`` for
                an argument that cannot cross to a host (only JSON values do).
        """
        return cast(
            "pykka.Future[None]", self._call("subscribe", {"uri": uri, "timeout": timeout}, None)
        )

    def unsubscribe(
        self, uri: str | tuple[str, str], *, timeout: float | None = None
    ) -> pykka.Future[None]:
        """Undo :meth:`subscribe`.

        Raises:
            Error: at once ``argument`` (a value that cannot cross) or ``closed``; from
                ``get()``: ``unavailable``/``server_not_ready`` at once for a server that is not
                ready (``data``: ``server``, ``state``, ``reason``);
                ``argument``/``unknown_server``, ``unknown_tool``, ``unknown_prompt`` or
                ``unknown_resource`` with the closest names (``data["closest"]``);
                ``closed``/``stopped`` after the hub's ``stop()``; then what the member
                ``Client`` raises (its "Errors"); ``unavailable``/``host_lost`` when the host's
                process died with the call in flight (it may have run: never sent again),
                ``unavailable``/``host_down`` when the host will not come back; ``argument`` for
                an argument that cannot cross to a host (only JSON values do).
        """
        return cast(
            "pykka.Future[None]", self._call("unsubscribe", {"uri": uri, "timeout": timeout}, None)
        )

    # END GENERATED requests
