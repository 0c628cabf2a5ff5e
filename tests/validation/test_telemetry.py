"""What the checks look like in OpenTelemetry: the first call's listing is its own
``tools/list`` span, and a result that fails its schema ends the ``tools/call`` span in error,
naming no value."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

import conduit_mcp as mcp

from .conftest import add_tool, structured

pytestmark = pytest.mark.timeout(60)

SECRET = "SECRET-span-77e1"


def test_spans_of_a_checked_call(scripted, start_client):
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        client = start_client(scripted.stdio(), tracer_provider=provider)
        name = add_tool(
            client,
            output_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
            result=structured({"n": SECRET}),
        )
        with pytest.raises(mcp.Error):
            client.call_tool(name)
        names = [s.name for s in exporter.get_finished_spans()]
        # never listed: the listing first, then the call (add_tool's own, then the checked one)
        assert names[:2] == ["tools/list", "tools/call add_tool"]
        assert f"tools/call {name}" in names
        (span,) = [s for s in exporter.get_finished_spans() if s.name == f"tools/call {name}"]
        assert span.status.status_code is StatusCode.ERROR
        assert span.attributes["error.type"] == "protocol"
        assert span.status.description == "protocol: invalid_structured_content"
        for s in exporter.get_finished_spans():
            assert SECRET not in repr(dict(s.attributes or {}))
            assert SECRET not in (s.status.description or "")
            assert all(SECRET not in repr(e.attributes) for e in s.events)
    finally:
        provider.shutdown()
