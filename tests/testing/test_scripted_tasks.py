"""Tasks served by the scripted server, driven by raw peers (stdio and HTTP): what the
conformance harness does not cover (tests/conformance/test_server_tasks.py) - the legacy
2025-11-25 flow, the durable mode across a restart, expiry, ``task_stats`` counts,
``--no-tasks``, ``Mcp-Name`` on ``tasks/*`` and ``notifications/tasks`` on the listen stream.

Nothing sleeps for an event: a task's status is polled with ``tasks/get`` at its
``pollIntervalMs`` (what a client does) until a deadline.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import stat
import time
from collections.abc import Callable, Coroutine
from typing import Any

import orjson
import pytest

from conduit_mcp.testing.raw.http import RawHttpPeer, SseReader, modern_headers
from conduit_mcp.testing.raw.stdio import RawPeer, envelope

pytestmark = pytest.mark.timeout(30)

EXT = "io.modelcontextprotocol/tasks"
CAPS = {"extensions": {EXT: {}}, "elicitation": {}}
RELATED = "io.modelcontextprotocol/related-task"


def run(coro: Coroutine[Any, Any, Any]) -> Any:
    return asyncio.run(asyncio.wait_for(coro, 20))


def until(get: Callable[[], dict[str, Any]], done: Callable[[dict[str, Any]], bool]) -> Any:
    """Call ``get`` at the answer's pollIntervalMs until ``done(answer)``, for 5 s at most."""
    deadline = time.monotonic() + 5
    while True:
        answer = get()
        if done(answer):
            return answer
        assert time.monotonic() < deadline, f"no such answer within 5 s; last: {answer}"
        time.sleep(answer.get("result", {}).get("pollIntervalMs", 20) / 1000)


def start(peer: RawPeer, tool: str = "task_job", **args: Any) -> str:
    created = peer.call(tool, args, capabilities=CAPS)["result"]
    assert created["resultType"] == "task", created
    return str(created["taskId"])


def get(peer: RawPeer, task_id: str, caps: Any = CAPS) -> dict[str, Any]:
    return peer.modern("tasks/get", {"taskId": task_id}, capabilities=caps)


def status_is(*wanted: str) -> Callable[[dict[str, Any]], bool]:
    return lambda answer: answer.get("result", {}).get("status") in wanted


def stats(peer: RawPeer, **kw: Any) -> dict[str, Any]:
    text = peer.call("task_stats", {}, **kw)["result"]["content"][0]["text"]
    out: dict[str, Any] = orjson.loads(text)
    return out


# ---- modern (stdio) ---------------------------------------------------------------------------


def test_modern_rounds_update_and_stats(spawn):
    _, peer = spawn(era="modern")
    task_id = start(peer, seconds=0.05, rounds=2, poll_ms=20, text="ok")
    first = until(lambda: get(peer, task_id), status_is("input_required"))["result"]
    assert list(first["inputRequests"]) == ["answer-1"] and first["pollIntervalMs"] == 20
    again = get(peer, task_id)["result"]  # asked again until answered: same key
    assert list(again["inputRequests"]) == ["answer-1"]
    update = {"taskId": task_id, "inputResponses": {"answer-1": ACCEPT("red"), "x": ACCEPT("-")}}
    ack = peer.modern("tasks/update", update, capabilities=CAPS)["result"]
    assert {k: v for k, v in ack.items() if k != "_meta"} == {"resultType": "complete"}
    second = until(lambda: get(peer, task_id), status_is("input_required", "completed"))
    assert list(second["result"]["inputRequests"]) == ["answer-2"]
    update = {"taskId": task_id, "inputResponses": {"answer-2": ACCEPT("green")}}
    peer.modern("tasks/update", update, capabilities=CAPS)
    done = until(lambda: get(peer, task_id), status_is("completed"))["result"]
    assert done["result"]["content"][0]["text"] == "ok (answers: red, green)"
    counted = stats(peer)[task_id]
    assert counted["updates"] == 2 and counted["cancels"] == 0 and counted["status"] == "completed"
    assert counted["gets"] >= 4  # at least one per wait above, plus the repeated ask


