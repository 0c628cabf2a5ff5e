"""Keep-alive soak: calls after idle pauses around each server's keep-alive timeout.

``python scripts/keepalive_soak.py`` (about 5 minutes; not part of the test suite). For each
server (the official ``mcp`` 2.3.0 server on uvicorn and on hypercorn, and the small Node
server ``tests/peers/keepalive_node.cjs``) and each keep-alive timeout (1, 5 and 75 s by
default), one client makes ``--calls`` calls of ``hit(key)``, each key used once, in bursts
of 1 to 3 at once, after pauses drawn around the two limits that race: the server's
timeout and the client's own idle limit (``Http(keep_alive=...)``, default 4 s). Every
configuration runs at the same time, on its own loopback port.

At the end, per configuration: calls, failures (by kind/reason), how many hits the server
ran and which keys it ran twice (counted at the server), and how many requests the client
sent again (its ``conduit_mcp.http`` debug log). Exits 1 on any failure, any key run twice,
or a server total that is not the number of successful calls.

Measured on a 2-core machine (2026-12-01), 60 calls per configuration (540 in all): before
the fix 33 of 480 failed ``transport``/``stream_broken`` (uvicorn 1 s aborted at its count
call; uvicorn 5 s, hypercorn 1 s and 5 s: 11 of 60 each; Node and the 75 s servers none)
and the servers had run only the successful ones; after it, 0 of 540 failed, 29 were sent
again, none ran twice. With ``--calls 120`` (1080 calls): 0 failed, 50 sent again.
"""

from __future__ import annotations

import argparse
import collections
import logging
import random
import shutil
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "interop"))

from http_peer import HttpPeer, free_port  # noqa: E402

import conduit_mcp as mcp  # noqa: E402

CLIENT_IDLE = 4.0  # Http's keep_alive default
# Offsets from a limit (s). With the proxy's 50 ms each way, the race's window is from
# 100 ms before a server's timeout to just before it (tests/interop/test_interop_keepalive.py).
NEAR = (-0.3, -0.085, -0.07, -0.055, -0.04, -0.025, 0.0, 0.05, 0.3)


def start_peer(server: str, keep_alive: float) -> HttpPeer:
    port = free_port()
    if server == "node":
        node = shutil.which("node") or "node"
        argv = [node, str(ROOT / "tests/peers/keepalive_node.cjs"), str(port), str(keep_alive)]
        return HttpPeer(argv, port, ready=["listening on port"])
    script = str(ROOT / "tests/peers/keepalive_peer.py")
    argv = [sys.executable, script, "--server", server, "--port", str(port)]
    return HttpPeer([*argv, "--keep-alive", str(keep_alive)], port, ready=[])


def pauses(keep_alive: float, rng: random.Random) -> list[float]:
    """Pauses just before, at and just after each limit that races (and a few short ones)."""
    around = [keep_alive] if keep_alive <= CLIENT_IDLE + 1 else []
    around.append(CLIENT_IDLE)
    out = [0.0, 0.05]
    for limit in around:
        out.extend(max(0.0, limit + d) for d in NEAR)
    rng.shuffle(out)
    return out


class ResendCounter(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.count = 0

    def emit(self, record: logging.LogRecord) -> None:
        text = record.getMessage()
        if "not sent again" in text:
            print(text, file=sys.stderr)  # why a broken call failed
        elif "sent again" in text:
            self.count += 1


def start_proxy(peer: HttpPeer, delay: float) -> HttpPeer:
    """The latency proxy (tests/peers/latency_proxy.py) in front of ``peer``."""
    port = free_port()
    script = str(ROOT / "tests/peers/latency_proxy.py")
    argv = [sys.executable, script, "--listen", str(port), "--to", str(peer.port)]
    return HttpPeer([*argv, "--delay", str(delay)], port, ready=[])


def run(server: str, keep_alive: float, calls: int, seed: int, delay: float) -> dict[str, Any]:
    rng = random.Random(seed)
    peer = start_peer(server, keep_alive)
    proxy = start_proxy(peer, delay) if delay > 0 else None
    failures: collections.Counter[str] = collections.Counter()
    ok = 0
    made = 0
    protocol = "legacy" if server == "node" else "auto"
    url = proxy.url if proxy is not None else peer.url
    client = mcp.Client.start(mcp.Http(url), protocol=protocol)
    try:
        client.list_tools(timeout=30)
        pool = ThreadPoolExecutor(3)
        plan = pauses(keep_alive, rng)
        step = 0
        while made < calls:
            time.sleep(plan[step % len(plan)])
            step += 1
            burst = min(1 + step % 3, calls - made)
            keys = [f"{server}-{keep_alive}-{made + i}" for i in range(burst)]
            made += burst
            futures = [pool.submit(client.call_tool, "hit", {"key": k}, timeout=30) for k in keys]
            for f in futures:
                try:
                    f.result()
                    ok += 1
                except mcp.Error as exc:
                    failures[f"{exc.kind}/{exc.reason}"] += 1
        pool.shutdown()
        seen = client.call_tool("hits", {}, timeout=30).structured_content
        seen = seen.get("result", seen) if isinstance(seen, dict) else seen
    finally:
        client.stop()
        peer.kill()
        if proxy is not None:
            proxy.kill()
    return {"calls": made, "ok": ok, "failures": dict(failures), "server": seen}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--servers", default="uvicorn,hypercorn,node")
    parser.add_argument("--keep-alive", default="1,5,75", help="server timeouts, seconds")
    parser.add_argument("--calls", type=int, default=60, help="calls per configuration")
    parser.add_argument("--seed", type=int, default=17)
    parser.add_argument(
        "--delay", type=float, default=0.05, help="latency each way (s); 0: no proxy"
    )
    args = parser.parse_args()
    counter = ResendCounter()
    log = logging.getLogger("conduit_mcp.http")
    log.setLevel(logging.DEBUG)
    log.addHandler(counter)
    configs = [(s, float(k)) for s in args.servers.split(",") for k in args.keep_alive.split(",")]
    results: dict[tuple[str, float], Any] = {}
    started = time.monotonic()

    def one(config: tuple[str, float]) -> None:
        try:
            results[config] = run(*config, args.calls, args.seed, args.delay)
        except Exception as exc:  # reported, and counted as a failure below
            results[config] = {"error": repr(exc)}

    threads = [threading.Thread(target=one, args=(c,)) for c in configs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = False
    total = failed = 0
    for config in configs:
        r = results[config]
        print(f"{config[0]:9} keep-alive {config[1]:>4}s: {r}")
        if "error" in r:
            bad = True
            continue
        total += r["calls"]
        failed += r["calls"] - r["ok"]
        server = r["server"]
        if r["failures"] or server["twice"] or server["total"] != r["ok"]:
            bad = True
    print(
        f"{total} calls, {failed} failed, {counter.count} sent again, "
        f"{time.monotonic() - started:.0f} s"
    )
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
