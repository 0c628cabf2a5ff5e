"""Floods and slow consumers (docs/connection.md, "Floods"): a server that floods requests,
notifications or progress cannot grow the client without bound, make a call miss its
deadline, or run a subscriber after ``stop()`` returned.

Each test floods a real scripted server subprocess (``--flood-tools``) through the public
API, samples the process's resident memory while it runs, reads what was dropped from the
``mcp.client.dropped`` counter (an in-memory OpenTelemetry reader), and checks the client
still works after the flood. Before these bounds, 200k pings grew the client by ~600 MB.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import conduit_mcp as mcp

FLOOD = 100_000
# Resident memory a flood may add (the unbounded client grew by 300-600 MB with these
# floods): generous for allocator noise, far below any leak.
MEMORY_MARGIN_MB = 60


def rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


class PeakRss:
    """The highest resident memory seen while the block runs (sampled every 5 ms)."""

    def __init__(self) -> None:
        self.start = rss_mb()
        self.peak = self.start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(0.005):
            self.peak = max(self.peak, rss_mb())

    def __enter__(self) -> PeakRss:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_mb())

    @property
    def growth(self) -> float:
        return self.peak - self.start


class Dropped:
    """Reads ``mcp.client.dropped`` by kind from a client's own meter provider."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])

    def __call__(self, kind: str) -> int:
        data = self.reader.get_metrics_data()
        total = 0
        for rm in data.resource_metrics if data is not None else ():
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name != "mcp.client.dropped":
                        continue
                    for point in metric.data.data_points:
                        if point.attributes.get("kind") == kind:
                            total += point.value
        return total


@pytest.fixture
def dropped() -> Iterator[Dropped]:
    d = Dropped()
    yield d
    d.provider.shutdown()


@pytest.fixture
def flood_client(
    make_server: Callable[..., Any], start_client: Callable[..., mcp.Client], dropped: Dropped
) -> Callable[..., mcp.Client]:
    def start(era: str = "legacy", **options: Any) -> mcp.Client:
        server = make_server(era=era, extra_args=["--flood-tools"])
        # close_grace: a server told to stop reading never sees stdin close; the stop
        # signals it after 0.3 s instead of waiting out the default 2 s
        client = start_client(
            server.stdio(close_grace=0.3), protocol=era, meter_provider=dropped.provider, **options
        )
        client.await_ready(10)
        return client

    return start


def still_works(client: mcp.Client) -> None:
    assert client.call_tool("add", {"a": 1, "b": 2}, timeout=10).structured_content == {"sum": 3}
    assert client.status().state == "ready"


# -- server requests ------------------------------------------------------------------------


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_ping_flood_is_answered_within_bounds(
    flood_client: Callable[..., mcp.Client], era: str
) -> None:
    client = flood_client(era)
    with PeakRss() as mem:
        result = client.call_tool("flood", {"what": "request", "count": FLOOD}, timeout=30)
    assert result.content[0]["text"] == f"flooded {FLOOD}"
    assert mem.growth < MEMORY_MARGIN_MB, f"grew {mem.growth:.0f} MB"
    still_works(client)


def test_a_flood_of_refused_requests_is_bounded(
    flood_client: Callable[..., mcp.Client],
) -> None:
    client = flood_client("legacy")
    args = {"what": "request", "count": FLOOD, "method": "sampling/createMessage"}
    with PeakRss() as mem:
        client.call_tool("flood", args, timeout=30)
    assert mem.growth < MEMORY_MARGIN_MB, f"grew {mem.growth:.0f} MB"
    still_works(client)


def test_answers_a_server_never_reads_are_dropped_and_counted(
    flood_client: Callable[..., mcp.Client], dropped: Dropped
) -> None:
    client = flood_client("legacy")
    args = {"what": "request", "count": FLOOD, "stop_reading": True}
    with PeakRss() as mem:
        result = client.call_tool("flood", args, timeout=30)
    assert result.content[0]["text"] == f"flooded {FLOOD}"
    assert mem.growth < MEMORY_MARGIN_MB, f"grew {mem.growth:.0f} MB"
    # ~40 bytes an answer: at most max_answer_backlog (1 MiB) plus a pipe's worth was kept,
    # and every other answer was dropped, or never read off the pipe (max_inbox).
    lost = dropped("answer") + dropped("inbound")
    assert lost >= FLOOD - (1024 * 1024 + 1024 * 1024) // 40
    assert client.status().state == "ready"


def test_a_smaller_answer_backlog_drops_more(
    flood_client: Callable[..., mcp.Client], dropped: Dropped
) -> None:
    client = flood_client("legacy", max_answer_backlog=0)
    args = {"what": "request", "count": 20_000, "stop_reading": True}
    client.call_tool("flood", args, timeout=30)
    # Nothing waits for a server that does not read: every answer the pipe could not take at
    # once was dropped (a pipe holds at most 1 MiB on Linux, ~40 bytes an answer).
    assert dropped("answer") + dropped("inbound") >= 20_000 - (1024 * 1024) // 40