def ACCEPT(answer: str) -> dict[str, Any]:
    return {"action": "accept", "content": {"answer": answer}}


def test_modern_gets_are_counted_one_by_one(spawn):
    _, peer = spawn(era="modern")
    task_id = start(peer, seconds=30)
    for _ in range(3):
        assert get(peer, task_id)["result"]["status"] == "working"
    peer.modern("tasks/cancel", {"taskId": task_id}, capabilities=CAPS)
    assert stats(peer)[task_id] == {"gets": 3, "updates": 0, "cancels": 1, "status": "cancelled"}


def test_modern_refusals(spawn):
    _, peer = spawn(era="modern")
    plain = peer.call("task_required", {})["error"]
    assert plain["code"] == -32021
    assert plain["data"] == {"requiredCapabilities": {"extensions": {EXT: {}}}}
    inline = peer.call("task_job", {"seconds": 0, "text": "inline"})["result"]
    assert inline["resultType"] == "complete" and inline["content"][0]["text"] == "inline"
    task_id = start(peer, seconds=30)
    assert get(peer, task_id, caps={})["error"]["code"] == -32021  # not declared on tasks/get
    unknown = get(peer, "no-such-task")["error"]
    assert unknown == {"code": -32602, "message": "Failed to retrieve task: Task not found"}
    for method in ("tasks/result", "tasks/list"):  # the 2025-11-25 methods are gone
        assert (
            peer.modern(method, {"taskId": task_id}, capabilities=CAPS)["error"]["code"] == -32601
        )
    bad = peer.modern("tasks/update", {"taskId": task_id, "inputResponses": []}, capabilities=CAPS)
    assert bad["error"]["code"] == -32602
    assert (
        "rounds"
        in peer.call("task_job", {"rounds": 99}, capabilities=CAPS)["result"]["content"][0]["text"]
    )


def test_modern_failed_and_server_cancelled_outcomes(spawn):
    _, peer = spawn(era="modern")
    failed = start(peer, seconds=0, outcome="failed")
    assert get(peer, failed)["result"]["error"] == {"code": -32603, "message": "task failed"}
    gone = start(peer, seconds=0, outcome="cancelled")
    view = get(peer, gone)["result"]
    assert view["status"] == "cancelled" and "result" not in view
    err = start(peer, seconds=0, outcome="error_result", text="bad")
    assert get(peer, err)["result"]["result"]["isError"] is True


def test_a_task_expires_after_its_ttl(spawn):
    _, peer = spawn(era="modern")
    before = time.monotonic()
    task_id = start(peer, seconds=0, ttl_ms=500, poll_ms=20)
    first = get(peer, task_id)
    if "error" not in first:  # (on a very busy machine 0.5 s may have passed already)
        assert first["result"]["status"] == "completed" and first["result"]["ttlMs"] == 500
        first = until(lambda: get(peer, task_id), lambda a: "error" in a)
    gone = first["error"]
    assert gone == {"code": -32602, "message": "Failed to retrieve task: Task has expired"}
    assert time.monotonic() - before >= 0.5
    assert get(peer, task_id)["error"]["message"] == "Failed to retrieve task: Task not found"
    assert task_id not in stats(peer)


def test_no_tasks_serves_none(spawn):
    _, peer = spawn(era="modern", tasks=False)
    discover = peer.modern("server/discover")["result"]["capabilities"]
    assert "extensions" not in discover
    inline = peer.call("task_job", {"seconds": 0}, capabilities=CAPS)["result"]
    assert inline["resultType"] == "complete"
    assert get(peer, "any")["error"]["code"] == -32601
    _, legacy = spawn(era="legacy", tasks=False)
    assert "tasks" not in legacy.initialize()["result"]["capabilities"]
    tools = legacy.request("tools/list")["result"]["tools"]
    assert not [t for t in tools if "execution" in t]
    call = {"name": "task_job", "arguments": {"seconds": 0}, "task": {}}
    assert legacy.request("tools/call", call)["result"]["content"][0]["text"] == "done"
    assert legacy.request("tasks/list")["error"]["code"] == -32601


