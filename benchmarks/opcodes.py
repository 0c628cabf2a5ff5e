"""The Python work of one sequential call, counted: bytecodes and function calls run per
``call_tool``, in the caller's thread and in the client's I/O loop thread.

A timing on this project's shared 2-core VM moves ±15% from one run to the next (and a
plain Python loop's speed by 2x within a minute), so it cannot show a change of a few
percent. A count of the bytecodes run does not move: it compares two builds on any
machine, and a sequential call's cost is mostly them (on this VM ~25-30 ns each; a
blocking stdio call runs ~2,800, the bare loop of ``bench_stdio.py`` ~150). It counts
the work, not the time: a system call or a wait counts as the one bytecode that makes it.

Counted with ``sys.settrace`` opcode events (which make the calls ~20x slower, so the
counts are taken over ``--calls`` calls after ``--warmup`` untraced ones, and no timing is
printed). Each row: bytecodes and Python function calls per call, and the split between
the caller's thread and the I/O loop's; ``--top N`` lists the functions that run the most.

    .venv/bin/python benchmarks/opcodes.py                     # stdio and HTTP, both front ends
    .venv/bin/python benchmarks/opcodes.py --only stdio --top 25
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling modules
from servers import read_port

import conduit_mcp as mcp
from conduit_mcp.transports import loop as io_loop

HERE = Path(__file__).resolve().parent
FAST_SERVER = str(HERE / "fast_server.py")
FAST_HTTP_SERVER = str(HERE / "fast_http_server.py")
ARGS = {"a": 1, "b": 2}


class Counts:
    """Bytecodes and calls per function, per thread kind ("caller", "io")."""

    def __init__(self) -> None:
        self.ops: collections.Counter[tuple[str, str]] = collections.Counter()
        self.calls: collections.Counter[tuple[str, str]] = collections.Counter()

    def tracer(self, where: str) -> Callable[[FrameType, str, Any], Any]:
        ops, calls = self.ops, self.calls

        def trace(frame: FrameType, event: str, arg: Any) -> Any:
            code = frame.f_code
            key = (where, f"{Path(code.co_filename).name}:{code.co_name}")
            if event == "call":
                calls[key] += 1
                frame.f_trace_opcodes = True
                frame.f_trace_lines = False
                return trace
            if event == "opcode":
                ops[key] += 1
            return trace

        return trace

    def total(self, counter: collections.Counter[tuple[str, str]], where: str | None) -> int:
        return sum(v for (w, _), v in counter.items() if where is None or w == where)


def _on_io_loop(fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn`` on the client's I/O loop thread and wait for it (bounded)."""
    done = threading.Event()

    def run() -> None:
        try:
            fn(*args)
        finally:
            done.set()

    io_loop.call_soon(run)
    if not done.wait(10):
        raise RuntimeError("the I/O loop did not run the tracer's switch in 10 s")


@contextlib.contextmanager
def traced(io: bool = True) -> Iterator[Counts]:
    """Count what runs inside the block in this thread and, with ``io``, on the client's
    I/O loop thread; the tracers are off again when it is left."""
    counts = Counts()
    if io:
        _on_io_loop(sys.settrace, counts.tracer("io"))
    sys.settrace(counts.tracer("caller"))
    try:
        yield counts
    finally:
        sys.settrace(None)
        if io:
            _on_io_loop(sys.settrace, None)


def measure(transport: Any, protocol: str, calls: int, warmup: int) -> dict[str, Counts]:
    client = mcp.Client.start(transport, protocol=protocol, max_in_flight=64)
    try:
        client.await_ready(timeout=15)
        for _ in range(warmup):
            client.call_tool("add", ARGS)

        with traced() as blocking:
            for _ in range(calls):
                client.call_tool("add", ARGS)
        out = {"blocking call_tool": blocking}

        async def aio_counted() -> Counts:
            for _ in range(warmup):
                await client.aio.call_tool("add", ARGS)
            with traced() as counts:
                for _ in range(calls):
                    await client.aio.call_tool("add", ARGS)
            return counts

        out["await aio.call_tool"] = asyncio.run(aio_counted())
        return out
    finally:
        client.stop()


