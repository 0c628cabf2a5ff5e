"""This process's CPU time and context switches around a loop of calls, written once for
``stdio_switches.py`` and ``http_switches.py``: both read the same counters the same way
(every thread's ``/proc/self/task/*/status``, Linux only, and ``time.process_time``) and
differ only in what they call and how they print it.
"""

from __future__ import annotations

import glob
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import ParamSpec

P = ParamSpec("P")


def switches() -> tuple[int, int]:
    """This process's voluntary and involuntary context switches so far, all threads."""
    vol = invol = 0
    for path in glob.glob("/proc/self/task/*/status"):
        try:
            with open(path) as f:
                for line in f:
                    if line.startswith("voluntary_ctxt_switches"):
                        vol += int(line.split()[1])
                    elif line.startswith("nonvoluntary_ctxt_switches"):
                        invol += int(line.split()[1])
        except FileNotFoundError:  # a thread that ended meanwhile
            pass
    return vol, invol


@dataclass
class Counts:
    """What ``n`` calls cost in all: wall and CPU seconds, voluntary and involuntary switches."""

    n: int
    wall: float
    cpu: float
    vol: int
    invol: int


def count(n: int, fn: Callable[P, object], *args: P.args, **kwargs: P.kwargs) -> Counts:
    """``n`` sequential calls of ``fn(*args, **kwargs)``, counted (the counters are read
    outside the loop only)."""
    v0, i0 = switches()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        fn(*args, **kwargs)
    t1, c1 = time.perf_counter(), time.process_time()
    v1, i1 = switches()
    return Counts(n, t1 - t0, c1 - c0, v1 - v0, i1 - i0)


async def count_async(
    n: int, fn: Callable[P, Awaitable[object]], *args: P.args, **kwargs: P.kwargs
) -> Counts:
    """:func:`count` for awaited calls: ``n`` of ``await fn(*args, **kwargs)``."""
    v0, i0 = switches()
    t0, c0 = time.perf_counter(), time.process_time()
    for _ in range(n):
        await fn(*args, **kwargs)
    t1, c1 = time.perf_counter(), time.process_time()
    v1, i1 = switches()
    return Counts(n, t1 - t0, c1 - c0, v1 - v0, i1 - i0)