def test_a_server_holds_10000_live_tasks_and_refuses_one_more(spawn):
    _, peer = spawn(era="modern")
    params = envelope({"name": "task_job", "arguments": {"seconds": 60}}, capabilities=CAPS)
    ids = [peer.send_request("tools/call", params) for _ in range(10_001)]  # pipelined
    answers = [peer.response(i, timeout=20) for i in ids]
    assert all(a["result"]["resultType"] == "task" for a in answers[:10_000])
    assert answers[-1]["error"] == {
        "code": -32603,
        "message": "Internal error: the server holds 10000 tasks already",
    }


# ---- durable restart (stdio) ------------------------------------------------------------------


def test_durable_tasks_survive_a_restart_and_finish_by_the_clock(spawn, tmp_path):
    path = tmp_path / "tasks.json"
    srv, peer = spawn(era="modern", durable=path)
    task_id = start(peer, seconds=0.3, rounds=1, poll_ms=20)
    get(peer, task_id)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    peer.proc.kill()
    peer.wait()
    _, again = spawn(srv)  # a new process, the same --tasks-durable file
    asked = until(lambda: get(again, task_id), status_is("input_required"))["result"]
    assert list(asked["inputRequests"]) == ["answer-1"]
    again.modern(
        "tasks/update",
        {"taskId": task_id, "inputResponses": {"answer-1": ACCEPT("kept")}},
        capabilities=CAPS,
    )
    done = until(lambda: get(again, task_id), status_is("completed"))["result"]
    assert done["result"]["content"][0]["text"] == "done (answers: kept)"
    counted = stats(again)[task_id]
    assert counted["updates"] == 1 and counted["status"] == "completed"
    assert counted["gets"] >= 2  # the second process's, at least
    assert srv.starts() == 2


def test_without_durable_a_restarted_server_knows_no_task(spawn):
    srv, peer = spawn(era="modern")
    task_id = start(peer, seconds=30)
    peer.proc.kill()
    peer.wait()
    _, again = spawn(srv)
    assert get(again, task_id)["error"]["code"] == -32602


def test_a_bad_durable_file_stops_the_server_with_a_reason(spawn, tmp_path):
    bad = tmp_path / "tasks.json"
    bad.write_text("[]")
    _, peer = spawn(durable=bad)
    assert peer.wait() == 2
    assert "cannot read the durable task file" in peer.stderr()


def test_task_ids_are_random_and_never_logged(spawn):
    srv, peer = spawn(era="modern")
    ids = {start(peer, seconds=0) for _ in range(20)}
    assert len(ids) == 20 and all(len(i) >= 22 for i in ids)
    events = orjson.dumps(srv.events()).decode()
    assert not any(i in events for i in ids)
    assert not any(i in peer.stderr() for i in ids)


# ---- legacy (2025-11-25, stdio) ---------------------------------------------------------------


