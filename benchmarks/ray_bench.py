"""The cluster on Ray (docs/cluster.md): per-call overhead through a host against the same
call on a local Hub, batched throughput, memory per host and per client, the start of a
host with many HTTP clients, and a host killed under load.

    .venv/bin/python benchmarks/ray_bench.py                 # everything (a few minutes)
    .venv/bin/python benchmarks/ray_bench.py --clients 200   # a smaller many-clients host
    .venv/bin/python benchmarks/ray_bench.py --spread 2000   # 2,000 HTTP clients over 4 hosts
    .venv/bin/python benchmarks/ray_bench.py --compiled      # batches over Ray compiled graphs

Starts a local Ray (loopback only, one CPU, 80 MiB object store, no dashboard), like
``mcp.RayEngine()`` does. Figures vary with other jobs on the machine: each is printed with
what it is compared to.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil
from servers import FastHttpServer

import conduit_mcp as mcp
from conduit_mcp.testing import ScriptedServer

HERE = Path(__file__).resolve().parent
SERVER = {"command": sys.executable, "args": ["-m", "conduit_mcp.testing"]}
ADD = {"a": 1, "b": 2}


def seq_ms(call: Any, n: int) -> float:
    for _ in range(20):
        call()
    start = time.perf_counter()
    for _ in range(n):
        call()
    return (time.perf_counter() - start) / n * 1000


def bare_ray_ms(n: int) -> float:
    """One Ray round trip to an async actor that returns its argument, sequentially: the
    floor under a call through a host (the same Ray, started by the engine)."""
    import ray

    @ray.remote(num_cpus=0)
    class Echo:
        async def echo(self, value: Any) -> Any:
            return value

    actor = Echo.remote()  # type: ignore[attr-defined]
    try:
        return seq_ms(lambda: ray.get(actor.echo.remote(ADD), timeout=60), n)
    finally:
        ray.kill(actor)


def graph_ray_ms(n: int) -> float:
    """The same round trip over a Ray compiled graph (caller -> actor -> caller on
    shared-memory channels): the engine's path for a caller's batches."""
    import ray
    from ray.dag import InputNode

    @ray.remote(num_cpus=0)
    class Echo:
        def echo(self, value: Any) -> Any:
            return value

    actor = Echo.remote()  # type: ignore[attr-defined]
    with InputNode() as given:
        dag = actor.echo.bind(given)
    graph = dag.experimental_compile()
    try:
        return seq_ms(lambda: ray.get(graph.execute(ADD)), n)
    finally:
        graph.teardown()
        ray.kill(actor)


def warm(call: Any, fast_ms: float, seconds: float = 15.0) -> None:
    """Calls until 50 in a row average under ``fast_ms`` (at most ``seconds``; the task
    path is never that fast): the engine compiles a host's graph in the background at the
    first call (0.1-6 s here), so a figure taken at once would be the actor task's."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.perf_counter()
        for _ in range(50):
            call()
        if (time.perf_counter() - start) / 50 * 1000 < fast_ms:
            return


def windowed(futures_front: Any, name: str, n: int, window: int) -> float:
    """Calls per second with ``window`` in flight (pykka futures, refilled as they finish)."""
    start = time.perf_counter()
    pending: list[Any] = []
    sent = 0
    while sent < n or pending:
        while sent < n and len(pending) < window:
            pending.append(futures_front.call_tool(name, ADD))
            sent += 1
        pending.pop(0).get(timeout=60)
    return n / (time.perf_counter() - start)


def aio_window(front: Any, name: str, n: int, window: int) -> float:
    async def run() -> float:
        sem = asyncio.Semaphore(window)

        async def one() -> None:
            async with sem:
                await front.call_tool(name, ADD)

        start = time.perf_counter()
        await asyncio.gather(*(one() for _ in range(n)))
        return n / (time.perf_counter() - start)

    return asyncio.run(run())


