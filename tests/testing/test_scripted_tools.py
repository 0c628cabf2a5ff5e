"""The scripted server's tools, prompts, resources and cancellation, in both eras."""

from __future__ import annotations

import os
import signal
import time

import pytest

from conduit_mcp.testing.raw.stdio import envelope

pytestmark = pytest.mark.timeout(30)


def text_of(response):
    return response["result"]["content"][0]["text"]


def is_notification(method):
    return lambda m: m.get("method") == method and "id" not in m


def test_tools_list_has_every_tool_with_schema(spawn):
    _, peer = spawn()
    tools = peer.modern("tools/list")["result"]["tools"]
    names = [t["name"] for t in tools]
    for name in (
        "add", "echo", "progress", "slow", "never", "crash", "garbage", "big", "stderr",
        "fail", "error", "notify", "env", "cwd", "pid",
    ):  # fmt: skip
        assert name in names
    for tool in tools:
        assert tool["inputSchema"]["type"] == "object"
        assert isinstance(tool["description"], str)
    add = tools[names.index("add")]
    assert add["inputSchema"]["required"] == ["a", "b"]
    assert add["outputSchema"]["properties"] == {"sum": {"type": "number"}}


def test_simple_tools(spawn, tmp_path):
    _, peer = spawn(env={"SCRIPTED_SECRET": "s3cret"}, cwd=tmp_path)
    assert text_of(peer.call("echo", {"text": "héllo"})) == "héllo"
    assert text_of(peer.call("add", {"a": 1.5, "b": 2})) == "3.5"
    assert text_of(peer.call("pid")) == str(peer.proc.pid)
    assert text_of(peer.call("cwd")) == os.path.realpath(tmp_path)
    env = peer.call("env", {"name": "SCRIPTED_SECRET"})["result"]
    assert env["structuredContent"] == {"name": "SCRIPTED_SECRET", "value": "s3cret"}
    unset = peer.call("env", {"name": "SCRIPTED_SURELY_UNSET"})["result"]
    assert unset["structuredContent"]["value"] is None
    fail = peer.call("fail")["result"]
    assert fail["isError"] is True
    big = text_of(peer.call("big", {"size": 1_000_000}))
    assert len(big.encode()) == 1_000_000
    assert peer.call("cpu")["result"]["structuredContent"]["cpu"] > 0


def test_bad_arguments_are_tool_errors_and_unknown_tools_32602(spawn):
    _, modern = spawn()
    assert modern.call("add", {"a": "1", "b": 2})["result"]["isError"] is True
    assert modern.call("add", {"a": True, "b": 2})["result"]["isError"] is True
    error = modern.call("nope")["error"]
    assert error["code"] == -32602 and "nope" in error["message"]
    bad = modern.modern("tools/call", {"name": "add", "arguments": [1, 2]})["error"]
    assert bad["code"] == -32602
    _, legacy = spawn()
    legacy.initialize()
    assert legacy.request("tools/call", {"name": "nope"})["error"]["code"] == -32602


def test_error_tool(spawn):
    _, peer = spawn()
    error = peer.call("error", {"code": -32001, "message": "custom", "data": {"x": 1}})["error"]
    assert error == {"code": -32001, "message": "custom", "data": {"x": 1}}
    assert "data" not in peer.call("error", {"code": 5, "message": "m"})["error"]


def test_progress_notifications_precede_the_result(spawn):
    _, peer = spawn()
    request_id = peer.send_request(
        "tools/call",
        envelope(
            {"name": "progress", "arguments": {"steps": 3, "delay": 0.01}}, progressToken="tok"
        ),
    )
    progress = [peer.expect(is_notification("notifications/progress")) for _ in range(3)]
    assert [p["params"] for p in progress] == [
        {"progressToken": "tok", "progress": i, "total": 3, "message": f"step {i}"}
        for i in (1, 2, 3)
    ]
    response = peer.recv()
    assert response["id"] == request_id and text_of(response) == "done 3 steps"
    # delay 0 takes the synchronous path; an integer token is echoed as is.
    request_id = peer.send_request(
        "tools/call",
        envelope({"name": "progress", "arguments": {"steps": 2, "delay": 0}}, progressToken=7),
    )
    assert [peer.recv()["params"]["progress"] for _ in range(2)] == [1, 2]
    assert peer.recv()["id"] == request_id


