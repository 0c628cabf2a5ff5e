"""One CLIENT span per request, with the MCP semantic-convention attributes, for every way a
request ends (docs/telemetry.md, "Telemetry")."""

from __future__ import annotations

import os
import signal
from concurrent.futures import ThreadPoolExecutor

import pytest
from opentelemetry.trace import SpanKind, StatusCode

import conduit_mcp as mcp
from conduit_mcp.telemetry.attributes import DURATION_BUCKETS

pytestmark = pytest.mark.timeout(30)

MODERN = "2026-07-28"


def _request_id(server, method="tools/call", n=-1):
    return str(server.received(method)[n]["id"])


def test_tools_call_ok(make_server, start_client, otel):
    server = make_server()
    client = start_client(server.stdio())
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    span = otel.span("tools/call add")
    assert span.kind is SpanKind.CLIENT
    assert span.status.status_code is StatusCode.UNSET
    assert dict(span.attributes) == {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "add",
        "gen_ai.operation.name": "execute_tool",
        "network.transport": "pipe",
        "jsonrpc.request.id": _request_id(server),
        "mcp.protocol.version": MODERN,
    }
    assert isinstance(span.attributes["jsonrpc.request.id"], str)
    assert span.parent is None  # no application span around the call
    assert span.instrumentation_scope.name == "conduit_mcp"
    assert not span.events


def test_legacy_era_records_the_negotiated_version(make_server, start_client, otel):
    server = make_server(era="legacy")
    client = start_client(server.stdio())
    client.call_tool("add", {"a": 1, "b": 2})
    span = otel.span("tools/call add")
    assert span.attributes["mcp.protocol.version"] == client.status().version
    assert client.status().era == "legacy"


def test_tool_error(make_server, start_client, otel):
    client = start_client(make_server().stdio())
    assert client.call_tool("fail", {"message": "it broke"}).is_error is True
    span = otel.span("tools/call fail")
    assert span.attributes["error.type"] == "tool_error"
    assert "rpc.response.status_code" not in span.attributes
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "tool_error"


def test_server_error(make_server, start_client, otel):
    server = make_server()
    client = start_client(server.stdio())
    with pytest.raises(mcp.Error) as err:
        client.call_tool("error", {"code": -32099, "message": "nope: you sent a=1"})
    assert err.value.kind == "server"
    span = otel.span("tools/call error")
    assert span.attributes["error.type"] == "-32099"
    assert span.attributes["rpc.response.status_code"] == "-32099"
    assert span.attributes["jsonrpc.request.id"] == _request_id(server)
    assert span.status.status_code is StatusCode.ERROR
    # our own kind and reason, never the server's free text (it may echo arguments)
    assert span.status.description == "server: other"


def test_known_server_error_codes_name_their_reason(make_server, start_client, otel):
    client = start_client(make_server().stdio())
    with pytest.raises(mcp.Error):
        client.call_tool("no_such_tool")
    span = otel.span("tools/call no_such_tool")
    assert span.attributes["error.type"] == "-32602"
    assert span.status.description == "server: invalid_params"


def test_timeout(make_server, start_client, otel):
    server = make_server()
    client = start_client(server.stdio())
    with pytest.raises(mcp.Error) as err:
        client.call_tool("never", timeout=0.2)
    assert err.value.kind == "timeout"
    span = otel.span("tools/call never")
    assert span.attributes["error.type"] == "timeout"
    assert span.attributes["jsonrpc.request.id"] == _request_id(server)
    assert span.status.status_code is StatusCode.ERROR
    assert span.status.description == "timeout: deadline"
    assert (span.end_time - span.start_time) / 1e9 >= 0.2


