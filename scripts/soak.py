"""Soak: many clients through random server kills, then count what went missing.

``make soak`` (or ``python scripts/soak.py --minutes 2``). Not part of the test suite: it
runs for minutes. Each client (stdio by default, a share over Streamable HTTP in both eras)
has a worker thread calling ``add`` with a number no other request uses, while a killer
thread SIGKILLs a random client's server every ``--kill-every`` seconds (an HTTP server is
started again on its port after a short pause: the client cannot restart it). At the end:

* **lost**: a request with no outcome (its call never returned, within its deadline and a
  grace);
* **doubled**: a request the servers received more than once (the client never re-sends a
  call: docs/connection.md, "Requests"), or a result that answers another request;
* outcomes by kind, and RSS, threads, open files and child processes before the clients
  started and after they stopped.

Exits 1 if anything was lost or doubled, or if threads, files or child processes did not
come back to where they were.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import os
import random
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import conduit_mcp as mcp
from conduit_mcp.testing import ScriptedServer

DEADLINE = 5.0
GRACE = 5.0  # how long past its deadline a call may take before it counts as lost


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def children() -> int:
    """Live child processes of this one (zombies included: they are leaks too)."""
    me = str(os.getpid())
    count = 0
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if fields[1] == me:
            count += 1
    return count


def server_pids(marker: str) -> list[int]:
    """Our child processes whose command line contains ``marker``."""
    me = str(os.getpid())
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[1] != me:
                    continue
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(pid))
        except OSError:
            continue
    return found


def snapshot() -> dict[str, float]:
    return {
        "rss_mb": round(rss_mb(), 1),
        "threads": threading.active_count(),
        "open_files": len(os.listdir("/proc/self/fd")),
        "children": children(),
    }


class Driven:
    """One client, its server, its worker and what it saw."""

    def __init__(self, index: int, kind: str, era: str, workdir: Path, aio: bool = False) -> None:
        self.index = index
        self.kind = kind
        # Driven by an asyncio loop of its own (aio.call_tool): over stdio its loop reads
        # the answers itself (transports/loop_reads.py).
        self.aio = aio
        self.era = era
        self.server = ScriptedServer(
            workdir / f"c{index}", era="both" if era == "modern" else "legacy"
        )
        self.srv: Any = None
        options: dict[str, Any] = {
            "request_timeout": DEADLINE,
            "max_reconnects": None,
            "backoff_base": 0.05,
            "backoff_max": 0.5,
        }
        if era == "legacy":
            options["protocol"] = "legacy"
        if kind == "stdio":
            spec: Any = self.server.stdio(close_grace=0.5)
        else:
            self.srv = self.server.http_server()
            spec = mcp.Http(self.srv.url)
        self.client = mcp.Client.start(spec, **options)
        self.issued: list[int] = []
        self.outcomes: dict[int, list[str]] = collections.defaultdict(list)
        self.misrouted = 0
        self.lock = threading.Lock()
        self.restarting = threading.Lock()

    def work(self, base: int, stop: threading.Event) -> None:
        if self.aio:
            asyncio.run(self.work_aio(base, stop))
            return
        n = 0
        while not stop.is_set():
            a = self._issue(base + n)
            n += 1
            try:
                result: Any = self.client.call_tool("add", {"a": a, "b": 1}, timeout=DEADLINE)
            except Exception as exc:
                result = exc
            self._record(a, result)
            stop.wait(random.uniform(0, 0.05))

    async def work_aio(self, base: int, stop: threading.Event) -> None:
        n = 0
        while not stop.is_set():
            a = self._issue(base + n)
            n += 1
            try:
                result: Any = await self.client.aio.call_tool(
                    "add", {"a": a, "b": 1}, timeout=DEADLINE
                )
            except Exception as exc:
                result = exc
            self._record(a, result)
            await asyncio.sleep(random.uniform(0, 0.05))

    def _issue(self, a: int) -> int:
        with self.lock:
            self.issued.append(a)
        return a

    def _record(self, a: int, result: Any) -> None:
        """The outcome of the call that added 1 to ``a``: its result, or what it raised."""
        if isinstance(result, mcp.Error):
            outcome = result.kind
        elif isinstance(result, Exception):  # a bug: counted under its class
            outcome = f"raised {type(result).__name__}"
        else:
            outcome = "ok"
        with self.lock:
            if outcome == "ok" and result.text != str(a + 1):
                self.misrouted += 1
            self.outcomes[a].append(outcome)

    def kill(self) -> None:
        if self.kind == "stdio":
            # Found by its command line (it names this client's folder), not by the
            # server's log: parsing a growing log on every kill would be most of the RSS.
            for pid in server_pids(str(self.server.workdir)):
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            return
        if not self.restarting.acquire(blocking=False):
            return
        try:
            self.srv.kill()
            time.sleep(random.uniform(0.05, 0.5))
            self.srv.restart()
        finally:
            self.restarting.release()

    def received(self) -> collections.Counter[int]:
        """How often the servers received each ``add`` (every process of this client)."""
        seen: collections.Counter[int] = collections.Counter()
        for entry in self.server.log():
            if entry.get("dir") == "in" and entry.get("method") == "tools/call":
                params = entry.get("params") or {}
                if params.get("name") == "add":
                    seen[params["arguments"]["a"]] += 1
        return seen


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--clients", type=int, default=20)
    p.add_argument("--minutes", type=float, default=10.0)
    p.add_argument("--kill-every", type=float, default=1.0, help="seconds between kills")
    p.add_argument("--http-share", type=float, default=0.25, help="share of HTTP clients")
    p.add_argument(
        "--aio-share", type=float, default=0.34, help="share of clients driven by asyncio"
    )
    p.add_argument("--seed", type=int, default=None)
    args = p.parse_args(argv)
    random.seed(args.seed)

    # Warm the process-wide services (I/O loop, timers) so "before" is the steady state.
    with tempfile.TemporaryDirectory(prefix="conduit-soak-") as tmp:
        warm = ScriptedServer(Path(tmp) / "warm")
        client = mcp.Client.start(warm.stdio())
        client.await_ready(timeout=10)
        client.stop()
        before = snapshot()
        http_every = round(1 / args.http_share) if args.http_share > 0 else 0
        aio_every = round(1 / args.aio_share) if args.aio_share > 0 else 0
        drivers: list[Driven] = []
        for i in range(args.clients):
            http = http_every and i % http_every == http_every - 1
            era = "legacy" if (i // 2) % 2 else "modern"
            aio = bool(aio_every) and i % aio_every == 0
            drivers.append(Driven(i, "http" if http else "stdio", era, Path(tmp), aio))
        for d in drivers:
            d.client.await_ready(timeout=30)
        stop = threading.Event()
        workers = [
            threading.Thread(target=d.work, args=(i * 10**9, stop), name=f"soak-{i}")
            for i, d in enumerate(drivers)
        ]
        for w in workers:
            w.start()
        started = time.monotonic()
        end = started + args.minutes * 60
        kills = 0
        peak_rss = before["rss_mb"]
        while time.monotonic() < end:
            time.sleep(random.uniform(0.5, 1.5) * args.kill_every)
            victim = random.choice(drivers)
            threading.Thread(target=victim.kill, daemon=True).start()
            kills += 1
            peak_rss = max(peak_rss, rss_mb())
        stop.set()
        for w in workers:
            w.join(timeout=DEADLINE + GRACE)
        stuck = [w.name for w in workers if w.is_alive()]
        for d in drivers:
            d.client.stop()
            if d.srv is not None:
                while not d.restarting.acquire(timeout=10):
                    pass
                d.srv.kill()
        # stop() returned: what the clients held is released (give the kernel and the
        # loop a moment to reap the last processes).
        deadline = time.monotonic() + 10
        gc.collect()
        after = snapshot()
        while time.monotonic() < deadline and (
            after["threads"] > before["threads"]
            or after["open_files"] > before["open_files"]
            or after["children"] > before["children"]
        ):
            time.sleep(0.1)
            after = snapshot()

        kinds: collections.Counter[str] = collections.Counter()
        issued = lost = doubled = misrouted = 0
        for d in drivers:
            received = d.received()
            with d.lock:
                issued += len(d.issued)
                misrouted += d.misrouted
                for a in d.issued:
                    got = d.outcomes.get(a, [])
                    if not got:
                        lost += 1
                    elif len(got) > 1:
                        doubled += 1
                    kinds.update(got)
                doubled += sum(1 for a, count in received.items() if count > 1)
        elapsed = time.monotonic() - started

    report = {
        "clients": args.clients,
        "http_clients": sum(1 for d in drivers if d.kind == "http"),
        "aio_clients": sum(1 for d in drivers if d.aio),
        "seconds": round(elapsed, 1),
        "kills": kills,
        "requests": issued,
        "outcomes": dict(kinds.most_common()),
        "lost": lost,
        "doubled": doubled,
        "misrouted": misrouted,
        "stuck_workers": stuck,
        "before": before,
        "peak_rss_mb": round(peak_rss, 1),
        "after": after,
    }
    width = max(len(k) for k in report)
    for key, value in report.items():
        print(f"{key:<{width}}  {value}")
    leaked = any(after[k] > before[k] for k in ("threads", "open_files", "children"))
    bad = lost or doubled or misrouted or stuck or leaked
    print("FAIL" if bad else "OK")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