def test_progress_without_token_sends_no_notification(spawn):
    _, peer = spawn()
    peer.send_request(
        "tools/call", envelope({"name": "progress", "arguments": {"steps": 2, "delay": 0}})
    )
    message = peer.recv()
    assert "method" not in message and text_of(message) == "done 2 steps"
    _, legacy = spawn()
    legacy.initialize()
    legacy.send_request(
        "tools/call",
        {"name": "progress", "arguments": {"steps": 1, "delay": 0}, "_meta": {"progressToken": 1}},
    )
    assert legacy.recv()["method"] == "notifications/progress"


def test_slow_answers_after_the_delay(spawn):
    _, peer = spawn()
    started = time.monotonic()
    assert text_of(peer.call("slow", {"seconds": 0.2})) == "slept 0.2"
    assert time.monotonic() - started >= 0.2


def test_cancellation_stops_never_and_slow_and_is_logged(spawn):
    srv, peer = spawn()
    never_id = peer.send_request("tools/call", envelope({"name": "never"}))
    slow_id = peer.send_request(
        "tools/call", envelope({"name": "slow", "arguments": {"seconds": 0.3}})
    )
    peer.notify("notifications/cancelled", {"requestId": never_id, "reason": "test"})
    peer.notify("notifications/cancelled", {"requestId": slow_id})
    # A later, longer request: any answer to the cancelled ones would come before its answer.
    later = peer.send_request(
        "tools/call", envelope({"name": "slow", "arguments": {"seconds": 0.5}})
    )
    seen = []
    assert peer.expect(lambda m: seen.append(m) or m.get("id") == later)
    assert [m.get("id") for m in seen] == [later]
    event = srv.wait_for({"event": "cancelled", "id": never_id})
    assert event["found"] is True and event["reason"] == "test"
    assert srv.wait_for({"event": "cancelled", "id": slow_id})["found"] is True
    cancels = srv.received("notifications/cancelled")
    assert [c["params"]["requestId"] for c in cancels] == [never_id, slow_id]


def test_cancelling_an_answered_or_unknown_request_is_harmless(spawn):
    srv, peer = spawn()
    done = peer.send_request("tools/call", envelope({"name": "echo", "arguments": {"text": "x"}}))
    assert peer.response(done)
    peer.notify("notifications/cancelled", {"requestId": done})
    peer.notify("notifications/cancelled", {"requestId": "ghost"})
    assert srv.wait_for({"event": "cancelled", "id": "ghost"})["found"] is False
    assert srv.wait_for({"event": "cancelled", "id": done})["found"] is False
    assert text_of(peer.call("echo", {"text": "still alive"})) == "still alive"


def test_crash_exits_with_the_code_without_answering(spawn):
    srv, peer = spawn()
    peer.send_request("tools/call", envelope({"name": "crash", "arguments": {"code": 7}}))
    assert peer.wait() == 7
    assert peer.recv_line() is None
    assert srv.events("exit")[-1]["code"] == 7
    _, default = spawn()
    default.send_request("tools/call", envelope({"name": "crash"}))
    assert default.wait() == 1


def test_garbage_line_then_the_answer(spawn):
    _, peer = spawn()
    request_id = peer.send_request("tools/call", envelope({"name": "garbage"}))
    line = peer.recv_line()
    with pytest.raises(ValueError):
        __import__("orjson").loads(line)
    assert peer.recv()["id"] == request_id
    peer.send_request("tools/call", envelope({"name": "garbage", "arguments": {"text": "oops"}}))
    assert peer.recv_line() == b"oops"


def test_stderr_tool_and_noise(spawn):
    _, peer = spawn(extra_args=["--stderr-noise", "5"])
    assert text_of(peer.call("stderr", {"text": "to-stderr-marker"})) == "written"
    text = peer.wait_stderr("to-stderr-marker")
    assert text.count("noise line") == 5


