"""HTTP+SSE (2024-11-05) throughput: conduit-mcp's ``Sse`` vs the official ``mcp`` 2.3.0 SSE client.

Both clients talk to the same server process, started once per server kind, calling the
tool ``add`` ``{"a": 1, "b": 2}``. Servers (``--server``, a comma list):

  official  the official ``mcp`` 2.3.0 server's SSE app (``tests/sse/sse_peers.py modern``:
            uvicorn, starlette, ``GET /sse``, ``POST /messages/``): realistic, and its own
            per-request work (starlette, pydantic) is most of the time (the default)
  light     ``tests/sse/sse_server.py``: a small aiohttp SSE server, so the clients' own
            cost shows more

Clients:

  official  ``mcp.client.sse.sse_client(url)`` + ``ClientSession`` under anyio (httpx2):
            sequential awaits, then 32 tasks in one task group
  conduit   ``conduit_mcp.Client.start(Sse(url), max_in_flight=64)``: blocking
            ``call_tool`` (one thread, then 32 threads) and ``await client.aio.call_tool``
            (one task, then 32 asyncio tasks)

Over this transport every call is a POST answered 202 and an answer on the one stream.
Each scenario runs ``--repeat`` times (a fresh
client each time, official and conduit alternating); the best run is kept. Prints calls/s,
latency p50/p99 and the ratio conduit/official for the matching pattern.

    .venv/bin/python benchmarks/sse_bench.py
    .venv/bin/python benchmarks/sse_bench.py --calls 200 --repeat 1   # a quick check
    .venv/bin/python benchmarks/sse_bench.py --server official,light
"""

from __future__ import annotations

import argparse
import asyncio
import platform
import socket
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # measure: a sibling module
from measure import (
    Row,
    failed,
    split,
    time_gather,
    time_official,
    time_sequential,
    time_sequential_async,
)

HERE = Path(__file__).resolve().parent
SSE_PEERS = HERE.parent / "tests" / "sse" / "sse_peers.py"
LIGHT_SERVER = HERE.parent / "tests" / "sse" / "sse_server.py"
ARGS = {"a": 1, "b": 2}

warnings.filterwarnings("ignore", message=".*SEP-2577.*")
warnings.filterwarnings("ignore", message=".*deprecated.*")


@dataclass
class SRow(Row):
    pass


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Server:
    """One SSE server process (``official`` or ``light``), up for the whole run of its kind."""

    def __init__(self, kind: str) -> None:
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}/sse"
        argv = (
            [str(SSE_PEERS), "modern", "--port", str(self.port)]
            if kind == "official"
            else [str(LIGHT_SERVER), "--port", str(self.port)]
        )
        self.proc = subprocess.Popen(
            [sys.executable, *argv],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("the SSE server exited at start")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)  # polling a port in a benchmark's setup, not a test
        self.stop()
        raise RuntimeError("the SSE server did not listen within 30 s")

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(5)


# --------------------------------------------------------------------------- official


def bench_official(url: str, n: int, total: int, conc: int, warmup: int) -> list[SRow]:
    seq = SRow("official", "sequential", "official mcp 2.3.0 sse_client: sequential await")
    par = SRow("official", "concurrent", f"official mcp 2.3.0 sse_client: {conc} anyio tasks")
    try:
        import anyio
        from mcp.client.session import ClientSession
        from mcp.client.sse import sse_client
    except ImportError as e:
        seq.error = par.error = f"not available (ImportError: {e})"
        return [seq, par]

    async def run() -> None:
        async with sse_client(url) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await time_official(session, [seq, par], n, total, conc, warmup, ARGS)

    try:
        anyio.run(run)
    except Exception as e:  # an ExceptionGroup from anyio's task groups, too
        failed([seq, par], e)
    return [seq, par]


# --------------------------------------------------------------------------- conduit