@pytest.mark.parametrize("response", ["sse", "json"])
def test_a_ping_flood_over_legacy_http_is_answered_within_bounds(
    serve_http: Callable[..., Any],
    start_client: Callable[..., mcp.Client],
    dropped: Dropped,
    response: str,
) -> None:
    # sse: the pings come on the tool call's response stream; json: on the session's GET
    # stream. Each answer is a POST: ANSWER_POSTS (32) at once, the rest wait, and
    # past max_answer_backlog bytes waiting they are dropped.
    _, proc = serve_http(era="legacy", flood_tools=True, http_response=response)
    client = start_client(mcp.Http(proc.url), protocol="legacy", meter_provider=dropped.provider)
    client.await_ready(10)
    with PeakRss() as mem:
        result = client.call_tool("flood", {"what": "request", "count": 30_000}, timeout=30)
    assert result.content[0]["text"] == "flooded 30000"
    assert mem.growth < MEMORY_MARGIN_MB, f"grew {mem.growth:.0f} MB"
    assert dropped("answer") > 0
    still_works(client)


# -- notifications --------------------------------------------------------------------------


def test_a_slow_subscriber_under_a_flood_is_bounded_and_stops_with_the_client(
    flood_client: Callable[..., mcp.Client], dropped: Dropped
) -> None:
    client = flood_client("legacy", max_subscriber_backlog=100)
    calls: list[Any] = []
    first = threading.Event()

    threads: set[threading.Thread] = set()

    def slow(note: mcp.ServerNotification) -> None:
        calls.append(note)
        threads.add(threading.current_thread())
        first.set()
        time.sleep(0.001)  # a slow consumer (its own work, not a wait for an event)

    client.subscribe_notifications(slow)
    with PeakRss() as mem:
        client.call_tool("flood", {"what": "notification", "count": FLOOD}, timeout=30)
        assert first.wait(10)
    assert mem.growth < MEMORY_MARGIN_MB, f"grew {mem.growth:.0f} MB"
    still_works(client)
    client.stop()
    seen = len(calls)
    # Nothing of the client runs after stop() returned: the thread that ran the subscriber
    # (the notifier's) is gone, so no call can come later.
    assert threads and not [t for t in threads if t.is_alive()]
    assert len(calls) == seen
    # Most of the flood never reached the slow subscriber: dropped at its queue (100) or
    # before the connection (max_inbox), and counted.
    assert seen + dropped("notification") + dropped("inbound") >= FLOOD * 0.99
    assert seen < FLOOD // 2


def test_a_fast_subscriber_gets_every_notification_of_a_moderate_burst(
    flood_client: Callable[..., mcp.Client], dropped: Dropped
) -> None:
    client = flood_client("legacy")
    got: list[Any] = []
    done = threading.Event()

    def fast(note: mcp.ServerNotification) -> None:
        got.append(note)
        if len(got) == 500:
            done.set()

    client.subscribe_notifications(fast)
    client.call_tool("flood", {"what": "notification", "count": 500}, timeout=30)
    assert done.wait(10)
    assert dropped("notification") == 0 and dropped("inbound") == 0


# -- progress -------------------------------------------------------------------------------


def test_a_progress_flood_to_a_slow_callback_ends_by_the_deadline(
    flood_client: Callable[..., mcp.Client],
) -> None:
    client = flood_client("legacy")
    seen: list[mcp.Progress] = []

    def slow(progress: mcp.Progress) -> None:
        seen.append(progress)
        time.sleep(0.0001)  # 0.1 ms of work per report

    args = {"what": "progress", "count": FLOOD, "then": "never"}
    started = time.monotonic()
    with PeakRss() as mem, pytest.raises(mcp.Error) as caught:
        client.call_tool("flood", args, timeout=2.0, on_progress=slow)
    took = time.monotonic() - started
    assert caught.value.kind == "timeout"
    assert took < 2.0 + 0.5, f"ended {took - 2.0:.2f}s past its deadline"
    assert mem.growth < MEMORY_MARGIN_MB, f"grew {mem.growth:.0f} MB"
    assert seen, "some progress reached the callback"
    still_works(client)


def test_a_progress_flood_keeps_the_latest_reports(
    flood_client: Callable[..., mcp.Client],
) -> None:
    client = flood_client("legacy")
    seen: list[float] = []
    args = {"what": "progress", "count": FLOOD}
    result = client.call_tool(
        "flood", args, timeout=30, on_progress=lambda p: seen.append(p.progress)
    )
    assert result.content[0]["text"] == f"flooded {FLOOD}"
    # In order, and never a report older than one already run; the last one is kept.
    assert seen == sorted(seen)
    assert seen[-1] == FLOOD


def test_a_progress_flood_to_a_slow_asyncio_callback_ends_by_the_deadline(
    make_server: Callable[..., Any],
) -> None:
    import asyncio

    server = make_server(era="legacy", extra_args=["--flood-tools"])

    async def run() -> float:
        async with mcp.Client.start(server.stdio(), protocol="legacy").aio as client:
            await client.await_ready(10)

            def slow(progress: mcp.Progress) -> None:
                time.sleep(0.0001)

            args = {"what": "progress", "count": FLOOD, "then": "never"}
            started = time.monotonic()
            with pytest.raises(mcp.Error) as caught:
                await client.call_tool("flood", args, timeout=2.0, on_progress=slow)
            assert caught.value.kind == "timeout"
            took = time.monotonic() - started
            ok = await client.call_tool("add", {"a": 1, "b": 2}, timeout=10)
            assert ok.structured_content == {"sum": 3}
            return took

    took = asyncio.run(run())
    assert took < 2.0 + 0.5, f"ended {took - 2.0:.2f}s past its deadline"
