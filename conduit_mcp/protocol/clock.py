"""One call's clock: its deadline, which stops while the client's handler works for it, and
the bound on the whole call (``max_total_timeout``).

A server may ask the client something in the middle of a call (an elicitation, a sampling):
a person may take minutes to answer, and that time is the person's, not the server's. So a
call's ``timeout`` measures only the time its clock runs; ``max_total_timeout`` bounds the
whole call, paused or not, so that a call is never unbounded (docs/connection.md,
"Server-to-client requests").

The rules live here once, as plain arithmetic on the times they are given (no clock is read
here): the caller computes the bound it waits until with :func:`total_bound`, the connection
keeps one :class:`CallClock` per call and pauses and resumes it. Both read the same numbers.
"""

from __future__ import annotations

__all__ = ["CallClock", "total_bound"]


def total_bound(deadline: float, now: float, max_total: float) -> float:
    """The absolute bound on a call whose deadline may be paused: ``max_total`` seconds from
    ``now``, never before its own ``deadline`` (a ``max_total_timeout`` shorter than the
    call's ``timeout`` does not cut the timeout short).

    >>> total_bound(deadline=130.0, now=100.0, max_total=600.0)
    700.0
    >>> total_bound(deadline=130.0, now=100.0, max_total=10.0)
    130.0
    """
    return max(deadline, now + max_total)


class CallClock:
    """The clock of one call, kept by the connection (one thread: no lock).

    ``deadline`` is absolute (the monotonic clock's seconds) and moves only when a pause ends;
    ``total`` is the absolute bound of :func:`total_bound` (None until known: the first pause
    sets it from the client's ``max_total_timeout``). Pauses nest (several server requests may
    belong to one call); the clock runs again when the last one ends.

    >>> clock = CallClock(deadline=130.0, total=700.0)
    >>> clock.pause(now=110.0, max_total=600.0)  # the handler starts: arm the total bound
    590.0
    >>> clock.resume(now=400.0)  # 20 s of the timeout were left: they still are
    20.0
    >>> clock.deadline
    420.0
    """

    __slots__ = ("deadline", "total", "pauses", "_left")

    def __init__(self, deadline: float, total: float | None = None) -> None:
        self.deadline = deadline
        self.total = total
        #: the handler's works for the call now (0: the clock runs)
        self.pauses = 0
        self._left = 0.0  # the timeout left when the first pause began

    def __repr__(self) -> str:
        return f"<CallClock deadline={self.deadline:.3f} total={self.total} pauses={self.pauses}>"

    @property
    def until(self) -> float:
        """The last moment the call may still be answered: its total bound, else its
        deadline (what a caller waits until)."""
        return self.deadline if self.total is None else self.total

    def left(self, now: float) -> float:
        """Seconds until the deadline, never negative."""
        return max(0.0, self.deadline - now)

    def pause(self, now: float, max_total: float) -> float | None:
        """The handler starts working for the call. On the first pause, the seconds until the
        total bound (the call's timer is re-armed to fire then); None when the clock was
        already stopped (the timer stands). ``max_total`` (seconds) sets the bound if it was
        not known yet."""
        if self.total is None:
            self.total = total_bound(self.deadline, now, max_total)
        self.pauses += 1
        if self.pauses > 1:
            return None
        self._left = self.left(now)
        return self.total - now

    def resume(self, now: float) -> float | None:
        """One of the handler's works for the call ended. When it was the last, the clock
        runs again: the deadline is the timeout left at the pause from ``now``, never past
        the total bound, and the seconds until it are returned (the timer is re-armed to fire
        then; negative: at once). None while other works go on, or if the clock was not
        stopped."""
        if self.pauses <= 0:
            return None
        self.pauses -= 1
        if self.pauses:
            return None
        total = self.deadline if self.total is None else self.total
        self.deadline = min(now + self._left, total)
        return self.deadline - now
