"""Context switches and CPU per sequential streamable-HTTP call (issue 23, goal 3).

Starts ``fast_http_server.py`` (as ``bench_http.py`` does), makes one blocking client per
era, and after a warm-up times ``--calls`` sequential ``call_tool`` calls, reading this
process's voluntary and involuntary context switches (every thread's
``/proc/self/task/*/status``, Linux only) and its CPU time around them::

    .venv/bin/python benchmarks/http_switches.py --calls 1000

Each figure is per call: rate, this process's CPU, voluntary switches (a thread that
blocks), involuntary ones (a thread preempted), and the threads alive. The bare loop runs
once per era: each client is compared with the same exchange, done without a client.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import bare_http
import bench_http as bench
from counters import Counts, count, count_async

import conduit_mcp as mcp


def bare(url: str, era: str, n: int, warmup: int) -> None:
    """The same figures for a bare aiohttp loop posting the era's calls (no client): a legacy
    session is initialized first and its calls carry ``Mcp-Session-Id`` and
    ``MCP-Protocol-Version``, as the client's do (``bare_http.connect``: the exchange
    ``bench_http.bench_bare`` times)."""
    import asyncio

    import aiohttp

    async def run() -> None:
        async with aiohttp.ClientSession() as http:
            call = await bare_http.connect(http, url, era, bench.ARGS)
            for _ in range(warmup):
                await call()
            counts = await count_async(n, call)
            report(f"bare aiohttp loop ({era})", counts)

    asyncio.run(run())


def report(what: str, c: Counts) -> None:
    n = c.n
    print(
        f"{what}: {n / c.wall:,.0f} calls/s, cpu {1e6 * c.cpu / n:.0f} us,"
        f" voluntary switches {c.vol / n:.2f}, involuntary {c.invol / n:.2f},"
        f" threads {len(os.listdir('/proc/self/task'))} (per call;"
        f" load {os.getloadavg()[0]:.2f})"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=1000)
    ap.add_argument("--warmup", type=int, default=100)
    ap.add_argument("--era", default="modern,legacy")
    args = ap.parse_args()
    server = bench.Server("fast")
    try:
        for era in args.era.split(","):
            bare(server.url, era, args.calls, args.warmup)
        for era in args.era.split(","):
            client = mcp.Client.start(mcp.Http(server.url), protocol=era, max_in_flight=64)
            try:
                for _ in range(args.warmup):
                    client.call_tool("add", bench.ARGS)
                report(era, count(args.calls, client.call_tool, "add", bench.ARGS))
            finally:
                client.stop()
    finally:
        server.stop()


if __name__ == "__main__":
    main()
