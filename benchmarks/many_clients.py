"""Many clients in one process: N clients start, all get ready, each answers one call, all stop.

    .venv/bin/python benchmarks/many_clients.py --clients 1000,10000            # streamable HTTP
    .venv/bin/python benchmarks/many_clients.py --transport stdio --clients 1000
    .venv/bin/python benchmarks/many_clients.py --clients 1000 --json /tmp/many.json

HTTP: every client talks to one ``fast_http_server.py`` process (``127.0.0.1``, modern era
by default, ``--era legacy`` for sessions). Stdio: each client has its own ``fast_server.py``
process. Each N runs in a fresh interpreter (so threads and memory are its own), in phases:

* **start**: ``Client.start`` for every client (returns at once: connecting runs in the
  connection actor);
* **ready**: from the first start until every client is ready (``await_ready`` on each, in
  start order, under one deadline);
* **call each**: one ``call_tool("add")`` to each client, one after another from one thread
  (the first call of each client lists its tools first, for the output check); then
  **all at once**: a second call to each, all in flight together from asyncio tasks
  (``client.aio.call_tool``);
* **idle**: the threads of this process once all are ready, and again after 6 s idle, by
  what they are for (an actor thread is named after its actor class, ``conduit-mcp-actor-N``
  is a worker of the actor pool, ``conduit-mcp-io`` the shared I/O loop);
* **stop**: ``Client.stop_all(clients)`` (``--stop serial``: ``client.stop()`` one by one);
* CPU: the user plus system seconds of this process and of the server's in each phase,
  and the floor's. A sequential first call costs ~2.2 ms of CPU here at 100, 1,000 or
  10,000 clients alike (reconnect, list, call through the client), against ~1.0 ms for the
  floor: the phase is bound by the per-call cost, not by the number of clients;
* RSS: this process's resident memory with all clients ready (``VmRSS``), its peak, and
  the peak of each phase (``VmHWM``, set back at each phase's end);
* GC: the time CPython's cyclic collector took in each phase (``gc.callbacks``), and how
  many full (generation 2) collections ran. A full collection walks every tracked object
  of the process, ~210 a client (208 over 200 idle HTTP clients, 2026-12-04): at 10,000 clients one takes 1-2 s with the GIL held, and
  they were a third of the run. ``--gc freeze`` is what an application holding thousands
  of clients can do about it: no collection while the clients start
  (``gc.disable()``), then ``gc.freeze()`` once all are ready (their objects leave the
  collector's generations, so later full collections walk only what came after) and
  ``gc.enable()``. It helps the start, but the later phases then collect more often (a
  full collection comes when the objects made since the last one reach a quarter of the
  long-lived ones, and frozen ones no longer count): 8 full collections in **all at once**
  at 10,000 clients, against 3. ``--gc threshold`` is the other remedy:
  ``gc.set_threshold(50_000, 20, 10)`` before the clients start (a young collection every
  50,000 new objects, not 700): the clients' objects are walked far less often, and no
  full collection ran in any phase at 10,000 clients. The library itself never touches
  the collector: how often it runs is the application's choice (docs/performance.md).

The handshake's timeouts are 120 s (``PATIENCE``): thousands of clients connecting at once
queue behind each other on the one I/O loop, and a probe unanswered within the default 5 s
would close a client under ``protocol="modern"``. Every wait is bounded (``--deadline``, seconds per phase); a phase that runs out fails the run.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path
from typing import Any

from counters import cpu_s
from servers import FastHttpServer

HERE = Path(__file__).resolve().parent
FAST_SERVER = str(HERE / "fast_server.py")
#: The handshake's timeouts (``probe_timeout``, ``request_timeout``, ``connect_timeout``):
#: thousands of clients connecting at once queue behind each other on the one I/O loop, and
#: the default 5 s probe timeout would close some of them under ``protocol="modern"``.
PATIENCE = 120.0
#: ``--gc threshold``: a young collection every 50,000 new objects (CPython's default: 700).
GC_THRESHOLD = (50_000, 20, 10)
#: Seconds idle before the second thread count: longer than an actor pool worker stays idle.
IDLE_WAIT = 6.0


def _status_mib(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) / 1024
    return float("nan")


def _rss_mib() -> float:
    return _status_mib("VmRSS:")


class PeakClock:
    """This process's peak resident memory in each phase: Linux's ``VmHWM`` read at the
    phase's end, then set back to the current RSS (``clear_refs`` ``5``) for the next one,
    so a peak is placed in the phase that made it (``None`` where the kernel refuses)."""

    def __init__(self) -> None:
        self.marks: dict[str, float | None] = {}
        self._reset()

    @staticmethod
    def _reset() -> bool:
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
        except OSError:
            return False
        return True

    def mark(self, phase: str) -> None:
        peak = _status_mib("VmHWM:")
        self.marks[phase] = round(peak, 1) if self._reset() else None


class CpuClock:
    """CPU seconds per phase of this process and of the server's (``None``: stdio, whose
    servers are many). A phase whose CPU is close to its wall time was bound by this
    process's one GIL, not by waiting for the server or the kernel."""

    def __init__(self, server_pid: int | None) -> None:
        self._server_pid = server_pid
        self._last = self._now()
        self.marks: dict[str, tuple[float, float | None]] = {}

    def _now(self) -> tuple[float, float | None]:
        pid = self._server_pid
        return cpu_s(), (cpu_s(pid) if pid is not None else None)

    def mark(self, phase: str) -> None:
        now = self._now()
        ours, theirs = now[0] - self._last[0], None
        if now[1] is not None and self._last[1] is not None:
            theirs = round(now[1] - self._last[1], 2)
        self.marks[phase] = (round(ours, 2), theirs)
        self._last = now