def test_notify_tool(spawn):
    _, peer = spawn()
    request_id = peer.send_request(
        "tools/call",
        envelope(
            {
                "name": "notify",
                "arguments": {"method": "notifications/x", "count": 3, "params": {"k": 1}},
            }
        ),
    )
    for _ in range(3):
        assert peer.recv() == {"jsonrpc": "2.0", "method": "notifications/x", "params": {"k": 1}}
    response = peer.recv()
    assert response["id"] == request_id and text_of(response) == "sent 3"
    assert peer.drain() == []
    assert text_of(peer.call("notify", {"method": "notifications/tools/list_changed"})) == "sent 1"
    assert peer.drain() == [{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}]


def test_log_tool_follows_the_requested_level(spawn):
    _, peer = spawn()
    assert text_of(peer.call("log", {"level": "error"})) == "suppressed"  # no logLevel: nothing
    peer.send_request(
        "tools/call",
        envelope(
            {"name": "log", "arguments": {"level": "error", "data": {"d": 1}}},
            **{"io.modelcontextprotocol/logLevel": "warning"},
        ),
    )
    note = peer.recv()
    assert note["method"] == "notifications/message"
    assert note["params"] == {"level": "error", "logger": "scripted", "data": {"d": 1}}
    assert text_of(peer.recv()) == "logged"
    _, legacy = spawn()
    legacy.initialize()
    assert legacy.request("logging/setLevel", {"level": "error"})["result"] == {}
    assert text_of(
        legacy.request("tools/call", {"name": "log", "arguments": {"level": "info"}})
    ) == ("suppressed")


def test_prompts(spawn):
    _, peer = spawn()
    prompts = peer.modern("prompts/list")["result"]["prompts"]
    assert [p["name"] for p in prompts] == ["greet", "plain"]
    got = peer.modern("prompts/get", {"name": "greet", "arguments": {"name": "Ada"}})["result"]
    assert got["messages"] == [{"role": "user", "content": {"type": "text", "text": "Hello, Ada!"}}]
    assert peer.modern("prompts/get", {"name": "greet"})["error"]["code"] == -32602
    assert peer.modern("prompts/get", {"name": "nope"})["error"]["code"] == -32602


def test_resources(spawn):
    _, peer = spawn()
    listed = peer.modern("resources/list")["result"]["resources"]
    assert listed[0]["uri"] == "test://static/hello"
    templates = peer.modern("resources/templates/list")["result"]["resourceTemplates"]
    assert templates[0]["uriTemplate"] == "test://item/{id}"
    hello = peer.modern("resources/read", {"uri": "test://static/hello"})["result"]
    assert hello["contents"] == [
        {"uri": "test://static/hello", "mimeType": "text/plain", "text": "Hello, world!"}
    ]
    assert hello["ttlMs"] == 0
    item = peer.modern("resources/read", {"uri": "test://item/42"})["result"]
    assert item["contents"][0]["text"] == "item 42"
    blob = peer.modern("resources/read", {"uri": "test://static/blob"})["result"]
    assert blob["contents"][0]["blob"] == "AAECAwQFBgcICQoLDA0ODw=="
    missing = peer.modern("resources/read", {"uri": "test://nope"})["error"]
    assert missing["code"] == -32602 and missing["data"] == {"uri": "test://nope"}
    _, legacy = spawn(era="legacy")
    legacy.initialize()
    assert legacy.request("resources/read", {"uri": "test://nope"})["error"]["code"] == -32002