def test_legacy_task_parameter_result_and_list(spawn):
    _, peer = spawn(era="legacy")
    init = peer.initialize(capabilities={"elicitation": {}})["result"]
    assert init["capabilities"]["tasks"] == {
        "list": {},
        "cancel": {},
        "requests": {"tools": {"call": {}}},
    }
    tools = {t["name"]: t for t in peer.request("tools/list")["result"]["tools"]}
    assert tools["task_job"]["execution"] == {"taskSupport": "optional"}
    assert tools["task_required"]["execution"] == {"taskSupport": "required"}
    assert "execution" not in tools["task_stats"] and "execution" not in tools["add"]
    plain = peer.request("tools/call", {"name": "task_required", "arguments": {}})["error"]
    assert plain["code"] == -32601 and "taskSupport" in plain["message"]
    created = peer.request(
        "tools/call",
        {
            "name": "task_required",
            "arguments": {"seconds": 0.05, "rounds": 1},
            "task": {"ttl": 9000},
        },
    )["result"]["task"]
    task_id = created["taskId"]
    assert (created["status"], created["ttl"], created["pollInterval"]) == ("working", 9000, 50)
    rid = peer.send_request("tasks/result", {"taskId": task_id})
    asked = peer.expect(lambda m: m.get("method") == "elicitation/create")
    assert asked["params"]["_meta"][RELATED] == {"taskId": task_id}
    peer.send({"jsonrpc": "2.0", "id": asked["id"], "result": ACCEPT("yes")})
    result = peer.response(rid)["result"]
    assert result["content"][0]["text"] == "done (answers: yes)"
    assert result["_meta"][RELATED] == {"taskId": task_id}
    status = peer.request("tasks/get", {"taskId": task_id})["result"]
    assert status["status"] == "completed" and "result" not in status
    listed = peer.request("tasks/list")["result"]["tasks"]
    assert [t["taskId"] for t in listed] == [task_id]
    refused = peer.request("tasks/cancel", {"taskId": task_id})["error"]
    assert refused["code"] == -32602 and "terminal" in refused["message"]


def test_legacy_cancel_and_failed_result(spawn):
    _, peer = spawn(era="legacy")
    peer.initialize()
    call = {"name": "task_job", "arguments": {"seconds": 30}, "task": {}}
    task_id = peer.request("tools/call", call)["result"]["task"]["taskId"]
    cancelled = peer.request("tasks/cancel", {"taskId": task_id})["result"]
    assert cancelled["status"] == "cancelled" and cancelled["taskId"] == task_id
    call = {"name": "task_job", "arguments": {"seconds": 0, "outcome": "failed"}, "task": {}}
    failed = peer.request("tools/call", call)["result"]["task"]["taskId"]
    error = peer.request("tasks/result", {"taskId": failed})["error"]
    assert error == {"code": -32603, "message": "task failed"}
    inline = peer.request("tools/call", {"name": "task_job", "arguments": {"seconds": 0}})
    assert inline["result"]["content"][0]["text"] == "done"  # optional: no task parameter


def test_legacy_without_elicitation_the_round_is_cancelled(spawn):
    _, peer = spawn(era="legacy")
    peer.initialize()
    call = {"name": "task_job", "arguments": {"seconds": 0, "rounds": 1}, "task": {}}
    task_id = peer.request("tools/call", call)["result"]["task"]["taskId"]
    result = peer.request("tasks/result", {"taskId": task_id})["result"]
    assert result["content"][0]["text"] == "done (answers: <cancel>)"


# ---- HTTP ---------------------------------------------------------------------------------


def test_http_mcp_name_must_be_the_task_id(http_server):
    srv, proc = http_server(era="modern")

    async def body() -> tuple[Any, ...]:
        async with RawHttpPeer(proc.url) as peer:
            call = {"name": "task_job", "arguments": {"seconds": 30}}
            created = (await peer.modern("tools/call", call, capabilities=CAPS)).json["result"]
            params = envelope({"taskId": created["taskId"]}, capabilities=CAPS)
            msg = {"jsonrpc": "2.0", "id": 9, "method": "tasks/get", "params": params}
            good = await peer.post(msg, modern_headers("tasks/get", params))
            wrong = {**modern_headers("tasks/get", params), "Mcp-Name": "another-task"}
            bad = await peer.post(msg, wrong)
            missing = modern_headers("tasks/get", params)
            del missing["Mcp-Name"]
            absent = await peer.post(msg, missing)
            return good, bad, absent

    good, bad, absent = run(body())
    assert good.status == 200 and good.json["result"]["status"] == "working"
    for reply in (bad, absent):
        assert reply.status == 400 and reply.json["error"]["code"] == -32020
        assert "Mcp-Name" in reply.json["error"]["message"]
    task_id = good.json["result"]["taskId"]
    logged = [
        e["headers"] for e in srv.events("http") if e["headers"].get("mcp-method") == "tasks/get"
    ]
    assert len(logged) == 3 and {h.get("mcp-name") for h in logged} == {"<task id>", None}
    assert task_id not in orjson.dumps(srv.events()).decode()  # never in an event