def _threads_by_purpose() -> dict[str, int]:
    """Live threads grouped by name with the counter dropped (``Connection-17`` ->
    ``Connection``): Pykka names an actor's thread after its class."""
    names = Counter(re.sub(r"[-_]\d+$", "", t.name) for t in threading.enumerate())
    return dict(names.most_common())


async def _call_all(clients: list[Any], deadline: float) -> list[str | None]:
    async def one(client: Any) -> str | None:
        result = await client.aio.call_tool("add", {"a": 1, "b": 2}, timeout=deadline)
        return result.text  # type: ignore[no-any-return]

    return await asyncio.gather(*(one(client) for client in clients))


class GcClock:
    """Seconds CPython's collector ran, and full collections, per phase (``gc.callbacks``)."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._began = 0.0
        self._marks: dict[str, tuple[float, int]] = {}
        self._last = (0.0, 0)
        gc.callbacks.append(self._callback)

    def _callback(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._began = time.perf_counter()
            return
        self.seconds += time.perf_counter() - self._began
        if info["generation"] == 2:
            self.full += 1

    def mark(self, phase: str) -> None:
        """The time and full collections since the previous mark, as ``phase``'s."""
        now = (self.seconds, self.full)
        self._marks[phase] = (round(now[0] - self._last[0], 3), now[1] - self._last[1])
        self._last = now

    def close(self) -> dict[str, tuple[float, int]]:
        gc.callbacks.remove(self._callback)
        return self._marks


#: What the floor's bare loop posts (``fast_http_server.py`` checks no session or header).
_FLOOR_HEADERS = {
    "Content-Type": "application/json",
    "Accept": "application/json, text/event-stream",
    "MCP-Protocol-Version": "2026-07-28",
}
_FLOOR_LIST = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
_FLOOR_CALL = (
    b'{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"add",'
    b'"arguments":{"a":1,"b":2}}}'
)