def test_completion(spawn):
    _, peer = spawn()
    prompt = peer.modern(
        "completion/complete",
        {
            "ref": {"type": "ref/prompt", "name": "greet"},
            "argument": {"name": "name", "value": "b"},
        },
    )["result"]["completion"]
    assert prompt == {"values": ["bob"], "total": 1, "hasMore": False}
    resource = peer.modern(
        "completion/complete",
        {
            "ref": {"type": "ref/resource", "uri": "test://item/{id}"},
            "argument": {"name": "id", "value": ""},
        },
    )["result"]["completion"]
    assert resource["values"] == ["1", "2", "3"]


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_pagination(spawn, era):
    _, peer = spawn(page_size=4, extra_args=["--extra-tools", "5"])

    def ask(params):
        if era == "modern":
            return peer.modern("tools/list", params)
        return peer.request("tools/list", params)

    if era == "legacy":
        peer.initialize()
    names, cursor, pages = [], None, 0
    while True:
        result = ask({"cursor": cursor} if cursor is not None else {})["result"]
        assert len(result["tools"]) <= 4
        names += [t["name"] for t in result["tools"]]
        pages += 1
        cursor = result.get("nextCursor")
        if cursor is None:
            break
        assert isinstance(cursor, str) and cursor
    assert len(names) == len(set(names)) and "extra_4" in names and "add" in names
    assert pages == -(-len(names) // 4)
    assert ask({"cursor": "bogus"})["error"]["code"] == -32602
    prompts = (peer.modern if era == "modern" else peer.request)("prompts/list", {})["result"]
    assert "nextCursor" not in prompts  # two prompts fit a page of 4


def test_listen_ack_changes_and_end(spawn):
    srv, peer = spawn()
    listen_id = peer.send_request(
        "subscriptions/listen",
        envelope(
            {
                "notifications": {
                    "toolsListChanged": True,
                    "resourceSubscriptions": ["test://static/hello"],
                    "bogus": 1,
                }
            }
        ),
    )
    ack = peer.recv()
    assert ack["method"] == "notifications/subscriptions/acknowledged"
    assert ack["params"] == {
        "_meta": {"io.modelcontextprotocol/subscriptionId": listen_id},
        "notifications": {
            "toolsListChanged": True,
            "resourceSubscriptions": ["test://static/hello"],
        },
    }
    sub = {"io.modelcontextprotocol/subscriptionId": listen_id}
    peer.call("add_tool", {"name": "dyn"})
    assert peer.drain()[0] == {
        "jsonrpc": "2.0",
        "method": "notifications/tools/list_changed",
        "params": {"_meta": sub},
    }
    assert "dyn" in [t["name"] for t in peer.modern("tools/list")["result"]["tools"]]
    assert text_of(peer.call("dyn", {"text": "x"})) == "dyn called"
    assert peer.call("changed", {"kind": "prompts"})["result"]["structuredContent"] == {"sent": 0}
    peer.call("changed", {"kind": "resource", "uri": "test://static/hello"})
    assert peer.drain()[0]["params"] == {"_meta": sub, "uri": "test://static/hello"}
    peer.call("remove_tool", {"name": "dyn"})
    assert peer.drain()[0]["method"] == "notifications/tools/list_changed"
    ended = peer.call("end_listens")
    assert ended["result"]["structuredContent"] == {"ended": [listen_id]}
    final = peer.response(listen_id)
    assert final["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"] == listen_id
    # A cancelled listen is gone: nothing more is sent for it.
    second = peer.send_request(
        "subscriptions/listen", envelope({"notifications": {"toolsListChanged": True}})
    )
    peer.recv()
    peer.notify("notifications/cancelled", {"requestId": second})
    assert srv.wait_for({"event": "cancelled", "id": second})["found"] is True
    assert peer.call("changed", {"kind": "tools"})["result"]["structuredContent"] == {"sent": 0}


def test_legacy_subscriptions_and_list_changed(spawn):
    _, peer = spawn()
    peer.initialize()
    assert peer.request("resources/subscribe", {"uri": "test://item/1"})["result"] == {}
    peer.request(
        "tools/call", {"name": "changed", "arguments": {"kind": "resource", "uri": "test://item/1"}}
    )
    assert peer.drain()[0] == {
        "jsonrpc": "2.0",
        "method": "notifications/resources/updated",
        "params": {"uri": "test://item/1"},
    }
    peer.request("resources/unsubscribe", {"uri": "test://item/1"})
    peer.request(
        "tools/call", {"name": "changed", "arguments": {"kind": "resource", "uri": "test://item/1"}}
    )
    peer.request("tools/call", {"name": "changed", "arguments": {"kind": "tools"}})
    assert [m["method"] for m in peer.drain()] == ["notifications/tools/list_changed"]


def test_client_request_modern_mrtr(spawn):
    _, peer = spawn()
    ask = {
        "name": "client_request",
        "arguments": {"method": "elicitation/create", "params": {"message": "?"}},
    }
    missing = peer.modern("tools/call", ask)["error"]
    assert missing["code"] == -32021
    assert missing["data"] == {"requiredCapabilities": {"elicitation": {}}}
    caps = {"elicitation": {}}
    first = peer.request("tools/call", envelope(ask, capabilities=caps))["result"]
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {
        "request": {"method": "elicitation/create", "params": {"message": "?"}}
    }
    answer = {"action": "accept", "content": {"name": "octocat"}}
    retry = dict(ask, inputResponses={"request": answer}, requestState=first["requestState"])
    final = peer.request("tools/call", envelope(retry, capabilities=caps))["result"]
    assert final["resultType"] == "complete"
    assert final["structuredContent"] == {"response": answer}
    bad = dict(ask, inputResponses={"request": answer}, requestState="tampered")
    assert peer.request("tools/call", envelope(bad, capabilities=caps))["error"]["code"] == -32602


def test_client_request_legacy_round_trip_and_cancel(spawn):
    srv, peer = spawn()
    peer.initialize(capabilities={"roots": {}})
    call_id = peer.send_request(
        "tools/call", {"name": "client_request", "arguments": {"method": "roots/list"}}
    )
    asked = peer.recv()
    assert asked["method"] == "roots/list" and asked["id"] == "s-1"
    peer.send({"jsonrpc": "2.0", "id": "s-1", "result": {"roots": []}})
    assert peer.response(call_id)["result"]["structuredContent"] == {"response": {"roots": []}}
    assert srv.wait_for(lambda e: e.get("dir") == "in" and e.get("id") == "s-1")["result"] == {
        "roots": []
    }
    call_id = peer.send_request(
        "tools/call", {"name": "client_request", "arguments": {"method": "roots/list"}}
    )
    assert peer.recv()["id"] == "s-2"
    peer.notify("notifications/cancelled", {"requestId": call_id})
    assert peer.recv() == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": "s-2", "reason": "cancelled"},
    }
    refused = peer.request(
        "tools/call", {"name": "client_request", "arguments": {"method": "sampling/createMessage"}}
    )
    assert refused["result"]["isError"] is True


