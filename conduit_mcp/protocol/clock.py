"""One call's clock: its deadline, which stops while the client's handler works for it and
restarts on each progress report when the call asks for that (``reset_timeout_on_progress``),
and the bound on the whole call (``max_total_timeout``).

A server may ask the client something in the middle of a call (an elicitation, a sampling):
a person may take minutes to answer, and that time is the person's, not the server's. So a
call's ``timeout`` measures only the time its clock runs; ``max_total_timeout`` bounds the
whole call, paused or not, so that a call is never unbounded (docs/connection.md,
"Server-to-client requests").

A long tool that reports progress is working, not stuck: with ``reset_timeout_on_progress``
each ``notifications/progress`` for the call gives it its whole ``timeout`` again from when it
was heard, so it is cut off only by silence, or by ``max_total_timeout``, which no progress
extends (the MCP spec, Basic, "Timeouts": implementations SHOULD always enforce a maximum
timeout regardless of progress; docs/connecting.md, "Progress that keeps a call alive").

The rules live here once, as plain arithmetic on the times they are given (no clock is read
here): the caller computes the bound it waits until with :func:`total_bound`, the connection
keeps one :class:`CallClock` per call, pauses and resumes it and, when its timer fires, asks
it whether progress moved the deadline (:meth:`CallClock.expire`). Both read the same numbers.
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
    """The clock of one call, kept by the connection (one thread, no lock, but for
    :meth:`progressed`: see there).

    ``deadline`` is absolute (the monotonic clock's seconds) and moves when a pause ends or,
    when the timer fires, to where progress moved it; ``total`` is the absolute bound of
    :func:`total_bound` (None until known: the first pause sets it from the client's
    ``max_total_timeout``). Pauses nest (several server requests may belong to one call); the
    clock runs again when the last one ends. ``reset`` is the call's ``timeout`` when each
    progress report restarts it (None: progress moves nothing) and ``heard`` when the latest
    one came.

    >>> clock = CallClock(deadline=130.0, total=700.0)
    >>> clock.pause(now=110.0, max_total=600.0)  # the handler starts: arm the total bound
    590.0
    >>> clock.resume(now=400.0)  # 20 s of the timeout were left: they still are
    20.0
    >>> clock.deadline
    420.0

    With ``reset``, the deadline is moved lazily: the reader only notes the time of each
    report; the connection's timer asks :meth:`expire` when it fires.

    >>> clock = CallClock(deadline=130.0, total=700.0, reset=30.0)
    >>> clock.progressed(now=125.0)
    >>> clock.expire(now=130.0)  # 30 s from the report: re-arm the timer for 25 s
    25.0
    >>> clock.expire(now=155.0) is None  # silent since: the call has run out
    True
    """

    __slots__ = ("deadline", "total", "pauses", "reset", "heard", "_left", "_paused_at")

    def __init__(
        self, deadline: float, total: float | None = None, reset: float | None = None
    ) -> None:
        self.deadline = deadline
        self.total = total
        #: the handler's works for the call now (0: the clock runs)
        self.pauses = 0
        self.reset = reset
        self.heard: float | None = None  # the latest progress report (None: none yet)
        self._left = 0.0  # the timeout left when the first pause began
        self._paused_at = 0.0

    def __repr__(self) -> str:
        return (
            f"<CallClock deadline={self.deadline:.3f} total={self.total} pauses={self.pauses}"
            + ("" if self.reset is None else f" reset={self.reset}")
            + ">"
        )

    @property
    def until(self) -> float:
        """The last moment the call may still be answered: its total bound, else its
        deadline (what a caller waits until)."""
        return self.deadline if self.total is None else self.total

    def progressed(self, now: float) -> None:
        """A progress report for the call was heard at ``now``. The one method called off
        the connection's thread (by the transport's reader, for a call with ``reset``): it
        stores one float, which the connection only reads, so no lock is needed and no
        wake-up of the connection is paid per report."""
        self.heard = now

    def _moved(self) -> float:
        # The deadline as the latest progress left it: its whole timeout from the report,
        # never past the total bound (which no progress moves).
        deadline = self.deadline
        reset, heard = self.reset, self.heard
        if reset is None or heard is None or heard + reset <= deadline:
            return deadline
        moved = heard + reset
        total = self.total
        return moved if total is None or moved <= total else max(deadline, total)

    def left(self, now: float) -> float:
        """Seconds until the deadline (as progress moved it), never negative."""
        return max(0.0, self._moved() - now)

    def expire(self, now: float) -> float | None:
        """The call's timer fired at ``now``: None if the call has run out (it fails), else
        the seconds until the deadline progress moved it to (the timer is re-armed to fire
        then, and ``deadline`` is that moment). A paused clock's timer is its total bound:
        it has run out."""
        if self.pauses:
            return None
        moved = self._moved()
        if moved <= now:
            return None
        self.deadline = moved
        return moved - now

    def cut_by_total(self) -> bool:
        """Whether a call that ran out was ended by its total bound rather than its
        timeout: it was paused for the handler, or progress would have kept it alive past
        the bound (``timeout``/``max_total_timeout`` rather than ``timeout``/``deadline``)."""
        if self.pauses:
            return True
        reset, heard, total = self.reset, self.heard, self.total
        return (
            reset is not None
            and heard is not None
            and total is not None
            and (heard + reset > total)
        )

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
        self._paused_at = now
        return self.total - now

    def resume(self, now: float) -> float | None:
        """One of the handler's works for the call ended. When it was the last, the clock
        runs again: the deadline is the timeout left at the pause from ``now`` (the whole
        ``reset`` timeout if progress was heard meanwhile), never past the total bound, and
        the seconds until it are returned (the timer is re-armed to fire then; negative: at
        once). None while other works go on, or if the clock was not stopped."""
        if self.pauses <= 0:
            return None
        self.pauses -= 1
        if self.pauses:
            return None
        left = self._left
        reset, heard = self.reset, self.heard
        if reset is not None and heard is not None and heard >= self._paused_at:
            left = max(left, reset)
        total = self.deadline if self.total is None else self.total
        self.deadline = min(now + left, total)
        return self.deadline - now
