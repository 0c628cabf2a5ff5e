"""No secret in any exported span or metric (docs/secrets.md): tool arguments, ``_meta``,
prompt arguments, resource URIs, the server's environment, server error text and data, and
results never reach a span name, attribute, event, link or status, nor a metric attribute."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(30)

SECRET = "sk-live-0tel5ecret9d3e"


def _span_texts(span) -> list[str]:
    texts = [span.name, str(span.status.description), repr(span.status)]
    for key, value in (span.attributes or {}).items():
        texts += [key, repr(value)]
    for event in span.events:
        texts.append(event.name)
        texts += [f"{k}={v!r}" for k, v in (event.attributes or {}).items()]
    for link in span.links:
        texts += [f"{k}={v!r}" for k, v in (link.attributes or {}).items()]
    texts.append(span.to_json())
    return texts


def _metric_texts(otel) -> list[str]:
    texts: list[str] = []
    for metric in otel.metrics().values():
        texts += [metric.name, metric.description or "", metric.unit or ""]
        for point in metric.data.data_points:
            texts += [f"{k}={v!r}" for k, v in point.attributes.items()]
    return texts


def test_no_secret_in_any_span_or_metric(make_server, start_client, otel):
    server = make_server(
        rules=[
            {"match": {"tool": "echo"}, "action": "respond_twice", "times": 1},
        ]
    )
    transport = server.stdio(env={"API_TOKEN": SECRET})
    client = start_client(transport)
    args = {"text": SECRET, "token": SECRET}
    meta = {"authorization": f"Bearer {SECRET}"}

    assert client.call_tool("echo", args, meta=meta).text == SECRET  # a result with the secret
    assert client.call_tool("env", {"name": "API_TOKEN"}).text == SECRET
    for call in (
        lambda: client.call_tool(
            "error", {"code": -32000, "message": f"bad token {SECRET}", "data": {"token": SECRET}}
        ),
        lambda: client.call_tool("error", {"code": -32602, "message": SECRET}),
        lambda: client.call_tool("never", args, timeout=0.2),
        lambda: client.call_tool("fail", {"message": SECRET}),
        lambda: client.get_prompt("greet", {"name": SECRET}),
        lambda: client.read_resource(f"test://item/{SECRET}"),
        lambda: client.request("tools/call", {"name": "echo", "arguments": args, "_meta": meta}),
        lambda: client.call_tool("echo", {"x": object(), "token": SECRET}),  # not JSON
        lambda: client.futures.call_tool("echo", args).get(timeout=10),
        lambda: asyncio.run(client.aio.call_tool("echo", args)),
    ):
        try:
            call()
        except mcp.Error:
            pass
    # a transport failure while a call with the secret is in flight
    pending = client.futures.call_tool("never", args, timeout=20)
    server.wait_for(
        lambda e: (
            e.get("dir") == "in"
            and e.get("method") == "tools/call"
            and (e.get("params") or {}).get("name") == "never"
        ),
        count=2,
    )
    os.kill(server.pids()[-1], signal.SIGKILL)
    with pytest.raises(mcp.Error):
        pending.get(timeout=10)
    client.wait_for_state("ready", timeout=10)

    # the secret did reach the server (so the test exercises real traffic) ...
    assert any(SECRET in str(e.get("params")) for e in server.received("tools/call"))
    spans = otel.spans()
    assert len(spans) >= 12
    # ... and nowhere in what was exported
    for span in spans:
        for text in _span_texts(span):
            assert SECRET not in text, (span.name, text)
    for text in _metric_texts(otel):
        assert SECRET not in text, text
    # nothing derived from arguments either
    for span in spans:
        assert not any("argument" in key or "param" in key for key in span.attributes)
