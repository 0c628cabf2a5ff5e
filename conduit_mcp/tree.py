"""One client's actor tree, and the directory of running clients by name.

``ClientSupervisor`` (one_for_one, 3 restarts in 5 s) supervises the ``Connection``, and two
lazy children started on their first work: the ``notifier`` (runs notification subscribers'
code) and the ``refresher`` (fetches cached lists). docs/actor-tree.md shows the tree and what
each crash costs.
The connection is ``transient``: a crash restarts it (its callers get ``transport``), a
normal exit does not. With ``on_give_up="stop"`` it is also *significant*: giving up ends
the whole client, so an application supervisor above it starts a fresh one.

A client handle (``conduit_mcp.request.Handle``) finds the current incarnation by name at
every call (an application supervisor may have replaced it), and the connection by name in the
tree's registry (the supervisor may have restarted it): refs are never kept across restarts.
While either is missing for a while (:meth:`ClientTree.may_come_back`), a caller waits.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Hashable
from dataclasses import replace
from typing import Any

import pykka

from .actors.connection import Connection
from .actors.handler import child_spec as handler_spec
from .actors.listen import child_spec as listen_spec
from .actors.notifier import child_spec as notifier_spec
from .actors.oauth import child_spec as oauth_spec
from .actors.refresher import child_spec as refresher_spec
from .config import Config
from .errors import Error
from .notifications import Subscriber
from .otp.flag import Flag
from .otp.pooled import stop_here
from .otp.registry import Registry
from .otp.siblings import Siblings
from .otp.supervisor import ChildSpec, Supervisor
from .protocol.client_caps import with_extensions
from .published import Published
from .telemetry import Telemetry
from .telemetry.attributes import PIPE, TCP
from .transports.http import HttpTransport
from .transports.http_spec import Http, is_oauth
from .transports.http_token import TokenCell
from .transports.inprocess import InProcessTransport
from .transports.inprocess_spec import InProcess
from .transports.sse import SseTransport
from .transports.sse_spec import Sse
from .transports.stdio import StdioTransport
from .transports.stdio_spec import Stdio

_counter = itertools.count(1)
_lock = threading.Lock()
_directory: dict[str, ClientTree] = {}
# Names of clients stopped by Client.stop and not started again (the most recent ones): a
# handle on such a name fails at once instead of waiting for a start that will not come.
_stopped: OrderedDict[str, None] = OrderedDict()
_STOPPED_KEPT = 1024


def make_transport(
    spec: Any,
    owner: pykka.ActorRef[Any],
    gen: int,
    cfg: Config,
    *,
    pending: Any = None,
    memory: dict[str, Any] | None = None,
    token: TokenCell | None = None,
) -> Any:
    """The transport for one connection attempt (a reconnect builds a new one; ``memory``
    is the connection's, kept across attempts; ``token`` the OAuth actor's published token,
    stamped on every request when the spec carries an ``OAuth``)."""
    if isinstance(spec, Stdio):
        return StdioTransport(
            spec,
            owner,
            gen,
            max_frame=cfg.max_frame,
            pending=pending,
            max_answer_backlog=cfg.max_answer_backlog,
        )
    if isinstance(spec, InProcess):
        return InProcessTransport(
            spec,
            owner,
            gen,
            max_frame=cfg.max_frame,
            pending=pending,
            max_answer_backlog=cfg.max_answer_backlog,
        )
    if isinstance(spec, Http):
        # Sse, or Http(sse_fallback=True): streamable HTTP first, then SSE (docs/sse.md).
        make = SseTransport if isinstance(spec, Sse) or spec.sse_fallback else HttpTransport
        return make(
            spec,
            owner,
            gen,
            max_frame=cfg.max_frame,
            max_in_flight=cfg.max_in_flight,
            pending=pending,
            memory=memory,
            max_answer_backlog=cfg.max_answer_backlog,
            token=token if is_oauth(spec.auth) else None,
            **({"fallback": True} if make is SseTransport and not isinstance(spec, Sse) else {}),
        )
    raise Error("config", "transport", f"unsupported transport {type(spec).__name__}")


def check_transport(spec: Any) -> None:
    if not isinstance(spec, (Stdio, Http, InProcess)):
        raise Error(
            "config",
            "transport",
            "transport must be conduit_mcp.Stdio(...), conduit_mcp.Http(...), "
            "conduit_mcp.Sse(...) or conduit_mcp.InProcess(...)",
        )


def check_era(spec: Any, config: Config) -> None:
    """A transport that speaks only the legacy era (``Sse``) with a modern ``protocol``
    option can never connect: say so at start."""
    if getattr(spec, "legacy_only", False) and config.protocol.mode == "modern":
        raise Error(
            "config",
            "protocol",
            "the HTTP+SSE transport (Sse) speaks the legacy protocol versions only "
            "(2024-11-05 to 2025-11-25): use protocol='auto' or 'legacy', or a legacy version",
        )


def unique_name() -> str:
    return f"client-{next(_counter)}"


class ClientTree:
    """One incarnation of a client's tree: its supervisor, registry and published values."""

    def __init__(self, name: str, spec: Any, config: Config) -> None:
        check_era(spec, config)
        self.name = name
        self.spec = spec
        auth: Any = getattr(spec, "auth", None)
        if is_oauth(auth) and auth.extensions:
            # The OAuth extensions the client uses are declared, once, for every actor that
            # sends capabilities (docs/oauth.md, "Declared extensions").
            config = replace(
                config, capabilities=with_extensions(config.capabilities, auth.extensions)
            )
        self.config = config
        self.shared = Published()
        self.shared.log_level = config.log_level  # set_logging_level replaces it
        self.telemetry = Telemetry(
            config.tracer_provider,
            config.meter_provider,
            network_transport=TCP if isinstance(spec, Http) else PIPE,
            shared=self.shared,
            server=(spec.host, spec.port) if isinstance(spec, Http) else None,
        )
        self.registry = Registry()
        # The notifier's subscribers, kept here so they outlive a crashed notifier.
        self.subscribers: dict[Hashable, Subscriber] = {}
        self.supervisor: pykka.ActorRef[Any] | None = None
        # The lazy children (notifier, refresher), told without blocking (otp/siblings.py).
        # Known from the supervisor's construction on: its init (in the caller's thread) starts
        # the children, and one may tell a sibling not started yet (Supervisor(announce=)).
        self._announced: pykka.ActorRef[Any] | None = None
        self.siblings = Siblings(self.registry, self._supervisor_ref)
        # Set when the tree exits on its own (restart intensity, or a significant child).
        self.stopped = Flag()
        # Started under an application's supervisor (``Client.child_spec``): a parent may
        # start a fresh incarnation under the same name after this one ends.
        self.supervised = False
        # Stopped by ``Client.stop``: for good, whoever started it.
        self.ended = False
        # Set when stop() begins: the notifier calls no subscriber after it, so nothing of
        # the client runs once stop() has returned.
        self.halt = Flag()

    def __repr__(self) -> str:
        return f"<ClientTree {self.name!r}>"

    # The tree's callbacks are bound methods, not closures: a client keeps them for its whole
    # life, and a closure is a function and a cell per name it reads, each walked by every
    # full collection of the cyclic collector (measured with gc.get_objects()).

    def _supervisor_ref(self) -> pykka.ActorRef[Any] | None:
        """The supervisor's ref, for :class:`Siblings` (it exists once the tree started)."""
        return self.supervisor or self._announced

    def _start_connection(self, link: Any) -> pykka.ActorRef[Any]:
        # self.spec, read at each (re)start: set_auth may have changed the credentials.
        # Its init runs here, in the supervisor's (or Client.start's) thread: no hand-off
        # to a pool worker and back to learn that it started (otp/pooled.py).
        return Connection.start_here(
            self.spec,
            self.config,
            self.shared,
            transport_factory=make_transport,
            link=link,
            telemetry=self.telemetry.connection,
            client_name=self.name,
            siblings=self.siblings,
        )

    def _gave_up(self, reason: BaseException | None) -> None:
        self.stopped.set()

    def children(self) -> list[ChildSpec]:
        cfg, shared = self.config, self.shared
        hooks = self.telemetry.connection
        specs = [
            ChildSpec(
                "connection",
                self._start_connection,
                restart="transient",
                shutdown=cfg.shutdown_timeout,
                significant=cfg.on_give_up == "stop",
            ),
            notifier_spec(
                self.name,
                self.subscribers,
                max_backlog=cfg.max_subscriber_backlog,
                halt=self.halt,
                on_dropped=hooks.overflow,
                deliveries=shared.deliveries,
            ),
            refresher_spec(self.registry),
            listen_spec(self.name, self.registry, shared, cfg),
        ]
        if isinstance(self.spec, Http) and is_oauth(self.spec.auth):
            # started with the client: the first 401 needs it (docs/actor-tree.md)
            specs.append(oauth_spec(self.name, self.registry, shared, self.spec, cfg))
        if cfg.handler is not None:  # started with the client (docs/actor-tree.md)
            specs.append(
                handler_spec(
                    self.name, self.registry, shared, cfg, halt=self.halt, on_dropped=hooks.overflow
                )
            )
        return specs

    def _announce(self, ref: pykka.ActorRef[Any]) -> None:
        self._announced = ref

    def start(self, link: Any = None) -> pykka.ActorRef[Any]:
        self.supervised = link is not None
        # Start synchronously: the supervisor's init (starting the connection actor:
        # milliseconds, threads, not connecting) runs here, in the caller's thread, so a call
        # made right after start finds the connection. The supervisor takes a pool thread
        # only when it has messages later (otp/pooled.py). Connecting itself never blocks
        # start (docs/actor-tree.md).
        sup = Supervisor.start_here(
            self.children(),
            strategy="one_for_one",
            max_restarts=3,
            max_seconds=5.0,
            registry=self.registry,
            on_give_up=self._gave_up,
            link=link,
            announce=self._announce,
        )
        self.supervisor = sup
        if not sup.is_alive():
            raise Error("unavailable", "start_failed", "the client's actors failed to start")
        return sup

    def connection(self) -> pykka.ActorRef[Any]:
        ref = self.registry.get("connection")
        if ref is None:
            raise Error("closed", "stopped", f"client {self.name!r} is not running")
        return ref

    def alive(self) -> bool:
        sup = self.supervisor
        return sup is not None and sup.is_alive()

    def starting(self) -> bool:
        """Registered, but its supervisor is not running yet (an application supervisor is
        starting it): a caller waits for it."""
        return self.supervisor is None and not self.ended

    def may_come_back(self) -> bool:
        """Whether a missing connection is a window (the tree starting, the connection
        restarting, an application supervisor restarting the tree) rather than the end: a
        caller waits through a window, bounded by its deadline (docs/actor-tree.md)."""
        if self.ended:
            return False
        if self.supervised:
            return True
        if self.stopped.is_set():
            return False
        sup = self.supervisor
        return sup is None or sup.is_alive()

    def stop(self, timeout: float) -> None:
        """Stop the tree, then wait (bounded) for server processes to be gone."""
        deadline = time.monotonic() + timeout
        sup = self._begin_stop()
        if sup is not None:
            try:
                stop_here(sup, timeout=timeout)  # an idle supervisor stops in this thread
            except (pykka.Timeout, pykka.ActorDeadError):
                pass
        self._end_stop(deadline)

    def _begin_stop(self) -> pykka.ActorRef[Any] | None:
        self.ended = True
        self.halt.set()
        return self.supervisor

    def _end_stop(self, deadline: float) -> None:
        self.stopped.set()
        for transport in [*self.shared.closing, self.shared.transport]:
            wait = getattr(transport, "wait_closed", None)
            if wait is not None:
                wait(max(0.0, deadline - time.monotonic()))


