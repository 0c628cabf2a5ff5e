"""Flood control for change notifications: a leading/trailing coalescer and a refresh gate.

The rule (``docs/connection.md``, "Notifications"): a burst of one
``notifications/*/list_changed`` kind is coalesced: the first is delivered at once, and any
further ones within the next 250 ms are delivered as one trailing notification, so a flood
reaches subscribers at most twice per window. Each delivered ``list_changed`` marks the
matching cache list stale and, if it was ever fetched, refreshes it: at most two refreshes per
burst, and at most one per second per list under a sustained flood.

Both classes are pure state machines: no threads, no clock reads, no timers. Every call takes
``now`` (``time.monotonic()`` seconds, never decreasing); ``next_deadline()`` says when the owner
(the connection) must call again, so it arms one timer for it and calls ``due(now)`` when it
fires. A late call is fine: what was due is delivered then, and the spacing rules still hold
because every window is measured from the delivery (or start) that actually happened.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Final

from ..errors import Error

__all__ = ["Coalescer", "RefreshGate", "is_list_changed"]

_PREFIX: Final = "notifications/"
_SUFFIX: Final = "/list_changed"
#: The Coalescer drops closed windows once it holds more than this many (and twice as many as
#: at its last sweep).
_SWEEP_MIN: Final = 64


def is_list_changed(method: str) -> bool:
    """Whether ``method`` is a ``notifications/<kind>/list_changed`` (the coalesced kinds).

    >>> is_list_changed("notifications/tools/list_changed")
    True
    >>> is_list_changed("notifications/message")
    False
    """
    return (
        method.startswith(_PREFIX)
        and method.endswith(_SUFFIX)
        and len(method) > len(_PREFIX) + len(_SUFFIX)
    )


def _positive(name: str, value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise Error("argument", name, f"{name} must be a number > 0")
    return float(value)


class Coalescer:
    """Leading + trailing coalescing per method, with a window of ``window`` seconds.

    A delivery opens a window ``[t, t + window)`` for its method. :meth:`offer` outside any open
    window delivers at once (``True``: a lone notification is never delayed). Inside one it is
    held (``False``); at the window's end :meth:`due` returns the method once, as the trailing
    notification that stands for every arrival held in that window, and that delivery opens
    the next window. So deliveries of one method are always at least ``window`` apart (at most
    two in any closed window-length interval), a sustained flood yields one per window, and an
    arrival is never delivered later than ``window`` after it (plus the owner's timer lag).

    >>> c = Coalescer(0.25)
    >>> c.offer("notifications/tools/list_changed", 10.0)
    True
    >>> c.offer("notifications/tools/list_changed", 10.1), c.next_deadline()
    (False, 10.25)
    >>> c.due(10.25), c.next_deadline()
    (['notifications/tools/list_changed'], None)
    """

    __slots__ = ("_window", "_open", "_held", "_sweep_at")

    def __init__(self, window: float = 0.25) -> None:
        self._window = _positive("window", window)
        #: method -> end of its open window (a delivery happened at end - window).
        self._open: dict[str, float] = {}
        #: methods with a held arrival, each in its open window.
        self._held: set[str] = set()
        self._sweep_at = _SWEEP_MIN

    @property
    def window(self) -> float:
        """The window length in seconds."""
        return self._window

    def offer(self, method: str, now: float) -> bool:
        """A notification of ``method`` arrived at ``now``: ``True`` to deliver it now.

        ``False`` means it is held: a later :meth:`due` returns ``method`` once for it and every
        other arrival held in the same window.
        """
        end = self._open.get(method)
        if end is not None and now < end:
            self._held.add(method)
            return False
        # No open window, or one that ended: a held trailing one (if the owner's timer is late)
        # is covered by delivering this arrival now.
        self._held.discard(method)
        self._open[method] = now + self._window
        if len(self._open) > self._sweep_at:
            self._sweep(now)
        return True

    def _sweep(self, now: float) -> None:
        # The method names come from the server: without this, one carrying a fresh name per
        # notification would grow the table until the owner's next due(). Amortised O(1).
        held = self._held
        self._open = {m: end for m, end in self._open.items() if end > now or m in held}
        self._sweep_at = max(_SWEEP_MIN, 2 * len(self._open))

    def due(self, now: float) -> list[str]:
        """The methods whose trailing notification is due at ``now``; deliver each once.

        Each opens a new window from ``now``. Windows that ended with nothing held are closed.
        """
        out: list[str] = []
        window = self._window
        for method, end in list(self._open.items()):
            if end > now:
                continue
            if method in self._held:
                self._held.discard(method)
                self._open[method] = now + window
                out.append(method)
            else:
                del self._open[method]
        return out

    def next_deadline(self) -> float | None:
        """When a trailing notification falls due (call :meth:`due` then); ``None``: none held."""
        if not self._held:
            return None
        return min(self._open[m] for m in self._held)

    def held(self) -> frozenset[str]:
        """The methods with a trailing notification pending."""
        return frozenset(self._held)


class _Refresh:
    """One list kind's refresh state."""

    __slots__ = ("running", "scheduled", "dirty", "last_start")

    def __init__(self) -> None:
        self.running = False
        #: When the next refresh is to start (returned to the owner, not yet started).
        self.scheduled: float | None = None
        #: A request arrived while a refresh ran: one follow-up is owed when it finishes.
        self.dirty = False
        self.last_start: float | None = None


class RefreshGate:
    """When to refresh each cached list: coalesced, and at least ``min_interval`` s apart.

    The owner calls :meth:`request` when a list goes stale; the answer is when to start a
    refresh (``now``, or later if the last one started less than ``min_interval`` ago), or
    ``None`` when a refresh already running or scheduled will cover the request. It calls
    :meth:`started` when it starts one and :meth:`finished` when that one ends, which returns
    the time of the single follow-up owed to requests that arrived while it ran. So a burst
    costs at most two refreshes (the one it triggered and one follow-up), a flood at most one
    per ``min_interval``, and the last request is always followed by a refresh that starts at
    or after it: the final state of the list is always fetched.

    For later starts, :meth:`next_deadline` and :meth:`due` work as in :class:`Coalescer`.

    >>> g = RefreshGate(1.0)
    >>> g.request("tools", 5.0)
    5.0
    >>> g.started("tools", 5.0)
    >>> g.request("tools", 5.1) is None  # coalesced into a follow-up
    True
    >>> g.finished("tools", 5.3)  # rate-limited: one second after the last start
    6.0
    >>> g.due(6.0)
    ['tools']
    """

    __slots__ = ("_min", "_kinds")

    def __init__(self, min_interval: float = 1.0) -> None:
        self._min = _positive("min_interval", min_interval)
        self._kinds: dict[str, _Refresh] = {}

    @property
    def min_interval(self) -> float:
        """The minimum time between two starts of one kind's refresh, in seconds."""
        return self._min

    def _state(self, kind: str) -> _Refresh:
        state = self._kinds.get(kind)
        if state is None:
            state = self._kinds[kind] = _Refresh()
        return state

    def _schedule(self, state: _Refresh, now: float) -> float:
        at = now if state.last_start is None else max(now, state.last_start + self._min)
        state.scheduled = at
        return at

    def request(self, kind: str, now: float) -> float | None:
        """``kind`` went stale at ``now``: when to start its refresh, or ``None`` (covered).

        ``now`` means start it now; a later time means arm a timer (or use :meth:`due`). Either
        way the owner calls :meth:`started` when it does start it, or :meth:`cancel`.
        """
        state = self._state(kind)
        if state.running:
            state.dirty = True
            return None
        if state.scheduled is not None:
            return None
        return self._schedule(state, now)

    def started(self, kind: str, now: float) -> None:
        """A refresh of ``kind`` started at ``now`` (scheduled here, or the list's first fetch).

        Every request so far is covered by it.
        """
        state = self._state(kind)
        state.running = True
        state.scheduled = None
        state.dirty = False
        state.last_start = now

    def finished(self, kind: str, now: float) -> float | None:
        """The refresh of ``kind`` ended at ``now`` (success or not): the follow-up's time.

        ``None`` when no request arrived while it ran.
        """
        state = self._state(kind)
        state.running = False
        if not state.dirty:
            return None
        state.dirty = False
        return self._schedule(state, now)

    def cancel(self, kind: str) -> None:
        """Drop ``kind``'s scheduled refresh and owed follow-up (e.g. the list was dropped).

        A running refresh stays running until :meth:`finished`; the rate limit is kept.
        """
        state = self._kinds.get(kind)
        if state is not None:
            state.scheduled = None
            state.dirty = False

    def running(self, kind: str) -> bool:
        """Whether a refresh of ``kind`` is running."""
        state = self._kinds.get(kind)
        return state is not None and state.running

    def due(self, now: float) -> list[str]:
        """The kinds whose scheduled refresh may start at ``now``; call :meth:`started` for each.

        They stay scheduled until then, so a later :meth:`request` still coalesces.
        """
        return [kind for kind, at in self._scheduled() if at <= now]

    def next_deadline(self) -> float | None:
        """The earliest scheduled start, or ``None`` when nothing is scheduled."""
        return min((at for _, at in self._scheduled()), default=None)

    def _scheduled(self) -> Iterator[tuple[str, float]]:
        for kind, state in self._kinds.items():
            if state.scheduled is not None:
                yield kind, state.scheduled
