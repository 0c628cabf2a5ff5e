"""The scripted server's modern input_required rounds: the ``rounds`` tool, prompt and resource,
and ``rounds_log``, over stdio (raw JSON lines) and HTTP (raw requests)."""

from __future__ import annotations

import asyncio

import orjson
import pytest

from conduit_mcp.testing.raw.http import RawHttpPeer
from conduit_mcp.testing.raw.stdio import envelope
from conduit_mcp.testing.scripted.rounds import rounds_prompt_arguments, rounds_uri

pytestmark = pytest.mark.timeout(30)

CAPS = {"elicitation": {"form": {}, "url": {}}, "sampling": {}, "roots": {}}
ELICIT = {
    "method": "elicitation/create",
    "params": {"message": "name?", "requestedSchema": {"type": "object"}},
}
SAMPLE = {"method": "sampling/createMessage", "params": {"messages": [], "maxTokens": 5}}
ROOTS = {"method": "roots/list"}
STATE = 'opaque "state" \\ é ✓ {"json": [1, 2]}'
ANSWERS = {
    "elicitation/create": {"action": "accept", "content": {"name": "octocat"}},
    "sampling/createMessage": {
        "role": "assistant",
        "content": {"type": "text", "text": "hi"},
        "model": "m",
    },
    "roots/list": {"roots": [{"uri": "file:///r"}]},
}
TWO_ROUNDS = {
    "rounds": [
        {"inputRequests": {"who": ELICIT, "llm": SAMPLE}, "requestState": STATE},
        {"requestState": "state-only"},
        {"inputRequests": {"roots": ROOTS}},
    ]
}


def send(peer, method, params, caps=CAPS):
    return peer.request(method, envelope(params, capabilities=caps))


def follow(peer, method, params, caps=CAPS):
    """Play a good client: answer each round, echo the state; return (final, responses)."""
    reply = send(peer, method, params, caps)
    rounds = 0
    while "result" in reply and reply["result"].get("resultType") == "input_required":
        rounds += 1
        result = reply["result"]
        retry = {k: v for k, v in params.items() if k not in ("inputResponses", "requestState")}
        if "inputRequests" in result:
            retry["inputResponses"] = {
                k: ANSWERS[r["method"]] for k, r in result["inputRequests"].items()
            }
        if "requestState" in result:
            retry["requestState"] = result["requestState"]
        reply = send(peer, method, retry, caps)
    return reply, rounds


def test_tool_rounds_with_a_good_client(spawn):
    _, peer = spawn()
    final, rounds = follow(peer, "tools/call", {"name": "rounds", "arguments": TWO_ROUNDS})
    assert rounds == 3
    result = final["result"]
    assert result["resultType"] == "complete"
    report = result["structuredContent"]
    assert orjson.loads(result["content"][0]["text"]) == report
    assert report["ok"] is True and report["rounds"] == 3
    requests = report["requests"]
    assert [r["round"] for r in requests] == [1, 2, 3, 4]
    assert len({r["id"] for r in requests}) == 4
    assert [r["carried"] for r in requests] == [
        [],
        ["inputResponses", "requestState"],
        ["requestState"],
        ["inputResponses"],
    ]
    assert requests[1]["inputResponses"] == {
        "who": ANSWERS["elicitation/create"],
        "llm": ANSWERS["sampling/createMessage"],
    }
    assert requests[1]["requestState"] == STATE
    assert requests[2]["requestState"] == "state-only" and requests[2]["inputResponses"] is None
    assert requests[3]["requestState"] is None
    assert all(r["new_id"] and r["state_ok"] and r["keys_ok"] for r in requests)
    assert requests[0]["after"] is None and all(r["after"] >= 0 for r in requests[1:])
    assert requests[2]["after"] == pytest.approx(requests[2]["t"] - requests[1]["t"], abs=1e-5)


def test_the_first_round_is_sent_as_scripted(spawn):
    _, peer = spawn()
    first = send(peer, "tools/call", {"name": "rounds", "arguments": TWO_ROUNDS})["result"]
    assert first["resultType"] == "input_required"
    assert first["inputRequests"] == {"who": ELICIT, "llm": SAMPLE}
    assert first["requestState"] == STATE
    assert "ttlMs" not in first and "io.modelcontextprotocol/serverInfo" in first["_meta"]


