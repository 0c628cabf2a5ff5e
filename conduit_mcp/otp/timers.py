"""One process-wide timer thread for every actor of every client.

Pykka has no timers, and a ``threading.Timer`` per timeout costs a thread per
pending request. Instead one daemon thread sleeps on a ``threading.Condition`` until the earliest
deadline of a heap. :func:`schedule` and :meth:`TimerHandle.cancel` run in the caller's thread
under the lock, O(log n) and O(1), with no message to the timer thread.

Callbacks run on the timer thread, so they must be quick and must only ``tell`` (e.g.
``safe_tell(ref, Wake())``): a callback that blocks delays every other timer of the process.
A callback's error is logged and never stops the thread. Cancellation is lazy (a flag): the
thread skips cancelled entries, and the heap is rebuilt when most of it is cancelled, so a
thousand actors that arm and cancel a timer per request do not grow it without bound.

:class:`TimerTable` is the per-actor side (used by the statem): any number of tokened timers,
and at most one entry here, for the earliest deadline.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Hashable
from functools import partial
from typing import Any, Final

__all__ = ["TimerHandle", "TimerService", "TimerTable", "schedule"]

logger = logging.getLogger("conduit_mcp.otp.timers")

_PENDING: Final = 0
_CANCELLED: Final = 1
_FIRED: Final = 2

#: The heap is rebuilt once it holds more than this many cancelled entries and they are more
#: than half of it: amortised O(1) per cancel, bounded memory.
_COMPACT_MIN: Final = 256


def _noop() -> None:
    return None


class TimerHandle:
    """One scheduled callback. :meth:`cancel` guarantees the callback will not start later.

    A callback already running (or about to run) on the timer thread when ``cancel`` is called
    cannot be stopped: that race is why callbacks only ``tell`` a message carrying a token the
    receiver checks.

    >>> import time
    >>> handle = schedule(time.monotonic() + 60, lambda: None)
    >>> handle.cancel(); handle.cancelled
    True
    """

    __slots__ = ("_callback", "_service", "_state", "when")

    def __init__(self, service: TimerService, when: float, callback: Callable[[], None]) -> None:
        self._service = service
        self._callback = callback
        self._state = _PENDING
        #: The ``time.monotonic()`` deadline this handle was scheduled for.
        self.when = when

    @property
    def cancelled(self) -> bool:
        """Whether :meth:`cancel` was called before the callback was taken to run.

        >>> import time
        >>> schedule(time.monotonic() + 60, lambda: None).cancelled
        False
        """
        return self._state == _CANCELLED

    def cancel(self) -> None:
        """Cancel the callback if it has not been taken to run yet; idempotent and O(1).

        >>> import threading, time
        >>> ran = threading.Event()
        >>> handle = schedule(time.monotonic() + 0.05, ran.set)
        >>> handle.cancel(); handle.cancel()
        >>> ran.wait(0.2)
        False
        """
        self._service._cancel(self)


class TimerService:
    """A heap of deadlines served by one lazily started daemon thread.

    The module-level :func:`schedule` uses one shared instance; tests may build their own.
    """

    def __init__(self, name: str = "conduit-timers") -> None:
        self._name = name
        self._reset()

    def _reset(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._heap: list[tuple[float, int, TimerHandle]] = []
        self._seq = 0
        self._cancelled = 0
        self._thread: threading.Thread | None = None

    def schedule(self, when: float, callback: Callable[[], None]) -> TimerHandle:
        """Run ``callback()`` on the timer thread once ``time.monotonic() >= when``.

        Callbacks due at the same time run in the order they were scheduled.
        """
        handle = TimerHandle(self, when, callback)
        with self._cond:
            if self._thread is None:
                self._start_thread()
            self._seq += 1
            heapq.heappush(self._heap, (when, self._seq, handle))
            # Wake the thread only if its sleep must get shorter.
            if self._heap[0][2] is handle:
                self._cond.notify()
        return handle

    def pending(self) -> int:
        """How many entries the heap holds, cancelled ones included (for tests and stats)."""
        return len(self._heap)

    def _cancel(self, handle: TimerHandle) -> None:
        with self._cond:
            if handle._state != _PENDING:
                return
            handle._state = _CANCELLED
            # Drop the callback now: it usually holds an actor ref.
            handle._callback = _noop
            self._cancelled += 1
            if self._cancelled > _COMPACT_MIN and self._cancelled * 2 > len(self._heap):
                self._heap = [e for e in self._heap if e[2]._state == _PENDING]
                heapq.heapify(self._heap)
                self._cancelled = 0

    def _start_thread(self) -> None:
        thread = threading.Thread(target=self._run, name=self._name, daemon=True)
        self._thread = thread
        thread.start()

    def _take_due(self) -> list[TimerHandle]:
        """Block until at least one live entry is due; pop and return all due ones."""
        with self._cond:
            while True:
                heap = self._heap
                while heap and heap[0][2]._state != _PENDING:
                    heapq.heappop(heap)
                    self._cancelled -= 1
                if not heap:
                    self._cond.wait()
                    continue
                now = time.monotonic()
                delay = heap[0][0] - now
                if delay > 0:
                    self._cond.wait(delay)
                    continue
                due: list[TimerHandle] = []
                while heap and heap[0][0] <= now:
                    handle = heapq.heappop(heap)[2]
                    if handle._state == _PENDING:
                        handle._state = _FIRED
                        due.append(handle)
                    else:
                        self._cancelled -= 1
                return due

    def _run(self) -> None:
        while True:
            try:
                due = self._take_due()
            except BaseException:  # pragma: no cover - a broken Condition; keep serving
                logger.exception("timer thread failed; continuing")
                continue
            for handle in due:
                callback, handle._callback = handle._callback, _noop
                try:
                    callback()
                except BaseException:
                    logger.exception("timer callback %r failed", callback)


_service = TimerService()

# A forked child has no timer thread and possibly a lock held by a parent thread: start afresh.
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_service._reset)


def schedule(when: float, callback: Callable[[], None]) -> TimerHandle:
    """Run ``callback()`` on the process timer thread at ``when`` (a ``time.monotonic()`` value).

    The callback must only ``tell``; see the module docstring.

    >>> import threading, time
    >>> fired = threading.Event()
    >>> _ = schedule(time.monotonic() + 0.01, fired.set)
    >>> fired.wait(5)
    True
    """
    return _service.schedule(when, callback)


class TimerTable:
    """The timers of one actor, keyed by name, each arm carrying a fresh token.

    Single-threaded: only the owning actor's thread calls it. The table keeps its own heap of
    ``(when, token)`` and holds at most one :func:`schedule` entry, for its earliest
    deadline: arming a later timer does not touch the service, and cancelling is lazy (the
    token is forgotten; the heap entry goes stale). When that entry fires, ``wake(arm)`` runs on
    the timer thread and must only tell the actor, which then calls :meth:`woke`, takes the
    :meth:`due` timers with :meth:`take`, and calls :meth:`rearm`. An entry whose token is no
    longer current is never returned: that is what makes cancel and replace race-free.

    A stale heap entry holds no key: the key (for a connection, the request's ``Call``, with
    its reply and clock) is reached through the live tokens only, so a request that ended
    before its deadline is freed at once, not when its deadline passes.

    A zero or negative time is not scheduled: it waits in a FIFO for :meth:`pop_zero`.
    """

    def __init__(self, wake: Callable[[int], None]) -> None:
        self._wake = wake
        # key -> (token, event, when); ``when`` is None for a zero-time timer.
        self._current: dict[Hashable, tuple[int, Any, float | None]] = {}
        # token -> key, for the current timers with a time (those in the heap).
        self._keys: dict[int, Hashable] = {}
        # (when, token): tokens are unique and rising, so two entries never tie.
        self._heap: list[tuple[float, int]] = []
        # Made by the first zero-time timer (a deque's first block is ~0.7 KiB an actor).
        self._zero: deque[tuple[Hashable, int]] | None = None
        self._token = 0
        self._armed: TimerHandle | None = None
        self._armed_when = 0.0
        self._arm_id = 0

    def _forget(self, key: Hashable) -> None:
        old = self._current.pop(key, None)
        if old is not None and old[2] is not None:
            del self._keys[old[0]]

    def set(self, key: Hashable, seconds: float | None, event: Any) -> None:
        """Arm ``key`` to yield ``event`` after ``seconds``, replacing it; ``None`` cancels."""
        self._forget(key)
        if seconds is None:
            return
        self._token += 1
        token = self._token
        if seconds <= 0:
            self._current[key] = (token, event, None)
            zero = self._zero
            if zero is None:
                zero = self._zero = deque()
            zero.append((key, token))
            return
        when = time.monotonic() + seconds
        self._current[key] = (token, event, when)
        self._keys[token] = key
        heap = self._heap
        heapq.heappush(heap, (when, token))
        if self._armed is None or when < self._armed_when:
            self._arm(when)
        elif len(heap) > 64 and len(heap) > 4 * len(self._keys):
            # Mostly stale (requests that ended before their deadline): rebuild, O(n) once per
            # n/2 cancels. Entries being delivered are safe: take() forgets them.
            self._heap = [(w, t) for t, _, w in self._current.values() if w is not None]
            heapq.heapify(self._heap)

    def cancel(self, key: Hashable) -> None:
        """Forget ``key``; a late firing of it will never be returned."""
        self._forget(key)

    @property
    def has_zero(self) -> bool:
        """Whether zero-time timers wait (some may be stale)."""
        return bool(self._zero)

    def pop_zero(self) -> tuple[Hashable, Any] | None:
        """The oldest current zero-time timer as ``(key, event)``, forgotten; else ``None``."""
        zero, current = self._zero, self._current
        while zero:
            key, token = zero.popleft()
            entry = current.get(key)
            if entry is not None and entry[0] == token:
                del current[key]
                return key, entry[1]
        return None

    def woke(self, arm: int) -> None:
        """Note that the wake for ``arm`` arrived: if it was the armed one, it is spent."""
        if arm == self._arm_id:
            self._armed = None

    def due(self) -> list[tuple[Hashable, int]]:
        """Pop the current timers whose deadline passed, in deadline order, as (key, token)."""
        now = time.monotonic()
        heap, keys = self._heap, self._keys
        due: list[tuple[Hashable, int]] = []
        while heap and heap[0][0] <= now:
            _, token = heapq.heappop(heap)
            if token in keys:
                due.append((keys[token], token))
        return due

    def take(self, key: Hashable, token: int) -> tuple[bool, Any]:
        """``(True, event)`` and forget it, if ``token`` is still current; else ``(False, None)``.

        Checked again at delivery because an earlier due timer's handler may have cancelled or
        replaced this one.
        """
        entry = self._current.get(key)
        if entry is None or entry[0] != token:
            return False, None
        del self._current[key]
        if entry[2] is not None:
            del self._keys[token]
        return True, entry[1]

    def rearm(self) -> None:
        """Arm the service for the earliest current deadline, if not armed early enough."""
        heap, keys = self._heap, self._keys
        while heap:
            if heap[0][1] in keys:
                break
            heapq.heappop(heap)
        if not heap:
            self.close()
        elif self._armed is None or heap[0][0] < self._armed_when:
            self._arm(heap[0][0])

    def close(self) -> None:
        """Cancel the armed service entry (the actor is exiting, or nothing is pending)."""
        if self._armed is not None:
            self._armed.cancel()
            self._armed = None

    def _arm(self, when: float) -> None:
        if self._armed is not None:
            self._armed.cancel()
        self._arm_id += 1
        self._armed_when = when
        self._armed = schedule(when, partial(self._wake, self._arm_id))
