"""Telling a sibling in the client's tree that may not be running yet (a lazy child).

The notifier and the refresher start only when they first have work (DESIGN, "Threads are a
cost"). Whoever has that work — the connection on its own thread, a caller subscribing —
must not block to start them: :meth:`Siblings.tell` tells a running child straight through
the registry, and otherwise tells the supervisor ``StartChild(child_id, then=message)``, which
starts it and hands it the message first. Never an ``ask``: nothing here waits.

Order: while a message for a child waits in the supervisor's mailbox (say behind the start of
another lazy child), later messages for that child go the same way, or one told straight
through the registry would overtake it. The supervisor calls back once it has passed each
one on (``StartChild.forwarded``); a count per child says when the direct path is safe again.
"""

from __future__ import annotations

import threading
from functools import partial
from typing import Any

import pykka

from .registry import Registry
from .supervisor import StartChild


class Siblings:
    """The lazy children of one client tree, told by id."""

    __slots__ = ("_registry", "_supervisor", "_lock", "_queued")

    def __init__(self, registry: Registry, supervisor: Any) -> None:
        self._registry = registry
        # A callable returning the supervisor's ref (it exists only once the tree started).
        self._supervisor = supervisor
        self._lock = threading.Lock()
        # child id -> messages told through the supervisor and not yet passed on by it
        self._queued: dict[str, int] = {}

    def __repr__(self) -> str:
        return "<Siblings>"

    def tell(self, child_id: str, message: Any) -> bool:
        """Tell ``child_id`` (starting it if needed); False if the tree is gone."""
        with self._lock:  # senders on several threads: the count and the path agree
            # Not there or restarting: the supervisor knows the new one.
            if (
                not self._queued.get(child_id)
                and self._registry.tell(child_id, message) is not None
            ):
                return True
            sup = self._supervisor()
            if sup is None:
                return False
            self._queued[child_id] = self._queued.get(child_id, 0) + 1
            start = StartChild(child_id, then=message, forwarded=partial(self._passed, child_id))
            try:
                sup.tell(start)
                return True
            except pykka.ActorDeadError:
                self._queued[child_id] -= 1
                return False

    def _passed(self, child_id: str) -> None:
        """The supervisor passed one message for ``child_id`` on (its thread)."""
        with self._lock:
            left = self._queued.get(child_id, 0) - 1
            if left > 0:
                self._queued[child_id] = left
            else:
                self._queued.pop(child_id, None)

    def get(self, child_id: str) -> pykka.ActorRef[Any] | None:
        return self._registry.get(child_id)
