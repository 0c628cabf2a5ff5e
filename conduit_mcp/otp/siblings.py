"""Telling a sibling in the client's tree that may not be running yet (a lazy child).

The notifier and the refresher start only when they first have work (DESIGN, "Threads are a
cost"). Whoever has that work — the connection on its own thread, a caller subscribing —
must not block to start them: :meth:`Siblings.tell` tells a running child straight through
the registry, and otherwise tells the supervisor ``StartChild(child_id, then=message)``, which
starts it and hands it the message first. Never an ``ask``: nothing here waits.
"""

from __future__ import annotations

from typing import Any

import pykka

from .registry import Registry
from .supervisor import StartChild


class Siblings:
    """The lazy children of one client tree, told by id."""

    __slots__ = ("_registry", "_supervisor")

    def __init__(self, registry: Registry, supervisor: Any) -> None:
        self._registry = registry
        # A callable returning the supervisor's ref (it exists only once the tree started).
        self._supervisor = supervisor

    def __repr__(self) -> str:
        return "<Siblings>"

    def tell(self, child_id: str, message: Any) -> bool:
        """Tell ``child_id`` (starting it if needed); False if the tree is gone."""
        ref = self._registry.get(child_id)
        if ref is not None:
            try:
                ref.tell(message)
                return True
            except pykka.ActorDeadError:
                pass  # restarting: the supervisor knows the new one
        sup = self._supervisor()
        if sup is None:
            return False
        try:
            sup.tell(StartChild(child_id, then=message))
            return True
        except pykka.ActorDeadError:
            return False

    def get(self, child_id: str) -> pykka.ActorRef[Any] | None:
        return self._registry.get(child_id)