def run_floor(n: int, deadline: float, gc_mode: str) -> dict[str, Any]:
    """The same phases' physical work with no client: one bare ``aiohttp`` session posting
    to the same server, in a process of its own with the same collector setting.

    * **first call each**: ``n`` times, a new connection, a ``tools/list`` and a
      ``tools/call`` on it, then the connection closed. That is what each client's first
      call does in **call each**: its pooled connection was idle past ``keep_alive`` (4 s,
      below uvicorn's 5 s), so it connects again; it lists the tools (the output check's
      schema); then it calls.
    * **all at once**: ``n`` POSTs in flight together from one loop, each on a new
      connection: the fan-out. The clients' own round follows their one-after-another
      calls, which took longer than ``keep_alive``: almost all of them connect again too
      (at 10,000 clients ~9,700 connections are made in it, counted with ``nstat``).
    """
    import aiohttp

    clock = GcClock()
    if gc_mode == "threshold":
        gc.set_threshold(*GC_THRESHOLD)
    server = FastHttpServer()
    out: dict[str, float] = {}
    try:

        async def run() -> None:
            connector = aiohttp.TCPConnector(limit=0)
            async with aiohttp.ClientSession(connector=connector) as http:

                async def post(body: bytes) -> None:
                    async with http.post(server.url, data=body, headers=_FLOOR_HEADERS) as r:
                        if r.status != 200 or b'"result"' not in await r.read():
                            raise RuntimeError(f"unexpected answer (HTTP {r.status})")

                clock.mark("floor_start")
                c0 = cpu_s()
                t0 = time.monotonic()
                for _ in range(n):
                    await post(_FLOOR_LIST)
                    await post(_FLOOR_CALL)
                    # Closed as a client's idle connection is: the next one connects anew.
                    # aiohttp has no public call to drop its idle connections (the private
                    # table is read here only, in a benchmark).
                    for idle in connector._conns.values():
                        for proto, _ in idle:
                            proto.close()
                        idle.clear()
                    if time.monotonic() - t0 > deadline:
                        raise RuntimeError("the floor's first calls ran out of time")
                out["first_call_each_s"] = time.monotonic() - t0
                out["first_call_each_cpu_s"] = cpu_s() - c0
                clock.mark("floor_first_call_each")
                c0 = cpu_s()
                t0 = time.monotonic()
                await asyncio.wait_for(
                    asyncio.gather(*(post(_FLOOR_CALL) for _ in range(n))), deadline
                )
                out["all_at_once_s"] = time.monotonic() - t0
                out["all_at_once_cpu_s"] = cpu_s() - c0
                clock.mark("floor_all_at_once")

        asyncio.run(run())
    finally:
        marks = clock.close()
        server.stop()
    return {
        "clients": n,
        "floor_first_call_each_s": round(out["first_call_each_s"], 3),
        "floor_all_at_once_s": round(out["all_at_once_s"], 3),
        "floor_first_call_each_cpu_s": round(out["first_call_each_cpu_s"], 2),
        "floor_all_at_once_cpu_s": round(out["all_at_once_cpu_s"], 2),
        "floor_gc_s": {k: v[0] for k, v in marks.items() if k != "floor_start"},
        "floor_gc_full": {k: v[1] for k, v in marks.items() if k != "floor_start"},
        "floor_load_avg_1min": round(os.getloadavg()[0], 2),
        "floor_rss_peak_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
    }


