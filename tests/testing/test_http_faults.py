"""Faults of the scripted HTTP server: scripted statuses, expired sessions, dropped streams
(and their resumption), bearer tokens; and the new actions' validation and stdio behaviour."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import aiohttp
import orjson
import pytest

from conduit_mcp.testing import ScriptedServer
from conduit_mcp.testing.raw.http import RawHttpPeer, SseReader

pytestmark = pytest.mark.timeout(30)

ADD = {"name": "add", "arguments": {"a": 1, "b": 2}}
NOT_FOUND = {
    "jsonrpc": "2.0",
    "id": "server-error",
    "error": {"code": -32600, "message": "Session not found"},
}


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 20))


def test_http_action_answers_exactly_that(http_server):
    rules = [
        {
            "match": {"tool": "add", "nth": 1},
            "action": {
                "delay": 0.05,
                "http": {"status": 429, "headers": {"Retry-After": "2"}, "body": {"x": 1}},
            },
        },
        {"match": {"tool": "add", "nth": 2}, "action": {"http": {"status": 503, "body": "busy"}}},
        {"match": {"tool": "add", "nth": 3}, "action": {"http": {"status": 500}}},
    ]
    srv, proc = http_server(rules=rules)

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            return [await peer.modern("tools/call", ADD) for _ in range(4)]

    limited, busy, bare, normal = run(body())
    assert limited.status == 429 and limited.headers["Retry-After"] == "2"
    assert orjson.loads(limited.body) == {"x": 1}
    assert limited.content_type == "application/json"
    assert busy.status == 503 and busy.body == b"busy"
    assert bare.status == 500 and bare.body == b""
    assert normal.status == 200 and normal.json["result"]["structuredContent"] == {"sum": 3}
    assert [e["action"] for e in srv.events("rule")] == ["http", "http", "http"]


def test_expire_session_answers_404_to_requests_in_flight(http_server):
    rules = [{"match": {"tool": "slow"}, "action": {"delay": 0.2, "expire_session": True}}]
    srv, proc = http_server(era="legacy", rules=rules)

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            await peer.initialize()
            slow = {"name": "slow", "arguments": {"seconds": 0}}
            replies = await asyncio.gather(*(peer.legacy("tools/call", slow) for _ in range(3)))
            after = await peer.legacy("tools/list")
            return replies, after, peer.session_id

    replies, after, sid = run(body())
    for reply in [*replies, after]:
        assert reply.status == 404 and orjson.loads(reply.body) == NOT_FOUND
    assert [e["session"] for e in srv.events("session_expired")] == [sid]


def test_drop_stream_then_resume_with_last_event_id(http_server):
    rules = [{"match": {"tool": "progress"}, "action": {"drop_stream": 1}}]
    srv, proc = http_server(era="legacy", rules=rules, options={"sse_retry_ms": 10})

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            await peer.initialize()
            params = {
                "name": "progress",
                "arguments": {"steps": 3, "delay": 0.05},
                "_meta": {"progressToken": "p"},
            }
            msg = {"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": params}
            seen = []
            async with peer.open_post(msg) as response:
                reader = SseReader(response)
                with pytest.raises(aiohttp.ClientPayloadError):
                    while (event := await reader.next()) is not None:
                        seen.append(event)
                retry = reader.retry
            async with peer.open_get(last_event_id=seen[-1].id) as resumed:
                rest = await SseReader(resumed).all()
            return seen, retry, rest

    seen, retry, rest = run(body())
    assert retry == 10
    assert [e.data["params"]["progress"] for e in seen] == [1]
    assert [e.data.get("method") for e in rest] == ["notifications/progress"] * 2 + [None]
    assert [e.data["params"]["progress"] for e in rest[:2]] == [2, 3]
    assert (
        rest[-1].data["id"] == 9 and rest[-1].data["result"]["content"][0]["text"] == "done 3 steps"
    )
    ids = [e.id for e in seen + rest]
    assert len(set(ids)) == 4 and all(ids)
    assert srv.wait_for("stream_dropped")["id"] == 9
    assert srv.wait_for("stream_resumed")["last_event_id"] == seen[-1].id
    assert srv.find({"event": "cancelled"}) == []  # a legacy disconnection is no cancellation


def test_drop_stream_modern_has_no_resumption(http_server):
    rules = [{"match": {"tool": "add"}, "action": {"drop_stream": 0}, "times": 1}]
    srv, proc = http_server(rules=rules)

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            with pytest.raises(aiohttp.ClientPayloadError):
                await peer.modern("tools/call", ADD, request_id=3)
            return await peer.modern("tools/call", ADD)

    assert run(body()).json["result"]["structuredContent"] == {"sum": 3}
    assert srv.wait_for("stream_dropped")["id"] == 3
    assert srv.find({"event": "cancelled"}) == []


def test_require_bearer(http_server):
    srv, proc = http_server(options={"require_bearer": "s3cret"})

    async def call(token: str | None):
        headers = {} if token is None else {"Authorization": f"Bearer {token}"}
        async with RawHttpPeer(proc.url, headers=headers) as peer:
            return await peer.modern("tools/call", ADD)

    async def body():
        return await call(None), await call("wrong"), await call("s3cret")

    missing, wrong, ok = run(body())
    expected = (
        f'Bearer resource_metadata="http://127.0.0.1:{proc.port}/.well-known/'
        'oauth-protected-resource", scope="mcp"'
    )
    assert missing.status == 401 and missing.headers["WWW-Authenticate"] == expected
    assert wrong.status == 401
    assert ok.status == 200
    statuses = [e["status"] for e in srv.events("http")]
    assert statuses == [401, 401, 200]


def test_fault_actions_are_validated():
    for action in (
        {"http": {"status": 99}},
        {"http": {"status": 500, "headers": {"A": 1}}},
        {"http": True},
        {"expire_session": "yes"},
        {"drop_stream": -1},
        {"drop_stream": 1, "http": {"status": 500}},
        "http",
    ):
        with pytest.raises(ValueError):
            ScriptedServer("/tmp", rules=[{"action": action}])


def test_http_actions_give_the_default_answer_on_stdio(spawn):
    rules = [
        {"match": {"tool": "add", "nth": 1}, "action": {"http": {"status": 500}}},
        {"match": {"tool": "add", "nth": 2}, "action": {"expire_session": True}},
        {"match": {"tool": "add", "nth": 3}, "action": {"drop_stream": 0}},
    ]
    _, peer = spawn(rules=rules)
    for _ in range(3):
        assert peer.call("add", {"a": 1, "b": 2})["result"]["structuredContent"] == {"sum": 3}
