"""How many connected clients one process holds: N clients, each with its own stdio server
(``fast_server.py``), all started, all ready, one call each, all stopped. Prints the time of
each phase, the threads and the resident memory of this process.

    .venv/bin/python benchmarks/scale_clients.py --clients 300
"""

from __future__ import annotations

import argparse
import resource
import sys
import threading
import time
from pathlib import Path

import conduit_mcp as mcp

FAST_SERVER = str(Path(__file__).resolve().parent / "fast_server.py")


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--clients", type=int, default=300)
    args = parser.parse_args()
    n = args.clients
    threads_before = threading.active_count()
    t0 = time.monotonic()
    clients = [mcp.Client.start(mcp.Stdio(sys.executable, [FAST_SERVER])) for _ in range(n)]
    t1 = time.monotonic()
    for client in clients:
        client.await_ready(timeout=120)
    t2 = time.monotonic()
    for client in clients:
        assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    t3 = time.monotonic()
    threads = threading.active_count() - threads_before
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    for client in clients:
        client.stop()
    t4 = time.monotonic()
    print(
        f"{n} clients: start {t1 - t0:.2f} s, all ready {t2 - t1:.2f} s, "
        f"one call each {t3 - t2:.2f} s, stop {t4 - t3:.2f} s"
    )
    print(
        f"threads added: {threads} ({threads / n:.1f} per client); "
        f"max RSS of this process {rss_mib:.0f} MiB ({rss_mib / n:.2f} MiB per client)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