def test_stdin_eof_exits_zero(spawn):
    srv, peer = spawn()
    peer.modern("server/discover")
    peer.close_stdin()
    assert peer.wait() == 0
    assert srv.events("eof")
    assert srv.events("exit")[-1]["code"] == 0


def test_sigterm_is_logged_then_kills(spawn):
    srv, peer = spawn(extra_args=["--ignore-eof"])
    peer.modern("server/discover")
    peer.close_stdin()
    srv.wait_for("eof")
    assert peer.proc.poll() is None  # still running after EOF
    peer.proc.send_signal(signal.SIGTERM)
    assert peer.wait() == -signal.SIGTERM
    assert srv.events("sigterm")[0]["ignored"] is False


def test_ignore_sigterm_needs_sigkill(spawn):
    srv, peer = spawn(extra_args=["--ignore-eof", "--ignore-sigterm"])
    peer.modern("server/discover")
    peer.proc.send_signal(signal.SIGTERM)
    srv.wait_for("sigterm")
    assert peer.modern("server/discover")["result"]  # still serving
    peer.proc.kill()
    assert peer.wait() == -signal.SIGKILL


def test_startup_delay_and_log_out(spawn):
    srv, peer = spawn(extra_args=["--startup-delay", "0.2", "--log-out"])
    peer.modern("server/discover")
    started = srv.wait_for("started")
    received = srv.wait_for("server/discover")
    assert received["t"] - started["t"] >= 0.2  # read only after the delay
    out = srv.wait_for(lambda e: e.get("dir") == "out")
    assert out["result"]["resultType"] == "complete"


def test_server_cpu_per_call_is_small(spawn):
    _, peer = spawn()
    for _ in range(200):
        peer.call("add", {"a": 1, "b": 2})
    before = peer.call("cpu")["result"]["structuredContent"]["cpu"]
    n = 2000
    for _ in range(n):
        peer.call("add", {"a": 1, "b": 2})
    spent = peer.call("cpu")["result"]["structuredContent"]["cpu"] - before
    # Typically 30-45 us per round trip (with the log); the bound leaves room for noisy hosts.
    assert spent / n < 250e-6, f"{spent / n * 1e6:.1f} us of server CPU per tools/call"
    assert os.getpid() != peer.proc.pid
