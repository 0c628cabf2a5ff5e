"""Timing a benchmark's calls into rows, written once for the scripts that compare clients
(``bench_stdio.py``, ``bench_http.py``, ``bench_cache.py``, ``sse_bench.py``,
``inprocess_bench.py``): a row and its rate and percentiles; the loops that fill it
(sequential, asyncio tasks, anyio tasks, threads) and the patterns several scripts build of
them (conduit's four rows, the official client's two); the run kept of a scenario's repeats
with the clients taking turns, with its options; a row's JSON fields. One copy of each loop,
so that rows set side by side are timed alike: a loop times each call on its own
(``time.perf_counter()`` before and after) and the row's seconds span the whole loop.
"""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
import traceback
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ParamSpec, TypeVar

import orjson

P = ParamSpec("P")


@dataclass(kw_only=True)
class Timed:
    """What a timed loop gives: its calls, its seconds, each call's seconds, or an error."""

    calls: int = 0
    seconds: float = 0.0
    latencies: list[float] = field(default_factory=list, repr=False)
    error: str | None = None

    @property
    def rate(self) -> float:
        return self.calls / self.seconds if self.seconds > 0 else 0.0

    def pct(self, q: float) -> float:
        """The ``q`` quantile of the calls' latencies, in µs (NaN with none)."""
        if not self.latencies:
            return float("nan")
        xs = sorted(self.latencies)
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1e6


@dataclass
class Row(Timed):
    """One scenario of one client: ``client`` (``"bare"``, ``"official"``, ``"conduit"``),
    ``pattern`` (``"sequential"``, ``"concurrent"``, ...) and the label it prints under."""

    client: str
    pattern: str
    label: str


R = TypeVar("R", bound=Row)


def split(total: int, parts: int) -> list[int]:
    """``total`` calls shared among ``parts`` callers, as evenly as they go."""
    return [total // parts + (1 if i < total % parts else 0) for i in range(parts)]


def failed(rows: Sequence[Timed], e: BaseException) -> None:
    """Mark the rows a failure left without calls, and print its traceback."""
    for r in rows:
        if not r.calls:
            r.error = f"failed ({type(e).__name__}: {e})"
    traceback.print_exc()


# --------------------------------------------------------------------------- the loops


def time_sequential(
    row: Timed, n: int, fn: Callable[P, object], *args: P.args, **kwargs: P.kwargs
) -> None:
    """``n`` calls of ``fn(*args, **kwargs)``, one after another."""
    lat = row.latencies
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        fn(*args, **kwargs)
        lat.append(time.perf_counter() - t)
    row.seconds, row.calls = time.perf_counter() - t0, n


async def time_sequential_async(
    row: Timed, n: int, fn: Callable[P, Awaitable[object]], *args: P.args, **kwargs: P.kwargs
) -> None:
    """``n`` of ``await fn(*args, **kwargs)``, one after another."""
    lat = row.latencies
    t0 = time.perf_counter()
    for _ in range(n):
        t = time.perf_counter()
        await fn(*args, **kwargs)
        lat.append(time.perf_counter() - t)
    row.seconds, row.calls = time.perf_counter() - t0, n


def _awaiting(
    lat: list[float], fn: Callable[P, Awaitable[object]], *args: P.args, **kwargs: P.kwargs
) -> Callable[[int], Coroutine[Any, Any, None]]:
    """A task's work for :func:`time_gather` and :func:`time_task_group`: ``k`` awaited
    calls, each timed into ``lat``."""

    async def worker(k: int) -> None:
        for _ in range(k):
            t = time.perf_counter()
            await fn(*args, **kwargs)
            lat.append(time.perf_counter() - t)

    return worker


async def time_gather(
    row: Timed,
    total: int,
    conc: int,
    fn: Callable[P, Awaitable[object]],
    *args: P.args,
    **kwargs: P.kwargs,
) -> None:
    """``total`` awaited calls over ``conc`` asyncio tasks (``asyncio.gather``)."""
    worker = _awaiting(row.latencies, fn, *args, **kwargs)
    t0 = time.perf_counter()
    await asyncio.gather(*(worker(k) for k in split(total, conc)))
    row.seconds, row.calls = time.perf_counter() - t0, total


async def time_task_group(
    row: Timed,
    total: int,
    conc: int,
    fn: Callable[P, Awaitable[object]],
    *args: P.args,
    **kwargs: P.kwargs,
) -> None:
    """``total`` awaited calls over ``conc`` tasks of one anyio task group (the official
    client's way), under ``anyio.run``."""
    import anyio

    worker = _awaiting(row.latencies, fn, *args, **kwargs)
    t0 = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for k in split(total, conc):
            tg.start_soon(worker, k)
    row.seconds, row.calls = time.perf_counter() - t0, total


def each_call(fn: Callable[[], object]) -> Callable[[int, list[float]], None]:
    """A thread's work for :func:`time_threads`: ``k`` calls of ``fn``, each timed."""

    def work(k: int, into: list[float]) -> None:
        for _ in range(k):
            t = time.perf_counter()
            fn()
            into.append(time.perf_counter() - t)

    return work


def time_threads(
    row: Timed, total: int, conc: int, work: Callable[[int, list[float]], None]
) -> None:
    """``total`` calls over ``conc`` threads, each running ``work(k, latencies)`` for its
    share ``k``: the threads start first and wait at a barrier, so the row's seconds span
    the calls, not the threads' start; the first error is raised once all are done."""
    barrier = threading.Barrier(conc + 1)
    errors: list[BaseException] = []
    lats: list[list[float]] = []

    def worker(k: int) -> None:
        mine: list[float] = []
        lats.append(mine)
        barrier.wait()
        try:
            work(k, mine)
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(k,), daemon=True) for k in split(total, conc)]
    for th in threads:
        th.start()
    barrier.wait()
    t0 = time.perf_counter()
    for th in threads:
        th.join()
    row.seconds, row.calls = time.perf_counter() - t0, total
    row.latencies = [x for m in lats for x in m]
    if errors:
        raise errors[0]