#: How many trees :func:`stop_all` stops at once: each stop holds a pool worker while its
#: supervisor waits for its children, so this bounds the threads a stop of thousands takes
#: (measured, ``benchmarks/many_clients.py``: more in flight bought nothing on 2 cores).
STOP_WINDOW = 64


def stop_all(runtimes: list[ClientTree], timeout: float) -> None:
    """Stop many trees concurrently, bounded by ``timeout`` in all: each supervisor's stop is
    told at once (at most :data:`STOP_WINDOW` in flight), then every server process is
    waited for under the one deadline. Each tree stops exactly as :meth:`ClientTree.stop`
    stops it (children in reverse start order, each within its ``shutdown``)."""
    deadline = time.monotonic() + timeout
    in_flight: deque[pykka.Future[Any]] = deque()

    def wait_oldest() -> None:
        try:
            in_flight.popleft().get(timeout=max(0.0, deadline - time.monotonic()))
        except (pykka.Timeout, pykka.ActorDeadError):
            pass

    for runtime in runtimes:
        sup = runtime._begin_stop()
        if sup is None:
            continue
        if len(in_flight) >= STOP_WINDOW:
            wait_oldest()
        in_flight.append(sup.stop(block=False))
    while in_flight:
        wait_oldest()
    for runtime in runtimes:
        runtime._end_stop(deadline)


def register(runtime: ClientTree, *, replace: bool) -> None:
    with _lock:
        current = _directory.get(runtime.name)
        if current is not None and current is not runtime and not replace and current.alive():
            raise Error("config", "name", f"a client named {runtime.name!r} is already running")
        _directory[runtime.name] = runtime
        _stopped.pop(runtime.name, None)


def unregister(runtime: ClientTree) -> None:
    with _lock:
        if _directory.get(runtime.name) is runtime:
            del _directory[runtime.name]
            if runtime.ended:
                _stopped[runtime.name] = None
                while len(_stopped) > _STOPPED_KEPT:
                    _stopped.popitem(last=False)


def was_stopped(name: str) -> bool:
    """Whether the client last registered under ``name`` was stopped by ``Client.stop``."""
    return name in _stopped


def lookup(name: str) -> ClientTree | None:
    return _directory.get(name)


def _forget_clients_in_child() -> None:
    # The parent's clients do not exist in a forked child (their actor threads were not
    # copied): the child starts with an empty directory, so it can start its own, under any
    # name.
    global _lock
    _lock = threading.Lock()
    _directory.clear()
    _stopped.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_clients_in_child)
