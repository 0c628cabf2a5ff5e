"""Providers: validated at start, per client, the globals resolved lazily; and the zero-SDK
fast path (no span, no injection, no measurement) when there is nothing to record."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
from opentelemetry import context, trace
from opentelemetry.trace import NonRecordingSpan, SpanContext, TraceFlags

import conduit_mcp as mcp
from conduit_mcp.config import build_config
from conduit_mcp.published import Published
from conduit_mcp.telemetry import Telemetry

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("option", ["tracer_provider", "meter_provider"])
def test_a_provider_without_its_getter_is_a_config_error(option):
    with pytest.raises(mcp.Error) as err:
        build_config({option: object()})
    assert (err.value.kind, err.value.reason) == ("config", option)
    with pytest.raises(mcp.Error) as err:
        mcp.Client.start(mcp.Stdio(sys.executable, ["-c", "pass"]), **{option: "global"})
    assert (err.value.kind, err.value.reason) == ("config", option)


def test_providers_are_kept_out_of_the_config_repr(otel):
    config = build_config(otel.options)
    assert config.tracer_provider is otel.tracer_provider
    assert config.meter_provider is otel.meter_provider
    assert "provider" not in repr(config)


def test_a_failing_provider_is_a_config_error():
    class Broken:
        def get_tracer(self, *args, **kwargs):
            raise RuntimeError("no")

    with pytest.raises(mcp.Error) as err:
        mcp.Client.start(mcp.Stdio(sys.executable, ["-c", "pass"]), tracer_provider=Broken())
    assert (err.value.kind, err.value.reason) == ("config", "tracer_provider")


def _globals_unset() -> bool:
    return (
        getattr(trace, "_TRACER_PROVIDER", None) is None
        and type(trace.get_tracer_provider()) is trace.ProxyTracerProvider
    )


def test_zero_sdk_fast_path():
    if not _globals_unset():
        pytest.skip("a global provider was installed in this process")
    tel = Telemetry(None, None, network_transport="pipe", shared=Published())
    params = {"name": "add", "arguments": {"a": 1}}
    assert tel.start("tools/call", params) is None


def test_without_sdk_a_propagated_parent_is_passed_on():
    """The API's propagation-only mode: no SDK, but the caller's context holds a remote
    span (e.g. extracted from an incoming request): its trace context still goes out."""
    if not _globals_unset():
        pytest.skip("a global provider was installed in this process")
    tel = Telemetry(None, None, network_transport="pipe", shared=Published())
    parent = SpanContext(0x1234, 0x5678, is_remote=True, trace_flags=TraceFlags(1))
    token = context.attach(trace.set_span_in_context(NonRecordingSpan(parent)))
    try:
        op = tel.start("tools/call", {"name": "add"})
    finally:
        context.detach(token)
    assert op is not None
    assert op.span is None  # nothing recorded
    traceparent = op.params["_meta"]["traceparent"]
    assert traceparent.startswith(f"00-{0x1234:032x}-{0x5678:016x}-")
    op.finish({"content": []}, None, 1)


def test_an_explicit_provider_takes_the_full_path(otel):
    tel = Telemetry(otel.tracer_provider, None, shared=Published())
    params = {"name": "add", "arguments": {"a": 1}}
    op = tel.start("tools/call", params)
    assert op is not None and op.span is not None
    assert "traceparent" in op.params["_meta"]
    assert "_meta" not in params  # a copy went out
    op.finish(None, mcp.Error("timeout", "deadline"), 3)
    op.finish(None, None, 3)  # once only
    (span,) = otel.spans()
    assert span.attributes["error.type"] == "timeout"
    assert span.attributes["jsonrpc.request.id"] == "3"


def test_a_meter_only_client_measures_without_tracing(make_server, start_client, otel):
    if not _globals_unset():
        pytest.skip("a global provider was installed in this process")
    server = make_server()
    client = start_client(server.stdio(), tracer_provider=None)
    client.call_tool("add", {"a": 1, "b": 2})
    assert otel.spans() == []
    (point,) = otel.points("mcp.client.operation.duration")
    assert point.count == 1
    assert "traceparent" not in server.received("tools/call")[-1]["params"]["_meta"]


def test_global_providers_installed_after_start_are_honoured(make_server):
    """The global providers are resolved lazily (the API's proxies): an application that
    installs its SDK after starting the client still gets spans and metrics. A subprocess,
    because a process can set the globals only once."""
    server = make_server()
    script = textwrap.dedent("""
        import sys
        import conduit_mcp as mcp
        from conduit_mcp.testing import ScriptedServer
        from opentelemetry import metrics, trace
        from opentelemetry.sdk.metrics import MeterProvider
        from opentelemetry.sdk.metrics.export import InMemoryMetricReader
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor
        from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

        server = ScriptedServer(sys.argv[1])
        client = mcp.Client.start(server.stdio())
        client.await_ready(timeout=10)
        client.call_tool("add", {"a": 1, "b": 2})          # before: no SDK, nothing recorded
        exporter, reader = InMemorySpanExporter(), InMemoryMetricReader()
        provider = TracerProvider()
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        trace.set_tracer_provider(provider)
        metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))
        client.call_tool("echo", {"text": "after"})         # after: recorded
        client.stop()
        names = [s.name for s in exporter.get_finished_spans()]
        points = [p for rm in reader.get_metrics_data().resource_metrics
                  for sm in rm.scope_metrics for m in sm.metrics
                  if m.name == "mcp.client.operation.duration" for p in m.data.data_points]
        print(names, [p.attributes["gen_ai.tool.name"] for p in points])
    """)
    out = subprocess.run(
        [sys.executable, "-c", script, str(server.workdir / "late")],
        capture_output=True,
        text=True,
        timeout=30,
        env={**os.environ, **server.env()},
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "['tools/call echo'] ['echo']"