def time_conduit(
    client: Any,
    rows: Sequence[Timed],
    n: int,
    total: int,
    conc: int,
    warmup: int,
    arguments: dict[str, object],
) -> None:
    """The four rows of a started, warmed-up conduit client calling ``add``, as
    ``bench_stdio.py`` and ``bench_http.py`` time them: sequential blocking ``call_tool``,
    ``conc`` threads of it, then (after ``warmup`` awaited calls) sequential
    ``await client.aio.call_tool`` and ``conc`` asyncio tasks of it."""

    def call() -> object:
        return client.call_tool("add", arguments)

    time_sequential(rows[0], n, call)
    time_threads(rows[1], total, conc, each_call(call))

    async def run() -> None:
        aio = client.aio
        for _ in range(warmup):
            await aio.call_tool("add", arguments)
        await time_sequential_async(rows[2], n, aio.call_tool, "add", arguments)
        await time_gather(rows[3], total, conc, aio.call_tool, "add", arguments)

    asyncio.run(run())


async def time_official(
    session: Any,
    rows: Sequence[Timed],
    n: int,
    total: int,
    conc: int,
    warmup: int,
    arguments: dict[str, object],
) -> None:
    """The two rows of the official client's connected ``session`` calling ``add`` (its
    ``Client`` or ``ClientSession``), as ``bench_stdio.py``, ``bench_http.py`` and
    ``sse_bench.py`` time them: ``warmup`` calls and a check of the last one's result
    (``3``), then sequential awaits and ``conc`` tasks of one anyio task group."""
    for _ in range(warmup):
        r = await session.call_tool("add", arguments)
    if r.is_error or r.content[0].text != "3":
        raise RuntimeError(f"bad result {r!r}")
    await time_sequential_async(rows[0], n, session.call_tool, "add", arguments)
    await time_task_group(rows[1], total, conc, session.call_tool, "add", arguments)


def stop(client: Any) -> None:
    """Stop a conduit client if one was started; a failure to stop is printed, not raised,
    so that the rows measured before it are kept."""
    if client is not None:
        try:
            client.stop()
        except Exception:
            traceback.print_exc()


# --------------------------------------------------------------------------- the runs kept


def keep(runs: list[R], how: str) -> R:
    """The run to report of a scenario's repeats: the median by rate (an even count takes the
    lower middle), or the best; a run that failed only when every run failed."""
    ok = sorted((r for r in runs if not r.error), key=lambda r: r.rate)
    if not ok:
        return runs[-1]
    return ok[-1] if how == "best" else ok[(len(ok) - 1) // 2]


def take_turns(
    clients: Sequence[tuple[str, Callable[[], list[R]]]],
    repeat: int,
    how: str,
    gives_up: Callable[[list[R]], bool],
    after_round: Callable[[], None] | None = None,
) -> tuple[list[R], dict[str, float]]:
    """Each client's run, ``repeat`` rounds of one run each, the clients taking turns: a
    machine whose load changes during the rounds (other processes on 2 cores) then weighs on
    every row alike, and the ratios hold. A client whose run ``gives_up`` is not run again.
    Returns the run kept of each row (:func:`keep`, by label, in the order first seen) and
    the seconds each client took in all."""
    runs: dict[str, list[R]] = {}
    spent = dict.fromkeys((name for name, _ in clients), 0.0)
    dead: set[str] = set()
    for _ in range(max(1, repeat)):
        for name, run in clients:
            if name in dead:
                continue
            t = time.perf_counter()
            got = run()
            spent[name] += time.perf_counter() - t
            for r in got:
                runs.setdefault(r.label, []).append(r)
            if gives_up(got):
                dead.add(name)
        if after_round is not None:
            after_round()
    return [keep(rs, how) for rs in runs.values()], spent


def add_turn_options(p: argparse.ArgumentParser) -> None:
    """The options of a script whose clients :func:`take_turns`, last on its command line:
    ``--keep``, ``--only`` and ``--json``."""
    p.add_argument(
        "--keep", choices=("median", "best"), default="median", help="which run to report (median)"
    )
    p.add_argument(
        "--only", default="bare,official,conduit", help="comma list of bare,official,conduit"
    )
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")


# --------------------------------------------------------------------------- JSON


def json_fields(r: Row, unit: str = "us") -> dict[str, object]:
    """A row's fields for ``--json``, its percentiles in ``unit`` (``"us"`` or ``"ns"``)."""
    scale = {"us": 1.0, "ns": 1e3}[unit]
    return {
        "client": r.client,
        "pattern": r.pattern,
        "label": r.label,
        "calls": r.calls,
        "seconds": r.seconds,
        "calls_per_s": r.rate,
        f"p50_{unit}": r.pct(0.5) * scale if r.latencies else None,
        f"p99_{unit}": r.pct(0.99) * scale if r.latencies else None,
        "error": r.error,
    }


def write_json(path: str, items: list[dict[str, object]]) -> None:
    """``items`` to ``path``, indented."""
    Path(path).write_bytes(orjson.dumps(items, option=orjson.OPT_INDENT_2))