def test_transport_lost_mid_call(make_server, start_client, otel):
    server = make_server()
    client = start_client(server.stdio())
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(client.call_tool, "never", timeout=20)
        server.wait_for({"dir": "in", "method": "tools/call"})
        os.kill(server.pids()[-1], signal.SIGKILL)
        with pytest.raises(mcp.Error) as err:
            pending.result(timeout=10)
    assert err.value.kind == "transport"
    span = otel.span("tools/call never")
    assert span.attributes["error.type"] == "transport"
    assert span.status.description == "transport: exit"
    # the span ended in the caller's thread once the caller had its answer
    client.wait_for_state("ready", timeout=10)


def test_overloaded(make_server, start_client, otel):
    server = make_server()
    client = start_client(server.stdio(), max_in_flight=1)
    blocker = client.futures.call_tool("never", timeout=20)
    server.wait_for({"dir": "in", "method": "tools/call"})
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", {"a": 1, "b": 1})
    assert err.value.kind == "overloaded"
    span = otel.span("tools/call add")
    assert span.attributes["error.type"] == "overloaded"
    assert "jsonrpc.request.id" not in span.attributes  # never numbered, never sent
    assert span.status.description == "overloaded: max_in_flight"
    client.stop()
    with pytest.raises(mcp.Error) as closed:
        blocker.get(timeout=10)
    assert closed.value.kind == "closed"
    assert otel.span("tools/call never").attributes["error.type"] == "closed"


def test_a_closed_client_still_gives_a_span(make_server, start_client, otel):
    server = make_server()
    client = start_client(server.stdio(), max_reconnects=0)
    os.kill(server.pids()[-1], signal.SIGKILL)
    client.wait_for_state("closed", timeout=10)
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", {"a": 1, "b": 1})
    assert err.value.kind == "closed"
    span = otel.span("tools/call add")
    assert span.attributes["error.type"] == "closed"
    assert span.status.description == "closed: max_reconnects"


def test_parent_is_the_callers_current_span(make_server, start_client, otel):
    client = start_client(make_server().stdio())
    tracer = otel.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("handle request") as app:
        client.call_tool("add", {"a": 1, "b": 2})
        client.list_tools()
    call = otel.span("tools/call add")
    listing = otel.span("tools/list")
    for child in (call, listing):
        assert child.parent is not None
        assert child.parent.span_id == app.get_span_context().span_id
        assert child.context.trace_id == app.get_span_context().trace_id
    # a call outside the application span is a root again
    client.call_tool("echo", {"text": "x"})
    assert otel.span("tools/call echo").parent is None


def test_traceparent_reaches_the_server_with_the_client_span_id(make_server, start_client, otel):
    server = make_server()
    client = start_client(server.stdio())
    meta = {"custom": "kept"}
    client.call_tool("add", {"a": 1, "b": 2}, meta=meta)
    assert meta == {"custom": "kept"}  # the caller's dict is never mutated
    span = otel.span("tools/call add")
    sent = server.received("tools/call")[-1]["params"]["_meta"]
    version, trace_id, span_id, flags = sent["traceparent"].split("-")
    assert version == "00"
    assert int(trace_id, 16) == span.context.trace_id
    assert int(span_id, 16) == span.context.span_id
    assert int(flags, 16) & 0x01  # sampled
    assert sent["custom"] == "kept"
    assert sent["io.modelcontextprotocol/protocolVersion"] == MODERN


def test_trace_context_goes_with_every_request_kind(make_server, start_client, otel):
    server = make_server(era="legacy")
    client = start_client(server.stdio())
    client.ping()
    client.list_prompts()
    for method in ("ping", "prompts/list"):
        sent = server.received(method)[-1]["params"]["_meta"]
        assert int(sent["traceparent"].split("-")[2], 16) == otel.span(method).context.span_id


