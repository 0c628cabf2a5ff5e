"""The Hub, measured: start-up of many servers, lock-free view reads, routing overhead,
failing fast, and how quickly a ``list_changed`` reaches the view.

Rows (targets from issue 20 in brackets):

  start     10 stdio scripted servers from one config: time until all are ready (their lists
            in the view), against one server alone [<= 1.5x]; then the same 10 plus a missing
            command and a server that hangs at start [the 10 no later]
  reads     ``hub.tools()`` and ``hub.tool(name)`` per second on one thread while a member's
            tools change every few ms (each change a list_changed, a refresh and a new
            snapshot) [>= 1M/s]; and what a hand-made merged view costs per read
            (``list_all_tools()`` of each member, merged into a dict: the issue's 444 us)
  route     ``hub.call_tool("fast.add")`` vs the same call on the member ``Client``
            (``benchmarks/fast_server.py``), interleaved rounds, best of each [<= 5% more]
  down      a call to a server that is not ready, to the first byte of the error [< 10 ms]
  changed   ``add_tool`` on a member to the new tool in ``hub.tool(...)`` [< 100 ms]
  comeback  a member's server killed: until its tools leave the view, and until they return
  many      N streamable HTTP servers (one ``fast_http_server.py``) in one config: all ready
            with their lists in the view, one call to each (all in flight), all stopped; at
            1,000 and 2,500 (``--many``), so the growth from one to the other reads as linear
            or not (each member's start used to merge the whole view: N²)

    .venv/bin/python benchmarks/hub_bench.py
    .venv/bin/python benchmarks/hub_bench.py --only route,reads --calls 2000
    .venv/bin/python benchmarks/hub_bench.py --only many --many 1000,2500,5000
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

import conduit_mcp as mcp

HERE = Path(__file__).resolve().parent
SCRIPTED = [sys.executable, "-m", "conduit_mcp.testing"]


def entry(*args: str) -> dict[str, Any]:
    return {"command": SCRIPTED[0], "args": [*SCRIPTED[1:], *args]}


def _ready_time(servers: dict[str, Any], wanted: list[str]) -> float:
    t0 = time.perf_counter()
    with mcp.Hub.start({"mcpServers": servers}) as hub:
        hub.await_ready(timeout=60, servers=wanted)
        return time.perf_counter() - t0


def _cpu(servers: dict[str, Any]) -> tuple[float, float, float]:
    """(wall, this process's CPU, the servers' CPU) until every server is ready."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    c0, t0 = time.process_time(), time.perf_counter()
    hub = mcp.Hub.start({"mcpServers": servers})
    hub.await_ready(timeout=60, servers="all")
    wall, own = time.perf_counter() - t0, time.process_time() - c0
    hub.stop()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    children = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, own, children


def _clients_time(n: int) -> float:
    """``n`` plain Clients started together, all ready: the floor the Hub is held to."""
    t0 = time.perf_counter()
    clients = [mcp.Client.start(mcp.Stdio(SCRIPTED[0], SCRIPTED[1:])) for _ in range(n)]
    try:
        for client in clients:
            client.await_ready(timeout=60)
            client.list_all_tools()
        return time.perf_counter() - t0
    finally:
        for client in clients:
            client.stop()