def test_a_bad_client_is_reported_and_strict_refuses_it(spawn):
    _, peer = spawn()
    script = {"rounds": [{"inputRequests": {"a": ROOTS, "b": ROOTS}, "requestState": "s1"}]}
    call = {"name": "rounds", "arguments": script}
    send(peer, "tools/call", call)
    bad = dict(call, inputResponses={"a": {"roots": []}}, requestState="s1 ")
    final = peer.request("tools/call", envelope(bad, capabilities=CAPS), id=1)["result"]
    report = final["structuredContent"]
    assert report["ok"] is False
    assert {k: report["requests"][1][k] for k in ("new_id", "state_ok", "keys_ok")} == {
        "new_id": False,
        "state_ok": False,
        "keys_ok": False,
    }
    strict = {"name": "rounds", "arguments": dict(script, strict=True)}
    send(peer, "tools/call", strict)
    wrong = dict(strict, inputResponses={"a": {"roots": []}, "b": {"roots": []}})  # no state
    error = send(peer, "tools/call", wrong)["error"]
    assert error["code"] == -32602 and "state_ok" in error["message"]
    assert error["data"]["carried"] == ["inputResponses"]


def test_a_fresh_request_abandons_the_conversation(spawn):
    _, peer = spawn()
    call = {"name": "rounds", "arguments": {"rounds": [{"requestState": "x"}]}}
    assert send(peer, "tools/call", call)["result"]["resultType"] == "input_required"
    assert send(peer, "tools/call", call)["result"]["resultType"] == "input_required"
    log = peer.call("rounds_log")["result"]["structuredContent"]
    assert [c["status"] for c in log["conversations"]] == ["abandoned", "pending"]


def test_final_result_type_absent_or_unknown(spawn):
    _, peer = spawn()
    absent = {"rounds": [{"requestState": "x"}], "final_result_type": None}
    final, _ = follow(peer, "tools/call", {"name": "rounds", "arguments": absent})
    assert "resultType" not in final["result"] and final["result"]["structuredContent"]["ok"]
    unknown = {"rounds": [{"requestState": "x"}], "final_result_type": "task"}
    final, _ = follow(peer, "tools/call", {"name": "rounds", "arguments": unknown})
    assert final["result"]["resultType"] == "task"


def test_an_endless_server_repeats_the_last_round(spawn):
    _, peer = spawn()
    call = {
        "name": "rounds",
        "arguments": {
            "rounds": [{"inputRequests": {"r": ROOTS}, "requestState": "e"}],
            "endless": True,
        },
    }
    reply = send(peer, "tools/call", call)
    for _ in range(20):
        assert reply["result"]["resultType"] == "input_required"
        assert reply["result"]["requestState"] == "e"
        retry = dict(call, inputResponses={"r": ANSWERS["roots/list"]}, requestState="e")
        reply = send(peer, "tools/call", retry)
    log = peer.call("rounds_log")["result"]["structuredContent"]["conversations"]
    assert log[0]["status"] == "pending" and log[0]["rounds"] == 21 and log[0]["ok"]


def test_a_round_needs_the_capability_declared_in_that_request(spawn):
    _, peer = spawn()
    call = {
        "name": "rounds",
        "arguments": {"rounds": [{"requestState": "a"}, {"inputRequests": {"s": SAMPLE}}]},
    }
    send(peer, "tools/call", call, caps=CAPS)
    # The retry declares no sampling: the round that needs it is refused.
    error = send(peer, "tools/call", dict(call, requestState="a"), caps={"roots": {}})["error"]
    assert error["code"] == -32021
    assert error["data"] == {"requiredCapabilities": {"sampling": {}}}
    url = {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": "m", "url": "https://x.test"},
    }
    form_only = {"elicitation": {"form": {}}}
    call = {"name": "rounds", "arguments": {"rounds": [{"inputRequests": {"u": url}}]}}
    error = send(peer, "tools/call", call, caps=form_only)["error"]
    assert error["data"] == {"requiredCapabilities": {"elicitation": {"url": {}}}}
    unchecked = {
        "name": "rounds",
        "arguments": {"rounds": [{"inputRequests": {"u": url}}], "check_capabilities": False},
    }
    assert send(peer, "tools/call", unchecked, caps={})["result"]["resultType"] == "input_required"
    statuses = [
        c["status"] for c in peer.call("rounds_log")["result"]["structuredContent"]["conversations"]
    ]
    assert statuses[:2] == ["refused", "refused"]


