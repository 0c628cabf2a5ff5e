"""A thousand concurrent tasks on one client poll without a thread each: every task is a
coroutine on the shared I/O loop (docs/tasks.md, "Polling"), so the process's
thread count stays where it was, and the server still sees at most one ``tasks/get`` per
``pollIntervalMs`` per task."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.otp.pooled import pool_threads

pytestmark = pytest.mark.timeout(120)

TASKS = 1000
SECONDS, POLL_MS = 1.5, 500


def test_a_thousand_concurrent_tasks_grow_no_threads(make_server: Callable[..., Any]) -> None:
    server = make_server(era="modern")
    with mcp.Client.start(server.stdio(), max_in_flight=2 * TASKS) as client:
        client.await_ready(timeout=20)
        client.call_tool("task_job", {"seconds": 0, "poll_ms": POLL_MS}, timeout=10)  # warm
        before = threading.active_count() - pool_threads()

        async def start_all() -> list[mcp.TaskHandle]:
            args = {"seconds": SECONDS, "poll_ms": POLL_MS}
            return list(
                await asyncio.gather(
                    *(client.aio.start_task("task_job", args, timeout=30) for _ in range(TASKS))
                )
            )

        started = time.monotonic()
        handles = asyncio.run(start_all())
        peak = threading.active_count() - pool_threads()
        pool_peak = pool_threads()
        while not all(h.done() for h in handles) and time.monotonic() - started < 60:
            peak = max(peak, threading.active_count() - pool_threads())
            pool_peak = max(pool_peak, pool_threads())
            handles[0].wait(0.05)
        results = [h.result(timeout=30) for h in handles]
        took = time.monotonic() - started
        stats = json.loads(client.call_tool("task_stats", {}, timeout=30).text)
    assert all(r.text == "done" for r in results)
    assert peak <= before + 1, (before, peak)  # asyncio.run's own loop thread at most
    # The shared actor pool lends a thread to each of the client's actors busy at once
    # (supervisor, connection, listen stream, refresher), and keeps idle ones for
    # IDLE_SECONDS: a handful, never one per task (1,000 here).
    assert pool_peak <= 8, pool_peak
    gets = [s["gets"] for s in stats.values() if s["status"] == "completed"]
    assert len(gets) >= TASKS
    # at most one tasks/get per pollIntervalMs per task, over the time it ran
    assert max(gets) <= took * 1000 / POLL_MS + 1
    print(
        f"\n{TASKS} tasks: threads {before} -> peak {peak}; {took:.1f} s; gets/task "
        f"min {min(gets)} max {max(gets)} mean {sum(gets) / len(gets):.2f}"
    )
