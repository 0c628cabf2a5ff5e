"""Cache reads: conduit-mcp's lock-free list cache vs the official ``mcp`` 2.3.0 response cache.

Every client talks to the scripted stdio server ``python -m conduit_mcp.testing --ttl-ms
600000`` (its own process per client; 22 tools, ``ttlMs`` 10 minutes, modern era), fetches
the tool list once, then reads it from its cache:

  (a) conduit lookups, after one ``list_all_tools()``:
        ``client.tool("add")``      point lookups, from 1 thread and from 8 threads (total)
        ``client.cached_tools()``   the whole cached tuple, from 1 thread and 8 threads (total)
  (b) a cached tool listing, no server round trip:
        official  ``await client.list_tools()`` (``Client(..., cache=CacheConfig())``, the
                  default; ``cache_mode="use"``: a hit is served while the server's ``ttlMs``
                  runs, as a deep copy re-absorbed by the session)
        conduit   ``client.list_all_tools()`` (blocking) and ``await client.aio.list_all_tools()``
                  while the cache is fresh

The server's log is read before and after each timed loop: a row whose loop sent any
``tools/list`` to the server is marked (it would not be a cache read). Calls are timed in
batches (per-call p50/p99 are batch times divided by the batch size: a clock read costs
more than a lookup). Each scenario runs ``--repeat`` times with a fresh client; the best
run is kept. Targets from the issue: ``tool(name)`` >= 2M lookups/s on one thread; fresh
``list_all_tools()`` >= 10x the official client's cached ``list_tools``.

    .venv/bin/python benchmarks/bench_cache.py
    .venv/bin/python benchmarks/bench_cache.py --calls 200 --repeat 1      # a quick check
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import sys
import tempfile
import time
import warnings
from collections.abc import Awaitable, Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # measure: a sibling module
from measure import (
    Row,
    failed,
    json_fields,
    stop,
    time_threads,
    write_json,
)

from conduit_mcp.testing import ScriptedServer

MODERN = "2026-07-28"
TTL_MS = "600000"
THREADS = 8
LOOKUP_TARGET = 2_000_000  # tool(name) lookups/s on one thread
LIST_TARGET = 10.0  # conduit list_all_tools / official cached list_tools

warnings.filterwarnings("ignore", message=".*SEP-2577.*")
warnings.filterwarnings("ignore", message=".*deprecated as of 2026-07-28.*")


def _tools_lists(server: ScriptedServer) -> int:
    return len(server.received("tools/list"))


def _batches(fn: Callable[[], object], batch: int) -> Callable[[int, list[float]], None]:
    """``k`` calls of ``fn`` in batches of ``batch``, per-call times (batch means) into a list
    (a thread's work for ``measure.time_threads``, too)."""

    def work(calls: int, lat: list[float]) -> None:
        perf = time.perf_counter
        left = calls
        while left > 0:
            k = min(batch, left)
            t = perf()
            for _ in range(k):
                fn()
            lat.append((perf() - t) / k)
            left -= k

    return work


async def _abatches(
    fn: Callable[[], Awaitable[object]], calls: int, batch: int, lat: list[float]
) -> None:
    """:func:`_batches` for awaited calls: ``calls`` of ``await fn()``, batch means into ``lat``."""
    left = calls
    while left > 0:
        k = min(batch, left)
        t = time.perf_counter()
        for _ in range(k):
            await fn()
        lat.append((time.perf_counter() - t) / k)
        left -= k


# --------------------------------------------------------------------------- conduit-mcp


def bench_conduit(server: ScriptedServer, lookups: int, list_calls: int) -> list[Row]:
    rows = [
        Row("conduit", "lookup", 'conduit: client.tool("add"), 1 thread'),
        Row("conduit", "lookup", f'conduit: client.tool("add"), {THREADS} threads (total)'),
        Row("conduit", "cached", "conduit: client.cached_tools(), 1 thread"),
        Row("conduit", "cached", f"conduit: client.cached_tools(), {THREADS} threads (total)"),
        Row("conduit", "list", "conduit: list_all_tools() fresh cache (blocking)"),
        Row("conduit", "list", "conduit: await aio.list_all_tools() fresh cache"),
    ]
    try:
        import conduit_mcp as mcp
    except Exception as e:
        for r in rows:
            r.error = f"not available ({type(e).__name__}: {e})"
        return rows

    client = None
    current: Row | None = None
    try:
        client = mcp.Client.start(server.stdio(), protocol="auto", max_in_flight=64)
        status = client.await_ready(timeout=15)
        if status.version != MODERN:
            raise RuntimeError(f"negotiated {status.version}, expected {MODERN}")
        tools = client.list_all_tools()
        add = client.tool("add")
        if add is None or add.name != "add" or client.cached_tools() != tools:
            raise RuntimeError(f"the cache does not hold the listing: tool('add') = {add!r}")

        def lookup() -> object:
            return client.tool("add")

        cached = client.cached_tools
        list_all = client.list_all_tools
        before = _tools_lists(server)
        for row, fn, threads, calls in (
            (rows[0], lookup, 1, lookups),
            (rows[1], lookup, THREADS, lookups),
            (rows[2], cached, 1, lookups),
            (rows[3], cached, THREADS, lookups),
            (rows[4], list_all, 1, list_calls),
        ):
            current = row
            work = _batches(fn, 1000)
            work(max(1, calls // 10), [])  # warm-up
            if threads == 1:
                t0 = time.perf_counter()
                work(calls, row.latencies)
                row.seconds, row.calls = time.perf_counter() - t0, calls
            else:
                time_threads(row, calls, threads, work)

        async def aio() -> None:
            fn = client.aio.list_all_tools
            row = rows[5]
            for _ in range(max(1, list_calls // 10)):
                await fn()
            t0 = time.perf_counter()
            await _abatches(fn, list_calls, 1000, row.latencies)
            row.seconds, row.calls = time.perf_counter() - t0, list_calls

        current = rows[5]
        asyncio.run(aio())
        sent = _tools_lists(server) - before
        if sent:
            for r in rows[4:]:
                r.error = f"INVALID: {sent} tools/list sent to the server while timing"
    except Exception as e:
        print(f"conduit failed during {current.label if current else 'setup'}:", file=sys.stderr)
        failed(rows, e)
    finally:
        stop(client)
    return rows


# --------------------------------------------------------------------------- official mcp


def bench_official(server: ScriptedServer, calls: int) -> list[Row]:
    row = Row("official", "list", "official mcp 2.3.0: await list_tools() cache hit")
    try:
        import anyio
        from mcp import Client, StdioServerParameters
    except ImportError as e:
        row.error = f"not available (ImportError: {e})"
        return [row]

    async def run() -> None:
        # The official stdio transport passes only a minimal environment: add the server's.
        params = StdioServerParameters(command=sys.executable, args=server.args(), env=server.env())
        async with Client(params, mode="auto") as client:
            if client.protocol_version != MODERN:
                raise RuntimeError(f"negotiated {client.protocol_version}, expected {MODERN}")
            first = await client.list_tools()  # the one fetch; later calls are cache hits
            if first.ttl_ms != int(TTL_MS) or not first.tools:
                raise RuntimeError(f"unexpected listing: ttl_ms={first.ttl_ms}")
            before = _tools_lists(server)
            for _ in range(max(1, calls // 10)):
                await client.list_tools()
            t0 = time.perf_counter()
            await _abatches(client.list_tools, calls, 10, row.latencies)
            row.seconds, row.calls = time.perf_counter() - t0, calls
            sent = _tools_lists(server) - before
            if sent:
                row.error = f"INVALID: {sent} tools/list sent to the server while timing"

    try:
        anyio.run(run)
    except Exception as e:  # an ExceptionGroup from anyio's task groups, too
        failed([row], e)
    return [row]


# --------------------------------------------------------------------------- report


def report(rows: list[Row]) -> str:
    official = next((r for r in rows if r.client == "official" and r.calls and not r.error), None)
    head = f"{'scenario':<56} {'calls':>9} {'calls/s':>11} {'p50 ns':>9} {'p99 ns':>9} {'/official':>10}"
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.error:
            lines.append(f"{r.label:<56} {r.error}")
            continue
        ratio = ""
        if r.pattern == "list" and r.client == "conduit" and official is not None:
            ratio = f"{r.rate / official.rate:,.0f}x"
        lines.append(
            f"{r.label:<56} {r.calls:>9} {r.rate:>11,.0f} {r.pct(0.5) * 1e3:>9,.0f}"
            f" {r.pct(0.99) * 1e3:>9,.0f} {ratio:>10}"
        )
    lines.append("")
    one = next((r for r in rows if r.label == 'conduit: client.tool("add"), 1 thread'), None)
    if one is not None and one.calls:
        ok = "ok" if one.rate >= LOOKUP_TARGET else "MISSED"
        lines.append(
            f"  tool(name), 1 thread (target >= {LOOKUP_TARGET:,}/s): {one.rate:,.0f}/s {ok}"
        )
    for r in rows:
        if r.pattern == "list" and r.client == "conduit" and r.calls and official is not None:
            x = r.rate / official.rate
            ok = "ok" if x >= LIST_TARGET else "MISSED"
            front = "aio" if "aio" in r.label else "blocking"
            lines.append(
                f"  fresh list_all_tools {front} vs official cached list_tools"
                f" (target >= {LIST_TARGET:.0f}x): {x:,.0f}x {ok}"
            )
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument(
        "--calls", type=int, default=2000, help="official cached list_tools calls per run (2000)"
    )
    p.add_argument(
        "--list-calls",
        type=int,
        default=None,
        help="conduit list_all_tools calls per run (default: 100 x --calls)",
    )
    p.add_argument(
        "--lookups",
        type=int,
        default=None,
        help="lookups per tool()/cached_tools() scenario, in total (default: 500 x --calls)",
    )
    p.add_argument("--repeat", type=int, default=3, help="runs per client; best kept (3)")
    p.add_argument("--only", default="official,conduit", help="comma list of official,conduit")
    p.add_argument("--json", metavar="PATH", help="also write the rows as JSON")
    a = p.parse_args()
    list_calls = a.list_calls if a.list_calls is not None else 100 * a.calls
    lookups = a.lookups if a.lookups is not None else 500 * a.calls
    which = {w.strip() for w in a.only.split(",")}
    print(
        f"cache benchmark: python {platform.python_version()}, {os.cpu_count()} cpus, "
        f"{lookups} lookups per scenario, {list_calls} conduit / {a.calls} official cached "
        f"listings, best of {a.repeat}",
        flush=True,
    )
    started = time.perf_counter()
    best: dict[str, Row] = {}
    with tempfile.TemporaryDirectory(prefix="bench-cache-") as tmp:
        server = ScriptedServer(tmp, extra_args=["--ttl-ms", TTL_MS])
        for i in range(max(1, a.repeat)):
            t = time.perf_counter()
            got: list[Row] = []
            if "official" in which:
                got += bench_official(server, a.calls)
            if "conduit" in which:
                got += bench_conduit(server, lookups, list_calls)
            for r in got:
                old = best.get(r.label)
                if (
                    old is None
                    or (old.error and not r.error)
                    or (not r.error and r.rate > old.rate)
                ):
                    best[r.label] = r
            print(f"  run {i + 1}: {time.perf_counter() - t:.1f} s", flush=True)
            if all(r.error and r.error.startswith("not available") for r in got):
                break
    rows = sorted(best.values(), key=lambda r: (r.pattern == "list", r.client != "official"))
    print()
    print(report(rows))
    print(f"\ntotal {time.perf_counter() - started:.1f} s")
    if a.json:
        write_json(a.json, [json_fields(r, "ns") for r in rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())
