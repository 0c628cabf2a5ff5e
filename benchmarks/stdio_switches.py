"""Where a sequential stdio call's time goes: bare loop, blocking, asyncio (issue 23, goal 2).

Starts ``fast_server.py`` (as ``bench_stdio.py`` does) and, after a warm-up, times
``--calls`` sequential calls of each kind, reading this process's context switches (every
thread's ``/proc/self/task/*/status``, Linux only) and its CPU time around them::

    .venv/bin/python benchmarks/stdio_switches.py --calls 5000

Each figure is per call: rate, this process's CPU, voluntary switches (a thread that
blocks), involuntary ones (a thread preempted). With ``--stages`` it then times the
stages of ``--calls`` more ``await client.aio.call_tool`` calls (medians, µs from the
call's start): the request's write begun and returned, the reader's handling of the answer
begun and done (``_on_stdout``, on the I/O loop's thread), the caller's loop settling the
future (``replies._settle_all``), the call returned. The probes wrap library functions, so
they add a little to each stage; compare stages, not totals, with the first table.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bench_stdio as bench
from counters import Counts, count, count_async

import conduit_mcp as mcp


def report(what: str, c: Counts) -> None:
    n = c.n
    print(
        f"{what}: {n / c.wall:,.0f} calls/s ({1e6 * c.wall / n:.0f} us), cpu {1e6 * c.cpu / n:.0f} us,"
        f" voluntary switches {c.vol / n:.2f}, involuntary {c.invol / n:.2f}"
        f" (per call; load {os.getloadavg()[0]:.2f})"
    )


def stages(n: int, warmup: int) -> None:
    """The medians of the stages of a sequential aio call (see the module docstring), with a
    client of its own started once the probes are in (the reader binds ``_on_stdout`` when
    it starts)."""
    from conduit_mcp import replies
    from conduit_mcp.transports import stdio

    clock = time.perf_counter_ns
    marks: dict[str, int] = {}
    write, on_stdout, settle = (
        stdio.StdioTransport._write_locked,
        stdio.StdioTransport._on_stdout,
        replies._settle_all,
    )

    def timed_write(self: Any, data: bytes) -> None:
        marks.setdefault("write", clock())
        write(self, data)
        marks.setdefault("written", clock())

    def timed_read(self: Any, data: bytes) -> None:
        marks["read"] = clock()
        on_stdout(self, data)
        marks["handled"] = clock()

    def timed_settle(items: list[Any]) -> None:
        marks["settled"] = clock()
        settle(items)

    stdio.StdioTransport._write_locked = timed_write  # type: ignore[method-assign]
    stdio.StdioTransport._on_stdout = timed_read  # type: ignore[method-assign]
    replies._settle_all = timed_settle
    rows: list[dict[str, float]] = []
    client = mcp.Client.start(
        mcp.Stdio(sys.executable, [bench.FAST_SERVER]), protocol="auto", max_in_flight=64
    )

    async def run() -> None:
        for _ in range(warmup):
            await client.aio.call_tool("add", bench.ARGS)
        for _ in range(n):
            marks.clear()
            t0 = clock()
            await client.aio.call_tool("add", bench.ARGS)
            row = {k: (v - t0) / 1000 for k, v in marks.items()}
            row["returned"] = (clock() - t0) / 1000
            rows.append(row)

    try:
        client.await_ready(timeout=30)
        asyncio.run(run())
    finally:
        client.stop()
        stdio.StdioTransport._write_locked = write  # type: ignore[method-assign]
        stdio.StdioTransport._on_stdout = on_stdout  # type: ignore[method-assign]
        replies._settle_all = settle
    names = ["write", "written", "read", "handled", "settled", "returned"]
    medians = {k: statistics.median(r[k] for r in rows if k in r) for k in names}
    print(
        "aio stages, median us from the call's start: "
        + ", ".join(f"{k} {v:.1f}" for k, v in medians.items())
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=5000)
    ap.add_argument("--warmup", type=int, default=300)
    ap.add_argument("--stages", action="store_true", help="then time an aio call's stages")
    args = ap.parse_args()
    n = args.calls

    pipe = bench._Pipe()
    try:
        for _ in range(args.warmup):
            pipe.request("tools/call", pipe.call_params())
        report("bare loop", count(n, lambda: pipe.request("tools/call", pipe.call_params())))
    finally:
        pipe.close()

    client = mcp.Client.start(
        mcp.Stdio(sys.executable, [bench.FAST_SERVER]), protocol="auto", max_in_flight=64
    )
    try:
        client.await_ready(timeout=30)
        for _ in range(args.warmup):
            client.call_tool("add", bench.ARGS)
        report("blocking call_tool", count(n, lambda: client.call_tool("add", bench.ARGS)))

        async def aio() -> None:
            for _ in range(args.warmup):
                await client.aio.call_tool("add", bench.ARGS)
            counts = await count_async(n, lambda: client.aio.call_tool("add", bench.ARGS))
            report("await aio.call_tool", counts)

        asyncio.run(aio())
    finally:
        client.stop()
    if args.stages:
        stages(n, args.warmup)


if __name__ == "__main__":
    main()