def bench_conduit(url: str, n: int, total: int, conc: int, warmup: int) -> list[SRow]:
    import conduit_mcp as mcp

    rows = [
        SRow("conduit", "sequential", "conduit Sse: blocking call_tool, 1 thread"),
        SRow("conduit", "concurrent", f"conduit Sse: blocking call_tool, {conc} threads"),
        SRow("conduit", "sequential", "conduit Sse: await aio.call_tool, 1 task"),
        SRow("conduit", "concurrent", f"conduit Sse: await aio.call_tool, {conc} tasks"),
    ]
    client = mcp.Client.start(mcp.Sse(url), max_in_flight=64)
    try:
        if client.await_ready(timeout=20).era != "legacy":
            raise RuntimeError("not legacy")
        for _ in range(warmup):
            r = client.call_tool("add", ARGS, timeout=10)
        if r.is_error or r.text != "3":
            raise RuntimeError(f"bad result {r!r}")
        time_sequential(rows[0], n, client.call_tool, "add", ARGS, timeout=10)

        # Not measure.time_threads: this row's seconds include starting the threads (no
        # barrier), as they always have here.
        par = rows[1]
        lock = threading.Lock()

        def worker(k: int) -> None:
            mine = []
            for _ in range(k):
                t = time.perf_counter()
                client.call_tool("add", ARGS, timeout=30)
                mine.append(time.perf_counter() - t)
            with lock:
                par.latencies.extend(mine)

        threads = [threading.Thread(target=worker, args=(k,)) for k in split(total, conc)]
        t0 = time.perf_counter()
        for th in threads:
            th.start()
        for th in threads:
            th.join()
        par.seconds, par.calls = time.perf_counter() - t0, total

        async def aio() -> None:
            call_tool = client.aio.call_tool
            await time_sequential_async(rows[2], n, call_tool, "add", ARGS, timeout=10)
            await time_gather(rows[3], total, conc, call_tool, "add", ARGS, timeout=30)

        asyncio.run(aio())
    except Exception as e:
        failed(rows, e)
    finally:
        client.stop()
    return rows


# --------------------------------------------------------------------------- report


def best(runs: list[list[SRow]]) -> list[SRow]:
    """Per label, the run with the highest rate."""
    out: dict[str, SRow] = {}
    for rows in runs:
        for r in rows:
            kept = out.get(r.label)
            if kept is None or (r.error is None and r.rate > kept.rate):
                out[r.label] = r
    return list(out.values())


def report(rows: list[SRow]) -> None:
    print(f"\n{'client / pattern':58} {'calls/s':>9} {'p50 us':>9} {'p99 us':>9} {'ratio':>7}")
    official = {r.pattern: r.rate for r in rows if r.client == "official" and r.error is None}
    for r in rows:
        if r.error is not None:
            print(f"{r.label:58} {r.error}")
            continue
        ratio = ""
        if r.client == "conduit" and official.get(r.pattern):
            ratio = f"{r.rate / official[r.pattern]:.2f}x"
        print(f"{r.label:58} {r.rate:9.0f} {r.pct(0.5):9.0f} {r.pct(0.99):9.0f} {ratio:>7}")
    print("ratio: conduit calls/s over the official client's, same pattern (higher is better)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=500, help="sequential calls per run")
    parser.add_argument("--concurrent-calls", type=int, default=1000)
    parser.add_argument("--concurrency", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--server", default="official", help="official, light, or both")
    args = parser.parse_args()
    kinds = [k.strip() for k in args.server.split(",") if k.strip()]
    if not kinds or any(k not in ("official", "light") for k in kinds):
        parser.error("--server is a comma list of official and light")
    print(f"python {platform.python_version()} on {platform.machine()}, {sys.platform}")
    for kind in kinds:
        server = Server(kind)
        try:
            runs: list[list[SRow]] = []
            for _ in range(args.repeat):
                common = (
                    server.url,
                    args.calls,
                    args.concurrent_calls,
                    args.concurrency,
                    args.warmup,
                )
                runs.append(bench_official(*common))
                runs.append(bench_conduit(*common))
            print(f"\nserver: {kind}")
            report(best(runs))
        finally:
            server.stop()


if __name__ == "__main__":
    main()