def test_http_listen_pushes_notifications_tasks(http_server):
    srv, proc = http_server(era="modern")

    async def body() -> tuple[Any, ...]:
        async with RawHttpPeer(proc.url) as peer:
            call = {"name": "task_job", "arguments": {"seconds": 0.1, "rounds": 1}}
            task_id = (await peer.modern("tools/call", call, capabilities=CAPS)).json["result"][
                "taskId"
            ]
            wanted = {"notifications": {"taskIds": [task_id, "unknown-task"]}}
            params = envelope(wanted, capabilities=CAPS)
            msg = {"jsonrpc": "2.0", "id": "L1", "method": "subscriptions/listen", "params": params}
            refused = await peer.post(
                {**msg, "params": envelope(wanted)}, modern_headers("subscriptions/listen")
            )
            async with peer.open_post(msg, modern_headers("subscriptions/listen")) as response:
                reader = SseReader(response)
                ack = await reader.next()
                notes = []
                while True:
                    event = await reader.next()
                    assert event is not None
                    notes.append(event.data)
                    if event.data["params"]["status"] == "input_required":
                        update = {"taskId": task_id, "inputResponses": {"answer-1": ACCEPT("a")}}
                        await peer.modern("tasks/update", update, capabilities=CAPS)
                    if event.data["params"]["status"] == "completed":
                        break
            return refused, ack, notes, task_id

    refused, ack, notes, task_id = run(body())
    assert refused.json["error"]["code"] == -32021
    assert ack.data["params"]["notifications"] == {"taskIds": [task_id]}
    assert [n["method"] for n in notes] == ["notifications/tasks"] * len(notes)
    statuses = [n["params"]["status"] for n in notes]
    # One notification per change; a working phase (0.05 s) may pass unseen on a busy machine.
    assert statuses[-1] == "completed" and "input_required" in statuses, statuses
    assert all(a != b for a, b in itertools.pairwise(statuses)), statuses
    assert set(statuses) <= {"working", "input_required", "completed"}, statuses
    last = notes[-1]["params"]
    assert (
        last["taskId"] == task_id
        and last["_meta"]["io.modelcontextprotocol/subscriptionId"] == "L1"
    )
    assert last["result"]["content"][0]["text"] == "done (answers: a)"
    assert not srv.find(lambda e: e.get("event") == "notification_dropped")


def test_http_legacy_result_asks_on_the_post_stream(http_server):
    _, proc = http_server(era="legacy")

    async def body() -> Any:
        async with RawHttpPeer(proc.url) as peer:
            await peer.initialize(capabilities={"elicitation": {}})
            call = {"name": "task_job", "arguments": {"seconds": 0, "rounds": 1}, "task": {}}
            task_id = (await peer.legacy("tools/call", call)).json["result"]["task"]["taskId"]
            msg = {
                "jsonrpc": "2.0",
                "id": 50,
                "method": "tasks/result",
                "params": {"taskId": task_id},
            }
            async with peer.open_post(msg) as response:
                reader = SseReader(response)
                asked = await reader.next()
                assert asked is not None and asked.data["method"] == "elicitation/create"
                reply = {"jsonrpc": "2.0", "id": asked.data["id"], "result": ACCEPT("http")}
                assert (await peer.post(reply)).status == 202
                final = await reader.next()
            return final

    final = run(body())
    assert final is not None and final.data["id"] == 50
    assert final.data["result"]["content"][0]["text"] == "done (answers: http)"
