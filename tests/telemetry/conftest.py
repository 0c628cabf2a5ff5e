"""Fixtures: a fresh in-memory tracer and meter provider per test (never the globals, which
OpenTelemetry lets a process set only once), scripted servers, and clients that use them."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import conduit_mcp as mcp


class Otel:
    """One test's providers, and readers for what they exported."""

    def __init__(self) -> None:
        self.exporter = InMemorySpanExporter()
        self.tracer_provider = TracerProvider()
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.exporter))
        self.reader = InMemoryMetricReader()
        self.meter_provider = MeterProvider(metric_readers=[self.reader])

    @property
    def options(self) -> dict[str, Any]:
        return {"tracer_provider": self.tracer_provider, "meter_provider": self.meter_provider}

    def spans(self, name: str | None = None) -> list[ReadableSpan]:
        spans = list(self.exporter.get_finished_spans())
        return [s for s in spans if name is None or s.name == name]

    def span(self, name: str) -> ReadableSpan:
        found = self.spans(name)
        assert len(found) == 1, [s.name for s in self.spans()]
        return found[0]

    def metrics(self) -> dict[str, Any]:
        """Metric name -> Metric, from one collection."""
        data = self.reader.get_metrics_data()
        out: dict[str, Any] = {}
        if data is None:
            return out
        for rm in data.resource_metrics:
            for sm in rm.scope_metrics:
                for metric in sm.metrics:
                    out[metric.name] = metric
        return out

    def points(self, name: str) -> list[Any]:
        metric = self.metrics().get(name)
        return [] if metric is None else list(metric.data.data_points)

    def counts(self, name: str) -> dict[frozenset[tuple[str, Any]], int]:
        """Counter value by attribute set."""
        return {frozenset(p.attributes.items()): p.value for p in self.points(name)}


@pytest.fixture
def otel() -> Iterator[Otel]:
    o = Otel()
    yield o
    o.tracer_provider.shutdown()
    o.meter_provider.shutdown()


@pytest.fixture
def start_client(otel: Otel) -> Iterator[Callable[..., mcp.Client]]:
    """Start a client wired to this test's providers (pass ``tracer_provider=None`` etc. to
    override)."""
    clients: list[mcp.Client] = []

    def start(transport: Any, **options: Any) -> mcp.Client:
        options.setdefault("backoff", lambda attempt: 0.01)
        # The spans here are those of the calls a test makes: no tools/list first for the
        # output check (docs/validation.md; tests/validation/test_telemetry.py has its spans).
        options.setdefault("validate_output", False)
        for key, value in otel.options.items():
            options.setdefault(key, value)
        client = mcp.Client.start(transport, **options)
        clients.append(client)
        client.await_ready(timeout=10)
        return client

    yield start
    for client in clients:
        client.stop()
