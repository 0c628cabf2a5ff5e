"""One process-wide timer thread for every actor of every client.

Pykka has no timers (stack.md §1.5), and a ``threading.Timer`` per timeout costs a thread per
pending request. Instead one daemon thread sleeps on a ``threading.Condition`` until the earliest
deadline of a heap. :func:`schedule` and :meth:`TimerHandle.cancel` run in the caller's thread
under the lock, O(log n) and O(1), with no message to the timer thread.

Callbacks run on the timer thread, so they must be quick and must only ``tell`` (e.g.
``safe_tell(ref, Wake())``): a callback that blocks delays every other timer of the process.
A callback's error is logged and never stops the thread. Cancellation is lazy (a flag): the
thread skips cancelled entries, and the heap is rebuilt when most of it is cancelled, so a
thousand actors that arm and cancel a timer per request do not grow it without bound.

The statem (``statem.py``) arms at most one timer here per actor, for its earliest deadline.
"""

from __future__ import annotations

import heapq
import logging
import os
import threading
import time
from collections.abc import Callable
from typing import Final

__all__ = ["TimerHandle", "TimerService", "schedule"]

logger = logging.getLogger("conduit_mcp.actors.timers")

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
    receiver checks (stack.md §1.5).
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
        """Whether :meth:`cancel` was called before the callback was taken to run."""
        return self._state == _CANCELLED

    def cancel(self) -> None:
        """Cancel the callback if it has not been taken to run yet; idempotent and O(1)."""
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
    """
    return _service.schedule(when, callback)
