"""A per-client name table: siblings find each other by name at send time.

A restarted actor is a new Pykka actor with a new ref, so no actor may keep a sibling's ref.
The supervisor writes the current incarnation's ref here on every (re)start and removes it on
stop; senders look the name up for every send and treat ``None`` or ``ActorDeadError`` as
"restarting" (:meth:`Registry.tell` does both). Pykka's own ``ActorRegistry`` is process-global (other
clients and the host application share it) and has no names, so it is not used.
"""

from __future__ import annotations

import threading
from typing import Any

import pykka

__all__ = ["Registry"]


class Registry:
    """Name -> current ``ActorRef``; reads are lock-free, writes are serialised.

    Writes replace the whole dict (copy on write): they happen once per (re)start, while reads
    happen once per message sent, so a read is one ``dict.get`` with no lock and
    :meth:`names` is a consistent snapshot. A :class:`Supervisor` given one registers each
    (re)started child under its id.

    >>> from conduit_mcp.otp import SafeActor
    >>> registry = Registry()
    >>> ref = SafeActor.start()
    >>> registry.set("worker", ref)
    >>> registry.get("worker") is ref, registry.names()
    (True, ['worker'])
    >>> registry.remove("worker"), registry.get("worker"), ref.stop()
    (True, None, True)
    """

    __slots__ = ("_lock", "_refs")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._refs: dict[str, pykka.ActorRef[Any]] = {}

    def get(self, name: str) -> pykka.ActorRef[Any] | None:
        """The current ref registered under ``name``, or ``None``.

        >>> Registry().get("nobody") is None
        True
        """
        return self._refs.get(name)

    def tell(self, name: str, message: Any) -> pykka.ActorRef[Any] | None:
        """Tell ``message`` to the actor registered under ``name`` if it is there and alive:
        the ref it went to, or None (none registered, or it died since: restarting). A sibling
        that must not fail on a restarting peer sends this way; the new incarnation asks again
        for what it needs when it starts.

        >>> from conduit_mcp.otp import SafeActor
        >>> registry = Registry()
        >>> registry.tell("worker", "hello") is None
        True
        >>> ref = SafeActor.start()
        >>> registry.set("worker", ref)
        >>> registry.tell("worker", "hello") is ref
        True
        >>> ref.stop(), registry.tell("worker", "hello") is None
        (True, True)
        """
        ref = self._refs.get(name)
        if ref is None:
            return None
        try:
            ref.tell(message)
        except pykka.ActorDeadError:
            return None
        return ref

    def set(self, name: str, ref: pykka.ActorRef[Any]) -> None:
        """Register ``ref`` under ``name``, replacing any previous incarnation's ref.

        >>> from conduit_mcp.otp import SafeActor
        >>> registry, old, new = Registry(), SafeActor.start(), SafeActor.start()
        >>> registry.set("w", old); registry.set("w", new)
        >>> registry.get("w") is new, old.stop(), new.stop()
        (True, True, True)
        """
        with self._lock:
            refs = dict(self._refs)
            refs[name] = ref
            self._refs = refs

    def remove(self, name: str, ref: pykka.ActorRef[Any] | None = None) -> bool:
        """Remove ``name``; with ``ref``, only if that is still the registered ref.

        The condition keeps a late removal for an old incarnation from erasing its successor.
        Returns whether something was removed.

        >>> from conduit_mcp.otp import SafeActor
        >>> registry, old, new = Registry(), SafeActor.start(), SafeActor.start()
        >>> registry.set("w", new)
        >>> registry.remove("w", old), registry.remove("w", new), old.stop(), new.stop()
        (False, True, True, True)
        """
        with self._lock:
            current = self._refs.get(name)
            if current is None or (ref is not None and current.actor_urn != ref.actor_urn):
                return False
            refs = dict(self._refs)
            del refs[name]
            self._refs = refs
            return True

    def names(self) -> list[str]:
        """The registered names, in registration order.

        >>> from conduit_mcp.otp import SafeActor
        >>> registry, ref = Registry(), SafeActor.start()
        >>> registry.set("b", ref); registry.set("a", ref)
        >>> registry.names(), ref.stop()
        (['b', 'a'], True)
        """
        return list(self._refs)