def run_one(
    n: int, transport: str, era: str, stop_mode: str, deadline: float, gc_mode: str = "default"
) -> dict[str, Any]:
    import conduit_mcp as mcp

    clock = GcClock()
    server = FastHttpServer() if transport == "http" else None
    cpu = CpuClock(server.proc.pid if server is not None else None)
    peak = PeakClock()

    def mark(phase: str) -> None:
        """The end of ``phase`` for the three clocks (collector, CPU, peak RSS)."""
        clock.mark(phase)
        cpu.mark(phase)
        peak.mark(phase)

    try:
        if server is not None:
            spec: Any = mcp.Http(server.url, connect_timeout=PATIENCE)
        else:
            spec = mcp.Stdio(sys.executable, [FAST_SERVER])
        options = {"protocol": era, "probe_timeout": PATIENCE, "request_timeout": PATIENCE}
        threads_before = threading.active_count()
        rss_before = _rss_mib()
        mark("before")
        if gc_mode == "freeze":
            gc.disable()
        elif gc_mode == "threshold":
            gc.set_threshold(*GC_THRESHOLD)
        t0 = time.monotonic()
        clients = [mcp.Client.start(spec, **options) for _ in range(n)]
        t1 = time.monotonic()
        end = t1 + deadline
        for client in clients:
            client.await_ready(timeout=max(0.001, end - time.monotonic()))
        t2 = time.monotonic()
        mark("ready")
        if gc_mode == "freeze":
            gc.freeze()
            gc.enable()
        rss_ready = _rss_mib()
        idle = _threads_by_purpose()
        threads_idle = threading.active_count() - threads_before
        # Idle for longer than the actor pool keeps an unused worker (otp/pooled.py).
        time.sleep(IDLE_WAIT)
        threads_long_idle = threading.active_count() - threads_before
        idle_long = _threads_by_purpose()
        t3 = time.monotonic()
        end = t3 + deadline
        for client in clients:
            result = client.call_tool(
                "add", {"a": 1, "b": 2}, timeout=max(0.001, end - time.monotonic())
            )
            if result.text != "3":
                raise RuntimeError(f"unexpected answer {result.text!r}")
        t4 = time.monotonic()
        mark("call_each")
        threads_after_calls = threading.active_count() - threads_before
        # The second call to each, all at once from asyncio tasks (the tools were listed by
        # the first call, for the output check).
        t_all = time.monotonic()
        texts = asyncio.run(_call_all(clients, deadline))
        t_all_end = time.monotonic()
        mark("all_at_once")
        if set(texts) != {"3"}:
            raise RuntimeError(f"unexpected answers {set(texts)!r}")
        rss_calls = _rss_mib()
        t5 = time.monotonic()
        if stop_mode == "serial":
            for client in clients:
                client.stop()
        else:
            mcp.Client.stop_all(clients, timeout=deadline)
        t6 = time.monotonic()
        mark("stop")
        threads_left = threading.active_count() - threads_before
    finally:
        gc.enable()
        gc_marks = clock.close()
        if server is not None:
            server.stop()
    return {
        "clients": n,
        "transport": transport,
        "era": era,
        "stop_mode": stop_mode,
        "gc_mode": gc_mode,
        "gc_s_by_phase": {k: v[0] for k, v in gc_marks.items() if k != "before"},
        "gc_full_by_phase": {k: v[1] for k, v in gc_marks.items() if k != "before"},
        "cpu_s_by_phase": {k: v[0] for k, v in cpu.marks.items() if k != "before"},
        "rss_peak_mib_by_phase": {k: v for k, v in peak.marks.items() if k != "before"},
        "server_cpu_s_by_phase": {k: v[1] for k, v in cpu.marks.items() if k != "before"},
        "load_avg_1min": round(os.getloadavg()[0], 2),
        "start_s": round(t1 - t0, 3),
        "ready_s": round(t2 - t0, 3),
        "call_each_s": round(t4 - t3, 3),
        "call_each_all_at_once_s": round(t_all_end - t_all, 3),
        "stop_s": round(t6 - t5, 3),
        "rss_ready_mib": round(rss_ready, 1),
        "rss_after_calls_mib": round(rss_calls, 1),
        # The phases' peaks: resetting VmHWM resets ru_maxrss with it
        "rss_peak_mib": max(
            (v for v in peak.marks.values() if v is not None),
            default=round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        ),
        "rss_before_mib": round(rss_before, 1),
        "threads_idle": threads_idle,
        "threads_after_calls": threads_after_calls,
        "threads_left_after_stop": threads_left,
        "threads_idle_by_name": idle,
        "threads_long_idle": threads_long_idle,
        "threads_long_idle_by_name": idle_long,
    }


