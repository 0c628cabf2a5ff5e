"""Floods over ``InProcess`` (docs/connection.md, "Floods"): an in-process server has no pipe
to push back, so the client's bounds are all there is. A flood of server requests or
notifications is bounded by ``max_inbox``; answers to a server that stopped reading are
dropped past ``max_answer_backlog``, and counted in ``mcp.client.dropped``."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(90)

FLOOD = 30_000


class Dropped:
    """``mcp.client.dropped`` by kind, from the client's own meter provider."""

    def __init__(self) -> None:
        self.reader = InMemoryMetricReader()
        self.provider = MeterProvider(metric_readers=[self.reader])

    def __call__(self, kind: str) -> int:
        data = self.reader.get_metrics_data()
        total = 0
        for rm in data.resource_metrics if data is not None else ():
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    if metric.name == "mcp.client.dropped":
                        for point in metric.data.data_points:
                            if point.attributes.get("kind") == kind:
                                total += point.value
        return total


@pytest.fixture
def dropped() -> Iterator[Dropped]:
    d = Dropped()
    yield d
    d.provider.shutdown()


def flooder(make_server: Any, start_client: Any, dropped: Dropped, **options: Any) -> Any:
    server = make_server(era="legacy", extra_args=["--flood-tools"])
    client = start_client(
        server.inprocess(), protocol="legacy", meter_provider=dropped.provider, **options
    )
    client.await_ready(10)
    return client


def still_works(client: mcp.Client) -> None:
    assert client.call_tool("add", {"a": 1, "b": 2}, timeout=10).structured_content == {"sum": 3}
    assert client.status().state == "ready"


def test_a_ping_flood_is_answered_and_the_client_keeps_working(
    make_server: Any, start_client: Any, dropped: Dropped
) -> None:
    client = flooder(make_server, start_client, dropped)
    result = client.call_tool("flood", {"what": "request", "count": FLOOD}, timeout=60)
    assert result.text == f"flooded {FLOOD}"
    still_works(client)


def test_a_notification_flood_past_max_inbox_is_dropped_and_counted(
    make_server: Any, start_client: Any, dropped: Dropped
) -> None:
    client = flooder(make_server, start_client, dropped, max_inbox=100)
    result = client.call_tool("flood", {"what": "notification", "count": FLOOD}, timeout=60)
    assert result.text == f"flooded {FLOOD}"
    assert dropped("inbound") > 0
    still_works(client)


def test_answers_to_a_server_that_stopped_reading_are_dropped_and_counted(
    make_server: Any, start_client: Any, dropped: Dropped
) -> None:
    client = flooder(make_server, start_client, dropped, max_answer_backlog=4096)
    args = {"what": "request", "count": FLOOD, "stop_reading": True}
    result = client.call_tool("flood", args, timeout=60)
    assert result.text == f"flooded {FLOOD}"
    # ~40 bytes an answer: at most 4096 bytes of them are handed over, the rest dropped (or
    # never admitted: max_inbox). The flood call's own answer came straight to this thread,
    # ahead of the connection working through the flood: wait for it, bounded.
    bound = FLOOD - 4096 // 30
    deadline = time.monotonic() + 30
    while dropped("answer") + dropped("inbound") < bound:
        assert time.monotonic() < deadline, (dropped("answer"), dropped("inbound"))
        time.sleep(0.05)
    assert client.status().state == "ready"
