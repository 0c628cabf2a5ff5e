"""How many connections of this process handshake at once: the rest wait their turn.

Measured on the development machine (2 cores): a Hub of 5,000 streamable HTTP servers, all
connecting together, sent 5,000 ``server/discover`` probes at once; the one I/O loop and the
server answered each of them past its 5 s ``probe_timeout``, so nearly every client fell back
to ``initialize``, heard the late answer, and started again (4,949 "answered late" in one
run), and some runs cascaded into reconnects and took 110 s where an orderly start takes
25 s. The same happens to any application starting thousands of clients, and to every client
of a server that restarts under them.

So a connection takes a *turn* before it starts a transport (``connecting``), and gives it
back when its handshake ends, however it ends (``ready``, ``authorizing``, ``reconnecting``,
``closed``, a stop or a crash). A connection that finds no turn free waits in ``connecting``
with no deadline running (its handshake's deadlines start with its turn); calls made to it
meanwhile wait under their own deadlines, as in any ``connecting``. Turns are given in the
order they were asked for.

A turn lasts :data:`LEASE_SECONDS` at most: a server that never answers its handshake
(a process that hangs at start) delays the others by that long at most, not by its
handshake's deadlines (``probe_timeout``, then ``request_timeout``). Its handshake goes on
without the turn.

Two gates, because their costs differ: a stdio server is a process starting on this
machine (:data:`PROCESS_TURNS`), a network server costs the loop a few requests each and is
mostly waited for (:data:`NETWORK_TURNS`). In-process servers take no turn.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from collections.abc import Callable
from typing import Final

__all__ = ["LEASE_SECONDS", "NETWORK_TURNS", "PROCESS_TURNS", "Gate", "gate_for"]

#: Stdio handshakes at once. Not a few per core: a server's start is often a wait, not
#: work (``npx`` fetching a package, a server that sleeps before it reads), and with 8 turns
#: ten servers that each wait 1 s at start took 2.25x one to be ready, against 1.35x with
#: no bound (``hub_bench.py --only start``). 64 keeps a config of that size untouched and
#: still stops 1,000 server processes from starting their handshakes at once.
PROCESS_TURNS: Final = 64

#: Streamable HTTP and SSE handshakes at once.
NETWORK_TURNS: Final = 256

#: How long a turn lasts at most (a handshake that takes longer goes on without it).
LEASE_SECONDS: Final = 5.0


class Gate:
    """At most ``turns`` holders at once; the others wait in order, and are woken (outside
    the lock) by a ``wake`` callable that returns False when its connection is gone, so a
    dead waiter never keeps a turn.

    >>> gate = Gate(1)
    >>> woken = []
    >>> gate.enter("a", lambda: True), gate.enter("b", lambda: woken.append("b") or True)
    (True, False)
    >>> gate.leave("a"); woken, gate.holding()
    (['b'], 1)
    >>> gate.leave("b"); gate.holding()
    0
    """

    def __init__(self, turns: int) -> None:
        self.turns = turns
        self._lock = threading.Lock()
        self._held: set[str] = set()
        self._waiting: deque[tuple[str, Callable[[], bool]]] = deque()
        self._queued: set[str] = set()

    def holding(self) -> int:
        return len(self._held)

    def holds(self, key: str) -> bool:
        return key in self._held

    def waiting(self) -> int:
        return len(self._queued)

    def enter(self, key: str, wake: Callable[[], bool]) -> bool:
        """True when ``key`` holds a turn now (it may already have held one); else it is
        queued and ``wake()`` is called once the turn is its own."""
        with self._lock:
            if key in self._held:
                return True
            if len(self._held) < self.turns and not self._waiting:
                self._held.add(key)
                return True
            if key not in self._queued:
                self._queued.add(key)
                self._waiting.append((key, wake))
            return False

    def leave(self, key: str) -> None:
        """Give ``key``'s turn back, or its place in the line (idempotent)."""
        with self._lock:
            self._held.discard(key)
            self._queued.discard(key)
        self._admit()

    def _admit(self) -> None:
        while True:
            with self._lock:
                if len(self._held) >= self.turns:
                    return
                wake = None
                while self._waiting:
                    key, candidate = self._waiting.popleft()
                    if key in self._queued:  # else it left the line meanwhile
                        self._queued.discard(key)
                        self._held.add(key)
                        wake = candidate
                        break
                if wake is None:
                    return
            if not wake():  # the connection is gone: its turn goes to the next
                with self._lock:
                    self._held.discard(key)


_PROCESS = Gate(PROCESS_TURNS)
_NETWORK = Gate(NETWORK_TURNS)


def gate_for(transport_spec: object) -> Gate | None:
    """The gate of a transport spec: stdio's, the network's, or none (in-process)."""
    from ..transports.http_spec import Http
    from ..transports.sse_spec import Sse
    from ..transports.stdio_spec import Stdio

    if isinstance(transport_spec, Stdio):
        return _PROCESS
    if isinstance(transport_spec, (Http, Sse)):
        return _NETWORK
    return None


def _fresh_gates_in_child() -> None:
    # A forked child has none of its parent's connections (tree.py forgets them too).
    global _PROCESS, _NETWORK
    _PROCESS = Gate(PROCESS_TURNS)
    _NETWORK = Gate(NETWORK_TURNS)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_fresh_gates_in_child)
