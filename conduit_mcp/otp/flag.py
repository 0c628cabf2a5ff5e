"""A :class:`threading.Event` that owns no lock and builds its ``Condition`` only when a thread
has to wait.

``threading.Event()`` makes a ``Condition`` at once, and the ``Condition`` a ``deque`` of
waiters with its first 64-slot block: about 1.2 KiB, most of it never used. A client holds
half a dozen events (each actor's ``actor_stopped``, its tree's ``stopped`` and ``halt``, its
supervisor's child starts, its transport's ``_gone``) that are mostly read (``is_set``) or set
once, and rarely waited on. At 10,000 clients that was about 70 MiB
(``benchmarks/many_clients.py``). :class:`Flag` keeps a bool and makes the ``Condition`` the
first time ``wait`` finds the flag clear.

Nor does a flag own its lock: it takes one of :data:`STRIPES` locks shared by every flag of
the process, picked by its address, and its ``Condition`` (when made) is on that lock. A lock
is one more object the cyclic collector walks on each full collection: six a client
(measured with ``gc.get_objects()``: 6 of ~250 tracked objects per idle HTTP client).
A flag holds its lock only to read or write its bool and to notify its own waiters (never
while it holds another lock, so sharing cannot deadlock), and ``Condition.wait`` releases it
while it waits, so flags that share a stripe only ever wait for each other for those few
instructions.

Same behaviour as ``threading.Event``: ``set``, ``clear``, ``is_set``, ``wait(timeout)``
(returns the flag), safe from any thread; ``set`` wakes every waiter (of this flag only).
"""

from __future__ import annotations

import os
import threading
from typing import Final

__all__ = ["STRIPES", "Flag"]

#: How many locks the flags of the process share.
STRIPES: Final = 64


def _new_stripes() -> tuple[threading.Lock, ...]:
    return tuple(threading.Lock() for _ in range(STRIPES))


_stripes = _new_stripes()


class Flag:
    """``threading.Event``'s interface on a shared lock, with a lazily made ``Condition`` (the
    module's docstring).

    >>> flag = Flag()
    >>> flag.is_set(), flag.wait(0.01)
    (False, False)
    >>> flag.set(); flag.is_set(), flag.wait(0.01), flag.wait()
    (True, True, True)
    >>> flag.clear(); flag.is_set()
    False
    >>> _ = threading.Timer(0.01, flag.set).start(); flag.wait(5)
    True
    """

    __slots__ = ("_cond", "_flag", "_lock")

    def __init__(self) -> None:
        self._flag = False
        # Addresses are 16-byte aligned: the low bits say nothing.
        self._lock = _stripes[(id(self) >> 4) % STRIPES]
        self._cond: threading.Condition | None = None

    def __repr__(self) -> str:
        return f"<Flag {'set' if self._flag else 'unset'}>"

    def is_set(self) -> bool:
        """Whether the flag is set."""
        return self._flag

    isSet = is_set

    def set(self) -> None:
        """Set the flag and wake every thread waiting for it."""
        with self._lock:
            self._flag = True
            if self._cond is not None:
                self._cond.notify_all()

    def clear(self) -> None:
        """Clear the flag: later ``wait`` calls block until ``set``."""
        with self._lock:
            self._flag = False

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the flag is set or ``timeout`` seconds passed; the flag (as
        ``threading.Event.wait`` returns it)."""
        if self._flag:
            return True
        with self._lock:
            if self._flag:
                return True
            cond = self._cond
            if cond is None:
                cond = self._cond = threading.Condition(self._lock)
            return cond.wait(timeout)


def _new_stripes_in_child() -> None:
    # fork copies only the calling thread: a stripe another thread held is held for good in
    # the child. Flags made in the child take fresh locks (those it inherited keep theirs,
    # as a flag with a lock of its own would).
    global _stripes
    _stripes = _new_stripes()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_new_stripes_in_child)
