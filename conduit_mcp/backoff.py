"""Reconnect delays. ``full_jitter`` is the default (AWS "Exponential Backoff and Jitter"):
a uniformly random delay up to an exponentially growing cap spreads a fleet of clients that
lost the same server, so they do not reconnect in lockstep."""

from __future__ import annotations

import logging
import math
import random
from collections.abc import Callable

log = logging.getLogger("conduit_mcp.backoff")


def full_jitter(attempt: int, *, base: float = 0.1, cap: float = 30.0) -> float:
    """Seconds to wait before reconnect attempt ``attempt`` (1-based).

    >>> 0.0 <= full_jitter(1) <= 0.2
    True
    >>> full_jitter(50, cap=2.0) <= 2.0
    True
    """
    exp = min(cap, base * (2.0 ** min(attempt, 62)))
    return random.uniform(0.0, exp)


class GuardedBackoff:
    """Runs the user's backoff function in the connection — the one piece of user code the
    connection runs (docs/connection.md, "States") — guarded: one that raises or returns anything but a finite
    non-negative number is replaced by :func:`full_jitter` for good, with one warning."""

    __slots__ = ("_fn", "_base", "_cap")

    def __init__(self, fn: Callable[[int], float] | None, base: float, cap: float) -> None:
        self._fn = fn
        self._base = base
        self._cap = cap

    def __call__(self, attempt: int) -> float:
        fn = self._fn
        if fn is not None:
            try:
                value = fn(attempt)
            except Exception as exc:
                log.warning("backoff function raised %s; using full_jitter", type(exc).__name__)
                self._fn = None
            else:
                if (
                    isinstance(value, (int, float))
                    and not isinstance(value, bool)
                    and math.isfinite(value)
                    and value >= 0
                ):
                    return float(value)
                log.warning("backoff function returned an invalid delay; using full_jitter")
                self._fn = None
        return full_jitter(attempt, base=self._base, cap=self._cap)