def test_prompt_and_resource_rounds(spawn):
    _, peer = spawn()
    prompt = {"name": "rounds", "arguments": rounds_prompt_arguments(TWO_ROUNDS)}
    final, rounds = follow(peer, "prompts/get", prompt)
    assert rounds == 3 and final["result"]["resultType"] == "complete"
    report = orjson.loads(final["result"]["messages"][0]["content"]["text"])
    assert report["ok"] and len(report["requests"]) == 4
    uri = rounds_uri(TWO_ROUNDS)
    final, rounds = follow(peer, "resources/read", {"uri": uri})
    assert rounds == 3 and final["result"]["resultType"] == "complete"
    content = final["result"]["contents"][0]
    assert content["uri"] == uri and orjson.loads(content["text"])["ok"]
    bad = send(peer, "prompts/get", {"name": "rounds", "arguments": {"script": "{"}})["error"]
    assert bad["code"] == -32602 and "rounds script" in bad["message"]


def test_rounds_log_shows_every_carrier_and_the_stray_ones(spawn):
    _, peer = spawn()
    follow(peer, "tools/call", {"name": "rounds", "arguments": {"rounds": [{"requestState": "x"}]}})
    stray = {"name": "add", "arguments": {"a": 1, "b": 2}, "requestState": "x"}
    assert send(peer, "tools/call", stray)["result"]["structuredContent"] == {"sum": 3}
    send(peer, "tools/list", {"inputResponses": {}})
    log = peer.call("rounds_log")["result"]["structuredContent"]
    assert [(c["method"], c["name"], c["carried"], c["legit"]) for c in log["carriers"]] == [
        ("tools/call", "rounds", ["requestState"], True),
        ("tools/call", "add", ["requestState"], False),
        ("tools/list", None, ["inputResponses"], False),
    ]
    assert log["stray"] == log["carriers"][1:]
    assert log["conversations"][0]["status"] == "complete"


def test_bad_scripts_and_the_legacy_era(spawn):
    _, peer = spawn()
    for bad in (
        {},
        {"rounds": []},
        {"rounds": [{}]},
        {"rounds": [{"requestState": 1}]},
        {"rounds": [{"inputRequests": {}}]},
        {"rounds": [{"inputRequests": {"k": {"params": {}}}}]},
        {"rounds": [{"requestState": "x"}], "endless": 1},
        {"rounds": [{"requestState": "x"}], "final_result_type": 3},
        {"rounds": [{"requestState": "x"}], "other": 1},
    ):
        assert send(peer, "tools/call", {"name": "rounds", "arguments": bad})["result"][
            "isError"
        ], bad
    _, peer = spawn(era="legacy")
    peer.initialize()
    reply = peer.request("tools/call", {"name": "rounds", "arguments": TWO_ROUNDS})["result"]
    assert reply["isError"] and "modern" in reply["content"][0]["text"]


# ---- over HTTP ---------------------------------------------------------------------------------


def test_http_rounds_for_the_tool_the_prompt_and_the_resource(http_server):
    _, proc = http_server()
    script = {"rounds": [{"inputRequests": {"who": ELICIT}, "requestState": STATE}]}
    cases = [
        ("tools/call", {"name": "rounds", "arguments": script}),
        ("prompts/get", {"name": "rounds", "arguments": rounds_prompt_arguments(script)}),
        ("resources/read", {"uri": rounds_uri(script)}),
    ]

    async def body():
        out = []
        async with RawHttpPeer(proc.url) as peer:
            for method, params in cases:
                first = await peer.modern(method, params, capabilities=CAPS)
                assert first.status == 200, first.body
                result = first.json["result"]
                retry = dict(params, inputResponses={"who": ANSWERS["elicitation/create"]})
                retry["requestState"] = result["requestState"]
                out.append((result, await peer.modern(method, retry, capabilities=CAPS)))
            refused = await peer.modern(*cases[0], capabilities={})
        return out, refused

    out, refused = asyncio.run(asyncio.wait_for(body(), 20))
    for first, final in out:
        assert first["resultType"] == "input_required" and first["requestState"] == STATE
        assert final.status == 200 and final.json["result"]["resultType"] == "complete"
    assert out[0][1].json["result"]["structuredContent"]["ok"] is True
    assert refused.status == 400 and refused.json["error"]["code"] == -32021