def rss_mib(pid: int) -> float:
    proc = psutil.Process(pid)
    total = proc.memory_info().rss
    for child in proc.children(recursive=True):
        try:
            total += child.memory_info().rss
        except psutil.Error:
            pass
    return total / 2**20


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"[load {one:.2f}/{five:.2f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=1000, help="HTTP clients on one host")
    parser.add_argument("--skip-many", action="store_true")
    parser.add_argument(
        "--compiled", action="store_true", help="RayEngine(compiled=True): batches over a graph"
    )
    parser.add_argument(
        "--spread", type=int, default=10_000, help="HTTP clients over 4 hosts (0: skip)"
    )
    args = parser.parse_args()
    n = args.calls

    print("== direct: a local Hub in this process ==")
    with mcp.Hub.start({"mcpServers": {"a": SERVER}}, max_in_flight=1000) as local:
        local.await_ready(timeout=30)
        d_seq = seq_ms(lambda: local.call_tool("a.add", ADD), n // 2)
        d_32 = windowed(local.futures, "a.add", n, 32)
        print(f"sequential: {d_seq:.3f} ms/call; 32 in flight: {d_32:,.0f} calls/s {load()}")

    t0 = time.perf_counter()
    cluster = mcp.Cluster.start(mcp.RayEngine(max_restarts=5, compiled=args.compiled))
    print(f"\n== through a host (Ray started in {time.perf_counter() - t0:.1f} s) ==")
    try:
        bare = bare_ray_ms(n // 2)
        print(
            f"base: a bare Ray round trip (an async actor method returning its argument) "
            f"{bare:.3f} ms {load()}"
        )
        graph = graph_ray_ms(n // 2)
        print(
            f"base: the same over a Ray compiled graph (RayEngine(compiled=True)'s path for "
            f"a caller's batches; this run: compiled={args.compiled}) {graph:.3f} ms {load()}"
        )
        t0 = time.perf_counter()
        hub = cluster.hub("bench", {"mcpServers": {"a": SERVER}}, max_in_flight=1000)
        hub.await_ready(timeout=60)
        print(f"a host with 1 stdio client, ready in {time.perf_counter() - t0:.2f} s")
        if args.compiled:
            warm(lambda: hub.call_tool("a.add", ADD), fast_ms=0.6 * bare)
        r_seq = seq_ms(lambda: hub.call_tool("a.add", ADD), n // 2)
        r_32 = windowed(hub.futures, "a.add", n, 32)
        r_aio = aio_window(hub.aio, "a.add", n, 32)
        (host,) = cluster.status().hosts
        print(
            f"sequential: {r_seq:.3f} ms/call (direct {d_seq:.3f}: +{r_seq - d_seq:.3f} ms; "
            f"bare Ray round trip {bare:.3f}: +{r_seq - bare:.3f} ms; compiled graph "
            f"{graph:.3f}: +{r_seq - graph:.3f} ms); "
            f"32 in flight: futures {r_32:,.0f} calls/s, asyncio {r_aio:,.0f} calls/s "
            f"(direct {d_32:,.0f}); {host.calls} calls in {host.messages} messages "
            f"({host.calls / max(host.messages, 1):.1f} per message) {load()}"
        )
        m0 = host.messages
        start = time.perf_counter()
        burst = [hub.futures.call_tool("a.add", ADD) for _ in range(n)]
        for f in burst:
            f.get(timeout=60)
        rate = n / (time.perf_counter() - start)
        (host,) = cluster.status().hosts
        print(
            f"burst of {n}: {rate:,.0f} calls/s, {host.messages - m0} messages "
            f"({n / max(host.messages - m0, 1):.0f} calls per message) {load()}"
        )
        base = rss_mib(host.pid)
        print(
            f"memory: the host with 1 stdio client {base:.0f} MiB (its server's process included)"
        )
        hub.stop()

        # -- a host killed under load ------------------------------------------------------
        print("\n== a host killed under load ==")
        scripted = ScriptedServer(tempfile.mkdtemp(prefix="ray-bench-"), name="kill")
        killed_server = {"command": sys.executable, "args": scripted.args()}
        hub = cluster.hub("kill", {"mcpServers": {"a": killed_server}}, max_in_flight=1000)
        hub.await_ready(timeout=60)
        (before,) = cluster.status().hosts
        futures = [hub.futures.call_tool("a.slow", {"seconds": 30}) for _ in range(32)]
        deadline = time.monotonic() + 20
        while cluster.status().hosts[0].in_flight < 32 or time.monotonic() < deadline - 19:
            if time.monotonic() > deadline:
                break
        killed = time.monotonic()
        os.kill(before.pid, signal.SIGKILL)
        answered: list[float] = []
        outcomes: dict[str, int] = {}
        for f in futures:
            try:
                f.get(timeout=30)
                outcomes["result"] = outcomes.get("result", 0) + 1
            except mcp.Error as e:
                outcomes[e.reason] = outcomes.get(e.reason, 0) + 1
            answered.append(time.monotonic() - killed)
        hub.await_ready(timeout=60, servers="all")
        back = time.monotonic() - killed
        ok = hub.call_tool("a.add", ADD).text == "3"
        (after,) = cluster.status().hosts
        received = [
            e
            for e in scripted.received("tools/call")
            if (e.get("params") or {}).get("name") == "slow"
        ]
        print(
            f"32 calls in flight: {outcomes} (0 lost: {len(answered)} of 32 answered; each "
            f"answered once, never sent again); slowest answer {max(answered):.2f} s after "
            f"the kill, median {statistics.median(answered):.2f} s; the host back with its "
            f"client in {back:.2f} s (pid {before.pid} -> {after.pid}, restarts "
            f"{after.restarts}); a call after: {'ok' if ok else 'FAILED'}; the server received "
            f"{len(received)} slow calls (32: none sent twice) {load()}"
        )
        hub.stop()

        # -- many clients on one host --------------------------------------------------------
        if not args.skip_many:
            print(f"\n== one host with {args.clients} HTTP clients ==")
            server = FastHttpServer()
            url = server.url
            try:
                config = {"mcpServers": {f"s{i}": {"url": url} for i in range(args.clients)}}
                t0 = time.perf_counter()
                hub = cluster.hub("many", config)
                started = time.perf_counter() - t0
                hub.await_ready(timeout=300, servers="all")
                ready = time.perf_counter() - t0
                (host,) = cluster.status().hosts
                total = rss_mib(host.pid)
                t1 = time.perf_counter()
                futures = [hub.futures.call_tool(f"s{i}.add", ADD) for i in range(args.clients)]
                texts = [f.get(timeout=120).text for f in futures]
                calls = time.perf_counter() - t1
                print(
                    f"host started in {started:.2f} s, {host.clients} clients all ready in "
                    f"{ready:.2f} s; one call each in {calls:.2f} s ({texts.count('3')} ok); "
                    f"host RSS {total:.0f} MiB: {(total - base) / args.clients * 1024:.0f} KiB "
                    f"per client over the 1-client host {load()}"
                )
                t2 = time.perf_counter()
                hub.stop()
                print(f"all stopped in {time.perf_counter() - t2:.2f} s {load()}")
            finally:
                server.stop()

        # -- many clients over 4 hosts -------------------------------------------------------
        if args.spread:
            spread = args.spread
            print(f"\n== {spread} HTTP clients over 4 hosts ==")
            cluster.engine.clients_per_host = -(-spread // 4)
            server = FastHttpServer()
            url = server.url
            try:
                config = {"mcpServers": {f"s{i}": {"url": url} for i in range(spread)}}
                t0 = time.perf_counter()
                hub = cluster.hub("spread", config)
                started = time.perf_counter() - t0
                hub.await_ready(timeout=600, servers="all")
                ready = time.perf_counter() - t0
                hosts = cluster.status().hosts
                total = sum(rss_mib(h.pid) for h in hosts if h.pid)
                t1 = time.perf_counter()
                futures = [hub.futures.call_tool(f"s{i}.add", ADD) for i in range(spread)]
                texts = [f.get(timeout=300).text for f in futures]
                calls = time.perf_counter() - t1
                print(
                    f"{len(hosts)} hosts ({[h.clients for h in hosts]} clients) started in "
                    f"{started:.2f} s, all ready in {ready:.2f} s; one call each in {calls:.2f} s "
                    f"({texts.count('3')} ok); the hosts' RSS {total:.0f} MiB {load()}"
                )
                t2 = time.perf_counter()
                hub.stop()
                print(f"all stopped in {time.perf_counter() - t2:.2f} s {load()}")
            finally:
                server.stop()
    finally:
        cluster.stop()


if __name__ == "__main__":
    main()
