"""The asyncio and Pykka-future front ends produce the same spans, in the caller."""

from __future__ import annotations

import asyncio
import threading

import pykka
import pytest
from opentelemetry.sdk.trace import SpanProcessor
from opentelemetry.trace import SpanKind, StatusCode

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(30)


class _Recorder(SpanProcessor):
    """A span processor noting the thread each span ends in."""

    def __init__(self) -> None:
        self.threads: dict[str, int] = {}

    def on_end(self, span) -> None:
        self.threads[span.name] = threading.get_ident()


def test_asyncio_spans_nest_under_the_tasks_span(make_server, start_client, otel):
    server = make_server()
    client = start_client(server.stdio())
    recorder = _Recorder()
    otel.tracer_provider.add_span_processor(recorder)
    tracer = otel.tracer_provider.get_tracer("app")

    async def main() -> tuple[int, int]:
        with tracer.start_as_current_span("job") as job:
            results = await asyncio.gather(
                client.aio.call_tool("add", {"a": 1, "b": 2}),
                client.aio.get_prompt("greet", {"name": "x"}),
            )
            assert results[0].text == "3"
            with pytest.raises(mcp.Error):
                await client.aio.call_tool("never", timeout=0.2)
        return job.get_span_context().span_id, threading.get_ident()

    job_id, loop_thread = asyncio.run(main())
    for name in ("tools/call add", "prompts/get greet", "tools/call never"):
        span = otel.span(name)
        assert span.kind is SpanKind.CLIENT
        assert span.parent.span_id == job_id
        assert recorder.threads[name] == loop_thread  # ended on the caller's loop
    assert otel.span("tools/call never").attributes["error.type"] == "timeout"
    sent = server.received("tools/call")[0]["params"]["_meta"]["traceparent"]
    assert int(sent.split("-")[2], 16) == otel.span("tools/call add").context.span_id


def test_asyncio_cancelled_task_is_error_type_cancelled(make_server, start_client, otel):
    server = make_server()
    client = start_client(server.stdio())

    async def main() -> None:
        task = asyncio.create_task(client.aio.call_tool("never", timeout=20))
        await server.wait_for_async({"dir": "in", "method": "tools/call"})
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    span = otel.span("tools/call never")
    assert span.attributes["error.type"] == "cancelled"
    assert span.status.status_code is StatusCode.ERROR
    server.wait_for("cancelled")


def test_futures_span_ends_on_get_timed_at_the_answer(make_server, start_client, otel):
    server = make_server()
    client = start_client(server.stdio())
    recorder = _Recorder()
    otel.tracer_provider.add_span_processor(recorder)
    future = client.futures.call_tool("add", {"a": 1, "b": 2})
    # the answer arrives meanwhile; nothing ends the span in the connection
    slow = client.call_tool("slow", {"seconds": 0.3})
    assert slow.is_error is False
    assert otel.spans("tools/call add") == []
    getter: list[int] = []

    def read() -> None:
        getter.append(threading.get_ident())
        assert future.get(timeout=10).text == "3"
        assert future.get(timeout=10).text == "3"  # a second get ends nothing twice

    t = threading.Thread(target=read)
    t.start()
    t.join()
    span = otel.span("tools/call add")
    assert recorder.threads["tools/call add"] == getter[0]  # the reading thread
    slow_span = otel.span("tools/call slow")
    # ended when the answer arrived, not when it was read (after the 0.3 s call)
    assert span.end_time < slow_span.end_time - 200_000_000
    assert span.attributes["jsonrpc.request.id"] == str(server.received("tools/call")[0]["id"])
    (point,) = [
        p
        for p in otel.points("mcp.client.operation.duration")
        if p.attributes.get("gen_ai.tool.name") == "add"
    ]
    assert point.count == 1
    assert point.sum < 0.25
    sent = server.received("tools/call")[0]["params"]["_meta"]["traceparent"]
    assert int(sent.split("-")[2], 16) == span.context.span_id


def test_futures_failure_and_parent(make_server, start_client, otel):
    client = start_client(make_server().stdio())
    tracer = otel.tracer_provider.get_tracer("app")
    with tracer.start_as_current_span("actor work") as work:
        future = client.futures.call_tool("error", {"code": -32001, "message": "no"})
    with pytest.raises(mcp.Error):
        future.get(timeout=10)
    with pytest.raises(mcp.Error):
        future.get(timeout=10)
    span = otel.span("tools/call error")
    assert span.parent.span_id == work.get_span_context().span_id
    assert span.attributes["error.type"] == "-32001"


def test_futures_get_timeout_does_not_end_the_span(make_server, start_client, otel):
    client = start_client(make_server().stdio())
    future = client.futures.call_tool("slow", {"seconds": 0.3}, timeout=10)
    with pytest.raises(pykka.Timeout):
        future.get(timeout=0.01)
    assert otel.spans("tools/call slow") == []
    assert future.get(timeout=10).is_error is False
    assert "error.type" not in otel.span("tools/call slow").attributes
