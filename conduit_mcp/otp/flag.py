"""A :class:`threading.Event` that builds its ``Condition`` only when a thread has to wait.

``threading.Event()`` makes a ``Condition`` at once, and the ``Condition`` a ``deque`` of
waiters with its first 64-slot block: about 1.2 KiB, most of it never used. A client holds
half a dozen events (each actor's ``actor_stopped``, its tree's ``stopped`` and ``halt``, its
supervisor's child starts, its transport's ``_gone``) that are mostly read (``is_set``) or set
once, and rarely waited on. At 10,000 clients that was about 70 MiB
(``benchmarks/many_clients.py``). :class:`Flag` keeps a bool and a lock, and makes the
``Condition`` (on that same lock) the first time ``wait`` finds the flag clear.

Same behaviour as ``threading.Event``: ``set``, ``clear``, ``is_set``, ``wait(timeout)``
(returns the flag), safe from any thread; ``set`` wakes every waiter.
"""

from __future__ import annotations

import threading

__all__ = ["Flag"]


class Flag:
    """``threading.Event``'s interface with a lazily made ``Condition`` (the module's docstring).

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
        self._lock = threading.Lock()
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
