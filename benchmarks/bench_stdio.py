"""stdio throughput: conduit-mcp vs the official ``mcp`` 2.3.0 client vs a bare loop (the limit).

All three talk to the same server, ``benchmarks/fast_server.py`` (a fresh process each), calling
the tool ``add`` ``{"a": 1, "b": 2}``:

  (a) bare      the first row: a loop with no client at all: orjson-encode a tools/call line,
                write it, read and decode the answer (sequential: the physical limit of
                sequential calls on this machine), and the same with 32 requests kept in
                flight (pipelined); then the same line out and back awaited on an asyncio
                loop, its answer read by a reader registered once (the floor of an awaited
                call: what asyncio costs; the aio rows' goal line says how far they are)
  (b) official  ``mcp.Client(StdioServerParameters(...), mode="auto")`` under anyio: sequential
                awaits, and 32 tasks in one task group
  (c) conduit   ``conduit_mcp.Client.start(Stdio(...), protocol="auto", max_in_flight=64)``:
                blocking ``call_tool`` (one thread, then 32 threads) and ``await client.aio.call_tool``
                (one task, then 32 asyncio tasks)

Each client connects and warms up before timing; each is run ``--repeat`` times (a fresh
server process each time) and its median run is kept (``--keep best`` for the best). Prints
one table: calls/s, per-call latency p50/p99, the ratio conduit/official for the matching
pattern, and every row against the bare sequential loop of the same run (``/bare``), so a
slower machine reads as a slower machine. The last lines check issue 23's goals: 32 calls in
flight at or above the bare sequential loop, sequential calls at 0.6 of it or more.

    .venv/bin/python benchmarks/bench_stdio.py            # or: make bench
    .venv/bin/python benchmarks/bench_stdio.py --calls 500 --concurrent-calls 1000 --only bare,official
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import functools
import os
import platform
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import orjson

sys.path.insert(0, str(Path(__file__).resolve().parent))  # measure: a sibling module
from measure import (
    Row,
    add_turn_options,
    failed,
    json_fields,
    stop,
    take_turns,
    time_conduit,
    time_official,
    write_json,
)

HERE = Path(__file__).resolve().parent
FAST_SERVER = str(HERE / "fast_server.py")
ARGS = {"a": 1, "b": 2}
MODERN = "2026-07-28"


# --------------------------------------------------------------------------- (a) the bare loop


class _Pipe:
    """fast_server over a raw pipe, speaking 2026-07-28 like a minimal client would."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, FAST_SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE, bufsize=0
        )
        self.w = self.proc.stdin.write  # type: ignore[union-attr]
        self.r = os.fdopen(self.proc.stdout.fileno(), "rb", closefd=False).readline  # type: ignore[union-attr]
        self.next_id = 0
        self.meta = {"io.modelcontextprotocol/protocolVersion": MODERN}
        self.request(
            "server/discover",
            {
                "_meta": {
                    **self.meta,
                    "io.modelcontextprotocol/clientInfo": {"name": "bare", "version": "0"},
                }
            },
        )

    def send(self, method: str, params: dict) -> None:
        self.next_id += 1
        self.w(
            orjson.dumps({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
            + b"\n"
        )

    def recv(self) -> dict:
        msg = orjson.loads(self.r())
        if "result" not in msg:
            raise RuntimeError(f"unexpected answer: {msg}")
        return msg

    def request(self, method: str, params: dict) -> dict:
        self.send(method, params)
        return self.recv()

    def call_params(self) -> dict:
        return {"name": "add", "arguments": ARGS, "_meta": self.meta}

    def close(self) -> None:
        self.proc.stdin.close()  # type: ignore[union-attr]
        self.proc.wait(5)


def bench_bare(n: int, total: int, conc: int, warmup: int) -> list[Row]:
    pipe = _Pipe()
    try:
        for _ in range(warmup):
            pipe.request("tools/call", pipe.call_params())

        seq = Row("bare", "sequential", "bare loop: one line out, one back")
        lat = seq.latencies
        t0 = time.perf_counter()
        for _ in range(n):
            t = time.perf_counter()
            pipe.send("tools/call", pipe.call_params())
            pipe.recv()
            lat.append(time.perf_counter() - t)
        seq.seconds, seq.calls = time.perf_counter() - t0, n

        pip = Row("bare", "concurrent", f"bare loop: {conc} pipelined")
        sent_at: dict[int, float] = {}
        t0 = time.perf_counter()
        sent = done = 0
        while sent < min(conc, total):
            pipe.send("tools/call", pipe.call_params())
            sent_at[pipe.next_id] = time.perf_counter()
            sent += 1
        while done < total:
            msg = pipe.recv()
            pip.latencies.append(time.perf_counter() - sent_at.pop(msg["id"]))
            done += 1
            if sent < total:
                pipe.send("tools/call", pipe.call_params())
                sent_at[pipe.next_id] = time.perf_counter()
                sent += 1
        pip.seconds, pip.calls = time.perf_counter() - t0, total
    finally:
        pipe.close()
    return [seq, pip, bench_bare_awaited(n, warmup)]


def bench_bare_awaited(n: int, warmup: int) -> Row:
    """The floor of an awaited sequential call: the bare loop's line out and line back, from
    a coroutine on an asyncio loop, the answer read by a reader registered once for the
    loop's life (what a minimal asyncio client does: no thread, no actor, nothing checked).
    The aio rows are read against it too: what asyncio itself costs on this machine."""
    row = Row("bare", "awaited", "bare asyncio loop: awaited, one reader")
    pipe = _Pipe()
    try:
        asyncio.run(_awaited(pipe, row, n, warmup))
    finally:
        pipe.close()
    return row


async def _awaited(
    pipe: _Pipe,
    row: Row,
    n: int,
    warmup: int,
    around: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
) -> None:
    # around: what the timed calls run inside (opcodes.py counts them with it)
    loop = asyncio.get_running_loop()
    rfd = pipe.proc.stdout.fileno()  # type: ignore[union-attr]
    wfd = pipe.proc.stdin.fileno()  # type: ignore[union-attr]
    os.set_blocking(rfd, False)
    buf = bytearray()
    waiting: list[asyncio.Future[dict]] = []

    def readable() -> None:
        buf.extend(os.read(rfd, 65536))
        end = buf.find(b"\n")
        if end >= 0 and waiting:
            msg = orjson.loads(bytes(buf[:end]))
            del buf[: end + 1]
            waiting.pop().set_result(msg)

    async def call() -> dict:
        future = loop.create_future()
        waiting.append(future)
        pipe.next_id += 1
        os.write(
            wfd,
            orjson.dumps(
                {
                    "jsonrpc": "2.0",
                    "id": pipe.next_id,
                    "method": "tools/call",
                    "params": pipe.call_params(),
                }
            )
            + b"\n",
        )
        msg = await future
        if "result" not in msg:
            raise RuntimeError(f"unexpected answer: {msg}")
        return msg

    loop.add_reader(rfd, readable)
    try:
        for _ in range(warmup):
            await call()
        lat = row.latencies
        with around():
            t0 = time.perf_counter()
            for _ in range(n):
                t = time.perf_counter()
                await call()
                lat.append(time.perf_counter() - t)
            row.seconds, row.calls = time.perf_counter() - t0, n
    finally:
        loop.remove_reader(rfd)


# --------------------------------------------------------------------------- (b) official mcp


def bench_official(n: int, total: int, conc: int, warmup: int) -> list[Row]:
    seq = Row("official", "sequential", "official mcp 2.3.0: sequential await")
    par = Row("official", "concurrent", f"official mcp 2.3.0: {conc} anyio tasks")
    try:
        import anyio
        from mcp import Client, StdioServerParameters
    except ImportError as e:
        seq.error = par.error = f"not available (ImportError: {e})"
        return [seq, par]

    async def run() -> None:
        params = StdioServerParameters(command=sys.executable, args=[FAST_SERVER])
        async with Client(params, mode="auto") as client:
            if client.protocol_version != MODERN:
                raise RuntimeError(f"negotiated {client.protocol_version}, expected {MODERN}")
            await time_official(client, [seq, par], n, total, conc, warmup, ARGS)

    try:
        anyio.run(run)
    except Exception as e:
        seq.error = par.error = f"failed ({type(e).__name__}: {e})"
        traceback.print_exc()
    return [seq, par]


# --------------------------------------------------------------------------- (c) conduit-mcp


def bench_conduit(n: int, total: int, conc: int, warmup: int) -> list[Row]:
    rows = [
        Row("conduit", "sequential", "conduit-mcp: sequential call_tool (blocking)"),
        Row("conduit", "concurrent", f"conduit-mcp: {conc} threads, call_tool"),
        Row("conduit", "sequential", "conduit-mcp: sequential await aio.call_tool"),
        Row("conduit", "concurrent", f"conduit-mcp: {conc} asyncio tasks, aio.call_tool"),
    ]
    try:
        import conduit_mcp as mcp
        from conduit_mcp import Client, Stdio  # noqa: F401 - the API may not be written yet
    except Exception as e:  # ImportError, or a half-written package
        for r in rows:
            r.error = f"not available ({type(e).__name__}: {e})"
        return rows

    client = None
    try:
        client = mcp.Client.start(
            mcp.Stdio(sys.executable, [FAST_SERVER]), protocol="auto", max_in_flight=64
        )
        client.await_ready(timeout=10)
        for _ in range(warmup):
            r = client.call_tool("add", ARGS)
        if getattr(r, "is_error", False):
            raise RuntimeError(f"bad result {r!r}")

        time_conduit(client, rows, n, total, conc, warmup, ARGS)
    except Exception as e:
        failed(rows, e)
    finally:
        stop(client)
    return rows


# --------------------------------------------------------------------------- report

#: Issue 23's goals, against the bare sequential loop of the same run.
GOALS = {"concurrent": 1.0, "sequential": 0.6}


def bare_rate(rows: list[Row]) -> float | None:
    """The bare sequential loop's rate in these rows (the machine's limit), if measured."""
    for r in rows:
        if r.client == "bare" and r.pattern == "sequential" and r.calls:
            return r.rate
    return None


def goal_lines(rows: list[Row], bare: float | None) -> list[str]:
    """Issue 23's two figures: 32 in flight >= 1.0x the bare sequential loop, sequential
    >= 0.6x of it (conduit's rows only)."""
    if bare is None:
        return []
    awaited = next(
        (r.rate for r in rows if r.client == "bare" and r.pattern == "awaited" and r.calls), None
    )
    out = []
    for pattern, target in GOALS.items():
        got = []
        for r in rows:
            if r.client == "conduit" and r.pattern == pattern and r.calls:
                front = "aio" if "aio" in r.label else "blocking"
                verdict = "ok" if r.rate / bare >= target else "MISSED"
                floor = ""
                if front == "aio" and pattern == "sequential" and awaited:
                    floor = f" ({r.rate / awaited:.2f}x of the bare asyncio loop)"
                got.append(f"{front} {r.rate / bare:.2f}x {verdict}{floor}")
        if got:
            name = "32 in flight" if pattern == "concurrent" else "sequential"
            out.append(
                f"  {name} vs the bare sequential loop (goal >= {target}x): {', '.join(got)}"
            )
    return out


def report(rows: list[Row]) -> str:
    def first(client: str, pattern: str) -> Row | None:
        ok = [r for r in rows if r.client == client and r.pattern == pattern and r.calls]
        return ok[0] if ok else None

    def ratio(r: Row, other: Row | None) -> str:
        if r.client != "conduit" or not r.calls or other is None:
            return ""
        return f"{r.rate / other.rate:.2f}x"

    bare = bare_rate(rows)
    head = f"{'scenario':<52} {'calls':>6} {'calls/s':>9} {'p50 us':>8} {'p99 us':>8} {'/official':>9} {'/bare':>6}"
    lines = [head, "-" * len(head)]
    for r in rows:
        if r.error:
            lines.append(f"{r.label:<52} {r.error}")
            continue
        vs_bare = f"{r.rate / bare:.2f}x" if bare else ""
        lines.append(
            f"{r.label:<52} {r.calls:>6} {r.rate:>9.0f} {r.pct(0.5):>8.0f} {r.pct(0.99):>8.0f}"
            f" {ratio(r, first('official', r.pattern)):>9} {vs_bare:>6}"
        )
    if bare:
        lines.append(f"\nthis machine's bare sequential loop: {bare:.0f} calls/s (/bare above)")
    lines += goal_lines(rows, bare)
    return "\n".join(lines)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--calls", type=int, default=2000, help="sequential calls per client (2000)")
    p.add_argument(
        "--concurrent-calls",
        type=int,
        default=4000,
        help="calls in total across the concurrent callers (4000)",
    )
    p.add_argument("--concurrency", type=int, default=32, help="concurrent callers (32)")
    p.add_argument("--warmup", type=int, default=200, help="untimed calls before timing (200)")
    p.add_argument("--repeat", type=int, default=3, help="runs per client (fresh server each) (3)")
    add_turn_options(p)
    a = p.parse_args()

    which = {w.strip() for w in a.only.split(",")}
    print(
        f"stdio benchmark: python {platform.python_version()}, {os.cpu_count()} cpus, "
        f"{a.calls} sequential calls, {a.concurrent_calls} calls over {a.concurrency} callers, "
        f"{a.keep} of {a.repeat}",
        flush=True,
    )
    fns = [
        (name, fn)
        for name, fn in (
            ("bare", bench_bare),
            ("official", bench_official),
            ("conduit", bench_conduit),
        )
        if name in which
    ]
    args = (a.calls, a.concurrent_calls, a.concurrency, a.warmup)
    started = time.perf_counter()
    rows, spent = take_turns(
        [(name, functools.partial(fn, *args)) for name, fn in fns],
        a.repeat,
        a.keep,
        gives_up=lambda got: all(r.error for r in got),  # not available: no point in repeating
    )
    print("  " + ", ".join(f"{name}: {secs:.1f} s" for name, secs in spent.items()), flush=True)
    print()
    print(report(rows))
    print(f"\ntotal {time.perf_counter() - started:.1f} s")
    if a.json:
        write_json(a.json, [json_fields(r) for r in rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())
