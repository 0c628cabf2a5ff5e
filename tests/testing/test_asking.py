"""The scripted server's legacy server-to-client requests: ``ask``, ``learned``, ``last_roots``,
``--ask-roots`` and ``--on-initialized``, over stdio (raw JSON lines) and HTTP (raw requests)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Coroutine
from typing import Any

import pytest

from conduit_mcp.testing.raw.http import RawHttpPeer, SseReader
from conduit_mcp.testing.raw.stdio import envelope

pytestmark = pytest.mark.timeout(30)

SAMPLING = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "hi"}}],
        "maxTokens": 5,
    },
}
ELICIT = {
    "method": "elicitation/create",
    "params": {"message": "name?", "requestedSchema": {"type": "object"}},
}
ROOTS = {"method": "roots/list"}
PING = {"method": "ping"}
UNKNOWN = {"method": "x/unknown", "params": {"a": 1}}


def ask(peer, arguments):
    """Start a legacy ``ask`` call; return its id."""
    return peer.send_request("tools/call", {"name": "ask", "arguments": arguments})


def answer(peer, request_id, result=None, error=None):
    msg = {"jsonrpc": "2.0", "id": request_id}
    msg.update({"error": error} if error is not None else {"result": result})
    peer.send(msg)


def structured(response):
    assert "result" in response, response
    return response["result"]["structuredContent"]


def test_sequential_requests_of_every_kind_and_their_answers_in_order(spawn):
    srv, peer = spawn(era="legacy", extra_args=["--log-out"])
    peer.initialize()
    call = ask(peer, {"requests": [SAMPLING, ELICIT, ROOTS, PING, UNKNOWN]})
    replies = [
        {"result": {"role": "assistant", "content": {"type": "text", "text": "yo"}, "model": "m"}},
        {"result": {"action": "decline"}},
        {"error": {"code": -32601, "message": "Method not found"}},
        {"result": {}},
        {"error": {"code": -32601, "message": "Method not found"}},
    ]
    sent = []
    for spec, reply in zip([SAMPLING, ELICIT, ROOTS, PING, UNKNOWN], replies, strict=True):
        request = peer.expect(lambda m: "method" in m and "id" in m)
        assert request["method"] == spec["method"]
        assert request.get("params") == spec.get("params")
        sent.append(request["id"])
        answer(peer, request["id"], **reply)
    assert sent == ["s-1", "s-2", "s-3", "s-4", "s-5"]
    answers = structured(peer.response(call))["answers"]
    assert [a["id"] for a in answers] == sent
    assert [a["method"] for a in answers] == [
        s["method"] for s in (SAMPLING, ELICIT, ROOTS, PING, UNKNOWN)
    ]
    assert [a["outcome"] for a in answers] == ["result", "result", "error", "result", "error"]
    assert answers[1]["result"] == {"action": "decline"}
    assert answers[4]["error"] == {"code": -32601, "message": "Method not found"}
    # One after another: each request left only after the previous one was answered.
    log = srv.log()
    for earlier, later in itertools.pairwise(sent):
        answered = next(e["t"] for e in log if e.get("dir") == "in" and e.get("id") == earlier)
        asked = next(e["t"] for e in log if e.get("dir") == "out" and e.get("id") == later)
        assert answered < asked


def test_concurrent_requests_all_leave_before_any_answer(spawn):
    _, peer = spawn(era="legacy")
    peer.initialize()
    call = ask(peer, {"requests": [PING, ROOTS, PING], "concurrent": True})
    requests = [peer.expect(lambda m: "method" in m and "id" in m) for _ in range(3)]
    assert [r["id"] for r in requests] == ["s-1", "s-2", "s-3"]
    for request in reversed(requests):
        answer(peer, request["id"], result={"n": request["id"]})
    answers = structured(peer.response(call))["answers"]
    assert [(a["id"], a["result"]) for a in answers] == [
        ("s-1", {"n": "s-1"}),
        ("s-2", {"n": "s-2"}),
        ("s-3", {"n": "s-3"}),
    ]


def test_cancel_after_sends_cancelled_and_reports_a_late_answer(spawn):
    _, peer = spawn(era="legacy")
    peer.initialize()
    call = ask(peer, {"requests": [dict(SAMPLING, cancel_after=0.05), PING], "cancel_grace": 2})
    first = peer.expect(lambda m: m.get("method") == "sampling/createMessage")
    cancelled = peer.expect(lambda m: m.get("method") == "notifications/cancelled")
    assert cancelled["params"]["requestId"] == first["id"] == "s-1"
    answer(peer, "s-1", result={"too": "late"})  # a client must NOT do this
    ping = peer.expect(lambda m: m.get("method") == "ping")
    answer(peer, ping["id"], result={})
    answers = structured(peer.response(call))["answers"]
    assert answers[0] == {
        "id": "s-1",
        "method": "sampling/createMessage",
        "outcome": "cancelled",
        "answered_after_cancel": True,
    }
    assert answers[1]["outcome"] == "result"
    learned = structured(peer.request("tools/call", {"name": "learned"}))
    first_record = learned["requests"][0]
    assert first_record["outcome"] == "cancelled" and first_record["origin"] == "ask"
    assert first_record["late"] == [{"result": {"too": "late"}}]


def test_a_cancelled_request_left_unanswered(spawn):
    _, peer = spawn(era="legacy")
    peer.initialize()
    call = ask(peer, {"requests": [dict(ELICIT, cancel_after=0)], "cancel_grace": 0.05})
    peer.expect(lambda m: m.get("method") == "elicitation/create")
    peer.expect(lambda m: m.get("method") == "notifications/cancelled")
    answers = structured(peer.response(call))["answers"]
    assert answers == [
        {
            "id": "s-1",
            "method": "elicitation/create",
            "outcome": "cancelled",
            "answered_after_cancel": False,
        }
    ]


def test_timeout_and_duplicate_and_unexpected_answers_are_recorded(spawn):
    _, peer = spawn(era="legacy")
    peer.initialize()
    call = ask(peer, {"requests": [PING], "timeout": 0.05})
    assert structured(peer.response(call))["answers"][0]["outcome"] == "timeout"
    assert peer.expect(lambda m: m.get("method") == "ping")["id"] == "s-1"
    answer(peer, "s-1", result={})  # late
    call = ask(peer, {"requests": [PING]})
    answer(peer, peer.expect(lambda m: m.get("method") == "ping")["id"], result={})
    assert structured(peer.response(call))["answers"][0]["outcome"] == "result"
    answer(peer, "s-2", result={"again": 1})  # twice
    answer(peer, "nobody-asked", result={})
    learned = structured(peer.request("tools/call", {"name": "learned"}))
    assert [r["outcome"] for r in learned["requests"]] == ["timeout", "result"]
    assert learned["requests"][0]["late"] == [{"result": {}}]
    assert learned["requests"][1]["duplicates"] == [{"result": {"again": 1}}]
    assert learned["unexpected"] == ["nobody-asked"]


def test_url_elicitation_then_complete_notification(spawn):
    _, peer = spawn(era="legacy")
    peer.initialize()
    url = {
        "method": "elicitation/create",
        "params": {
            "mode": "url",
            "message": "log in",
            "url": "https://x.test/a",
            "elicitationId": "e-7",
        },
        "complete": True,
    }
    call = ask(peer, {"requests": [url]})
    request = peer.expect(lambda m: m.get("method") == "elicitation/create")
    assert request["params"]["elicitationId"] == "e-7"
    answer(peer, request["id"], result={"action": "accept"})
    complete = peer.expect(lambda m: m.get("method") == "notifications/elicitation/complete")
    assert complete["params"] == {"elicitationId": "e-7"}
    entry = structured(peer.response(call))["answers"][0]
    assert entry["completed"] is True and entry["result"] == {"action": "accept"}
    before = dict(url, complete="before")
    call = ask(peer, {"requests": [before]})
    peer.expect(lambda m: m.get("method") == "elicitation/create")
    peer.expect(lambda m: m.get("method") == "notifications/elicitation/complete")
    answer(peer, "s-2", result={"action": "accept"})
    assert "completed" not in structured(peer.response(call))["answers"][0]


def test_cancelling_the_call_cancels_its_pending_requests(spawn):
    srv, peer = spawn(era="legacy")
    peer.initialize()
    call = ask(peer, {"requests": [PING, ROOTS], "concurrent": True})
    peer.expect(lambda m: m.get("method") == "roots/list")
    peer.notify("notifications/cancelled", {"requestId": call})
    ids = {
        peer.expect(lambda m: m.get("method") == "notifications/cancelled")["params"]["requestId"]
        for _ in range(2)
    }
    assert ids == {"s-1", "s-2"}
    srv.wait_for({"event": "cancelled", "id": call, "found": True})


def test_detached_requests_go_on_after_the_call_answered(spawn):
    srv, peer = spawn(era="legacy")
    peer.initialize()
    reply = peer.request(
        "tools/call", {"name": "ask", "arguments": {"requests": [PING, ROOTS], "detach": True}}
    )
    assert structured(reply) == {"detached": 2}
    for method in ("ping", "roots/list"):
        request = peer.expect(lambda m, method=method: m.get("method") == method)
        answer(peer, request["id"], result={"m": method})
        srv.wait_for(lambda e, rid=request["id"]: e.get("dir") == "in" and e.get("id") == rid)
    learned = structured(peer.request("tools/call", {"name": "learned"}))["requests"]
    assert [(r["id"], r["outcome"], r["result"]) for r in learned] == [
        ("s-1", "result", {"m": "ping"}),
        ("s-2", "result", {"m": "roots/list"}),
    ]


def test_bad_arguments_and_the_modern_era_are_tool_errors(spawn):
    _, peer = spawn()
    modern = peer.call("ask", {"requests": [PING]})["result"]
    assert modern["isError"] is True and "legacy" in modern["content"][0]["text"]
    forced = peer.send_request(
        "tools/call", envelope({"name": "ask", "arguments": {"requests": [PING], "force": True}})
    )
    answer(peer, peer.expect(lambda m: m.get("method") == "ping")["id"], result={})
    assert structured(peer.response(forced))["answers"][0]["outcome"] == "result"
    _, peer = spawn(era="legacy")
    peer.initialize()
    for bad in (
        {},
        {"requests": []},
        {"requests": [{"params": {}}]},
        {"requests": [dict(PING, cancel_after=-1)]},
        {"requests": [dict(PING, complete=1)]},
        {"requests": [dict(PING, extra=1)]},
        {"requests": [PING], "via": "side"},
        {"requests": [PING], "timeout": 0},
        {"requests": [PING] * 65},
    ):
        reply = peer.request("tools/call", {"name": "ask", "arguments": bad})["result"]
        assert reply["isError"] is True, bad


def test_ask_roots_after_initialized_and_on_list_changed(spawn):
    srv, peer = spawn(era="legacy", extra_args=["--ask-roots"])
    peer.initialize(capabilities={"roots": {"listChanged": True}})
    request = peer.expect(lambda m: m.get("method") == "roots/list")
    answer(peer, request["id"], result={"roots": [{"uri": "file:///a", "name": "a"}]})
    srv.wait_for(lambda e: e.get("dir") == "in" and e.get("id") == request["id"])
    roots = structured(peer.request("tools/call", {"name": "last_roots"}))
    assert roots == {
        "roots": [{"uri": "file:///a", "name": "a"}],
        "error": None,
        "id": "s-1",
        "answered": 1,
        "list_changed": 0,
    }
    peer.notify("notifications/roots/list_changed")
    again = peer.expect(lambda m: m.get("method") == "roots/list")
    answer(peer, again["id"], result={"roots": []})
    srv.wait_for(lambda e: e.get("dir") == "in" and e.get("id") == again["id"])
    roots = structured(peer.request("tools/call", {"name": "last_roots"}))
    assert (roots["roots"], roots["answered"], roots["list_changed"]) == ([], 2, 1)
    origins = [
        r["origin"] for r in structured(peer.request("tools/call", {"name": "learned"}))["requests"]
    ]
    assert origins == ["initialized", "roots_changed"]


def test_ask_roots_needs_the_declared_capability(spawn):
    srv, peer = spawn(era="legacy", extra_args=["--ask-roots"])
    peer.initialize()
    srv.wait_for({"event": "roots_not_declared", "origin": "initialized"})
    roots = structured(peer.request("tools/call", {"name": "last_roots"}))
    assert roots["roots"] is None and roots["answered"] == 0
    assert not [m for m in peer.drain() if m.get("method") == "roots/list"]


def test_on_initialized_sends_any_request_in_order(spawn):
    args = ["--on-initialized", "ping", "--on-initialized", '{"method": "x/y", "params": {"k": 1}}']
    _, peer = spawn(era="legacy", extra_args=args)
    peer.initialize()
    first = peer.expect(lambda m: "method" in m and "id" in m)
    second = peer.expect(lambda m: "method" in m and "id" in m)
    assert (first["method"], first["id"]) == ("ping", "s-1") and "params" not in first
    assert (second["method"], second["params"]) == ("x/y", {"k": 1})
    answer(peer, "s-2", error={"code": -32601, "message": "Method not found"})
    answer(peer, "s-1", result={})
    learned = structured(peer.request("tools/call", {"name": "learned"}))
    assert [(r["id"], r["outcome"]) for r in learned["requests"]] == [
        ("s-1", "result"),
        ("s-2", "error"),
    ]


def test_on_initialized_refuses_a_bad_value(spawn):
    srv = spawn.server(era="legacy", extra_args=["--on-initialized", '{"method": 1}'])
    with srv.spawn_raw() as peer:
        assert peer.wait(timeout=10) == 2
        assert "--on-initialized" in peer.stderr()


# ---- over HTTP ---------------------------------------------------------------------------------


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 20))


def call_msg(peer: RawHttpPeer, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": peer.next_id(),
        "method": "tools/call",
        "params": {"name": "ask", "arguments": arguments},
    }


def test_http_requests_ride_on_the_calls_sse_stream(http_server):
    _, proc = http_server(era="legacy")

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            await peer.initialize()
            async with peer.open_post(call_msg(peer, {"requests": [PING, ELICIT]})) as response:
                assert response.content_type == "text/event-stream"
                reader = SseReader(response)
                seen = []
                while (event := await reader.next()) is not None:
                    seen.append(event.data)
                    if "method" in event.data:
                        posted = await peer.post(
                            {
                                "jsonrpc": "2.0",
                                "id": event.data["id"],
                                "result": {"ok": event.data["method"]},
                            }
                        )
                        assert posted.status == 202
                return seen

    seen = run(body())
    assert [m.get("method") for m in seen] == ["ping", "elicitation/create", None]
    answers = seen[-1]["result"]["structuredContent"]["answers"]
    assert [a["result"] for a in answers] == [{"ok": "ping"}, {"ok": "elicitation/create"}]


def test_http_via_get_uses_the_standalone_stream(http_server):
    _, proc = http_server(era="legacy", options={"http_response": "sse"})
    arguments = {
        "requests": [dict(ROOTS, cancel_after=0.05), PING],
        "via": "get",
        "cancel_grace": 0,
    }

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            await peer.initialize()
            async with peer.open_get() as stream:
                reader = SseReader(stream)
                call = asyncio.create_task(peer.post(call_msg(peer, arguments)))
                on_get = [(await reader.next()).data for _ in range(3)]
                await peer.post({"jsonrpc": "2.0", "id": on_get[2]["id"], "result": {}})
                return on_get, await call

    on_get, call = run(body())
    assert [m["method"] for m in on_get] == ["roots/list", "notifications/cancelled", "ping"]
    assert on_get[1]["params"]["requestId"] == on_get[0]["id"]
    assert [e.data.get("method") for e in call.events] == [None]  # nothing but the response
    answers = call.json["result"]["structuredContent"]["answers"]
    assert [a["outcome"] for a in answers] == ["cancelled", "result"]


def test_http_ask_roots_on_the_get_stream(http_server):
    srv, proc = http_server(era="legacy", extra_args=["--ask-roots"])

    async def body():
        async with RawHttpPeer(proc.url) as peer:
            await peer.initialize(capabilities={"roots": {}})
            async with peer.open_get() as stream:
                request = (await SseReader(stream).next()).data
                await peer.post(
                    {
                        "jsonrpc": "2.0",
                        "id": request["id"],
                        "result": {"roots": [{"uri": "file:///r"}]},
                    }
                )
            roots = await peer.legacy("tools/call", {"name": "last_roots"})
            return request, roots

    request, roots = run(body())
    assert request["method"] == "roots/list"
    assert roots.json["result"]["structuredContent"]["roots"] == [{"uri": "file:///r"}]
    assert srv.events("buffered")  # sent before the GET stream opened, delivered on it