def bench_start(repeat: int) -> None:
    print("== start: servers ready, their lists in the view (best of", repeat, ")")
    one = min(_ready_time({"s0": entry()}, ["s0"]) for _ in range(repeat))
    ten_names = [f"s{i}" for i in range(10)]
    ten = min(_ready_time({n: entry() for n in ten_names}, ten_names) for _ in range(repeat))
    floor = min(_clients_time(10) for _ in range(repeat))
    broken = {
        **{n: entry() for n in ten_names},
        "missing": {"command": "/nonexistent/mcp-server"},
        "hangs": entry("--startup-delay", "120"),
    }
    with_broken = min(_ready_time(broken, ten_names) for _ in range(repeat))
    print(f"  1 server                      {one * 1e3:8.1f} ms")
    print(f"  10 servers                    {ten * 1e3:8.1f} ms   {ten / one:5.2f}x one [<= 1.5x]")
    print(
        f"  10 plain Clients (no hub)     {floor * 1e3:8.1f} ms   {floor / one:5.2f}x one "
        f"(10 server processes starting on this machine's cores)"
    )
    print(f"  hub vs 10 plain Clients       {ten / floor:5.2f}x")
    _wall, own, children = _cpu({n: entry() for n in ten_names})
    cores = os.cpu_count() or 1
    print(
        f"  CPU of that start: the 10 servers {children * 1e3:.0f} ms, this process "
        f"{own * 1e3:.0f} ms; on {cores} cores no start beats {children / cores * 1e3:.0f} ms"
    )
    # A start that waits (a server doing I/O, a package manager resolving) rather than
    # computes: the Hub starts every member at once, so ten cost what one does.
    slow = ("--startup-delay", "1.0")
    one_slow = min(_ready_time({"s0": entry(*slow)}, ["s0"]) for _ in range(repeat))
    ten_slow = min(
        _ready_time({n: entry(*slow) for n in ten_names}, ten_names) for _ in range(repeat)
    )
    print(
        f"  each server waits 1 s at start: 1 in {one_slow * 1e3:.0f} ms, 10 in "
        f"{ten_slow * 1e3:.0f} ms   {ten_slow / one_slow:5.2f}x one [<= 1.5x]"
    )
    print(
        f"  10 + missing + hanging        {with_broken * 1e3:8.1f} ms   "
        f"{with_broken / ten:5.2f}x the 10 alone"
    )


def _rate(fn: Any, seconds: float) -> float:
    n, batch = 0, 10_000
    t0 = time.perf_counter()
    deadline = t0 + seconds
    while time.perf_counter() < deadline:
        for _ in range(batch):
            fn()
        n += batch
    return n / (time.perf_counter() - t0)


def bench_reads(seconds: float) -> None:
    print("== reads: the merged view, one thread, while a member's tools keep changing")
    # ttlMs 10 minutes: a member's list_all_tools() is served from its cache, so the
    # hand-made merge below is compared at its best (no server round trip)
    servers = {f"s{i}": entry("--ttl-ms", "600000") for i in range(5)}
    with mcp.Hub.start({"mcpServers": servers}) as hub:
        hub.await_ready(timeout=60, servers="all")
        stop = threading.Event()
        changes = [0]

        def churn(server: str) -> None:
            i = 0
            while not stop.is_set():
                name = f"churn_{i % 4}"
                hub.call_tool(f"{server}.add_tool", {"name": name})
                hub.call_tool(f"{server}.remove_tool", {"name": name})
                changes[0] += 2
                i += 1

        first = hub._board.view.version
        workers = [threading.Thread(target=churn, args=(f"s{i}",), daemon=True) for i in range(4)]
        for worker in workers:
            worker.start()
        tools = _rate(hub.tools, seconds)
        point = _rate(lambda: hub.tool("s3.echo"), seconds)
        stop.set()
        for worker in workers:
            worker.join(10)
        swaps = hub._board.view.version - first
        clients = [hub.client(n) for n in servers]

        def hand_made() -> dict[str, Any]:
            merged = {}
            for name, client in zip(servers, clients, strict=True):
                for tool in client.list_all_tools():
                    merged[f"{name}.{tool.name}"] = tool
            return merged

        hand = _rate_small(hand_made, 1.0)
    print(f"  hub.tools()                   {tools:12,.0f} reads/s [>= 1M/s]")
    print(f"  hub.tool(name)                {point:12,.0f} reads/s [>= 1M/s]")
    print(
        f"  (meanwhile: {changes[0]} tool changes on s0..s3, {swaps} snapshots published; "
        "each member refreshes a list at most once a second under a burst)"
    )
    print(
        f"  hand-made merge of 5 members' cached list_all_tools(): {1e6 / hand:8.1f} us per read "
        f"({tools / hand:,.0f}x slower than hub.tools())"
    )


