"""This process's CPU time and context switches around a loop of calls, written once for
``stdio_switches.py`` and ``http_switches.py`` (and a process's CPU seconds for
``many_clients.py``): the scripts read the same counters the same way (every thread's
``/proc/self/task/*/status``, Linux only, and ``time.process_time``) and differ only in
what they call and how they print it.
"""

from __future__ import annotations

import glob
import os
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


def _now() -> tuple[float, float, int, int]:
    vol, invol = switches()
    return time.perf_counter(), time.process_time(), vol, invol


def _since(n: int, t0: tuple[float, float, int, int]) -> Counts:
    # Clocks first, then /proc (as _now reads it before them): its reads stay outside the
    # timed span at both ends.
    t1, c1 = time.perf_counter(), time.process_time()
    v1, i1 = switches()
    return Counts(n, t1 - t0[0], c1 - t0[1], v1 - t0[2], i1 - t0[3])


def count(n: int, fn: Callable[P, object], *args: P.args, **kwargs: P.kwargs) -> Counts:
    """``n`` sequential calls of ``fn(*args, **kwargs)``, counted (the counters are read
    outside the loop only)."""
    t0 = _now()
    for _ in range(n):
        fn(*args, **kwargs)
    return _since(n, t0)


async def count_async(
    n: int, fn: Callable[P, Awaitable[object]], *args: P.args, **kwargs: P.kwargs
) -> Counts:
    """:func:`count` for awaited calls: ``n`` of ``await fn(*args, **kwargs)``."""
    t0 = _now()
    for _ in range(n):
        await fn(*args, **kwargs)
    return _since(n, t0)


def cpu_s(pid: int | None = None) -> float:
    """User plus system CPU seconds of this process (every thread), or of process ``pid``
    (its ``/proc/<pid>/stat``, Linux)."""
    if pid is None:
        return time.process_time()
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