def _print(row: dict[str, Any]) -> None:
    n = row["clients"]
    print(
        f"{n:>6} {row['transport']:<5} {row['era']:<6} ready {row['ready_s']:7.2f} s "
        f"(start {row['start_s']:.2f} s)  call each {row['call_each_s']:6.2f} s "
        f"({1000 * row['call_each_s'] / n:.2f} ms a call), all at once "
        f"{row['call_each_all_at_once_s']:.2f} s  stop {row['stop_s']:6.2f} s "
        f"({row['stop_mode']})  RSS {row['rss_ready_mib']:.0f} MiB ready, "
        f"{row['rss_peak_mib']:.0f} MiB peak  threads {row['threads_idle']} ready, "
        f"{row['threads_long_idle']} idle "
        f"({row['threads_long_idle'] / n:.2f} a client), {row['threads_after_calls']} after calls, "
        f"{row['threads_left_after_stop']} left after stop  load {row['load_avg_1min']:.2f}",
        flush=True,
    )
    gc_s, full = row["gc_s_by_phase"], row["gc_full_by_phase"]
    print(
        f"       GC ({row['gc_mode']}), seconds (full collections) by phase: "
        + ", ".join(f"{k} {gc_s[k]:.2f} s ({full[k]})" for k in gc_s),
        flush=True,
    )
    ours, theirs = row["cpu_s_by_phase"], row["server_cpu_s_by_phase"]
    print(
        "       CPU, seconds (this process / the server) by phase: "
        + ", ".join(
            f"{k} {ours[k]:.2f}" + (f" / {theirs[k]:.2f}" if theirs[k] is not None else "")
            for k in ours
        )
        + f"; call each {1000 * ours['call_each'] / n:.2f} ms CPU a call",
        flush=True,
    )
    peaks = row["rss_peak_mib_by_phase"]
    print(
        "       RSS peak, MiB by phase: "
        + ", ".join(f"{k} {v:.0f}" if v is not None else f"{k} ?" for k, v in peaks.items()),
        flush=True,
    )
    if "floor_first_call_each_s" in row:
        first, fan = row["floor_first_call_each_s"], row["floor_all_at_once_s"]
        print(
            f"       floor (a bare aiohttp session, no client; load "
            f"{row['floor_load_avg_1min']:.2f}): first call each {first:.2f} s "
            f"(connect, list, call: client/floor {row['call_each_s'] / first:.2f}), "
            f"all at once {fan:.2f} s (client/floor "
            f"{row['call_each_all_at_once_s'] / fan:.2f}); its CPU "
            f"{row['floor_first_call_each_cpu_s']:.2f} s and "
            f"{row['floor_all_at_once_cpu_s']:.2f} s "
            f"({1000 * row['floor_first_call_each_cpu_s'] / n:.2f} ms a first call), RSS peak "
            f"{row['floor_rss_peak_mib']:.0f} MiB; GC "
            + ", ".join(
                f"{k.removeprefix('floor_')} {v:.2f} s ({row['floor_gc_full'][k]})"
                for k, v in row["floor_gc_s"].items()
            ),
            flush=True,
        )
    for key, when in (("threads_idle_by_name", "ready"), ("threads_long_idle_by_name", "6 s idle")):
        by_name = ", ".join(f"{name} {count}" for name, count in row[key].items())
        print(f"       threads when {when}, by name: {by_name}", flush=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--clients", default="1000", help="comma list of N (1000)")
    p.add_argument("--transport", choices=("http", "stdio"), default="http")
    p.add_argument("--era", choices=("modern", "legacy"), default="modern")
    p.add_argument("--stop", choices=("all", "serial"), default="all", help="how to stop them")
    p.add_argument("--deadline", type=float, default=600.0, help="seconds per phase (600)")
    p.add_argument("--json", help="append each row as a JSON line to this file")
    p.add_argument(
        "--gc",
        choices=("default", "freeze", "threshold"),
        default="default",
        help="the collector as is; off while starting and gc.freeze() once all are ready; "
        "or gc.set_threshold(50000, 20, 10) before starting",
    )
    p.add_argument(
        "--floor",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="HTTP: also time the same work with a bare aiohttp session, no client (run_floor)",
    )
    p.add_argument("--one", type=int, help=argparse.SUPPRESS)  # the child: run one N here
    p.add_argument("--one-floor", type=int, help=argparse.SUPPRESS)  # the floor's child
    args = p.parse_args()
    if args.one is not None:
        row = run_one(args.one, args.transport, args.era, args.stop, args.deadline, args.gc)
        print(json.dumps(row))
        return 0
    if args.one_floor is not None:
        print(json.dumps(run_floor(args.one_floor, args.deadline, args.gc)))
        return 0
    for n in [int(x) for x in args.clients.split(",") if x]:
        cmd = [sys.executable, __file__, "--one", str(n), "--transport", args.transport]
        cmd += ["--era", args.era, "--stop", args.stop, "--deadline", str(args.deadline)]
        cmd += ["--gc", args.gc]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=6 * args.deadline)
        if out.returncode != 0:
            sys.stderr.write(out.stderr[-4000:])
            print(f"{n} clients: failed (exit {out.returncode})", flush=True)
            return 1
        row = json.loads(out.stdout.strip().splitlines()[-1])
        if args.floor and args.transport == "http":
            cmd = [sys.executable, __file__, "--one-floor", str(n), "--gc", args.gc]
            cmd += ["--deadline", str(args.deadline)]
            out = subprocess.run(cmd, capture_output=True, text=True, timeout=3 * args.deadline)
            if out.returncode != 0:
                sys.stderr.write(out.stderr[-4000:])
                print(f"{n} clients: the floor failed (exit {out.returncode})", flush=True)
                return 1
            row.update(json.loads(out.stdout.strip().splitlines()[-1]))
        _print(row)
        if args.json:
            with open(args.json, "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