def _rate_small(fn: Any, seconds: float) -> float:
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - t0)


def bench_route(calls: int, rounds: int) -> None:
    print("== route: hub.call_tool vs the member Client (fast_server.py, sequential)")
    server = {"command": sys.executable, "args": [str(HERE / "fast_server.py")]}
    with mcp.Hub.start({"mcpServers": {"fast": server}}, max_in_flight=64) as hub:
        hub.await_ready(timeout=60, servers="all")
        client = hub.client("fast")
        for _ in range(200):  # warm-up
            hub.call_tool("fast.add", {"a": 1, "b": 2})
            client.call_tool("add", {"a": 1, "b": 2})
        direct: list[float] = []
        routed: list[float] = []
        for i in range(rounds):
            # interleaved, the order alternating: drift on a shared machine hits both alike
            for which in (direct, routed) if i % 2 else (routed, direct):
                t0 = time.perf_counter()
                if which is direct:
                    for _ in range(calls):
                        client.call_tool("add", {"a": 1, "b": 2})
                else:
                    for _ in range(calls):
                        hub.call_tool("fast.add", {"a": 1, "b": 2})
                which.append((time.perf_counter() - t0) / calls)
        # the routing step alone (resolve, status check), without the call
        from conduit_mcp.hub import routing

        board = hub._board
        n = 200_000
        t0 = time.perf_counter()
        for _ in range(n):
            routing.tool(board, "fast.add")
        resolve = (time.perf_counter() - t0) / n
    d, r = min(direct), min(routed)
    print(
        f"  member Client.call_tool       {d * 1e6:8.1f} us/call   (median {statistics.median(direct) * 1e6:.1f})"
    )
    print(
        f"  hub.call_tool                 {r * 1e6:8.1f} us/call   (median {statistics.median(routed) * 1e6:.1f})"
    )
    ratios = sorted(b / a for a, b in zip(direct, routed, strict=True))
    print(
        f"  overhead                      {(r / d - 1) * 100:+7.1f} % best, "
        f"{(statistics.median(ratios) - 1) * 100:+.1f} % median of {len(ratios)} paired rounds "
        f"[<= 5%]"
    )
    print(
        f"  routing alone                 {resolve * 1e6:8.2f} us "
        f"({resolve / d * 100:.1f} % of a call)"
    )


def bench_down(calls: int) -> None:
    print("== down: a call to a server that is not ready")
    servers = {
        "ok": entry(),
        "missing": {"command": "/nonexistent/mcp-server"},
        "hangs": entry("--startup-delay", "120"),
    }
    with mcp.Hub.start({"mcpServers": servers}) as hub:
        hub.await_ready(timeout=60, servers=["ok"])
        hub.wait_for(lambda h: h.status()["missing"].state == "closed", timeout=30)
        for name in ("missing", "hangs"):
            times = []
            for _ in range(calls):
                t0 = time.perf_counter()
                try:
                    hub.call_tool(f"{name}.add", {"a": 1, "b": 2}, timeout=30)
                except mcp.Error:
                    pass
                times.append(time.perf_counter() - t0)
            times.sort()
            print(
                f"  {name:8} ({hub.status()[name].state:11}) p50 {times[len(times) // 2] * 1e6:7.1f} us"
                f"  max {times[-1] * 1e6:7.1f} us  [< 10 ms]"
            )


