"""The modern era (2026-07-28) over Streamable HTTP, through the public API against
the scripted server on loopback: one POST per message with the mirrored headers, the
``x-mcp-header`` parameters and their encoding, JSON and SSE answers, cancellation by closing
the stream, no session and no GET stream."""

from __future__ import annotations

import asyncio
import base64
import logging

import pytest

import conduit_mcp as mcp
from conduit_mcp.testing.raw.http import RawHttpPeer

pytestmark = pytest.mark.timeout(30)

MODERN = "2026-07-28"
PV_META = "io.modelcontextprotocol/protocolVersion"
FAST = {"request_timeout": 5.0, "backoff_base": 0.05, "backoff_max": 0.2}


def b64(text: str) -> str:
    return "=?base64?" + base64.b64encode(text.encode()).decode() + "?="


def start(start_client, srv, **options):
    client = start_client(srv.spec(), **{**FAST, **options})
    status = client.await_ready(timeout=5)
    assert (status.state, status.era, status.version) == ("ready", "modern", MODERN)
    return client


def posts(server, method=None, name=None):
    """The server's ``http`` events of POSTs, optionally of one Mcp-Method / Mcp-Name."""
    return [
        e
        for e in server.events("http")
        if e["verb"] == "POST"
        and (method is None or e["headers"].get("mcp-method") == method)
        and (name is None or e["headers"].get("mcp-name") == name)
    ]


def params_of(event):
    return {k: v for k, v in event["headers"].items() if k.startswith("mcp-param-")}


def test_one_post_per_message_with_the_modern_headers(serve_http, start_client):
    server, srv = serve_http()
    # the wire as the calls make it: no tools/list first for the output check
    client = start(start_client, srv, validate_output=False)
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    assert client.read_resource("test://static/hello").contents[0]["text"] == "Hello, world!"
    assert client.get_prompt("greet", {"name": "ann"}).messages
    assert client.complete(
        {"type": "ref/prompt", "name": "greet"}, {"name": "name", "value": "a"}
    ).values == ("alice",)

    received = [e for e in server.log() if e.get("dir") == "in"]
    http = server.events("http")
    methods = [
        "server/discover",
        "tools/call",
        "resources/read",
        "prompts/get",
        "completion/complete",
    ]
    assert [e["method"] for e in received] == methods
    assert len(http) == len(received)  # one POST per message, in order (calls are sequential)
    names = {"tools/call": "add", "resources/read": "test://static/hello", "prompts/get": "greet"}
    for message, event in zip(received, http, strict=True):
        headers = event["headers"]
        assert (event["verb"], event["path"], event["status"]) == ("POST", "/mcp", 200)
        accepted = {part.strip() for part in headers["accept"].split(",")}
        assert {"application/json", "text/event-stream"} <= accepted
        assert headers["content-type"].startswith("application/json")
        assert headers["mcp-method"] == message["method"]
        assert headers["mcp-protocol-version"] == message["params"]["_meta"][PV_META] == MODERN
        assert headers.get("mcp-name") == names.get(message["method"])
    assert not server.events("header_mismatch")


def test_mcp_param_headers_follow_the_encoding_rules(serve_http, start_client):
    server, srv = serve_http(header_tools=True)
    client = start(start_client, srv)
    assert "weather" in {t.name for t in client.list_all_tools()}  # learns the header plans
    cases = [
        (
            {"region": "Oslo", "days": 3, "metric": True},
            "Oslo 3 true",
            {"mcp-param-region": "Oslo", "mcp-param-days": "3", "mcp-param-metric": "true"},
        ),
        ({"region": "Zürich"}, "Zürich null null", {"mcp-param-region": b64("Zürich")}),
        (
            {"region": "Oslo ", "metric": False},
            "Oslo  null false",
            {"mcp-param-region": b64("Oslo "), "mcp-param-metric": "false"},
        ),
        ({"region": " lead", "days": None}, " lead null null", {"mcp-param-region": b64(" lead")}),
        (
            {"region": "=?base64?x?="},
            "=?base64?x?= null null",
            {"mcp-param-region": b64("=?base64?x?=")},
        ),
    ]
    for arguments, text, _ in cases:
        assert client.call_tool("weather", arguments).text == text
    sent = [params_of(e) for e in posts(server, "tools/call", "weather")]
    assert sent == [headers for _, _, headers in cases]
    assert not server.events("header_mismatch")
    # A value the header cannot carry (wrong JSON type, beyond ±(2^53-1)) is refused in the
    # caller, before anything is sent.
    for arguments in ({"region": 5}, {"region": "Oslo", "days": 2**53}, {"region": True}):
        with pytest.raises(mcp.Error) as err:
            client.call_tool("weather", arguments)
        assert (err.value.kind, err.value.reason) == ("argument", "x_mcp_header_value")
    assert len(server.received("tools/call")) == len(cases)


def test_a_tool_with_an_invalid_annotation_is_hidden_with_a_warning(
    serve_http, start_client, caplog
):
    caplog.set_level(logging.WARNING)
    _, srv = serve_http(header_tools=True)

    async def raw_names():
        async with RawHttpPeer(srv.url) as peer:
            reply = await peer.modern("tools/list")
            return {t["name"] for t in reply.json["result"]["tools"]}

    served = asyncio.run(asyncio.wait_for(raw_names(), 10))
    assert {"bad_header", "weather", "add"} <= served  # the server does list it

    client = start(start_client, srv)
    names = {t.name for t in client.list_all_tools()}
    assert names == served - {"bad_header"}
    page = client.list_tools()
    assert "bad_header" not in {t.name for t in page.items} and "weather" in {
        t.name for t in page.items
    }
    warnings = [
        r for r in caplog.records if r.levelno == logging.WARNING and "bad_header" in r.getMessage()
    ]
    assert warnings and "x-mcp-header" in warnings[0].getMessage()
    assert client.call_tool("weather", {"region": "Oslo"}).text == "Oslo null null"