def test_span_names_and_targets(make_server, start_client, otel):
    client = start_client(make_server().stdio())
    client.get_prompt("greet", {"name": "ann"})
    client.read_resource("test://item/42")
    client.list_resources()
    client.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 1}})
    prompt = otel.span("prompts/get greet")
    assert prompt.attributes["gen_ai.prompt.name"] == "greet"
    assert "gen_ai.operation.name" not in prompt.attributes
    read = otel.span("resources/read")  # never the URI: it may carry identifiers
    assert "test://item/42" not in str(dict(read.attributes))
    assert "gen_ai.tool.name" not in read.attributes
    assert otel.span("resources/list").attributes["mcp.method.name"] == "resources/list"
    raw = otel.span("tools/call add")  # request() by method name gets the same span
    assert raw.attributes["gen_ai.tool.name"] == "add"


def test_one_span_per_page(make_server, start_client, otel):
    client = start_client(make_server(page_size=2).stdio())
    tools = client.list_all_tools()
    pages = otel.spans("tools/list")
    assert len(pages) == (len(tools) + 1) // 2 >= 2


def test_histogram_points_and_bounds(make_server, start_client, otel):
    client = start_client(make_server().stdio())
    client.call_tool("add", {"a": 1, "b": 2})
    client.call_tool("add", {"a": 3, "b": 4})
    with pytest.raises(mcp.Error):
        client.call_tool("error", {"code": -32000, "message": "m"})
    metric = otel.metrics()["mcp.client.operation.duration"]
    assert metric.unit == "s"
    points = {frozenset(p.attributes.items()): p for p in metric.data.data_points}
    ok = points[
        frozenset(
            {
                "mcp.method.name": "tools/call",
                "gen_ai.tool.name": "add",
                "gen_ai.operation.name": "execute_tool",
                "mcp.protocol.version": MODERN,
                "network.transport": "pipe",
            }.items()
        )
    ]
    assert ok.count == 2
    assert 0 < ok.sum < 10
    assert list(ok.explicit_bounds) == list(DURATION_BUCKETS)
    assert sum(ok.bucket_counts) == 2
    failed = points[
        frozenset(
            {
                "mcp.method.name": "tools/call",
                "gen_ai.tool.name": "error",
                "gen_ai.operation.name": "execute_tool",
                "mcp.protocol.version": MODERN,
                "network.transport": "pipe",
                "error.type": "-32000",
                "rpc.response.status_code": "-32000",
            }.items()
        )
    ]
    assert failed.count == 1
    for point in metric.data.data_points:  # low cardinality: no ids
        assert "jsonrpc.request.id" not in point.attributes
        assert "mcp.session.id" not in point.attributes


def test_duration_is_the_callers_wait(make_server, start_client, otel):
    client = start_client(make_server().stdio())
    client.call_tool("slow", {"seconds": 0.25})
    (point,) = otel.points("mcp.client.operation.duration")
    assert 0.25 <= point.sum < 5
    span = otel.span("tools/call slow")
    assert (span.end_time - span.start_time) / 1e9 >= 0.25


def test_providers_are_per_client(make_server, start_client, otel):
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    other = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(other))
    server = make_server()
    a = start_client(server.stdio())
    b = start_client(server.stdio(), tracer_provider=provider)
    a.call_tool("add", {"a": 1, "b": 1})
    b.call_tool("echo", {"text": "b"})
    assert [s.name for s in otel.spans()] == ["tools/call add"]
    assert [s.name for s in other.get_finished_spans()] == ["tools/call echo"]


def test_a_request_queued_before_ready_gets_the_version_it_ran_under(make_server, otel):
    server = make_server(rules=[{"match": {"method": "server/discover"}, "action": {"delay": 0.3}}])
    # validate_output=False: one operation, the call's (no tools/list first)
    with mcp.Client.start(server.stdio(), validate_output=False, **otel.options) as client:
        assert client.status().version is None
        client.call_tool("add", {"a": 1, "b": 2})
    span = otel.span("tools/call add")
    assert span.attributes["mcp.protocol.version"] == MODERN
    (point,) = otel.points("mcp.client.operation.duration")
    assert point.attributes["mcp.protocol.version"] == MODERN
    assert point.sum >= 0.2  # it waited for the handshake