def bench_changed(rounds: int) -> None:
    print("== changed: add_tool on a member -> the tool in the hub's view")
    with mcp.Hub.start({"mcpServers": {"a": entry(), "b": entry()}}) as hub:
        hub.await_ready(timeout=60, servers="all")
        lat = []
        for i in range(rounds):
            name = f"fresh_{i}"
            t0 = time.perf_counter()
            hub.call_tool("a.add_tool", {"name": name})
            hub.wait_for(lambda h, q=f"a.{name}": h.tool(q) is not None, timeout=5)
            lat.append(time.perf_counter() - t0)
            # coalescing allows one refresh per second per list: space the rounds out
            hub.call_tool("a.remove_tool", {"name": name})
            hub.wait_for(lambda h, q=f"a.{name}": h.tool(q) is None, timeout=5)
            time.sleep(1.1)
        lat.sort()
    print(
        f"  p50 {statistics.median(lat) * 1e3:6.1f} ms   max {lat[-1] * 1e3:6.1f} ms   "
        f"({rounds} rounds, including the add_tool call) [< 100 ms]"
    )


def bench_comeback(rounds: int) -> None:
    print("== comeback: a member's server killed -> its tools gone from the view -> back")
    with mcp.Hub.start({"mcpServers": {"a": entry(), "b": entry()}}) as hub:
        hub.await_ready(timeout=60, servers="all")
        gone, back = [], []
        for _ in range(rounds):
            t0 = time.perf_counter()
            try:
                hub.call_tool("b.crash", timeout=5)
            except mcp.Error:
                pass
            hub.wait_for(lambda h: h.tool("b.add") is None, timeout=10)
            gone.append(time.perf_counter() - t0)
            hub.wait_for(lambda h: h.tool("b.add") is not None, timeout=30)
            back.append(time.perf_counter() - t0)
    print(
        f"  tools hidden after {statistics.median(gone) * 1e3:6.1f} ms, back after "
        f"{statistics.median(back) * 1e3:6.1f} ms (median of {rounds}; the client's "
        "reconnect backoff and a new server process)"
    )


def bench_many(sizes: list[int]) -> None:
    from servers import FastHttpServer

    print("== many: N HTTP servers in one config (one fast_http_server.py, modern era)")
    with FastHttpServer() as server:
        per: list[float] = []
        for n in sizes:
            config = {"mcpServers": {f"s{i}": {"url": server.url} for i in range(n)}}
            t0 = time.perf_counter()
            hub = mcp.Hub.start(config)
            try:
                hub.await_ready(timeout=300, servers="all")
                ready = time.perf_counter() - t0
                t1 = time.perf_counter()
                futures = [hub.futures.call_tool(f"s{i}.add", {"a": 1, "b": 2}) for i in range(n)]
                ok = [f.get(timeout=300).text for f in futures].count("3")
                calls = time.perf_counter() - t1
            finally:
                t2 = time.perf_counter()
                hub.stop()
                stopped = time.perf_counter() - t2
            per.append(ready / n)
            print(
                f"  {n:6d} servers: all ready in {ready:6.2f} s ({ready / n * 1e3:.2f} ms each), "
                f"one call each {calls:5.2f} s ({ok} ok), stopped in {stopped:5.2f} s "
                f"[load {os.getloadavg()[0]:.2f}]"
            )
        if len(per) > 1:
            print(
                f"  ready per server, largest over smallest: {per[-1] / per[0]:.2f}x [~1: linear]"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--only", default="start,reads,route,down,changed,comeback,many")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--calls", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--seconds", type=float, default=1.0)
    parser.add_argument("--many", default="1000,2500", help="server counts for the many row")
    args = parser.parse_args()
    only = set(args.only.split(","))
    if "start" in only:
        bench_start(args.repeat)
    if "reads" in only:
        bench_reads(args.seconds)
    if "route" in only:
        bench_route(args.calls, args.rounds)
    if "down" in only:
        bench_down(200)
    if "changed" in only:
        bench_changed(5)
    if "comeback" in only:
        bench_comeback(5)
    if "many" in only:
        bench_many([int(n) for n in args.many.split(",")])


if __name__ == "__main__":
    main()
