"""Streamable HTTP throughput: conduit-mcp vs the official ``mcp`` 2.3.0 client, both eras.

All talk to the same server process (started once per server kind, on 127.0.0.1), calling
the tool ``add`` ``{"a": 1, "b": 2}``, in the modern era (2026-07-28: one stateless POST per
request) and the legacy era (2025-11-25: ``initialize``, ``Mcp-Session-Id``):

  bare      the first row of each table: no client at all, a bare ``aiohttp`` loop posting
            the JSON-RPC line with the era's headers and decoding the answer (orjson), over
            one keep-alive session: sequential (the limit of sequential calls on this machine)
            and 32 tasks

  official  ``mcp.Client(url, mode="auto" | "legacy")`` under anyio (its streamable HTTP
            client, httpx2): sequential awaits, and 32 tasks in one task group
  conduit   ``conduit_mcp.Client.start(Http(url), protocol="modern" | "legacy",
            max_in_flight=64)``: blocking ``call_tool`` (one thread, then 32 threads) and
            ``await client.aio.call_tool`` (one task, then 32 asyncio tasks)

Servers (``--server``, a comma list):

  fast      ``benchmarks/fast_http_server.py``: a bare asyncio HTTP/1.1 server answering from
            templates, so that the client's cost dominates (the default)
  scripted  ``python -m conduit_mcp.testing --http``: conduit's strict scripted server (aiohttp)
  official  ``tests/peers/modern_peer.py http``: the official ``mcp`` 2.3.0 server (uvicorn,
            starlette, dual-era); realistic, but its own per-request CPU is most of the time

Each client connects and warms up before timing; each scenario is run ``--repeat`` times (a
fresh client each time, bare, official and conduit taking turns) and its median run is kept
(``--keep best`` for the best). Prints one table per server and era: calls/s, per-call
latency p50/p99, the ratio conduit/official for the matching pattern (sequential vs
sequential, 32 in flight vs 32), and every row against the bare sequential loop of the same
run (``/bare``), with issue 23's goals checked (32 in flight at or above the bare sequential
loop, sequential at 0.6 of it or more).

    .venv/bin/python benchmarks/bench_http.py                 # fast server, both eras
    .venv/bin/python benchmarks/bench_http.py --server official --calls 300 --concurrent-calls 600
    .venv/bin/python benchmarks/bench_http.py --calls 200 --repeat 1   # a quick check
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # sibling modules
import bare_http
from bare_http import ERAS
from bench_stdio import goal_lines
from measure import (
    Row,
    add_turn_options,
    failed,
    json_fields,
    stop,
    take_turns,
    time_conduit,
    time_gather,
    time_official,
    time_sequential_async,
    write_json,
)
from servers import read_port

HERE = Path(__file__).resolve().parent

FAST_HTTP_SERVER = str(HERE / "fast_http_server.py")
MODERN_PEER = str(HERE.parent / "tests" / "peers" / "modern_peer.py")
ARGS = {"a": 1, "b": 2}
TARGETS = {"sequential": 1.5, "concurrent": 3.0}  # conduit/official, from the issue

warnings.filterwarnings("ignore", message=".*SEP-2577.*")
warnings.filterwarnings("ignore", message=".*deprecated as of 2026-07-28.*")


@dataclass
class HRow(Row):
    server: str = ""
    era: str = ""


# --------------------------------------------------------------------------- the servers


class Server:
    """One HTTP MCP server process, up for the whole run of its kind."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.stderr = tempfile.NamedTemporaryFile(  # noqa: SIM115 - closed by stop()
            prefix=f"bench-http-{kind}-", suffix=".stderr"
        )
        if kind == "official":
            self.port = _free_port()
            cmd = [sys.executable, MODERN_PEER, "http", "--port", str(self.port)]
        elif kind == "scripted":
            cmd = [sys.executable, "-m", "conduit_mcp.testing", "--http", "--port", "0"]
        elif kind == "fast":
            cmd = [sys.executable, FAST_HTTP_SERVER, "--port", "0"]
        else:
            raise SystemExit(f"unknown server {kind!r} (fast, scripted, official)")
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL if kind == "official" else subprocess.PIPE,
            stderr=self.stderr,
        )
        try:
            if kind == "official":
                self._wait_listening(time.monotonic() + 20)
            else:
                self.port = self._read_port(time.monotonic() + 20)
        except BaseException:
            self.stop()
            raise
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def _read_port(self, deadline: float) -> int:
        try:
            return read_port(self.proc, deadline, f"{self.kind} server")
        except RuntimeError as exc:
            raise RuntimeError(f"{exc}: {self.tail()}") from None

    def _wait_listening(self, deadline: float) -> None:
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.kind} server exited: {self.tail()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{self.kind} server did not start: {self.tail()}") from None
                time.sleep(0.05)

    def check(self) -> None:
        """RuntimeError if the server has died."""
        if self.proc.poll() is not None:
            raise RuntimeError(f"the {self.kind} server died: {self.tail()}")

    def tail(self) -> str:
        try:
            return Path(self.stderr.name).read_text(errors="replace")[-2000:]
        except OSError as e:
            return f"<stderr unreadable: {e}>"

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.stderr.close()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# --------------------------------------------------------------------------- the bare loop


def bench_bare(
    url: str, era: str, n: int, total: int, conc: int, warmup: int, server: str
) -> list[HRow]:
    """No client: aiohttp posts the line, orjson decodes the answer (the limit over HTTP)."""
    seq = HRow("bare", "sequential", "bare aiohttp loop: sequential POST", server=server, era=era)
    par = HRow("bare", "concurrent", f"bare aiohttp loop: {conc} tasks", server=server, era=era)
    try:
        import aiohttp
    except ImportError as e:
        seq.error = par.error = f"not available (ImportError: {e})"
        return [seq, par]

    async def run() -> None:
        async with aiohttp.ClientSession() as http:
            call = await bare_http.connect(http, url, era, ARGS)
            for _ in range(warmup):
                await call()
            await time_sequential_async(seq, n, call)
            await time_gather(par, total, conc, call)

    try:
        asyncio.run(run())
    except Exception as e:
        failed([seq, par], e)
    return [seq, par]


# --------------------------------------------------------------------------- official mcp


def bench_official(
    url: str, era: str, n: int, total: int, conc: int, warmup: int, server: str
) -> list[HRow]:
    seq = HRow(
        "official", "sequential", "official mcp 2.3.0: sequential await", server=server, era=era
    )
    par = HRow(
        "official", "concurrent", f"official mcp 2.3.0: {conc} anyio tasks", server=server, era=era
    )
    try:
        import anyio
        from mcp import Client
    except ImportError as e:
        seq.error = par.error = f"not available (ImportError: {e})"
        return [seq, par]

    async def run() -> None:
        async with Client(url, mode="auto" if era == "modern" else "legacy") as client:
            if client.protocol_version != ERAS[era]:
                raise RuntimeError(f"negotiated {client.protocol_version}, expected {ERAS[era]}")
            await time_official(client, [seq, par], n, total, conc, warmup, ARGS)

    try:
        anyio.run(run)
    except Exception as e:  # an ExceptionGroup from anyio's task groups, too
        failed([seq, par], e)
    return [seq, par]


# --------------------------------------------------------------------------- conduit-mcp


def bench_conduit(
    url: str, era: str, n: int, total: int, conc: int, warmup: int, server: str
) -> list[HRow]:
    rows = [
        HRow("conduit", "sequential", "conduit-mcp: sequential call_tool (blocking)"),
        HRow("conduit", "concurrent", f"conduit-mcp: {conc} threads, call_tool"),
        HRow("conduit", "sequential", "conduit-mcp: sequential await aio.call_tool"),
        HRow("conduit", "concurrent", f"conduit-mcp: {conc} asyncio tasks, aio.call_tool"),
    ]
    for r in rows:
        r.server, r.era = server, era
    try:
        import conduit_mcp as mcp

        mcp.Http  # noqa: B018 - the HTTP transport may not be written yet
    except Exception as e:
        for r in rows:
            r.error = f"not available ({type(e).__name__}: {e})"
        return rows

    client = None
    try:
        client = mcp.Client.start(mcp.Http(url), protocol=era, max_in_flight=64)
        status = client.await_ready(timeout=15)
        if status.version != ERAS[era]:
            raise RuntimeError(f"negotiated {status.version}, expected {ERAS[era]}")
        for _ in range(warmup):
            r = client.call_tool("add", ARGS)
        if r.is_error or r.text != "3":
            raise RuntimeError(f"bad result {r!r}")

        time_conduit(client, rows, n, total, conc, warmup, ARGS)
    except Exception as e:
        failed(rows, e)
    finally:
        stop(client)
    return rows


# --------------------------------------------------------------------------- report


def _official(rows: list[HRow], r: HRow) -> HRow | None:
    for o in rows:
        if (o.client, o.server, o.era, o.pattern) == ("official", r.server, r.era, r.pattern):
            return o if o.calls else None
    return None


def _bare(rows: list[HRow], server: str, era: str) -> float | None:
    for r in rows:
        if (r.client, r.server, r.era, r.pattern) == ("bare", server, era, "sequential"):
            return r.rate if r.calls else None
    return None


def report(rows: list[HRow]) -> str:
    head = (
        f"{'scenario':<52} {'calls':>6} {'calls/s':>8} {'p50 us':>8} {'p99 us':>8} {'/official':>9}"
        f" {'/bare':>6}"
    )
    lines: list[str] = []
    groups = list(dict.fromkeys((r.server, r.era) for r in rows))
    for server, era in groups:
        lines += ["", f"server: {server}, era: {era} ({ERAS[era]})", head, "-" * len(head)]
        group = [r for r in rows if (r.server, r.era) == (server, era)]
        bare = _bare(rows, server, era)
        for r in group:
            if r.error:
                lines.append(f"{r.label:<52} {r.error}")
                continue
            o = _official(rows, r)
            ratio = f"{r.rate / o.rate:.2f}x" if r.client == "conduit" and o else ""
            vs_bare = f"{r.rate / bare:.2f}x" if bare else ""
            lines.append(
                f"{r.label:<52} {r.calls:>6} {r.rate:>8.0f} {r.pct(0.5):>8.0f} {r.pct(0.99):>8.0f}"
                f" {ratio:>9} {vs_bare:>6}"
            )
        verdicts = []
        for pattern, target in TARGETS.items():
            got = []
            for r in group:
                o = _official(rows, r)
                if r.client == "conduit" and r.pattern == pattern and r.calls and o:
                    ok = "ok" if r.rate / o.rate >= target else "MISSED"
                    front = "aio" if "aio" in r.label else "blocking"
                    got.append(f"{front} {r.rate / o.rate:.2f}x {ok}")
            if got:
                name = "sequential" if pattern == "sequential" else "32 in flight"
                verdicts.append(f"{name} (target >= {target}x): {', '.join(got)}")
        if bare:
            verdicts.append(f"this machine's bare sequential loop: {bare:.0f} calls/s (/bare)")
        lines += [f"  {v}" for v in verdicts]
        lines += goal_lines(group, bare)
    return "\n".join(lines).lstrip("\n")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--server", default="fast", help="comma list of fast,scripted,official (fast)")
    p.add_argument("--era", default="modern,legacy", help="comma list of modern,legacy (both)")
    p.add_argument("--calls", type=int, default=1000, help="sequential calls per scenario (1000)")
    p.add_argument(
        "--concurrent-calls",
        type=int,
        default=None,
        help="calls in total across the concurrent callers (default: 2 x --calls)",
    )
    p.add_argument("--concurrency", type=int, default=32, help="concurrent callers (32)")
    p.add_argument("--warmup", type=int, default=100, help="untimed calls before timing (100)")
    p.add_argument("--repeat", type=int, default=3, help="runs per client (3)")
    add_turn_options(p)
    a = p.parse_args()
    total = a.concurrent_calls if a.concurrent_calls is not None else 2 * a.calls
    which = [w.strip() for w in a.only.split(",") if w.strip()]
    eras = [e.strip() for e in a.era.split(",") if e.strip()]
    for e in eras:
        if e not in ERAS:
            raise SystemExit(f"unknown era {e!r} (modern, legacy)")
    print(
        f"streamable HTTP benchmark: python {platform.python_version()}, {os.cpu_count()} cpus, "
        f"{a.calls} sequential calls, {total} calls over {a.concurrency} callers, "
        f"{a.keep} of {a.repeat}",
        flush=True,
    )
    fns = {"bare": bench_bare, "official": bench_official, "conduit": bench_conduit}
    rows: list[HRow] = []
    started = time.perf_counter()
    for kind in [s.strip() for s in a.server.split(",") if s.strip()]:
        t = time.perf_counter()
        server = Server(kind)
        print(
            f"  {kind} server on {server.url} (started in {time.perf_counter() - t:.1f} s)",
            flush=True,
        )
        try:
            for era in eras:
                t = time.perf_counter()
                args = (server.url, era, a.calls, total, a.concurrency, a.warmup, kind)

                kept, _ = take_turns(
                    [(name, functools.partial(fns[name], *args)) for name in which],
                    a.repeat,
                    a.keep,
                    gives_up=lambda got: all(
                        r.error and r.error.startswith("not available") for r in got
                    ),
                    after_round=server.check,
                )
                order = {"bare": 0, "official": 1, "conduit": 2}
                rows += sorted(kept, key=lambda r: order[r.client])
                print(f"  {kind}/{era}: done in {time.perf_counter() - t:.1f} s", flush=True)
        finally:
            server.stop()
    print()
    print(report(rows))
    print(f"\ntotal {time.perf_counter() - started:.1f} s")
    if a.json:
        write_json(a.json, [{"server": r.server, "era": r.era, **json_fields(r)} for r in rows])
    return 0


if __name__ == "__main__":
    sys.exit(main())