def bare_stdio(calls: int) -> Counts:
    """The bare loop of bench_stdio.py, counted the same way."""
    import bench_stdio

    pipe = bench_stdio._Pipe()
    try:
        for _ in range(50):
            pipe.request("tools/call", pipe.call_params())
        with traced(io=False) as counts:
            for _ in range(calls):
                pipe.request("tools/call", pipe.call_params())
        return counts
    finally:
        pipe.close()


def bare_awaited(calls: int) -> Counts:
    """The bare asyncio loop of bench_stdio.py (the floor of an awaited call), counted the
    same way."""
    import bench_stdio

    got: list[Counts] = []

    @contextlib.contextmanager
    def around() -> Iterator[None]:
        with traced(io=False) as counts:
            got.append(counts)
            yield

    pipe = bench_stdio._Pipe()
    try:
        row = bench_stdio.Row("bare", "awaited", "counted")
        asyncio.run(bench_stdio._awaited(pipe, row, calls, 50, around))
    finally:
        pipe.close()
    return got[0]


def bare_http_loop(url: str, era: str, calls: int) -> Counts:
    """The bare aiohttp loop of bench_http.py (bare_http.py), counted the same way: its
    loop runs in the caller's thread, so all of it is the caller's."""
    import aiohttp
    import bare_http

    async def run() -> Counts:
        async with aiohttp.ClientSession() as http:
            call = await bare_http.connect(http, url, era, ARGS)
            for _ in range(50):
                await call()
            with traced(io=False) as counts:
                for _ in range(calls):
                    await call()
            return counts

    return asyncio.run(run())


def http_server() -> tuple[subprocess.Popen[bytes], str]:
    proc = subprocess.Popen(
        [sys.executable, FAST_HTTP_SERVER, "--port", "0"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    try:
        port = read_port(proc, time.monotonic() + 20, "fast HTTP server")
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    return proc, f"http://127.0.0.1:{port}/mcp"


def row(label: str, counts: Counts, calls: int) -> str:
    ops = counts.total(counts.ops, None) / calls
    caller = counts.total(counts.ops, "caller") / calls
    io = counts.total(counts.ops, "io") / calls
    fns = counts.total(counts.calls, None) / calls
    return f"{label:<44} {ops:>9.0f} {caller:>8.0f} {io:>8.0f} {fns:>8.1f}"


def top(counts: Counts, calls: int, n: int) -> list[str]:
    return [
        f"    {v / calls:>8.1f}  {counts.calls[k] / calls:>5.1f} calls  {k[0]:<6} {k[1]}"
        for k, v in counts.ops.most_common(n)
    ]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--calls", type=int, default=300, help="traced calls per row (300)")
    ap.add_argument("--warmup", type=int, default=200, help="untraced calls before (200)")
    ap.add_argument("--only", default="stdio,http", help="comma list of stdio,http")
    ap.add_argument("--top", type=int, default=0, help="list the N costliest functions")
    args = ap.parse_args()
    if args.calls < 1 or args.warmup < 0:
        ap.error("--calls must be >= 1 and --warmup >= 0")
    kinds = set(args.only.split(","))
    results: list[tuple[str, Counts]] = []
    if "stdio" in kinds:
        results.append(("stdio bare loop (bench_stdio.py)", bare_stdio(args.calls)))
        results.append(("stdio bare asyncio loop (bench_stdio.py)", bare_awaited(args.calls)))
        stdio = mcp.Stdio(sys.executable, [FAST_SERVER])
        for name, counts in measure(stdio, "auto", args.calls, args.warmup).items():
            results.append((f"stdio {name}", counts))
    if "http" in kinds:
        proc, url = http_server()
        try:
            for era in ("modern", "legacy"):
                bare = bare_http_loop(url, era, args.calls)
                results.append((f"http {era} bare aiohttp loop (bare_http.py)", bare))
                for name, counts in measure(mcp.Http(url), era, args.calls, args.warmup).items():
                    results.append((f"http {era} {name}", counts))
        finally:
            proc.terminate()
            proc.wait(10)
    print(f"{'per call':<44} {'bytecodes':>9} {'caller':>8} {'I/O loop':>8} {'calls':>8}")
    print("-" * 82)
    for label, counts in results:
        print(row(label, counts, args.calls))
        if args.top:
            print("\n".join(top(counts, args.calls, args.top)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