@pytest.mark.parametrize("mode", ["json", "sse"])
def test_a_header_tool_called_before_any_listing_learns_its_plan_and_is_resent_once(
    serve_http, start_client, mode
):
    # Spec 2026-07-28, "Streamable HTTP": on -32020 the client SHOULD list the tools, then retry. The server
    # refused the first POST (it never ran); the second carries Mcp-Param-Region.
    server, srv = serve_http(header_tools=True, http_response=mode)
    # before any listing: the output check would list first (docs/validation.md)
    client = start(start_client, srv, validate_output=False)
    assert client.call_tool("weather", {"region": "Zürich", "days": 2}).text == "Zürich 2 null"
    calls = posts(server, "tools/call", "weather")
    assert [params_of(e) for e in calls] == [
        {},
        {"mcp-param-region": b64("Zürich"), "mcp-param-days": "2"},
    ]
    assert len(server.received("tools/list")) >= 1
    assert len(server.received("tools/call")) == 1  # only the one that ran reached the tool
    # known now: the next call carries its headers at once
    assert client.call_tool("weather", {"region": "Oslo"}).text == "Oslo null null"
    assert len(posts(server, "tools/call", "weather")) == 3


def test_user_headers_never_override_the_protocol_headers(serve_http, start_client):
    server, srv = serve_http()
    forged = {"Mcp-Method": "forged", "Accept": "text/plain", "MCP-Protocol-Version": "1999"}
    client = start_client(srv.spec(headers=forged, auth=lambda: forged), **FAST)
    assert client.await_ready(timeout=5).era == "modern"
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    event = posts(server, "tools/call", "add")[-1]
    assert event["headers"]["mcp-method"] == "tools/call"
    assert event["headers"]["mcp-protocol-version"] == MODERN
    assert "text/event-stream" in event["headers"]["accept"]


@pytest.mark.parametrize("mode", ["json", "sse", "auto"])
def test_answers_come_as_json_or_as_an_sse_stream(serve_http, start_client, mode):
    # auto (the default): SSE when the request carries a progress token, else JSON
    server, srv = serve_http(http_response=mode)
    client = start(start_client, srv)
    seen: list[mcp.Progress] = []
    result = client.call_tool("progress", {"steps": 3, "delay": 0}, on_progress=seen.append)
    assert result.text == "done 3 steps"
    assert client.call_tool("add", {"a": 2, "b": 3}).text == "5"
    dropped = server.events("notification_dropped")
    if mode != "json":  # progress first, then the response, on the request's stream
        assert [(p.progress, p.total) for p in seen] == [(1, 3), (2, 3), (3, 3)]
        assert dropped == []
    else:  # a JSON answer has no room for progress: the server drops it
        assert seen == []
        assert [d["reason"] for d in dropped] == ["json response"] * 3


@pytest.mark.parametrize("stream", [False, True], ids=["json", "sse"])
def test_a_timed_out_request_closes_its_stream_which_cancels_it(serve_http, start_client, stream):
    server, srv = serve_http()
    client = start(start_client, srv)
    progress = {"on_progress": lambda p: None} if stream else {}
    with pytest.raises(mcp.Error) as err:
        client.call_tool("never", {}, timeout=0.3, **progress)
    assert err.value.kind == "timeout"
    (call,) = server.received("tools/call")
    assert ("progressToken" in call["params"]["_meta"]) is stream
    server.wait_for({"event": "stream_closed_by_client", "id": call["id"]})
    assert server.wait_for({"event": "cancelled", "id": call["id"]})["found"] is True
    # The closed stream is the cancellation: no notifications/cancelled is POSTed.
    assert [e["params"]["reason"] for e in server.received("notifications/cancelled")] == [
        "client closed the response stream"
    ]
    assert posts(server, "notifications/cancelled") == []
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"


def test_no_session_and_no_get_stream_in_the_modern_era(serve_http, start_client):
    server, srv = serve_http(header_tools=True)
    client = start(start_client, srv)
    client.list_all_tools()
    client.call_tool("progress", {"steps": 2, "delay": 0}, on_progress=lambda p: None)
    client.call_tool("add", {"a": 1, "b": 2})
    with pytest.raises(mcp.Error):
        client.call_tool("never", {}, timeout=0.2)
    # never's http event is logged once the client closed its stream (status None)
    server.wait_for(lambda e: e.get("event") == "http" and e["status"] is None)
    client.stop()
    http = server.events("http")
    assert len(http) >= 5  # discover, tools/list, progress, add, never (+ a listen)
    assert {e["verb"] for e in http} == {"POST"}  # no GET stream, no DELETE
    assert all("mcp-session-id" not in e["headers"] and e["session"] is None for e in http)
    assert server.events("session_created") == server.events("session_deleted") == []


def test_auto_mode_on_a_modern_only_server_is_modern(serve_http, start_client):
    server, srv = serve_http(era="modern")
    client = start_client(srv.spec(), **FAST)
    status = client.await_ready(timeout=5)
    assert (status.era, status.version, status.origin) == ("modern", MODERN, "probe")
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    assert server.received("initialize") == []
    assert posts(server, "initialize") == []
    assert [e["headers"]["mcp-method"] for e in posts(server)][:1] == ["server/discover"]
