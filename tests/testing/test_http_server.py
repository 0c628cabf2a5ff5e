"""The scripted server over Streamable HTTP: both eras, driven by a raw aiohttp client.

Each test starts the real subprocess (``ScriptedServer.http_server``) and talks HTTP to it
with :class:`~conduit_mcp.testing.raw.http.RawHttpPeer`, not with the conduit client. Nothing
sleeps: tests wait on an answer, an SSE event, or a log entry with a deadline.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import orjson
import pytest

from conduit_mcp.testing.http.headers import encode_header_value
from conduit_mcp.testing.raw.http import RawHttpPeer, SseReader
from conduit_mcp.transports.http_spec import Http

pytestmark = pytest.mark.timeout(30)

MISSING_SESSION = {
    "jsonrpc": "2.0",
    "id": "server-error",
    "error": {"code": -32600, "message": "Bad Request: Missing session ID"},
}
ADD = {"name": "add", "arguments": {"a": 1, "b": 2}}


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 20))


# ---- modern (2026-07-28) ----------------------------------------------------------------------


def test_modern_json_call_and_logged_headers(http_server):
    srv, proc = http_server()

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            return await peer.modern("tools/call", ADD)

    reply = run(body())
    assert reply.status == 200 and reply.content_type == "application/json"
    assert reply.json["result"]["structuredContent"] == {"sum": 3}
    assert "Mcp-Session-Id" not in reply.headers
    entry = srv.wait_for({"event": "http", "verb": "POST"})
    assert entry["status"] == 200 and entry["path"] == "/mcp" and entry["session"] is None
    assert entry["headers"]["mcp-method"] == "tools/call"
    assert entry["headers"]["mcp-name"] == "add"
    assert srv.received("tools/call")[0]["params"]["arguments"] == {"a": 1, "b": 2}
    assert srv.starts() == 1


def test_modern_sse_call_with_progress(http_server):
    _, proc = http_server()

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            args = {"name": "progress", "arguments": {"steps": 3, "delay": 0.01}}
            return await peer.modern("tools/call", args, progressToken="tok")

    reply = run(body())
    assert reply.status == 200 and reply.content_type == "text/event-stream"
    methods = [e.data.get("method") for e in reply.events]
    assert methods == ["notifications/progress"] * 3 + [None]
    assert [e.data["params"]["progress"] for e in reply.events[:3]] == [1, 2, 3]
    assert reply.json["result"]["content"][0]["text"] == "done 3 steps"
    assert all(e.id is None for e in reply.events) and reply.retry is None  # no resumption


@pytest.mark.parametrize(
    ("headers", "reason"),
    [
        ({"MCP-Protocol-Version": None}, "MCP-Protocol-Version header is missing"),
        ({"MCP-Protocol-Version": "2099-01-01"}, "MCP-Protocol-Version header does not match"),
        ({"Mcp-Method": "tools/list"}, "Mcp-Method header does not match"),
        ({"Mcp-Method": None}, "Mcp-Method header does not match"),
        ({"Mcp-Name": "echo"}, "Mcp-Name header does not match"),
        ({"Mcp-Name": None}, "Mcp-Name header does not match"),
    ],
)
def test_header_mismatch_is_400_32020(http_server, headers, reason):
    srv, proc = http_server(era="modern")

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            return await peer.modern("tools/call", ADD, headers=headers, request_id=5)

    reply = run(body())
    assert reply.status == 400
    assert reply.json["id"] == 5 and reply.json["error"]["code"] == -32020
    assert reply.json["error"]["message"].startswith(reason)
    assert srv.received("tools/call") == []  # refused before the core


def test_mcp_name_in_base64_form(http_server):
    _, proc = http_server()

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            params = {"name": "greet", "arguments": {"name": "Zoë"}}
            return await peer.modern(
                "prompts/get", params, headers={"Mcp-Name": "=?base64?Z3JlZXQ=?="}
            )

    reply = run(body())
    assert reply.status == 200
    assert reply.json["result"]["messages"][0]["content"]["text"] == "Hello, Zoë!"


def test_mcp_param_headers(http_server):
    srv, proc = http_server(options={"header_tools": True})
    good = {"Mcp-Param-Region": encode_header_value("Zürich"), "Mcp-Param-Days": "3"}
    good["Mcp-Param-Metric"] = "true"
    args = {"region": "Zürich", "days": 3, "metric": True}

    async def call(arguments: dict[str, Any], headers: dict[str, Any], name: str = "weather"):
        async with RawHttpPeer(proc.url) as peer:
            return await peer.modern(
                "tools/call", {"name": name, "arguments": arguments}, headers=headers
            )

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            listed = await peer.modern("tools/list")
        return [
            listed,
            await call(args, good),
            await call(args, {**good, "Mcp-Param-Region": "Zürich"}),  # raw non-ASCII: refused
            await call(args, {**good, "Mcp-Param-Days": None}),
            await call(args, {**good, "Mcp-Param-Metric": "True"}),
            await call({"region": "Oslo"}, {"Mcp-Param-Region": "Oslo"}),
            await call({"region": "Oslo"}, {"Mcp-Param-Region": "Oslo", "Mcp-Param-Days": "1"}),
            await call({"region": " x"}, {"Mcp-Param-Region": encode_header_value(" x")}),
            await call({"v": 1.5}, {}, name="bad_header"),
        ]

    listed, ok, raw, missing, wrong, absent, extra, spaced, bad = run(body())
    tools = {t["name"]: t for t in listed.json["result"]["tools"]}
    assert tools["weather"]["inputSchema"]["properties"]["days"]["x-mcp-header"] == "Days"
    assert tools["bad_header"]["inputSchema"]["properties"]["v"]["type"] == "number"
    assert ok.status == 200
    assert ok.json["result"]["content"][0]["text"] == "Zürich 3 true"
    for refused in (raw, missing, wrong, extra):
        assert refused.status == 400 and refused.json["error"]["code"] == -32020
    assert "Mcp-Param-Days" in missing.json["error"]["message"]
    assert absent.status == 200 and absent.json["result"]["content"][0]["text"] == "Oslo null null"
    assert spaced.status == 200
    assert bad.status == 200 and bad.json["result"]["content"][0]["text"] == "1.5"
    assert len(srv.events("header_mismatch")) == 4


def test_modern_errors_and_statuses(http_server):
    _, proc = http_server(era="modern")

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            unknown = await peer.modern("no/such/method")
            version = await peer.modern(
                "tools/list",
                {"_meta": {"io.modelcontextprotocol/protocolVersion": "2099-01-01"}},
            )
            note = await peer.post(
                {"jsonrpc": "2.0", "method": "notifications/whatever"},
                {"MCP-Protocol-Version": "2026-07-28"},
            )
            async with peer.http.get(proc.url) as got:
                get_status = got.status
            async with peer.http.delete(proc.url) as deleted:
                delete_status = deleted.status
            no_accept = await peer.modern("tools/list", headers={"Accept": "application/json"})
            return unknown, version, note, get_status, delete_status, no_accept

    unknown, version, note, get_status, delete_status, no_accept = run(body())
    assert unknown.status == 404 and unknown.json["error"]["code"] == -32601
    assert version.status == 400 and version.json["error"]["code"] == -32022
    assert version.json["error"]["data"] == {"supported": ["2026-07-28"], "requested": "2099-01-01"}
    assert note.status == 202 and note.body == b""
    assert get_status == 405 and delete_status == 405
    assert no_accept.status == 406


def test_listen_stream_then_client_close_cancels(http_server):
    srv, proc = http_server()

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            params: dict[str, Any] = {"notifications": {"toolsListChanged": True}}
            msg = {
                "jsonrpc": "2.0",
                "id": "L1",
                "method": "subscriptions/listen",
                "params": {**params, "_meta": _meta()},
            }
            headers = {"MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "subscriptions/listen"}
            async with peer.open_post(msg, headers) as response:
                assert response.content_type == "text/event-stream"
                reader = SseReader(response)
                ack = await reader.next()
                changed = await peer.modern(
                    "tools/call", {"name": "changed", "arguments": {"kind": "tools"}}
                )
                note = await reader.next()
            # leaving the block closes the stream: the listen is cancelled
            await srv.wait_for_async({"event": "cancelled", "id": "L1"})
            return ack, changed, note

    ack, changed, note = run(body())
    assert ack.data["method"] == "notifications/subscriptions/acknowledged"
    assert changed.json["result"]["structuredContent"] == {"sent": 1}
    assert note.data["method"] == "notifications/tools/list_changed"
    assert note.data["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"
    assert srv.wait_for({"event": "cancelled", "id": "L1"})["found"] is True
    assert srv.wait_for({"event": "stream_closed_by_client", "id": "L1"})


def test_closing_a_json_request_cancels_it(http_server):
    srv, proc = http_server()

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            task = asyncio.create_task(peer.modern("tools/call", {"name": "never"}, request_id=41))
            await srv.wait_for_async({"dir": "in", "id": 41})
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
            return await srv.wait_for_async({"event": "cancelled", "id": 41})

    assert run(body())["found"] is True
    assert srv.wait_for({"event": "http", "status": None})["verb"] == "POST"


def test_initialize_against_a_modern_only_server(http_server):
    _, proc = http_server(era="modern")

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            return await peer.initialize()

    reply = run(body())
    assert reply.status == 404 and reply.json["error"]["code"] == -32601


def _meta() -> dict[str, Any]:
    return {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {},
    }


# ---- legacy (2025-11-25 and older) ------------------------------------------------------------


def test_legacy_session_get_stream_and_delete(http_server):
    srv, proc = http_server()

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            init = await peer.initialize("2025-06-18")
            async with peer.open_get() as stream:
                reader = SseReader(stream)
                changed = await peer.legacy(
                    "tools/call", {"name": "changed", "arguments": {"kind": "tools"}}
                )
                note = await reader.next()
                retry = reader.retry
            deleted = await peer.delete()
            after = await peer.legacy("tools/list")
            return init, changed, note, retry, deleted, after, peer.session_id

    init, changed, note, retry, deleted, after, sid = run(body())
    assert init.status == 200 and init.json["result"]["protocolVersion"] == "2025-06-18"
    assert sid and len(sid) >= 16
    assert changed.status == 200 and changed.headers["Mcp-Session-Id"] == sid
    assert note.data == {"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}
    assert note.id is not None and retry == 50
    assert deleted.status == 200
    assert after.status == 404
    assert after.json == {
        "jsonrpc": "2.0",
        "id": "server-error",
        "error": {"code": -32600, "message": "Session not found"},
    }
    assert srv.wait_for("session_created")["session"] == sid
    assert srv.wait_for("session_deleted")["session"] == sid
    assert srv.wait_for("initialized")
    entry = srv.find({"event": "http", "verb": "GET"})[0]
    assert entry["session"] == sid and entry["status"] == 200


@pytest.mark.parametrize("era", ["legacy", "both"])
def test_missing_session_body_is_exact(http_server, era):
    _, proc = http_server(era=era)

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            legacy_probe = await peer.legacy("tools/list")
            if era == "both":
                return legacy_probe, None
            return legacy_probe, await peer.modern("server/discover")

    for reply in run(body()):
        if reply is not None:
            assert reply.status == 400 and orjson.loads(reply.body) == MISSING_SESSION


def test_unknown_session_and_wrong_version(http_server):
    _, proc = http_server(era="legacy")

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            await peer.initialize()
            wrong = await peer.legacy("tools/list", headers={"MCP-Protocol-Version": "2025-03-26"})
            absent = await peer.legacy("tools/list", headers={"MCP-Protocol-Version": None})
            async with peer.open_get() as first, peer.open_get() as second:
                conflict = (first.status, second.status)
            async with peer.open_get(last_event_id="999-1") as resumed:
                bad_resume = resumed.status
            peer.session_id = "no-such-session"
            unknown = await peer.legacy("tools/list")
            async with peer.open_get() as got:
                get_unknown = got.status
            return wrong, absent, unknown, get_unknown, conflict, bad_resume

    wrong, absent, unknown, get_unknown, conflict, bad_resume = run(body())
    assert conflict == (200, 409) and bad_resume == 400
    assert wrong.status == 400
    assert absent.status == 200 and "tools" in absent.json["result"]
    assert unknown.status == 404 and get_unknown == 404


def test_legacy_server_request_on_get_stream(http_server):
    srv, proc = http_server(era="legacy")

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            await peer.initialize(capabilities={"roots": {}})
            async with peer.open_get() as stream:
                reader = SseReader(stream)
                call = asyncio.create_task(
                    peer.legacy(
                        "tools/call",
                        {"name": "client_request", "arguments": {"method": "roots/list"}},
                    )
                )
                request = await reader.next()
                assert request is not None
                answer = {"jsonrpc": "2.0", "id": request.data["id"], "result": {"roots": []}}
                posted = await peer.post(answer)
                return request, posted, await call

    request, posted, call = run(body())
    assert request.data["method"] == "roots/list"
    assert posted.status == 202
    assert call.json["result"]["structuredContent"] == {"response": {"roots": []}}
    assert srv.received(None)[0]["result"] == {"roots": []}


# ---- the process handle -----------------------------------------------------------------------


def test_restart_on_the_same_port(http_server):
    srv, proc = http_server()
    port, first_pid = proc.port, proc.pid
    assert proc.url == f"http://127.0.0.1:{port}/mcp"
    assert isinstance(proc.spec(), Http) and proc.spec().port == port
    proc.kill()
    assert not proc.running()
    with proc.restart():
        assert proc.port == port and proc.pid != first_pid

        async def body():
            async with RawHttpPeer(proc.url) as peer:
                return await peer.modern("tools/call", ADD)

        assert run(body()).json["result"]["structuredContent"] == {"sum": 3}
    assert not proc.running()
    assert srv.starts() == 2 and len(set(srv.pids())) == 2


def test_start_failure_raises_with_stderr(http_server):
    srv, proc = http_server()
    with pytest.raises(RuntimeError, match=r"address already in use|Errno 98"):
        srv.http_server(port=proc.port)


def test_port_file_and_sigterm(http_server, tmp_path):
    port_file = tmp_path / "port"
    srv, proc = http_server(options={"port_file": str(port_file)})
    assert port_file.read_text() == str(proc.port)
    assert proc.stop() == 0
    assert srv.wait_for("sigterm")["ignored"] is False
