"""What the Hub's actors publish for the front ends: read lock-free from any thread.

Two writers, one value each, each replaced whole (one attribute store, atomic under the GIL):
the view actor writes :attr:`Board.view`, the hub supervisor writes :attr:`Board.members`.
A reader loads the attribute once and works on that snapshot. The condition is only for
:meth:`Board.wait` (``await_ready``): the writers notify it after a swap, readers never take it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal

import pykka

from ..status import Status
from .config import ServerEntry
from .names import Naming
from .view import EMPTY, View

if TYPE_CHECKING:
    from ..client import Client
    from ..tree import ClientTree

__all__ = ["Board", "Member", "ServerDown"]

ServerDown = Literal["hide", "keep"]


@dataclass(frozen=True, slots=True, eq=False)
class Member:
    """One server's current incarnation (``gen`` grows with each restart by the hub).

    ``client`` is None while the hub waits to start it again (``down`` says why) or after it
    gave up for good (``given_up``).
    """

    name: str
    entry: ServerEntry | None
    spec: Any = field(repr=False)
    config: Any = field(repr=False)
    gen: int = 0
    client: Client | None = field(default=None, repr=False)
    runtime: ClientTree | None = field(default=None, repr=False)
    down: Status | None = None
    given_up: bool = False
    restarts: int = 0
    """How many times the hub started this server again after its client gave up (counted
    from ``Hub.start``, ``add_server`` or ``reload``)."""

    def status(self) -> Status:
        if self.client is None:
            return self.down or Status("connecting")
        return self.client.status()


class Board:
    """The hub's published values (see the module docstring)."""

    __slots__ = (
        "name",
        "view",
        "members",
        "order",
        "naming",
        "on_server_down",
        "view_ref",
        "list_timeout",
        "_changed",
        "stopped",
        "subscriptions",
        "log_level",
    )

    def __init__(
        self, name: str, naming: Naming, on_server_down: ServerDown, list_timeout: float
    ) -> None:
        self.name = name
        self.view: View = EMPTY
        self.members: Mapping[str, Member] = MappingProxyType({})
        self.order: tuple[str, ...] = ()
        self.naming = naming
        self.on_server_down: ServerDown = on_server_down
        self.view_ref: pykka.ActorRef[Any] | None = None
        self.list_timeout = list_timeout
        self._changed = threading.Condition()
        self.stopped = False
        # The hub's notification subscriptions (conduit_mcp.hub.notify.Subscription), each
        # applied to every member the supervisor starts.
        self.subscriptions: dict[Any, Any] = {}
        # Hub.set_logging_level's level (None: each member's own ``log_level`` option),
        # applied by the supervisor to every member it starts from then on.
        self.log_level: str | None = None

    def publish_view(self, view: View) -> None:
        self.view = view
        with self._changed:
            self._changed.notify_all()

    def publish_members(self, members: Mapping[str, Member], order: tuple[str, ...]) -> None:
        self.members = MappingProxyType(dict(members))
        self.order = order
        with self._changed:
            self._changed.notify_all()

    def wait(self, predicate: Callable[[], bool], timeout: float) -> bool:
        """Block (a caller's thread) until ``predicate()`` holds; False on timeout. Bounded:
        woken by every swap, and at least every 50 ms (a member's status is not a swap)."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.stopped:
                    return predicate()
                self._changed.wait(min(remaining, 0.05))
            return True

    def client_name(self, server: str) -> str:
        """The registry name of a member's client (what its notifications' ``client`` and
        its handler's ``HandlerContext.client_name`` say)."""
        return f"{self.name}/{server}"

    def server_of(self, client_name: str) -> str | None:
        prefix = self.name + "/"
        return client_name[len(prefix) :] if client_name.startswith(prefix) else None
