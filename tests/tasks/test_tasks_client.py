"""Tasks through the public API against the scripted test server (docs/tasks.md): a tool
call answered with a task is polled to its end in both eras, outcomes map as the Tasks
extension says, input rounds go to the handler and are answered once, giving up sends
``tasks/cancel``, the TTL backstop and a lost task end the wait, and polling is bounded by
the server's ``pollIntervalMs``."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(60)

EXT = "io.modelcontextprotocol/tasks"


class Answers(mcp.Handler):
    """Answers each elicitation with the next name, counting them."""

    def __init__(self) -> None:
        self.asked = 0

    async def elicit(self, request: Any, ctx: Any) -> mcp.ElicitResult:
        self.asked += 1
        return mcp.ElicitResult.accept({"answer": f"a{self.asked}"})


def stats(client: mcp.Client) -> dict[str, Any]:
    return json.loads(client.call_tool("task_stats", {}, timeout=10).text)


@pytest.fixture(scope="module")
def modern_http(tmp_path_factory: pytest.TempPathFactory) -> Any:
    from conduit_mcp.testing import ScriptedServer

    server = ScriptedServer(tmp_path_factory.mktemp("tasks-http"), era="modern")
    proc = server.http_server()
    yield server, proc
    proc.kill()


@pytest.fixture(scope="module")
def modern(modern_http: Any) -> Any:
    _server, proc = modern_http
    client = mcp.Client.start(mcp.Http(proc.url), handler=Answers(), backoff=lambda a: 0.01)
    client.await_ready(timeout=20)
    yield client
    client.stop()


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_call_tool_polls_a_task_to_its_result(make_server: Callable[..., Any], era: str) -> None:
    server = make_server(era=era)
    with mcp.Client.start(server.stdio()) as client:
        client.await_ready(timeout=20)
        started = time.monotonic()
        result = client.call_tool(
            "task_required", {"seconds": 0.3, "poll_ms": 50, "text": "built"}, timeout=10
        )
        took = time.monotonic() - started
        assert result.text == "built" and not result.is_error
        assert took >= 0.3
    calls = server.received("tools/call")
    if era == "modern":
        caps = calls[0]["params"]["_meta"]["io.modelcontextprotocol/clientCapabilities"]
        assert caps["extensions"] == {EXT: {}}
    else:
        assert calls[0]["params"]["task"] == {}
        assert server.received("tasks/result")
    assert server.received("tasks/get")


def test_poll_traffic_is_one_get_per_poll_interval(modern: mcp.Client) -> None:
    seconds, poll_ms = 1.0, 100
    handle = modern.start_task("task_job", {"seconds": seconds, "poll_ms": poll_ms})
    assert handle.result(timeout=10).text == "done"
    # counted at the server: at most one tasks/get per pollIntervalMs, and it was polled
    gets = [s["gets"] for s in stats(modern).values() if s["status"] == "completed"]
    assert gets and max(gets) <= seconds * 1000 / poll_ms + 1
    assert min(gets) >= seconds * 1000 / poll_ms / 2


def test_outcomes(modern: mcp.Client) -> None:
    args = {"seconds": 0.1, "poll_ms": 50}
    error_result = modern.call_tool("task_job", {**args, "outcome": "error_result"}, timeout=10)
    assert error_result.is_error  # a completed task with isError is a result
    with pytest.raises(mcp.Error) as failed:
        modern.call_tool("task_job", {**args, "outcome": "failed"}, timeout=10)
    assert (failed.value.kind, failed.value.code) == ("server", -32603)
    with pytest.raises(mcp.Error) as cancelled:
        modern.call_tool("task_job", {**args, "outcome": "cancelled"}, timeout=10)
    assert cancelled.value.kind == "cancelled"


def test_input_rounds_go_to_the_handler_once_each(modern: mcp.Client) -> None:
    handle = modern.start_task("task_job", {"seconds": 0.2, "poll_ms": 50, "rounds": 2})
    result = handle.result(timeout=10)
    assert "(answers: " in result.text
    assert sorted(handle.record["answered"]) == handle.record["answered"]
    assert len(handle.record["answered"]) == 2
    updates = [s["updates"] for s in stats(modern).values() if s["status"] == "completed"]
    assert 2 in updates  # one tasks/update per round, though each was polled more than once


def test_a_deadline_sends_tasks_cancel_not_notifications_cancelled(
    modern_http: Any, modern: mcp.Client
) -> None:
    server, _ = modern_http

    def cancelled() -> list[Any]:
        # a listen replaced when the tasks it watches change is cancelled too: not a task's
        notes = server.received("notifications/cancelled")
        ids = [(n.get("params") or {}).get("requestId") for n in notes]
        return [i for i in ids if not (isinstance(i, str) and i.startswith("listen-"))]

    before = len(cancelled())
    started = time.monotonic()
    with pytest.raises(mcp.Error) as err:
        modern.call_tool("task_job", {"seconds": 30, "poll_ms": 50}, timeout=0.5)
    assert (err.value.kind, err.value.reason) == ("timeout", "deadline")
    assert time.monotonic() - started < 2.5
    server.wait_for(lambda e: e.get("method") == "tasks/cancel", timeout=5)
    assert len(cancelled()) == before
    assert any(s["cancels"] == 1 and s["status"] == "cancelled" for s in stats(modern).values())


def test_handle_cancel(modern: mcp.Client) -> None:
    handle = modern.start_task("task_job", {"seconds": 30, "poll_ms": 50})
    assert handle.status() == "working" and not handle.done()
    assert not handle.wait(0.1)
    handle.cancel()
    assert handle.wait(5)
    with pytest.raises(mcp.Error) as err:
        handle.result()
    assert err.value.kind == "cancelled"
    assert handle.status() == "cancelled"


def test_ttl_backstop_is_task_expired(modern: mcp.Client) -> None:
    with pytest.raises(mcp.Error) as err:
        modern.call_tool("task_job", {"seconds": 30, "poll_ms": 50, "ttl_ms": 300}, timeout=10)
    assert (err.value.kind, err.value.reason) in (
        ("timeout", "task_expired"),
        ("unavailable", "task_lost"),  # the server purged it first: -32602
    )


def test_a_task_answer_to_another_request_is_a_protocol_error(
    make_server: Callable[..., Any],
) -> None:
    task = {
        "resultType": "task",
        "taskId": "t-1",
        "status": "working",
        "createdAt": "2026-01-01T00:00:00Z",
        "lastUpdatedAt": "2026-01-01T00:00:00Z",
        "ttlMs": None,
    }
    rules = [
        {"match": {"method": "prompts/get"}, "action": {"result": task}},
        {"match": {"method": "tools/call", "tool": "add"}, "action": {"result": task}},
    ]
    server = make_server(era="modern", rules=rules)
    with mcp.Client.start(server.stdio()) as client:
        client.await_ready(timeout=20)
        with pytest.raises(mcp.Error) as err:
            client.get_prompt("greet", timeout=5)
        assert (err.value.kind, err.value.reason) == ("protocol", "unexpected_task")
        assert "t-1" not in str(err.value)
    with mcp.Client.start(server.stdio(), tasks=False) as client:
        client.await_ready(timeout=20)
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", {"a": 1, "b": 2}, timeout=5)
        # a task to a request that did not declare the extension is an invalid answer
        assert (err.value.kind, err.value.reason) == ("protocol", "unexpected_task")


def test_tasks_false_declares_nothing(modern_http: Any) -> None:
    _server, proc = modern_http
    with mcp.Client.start(mcp.Http(proc.url), tasks=False) as client:
        client.await_ready(timeout=20)
        assert client.call_tool("task_job", {"seconds": 0}, timeout=10).text == "done"
        with pytest.raises(mcp.Error) as err:
            client.call_tool("task_required", {"seconds": 0}, timeout=10)
        assert err.value.code == -32021


def test_a_restarted_stdio_server_loses_the_task(make_server: Callable[..., Any]) -> None:
    import os
    import signal

    server = make_server(era="modern")
    with mcp.Client.start(server.stdio(), backoff=lambda a: 0.01) as client:
        client.await_ready(timeout=20)
        handle = client.start_task("task_job", {"seconds": 30, "poll_ms": 200})
        server.wait_for(lambda e: e.get("method") == "tasks/get", timeout=5)
        os.kill(server.pids()[0], signal.SIGKILL)
        killed = time.monotonic()
        with pytest.raises(mcp.Error) as err:
            handle.result(timeout=10)
        assert (err.value.kind, err.value.reason) == ("unavailable", "task_lost")
        assert time.monotonic() - killed < 2.0  # within one poll after the restart
        assert client.tasks.unfinished() == []


def test_legacy_start_task_asks_an_optional_tool_for_a_task(
    make_server: Callable[..., Any],
) -> None:
    server = make_server(era="legacy")
    with mcp.Client.start(server.stdio()) as client:
        client.await_ready(timeout=20)
        handle = client.start_task("task_job", {"seconds": 0.2, "poll_ms": 50})
        assert handle.record["era"] == "legacy"
        assert handle.result(timeout=10).text == "done"
        # call_tool of the optional tool runs inline
        assert client.call_tool("task_job", {"seconds": 0}, timeout=10).text == "done"
    tasked = [c for c in server.received("tools/call") if "task" in (c.get("params") or {})]
    assert len(tasked) == 1


def test_a_pushed_status_replaces_the_poll_over_http(modern_http: Any, modern: mcp.Client) -> None:
    server, _ = modern_http
    # a poll interval of 5 s: without the push the result would wait for the next poll
    started = time.monotonic()
    handle = modern.start_task("task_job", {"seconds": 0.3, "poll_ms": 5000, "text": "pushed"})
    assert handle.result(timeout=10).text == "pushed"
    assert time.monotonic() - started < 3.0
    listens = server.received("subscriptions/listen")
    assert any("taskIds" in (m["params"].get("notifications") or {}) for m in listens)
    # the task ended on the push: no tasks/get at all (the first poll was due after 5 s)
    assert stats(modern)[handle.record["task_id"]]["gets"] == 0


def test_legacy_outcomes(make_server: Callable[..., Any]) -> None:
    server = make_server(era="legacy")
    args = {"seconds": 0.1, "poll_ms": 50}
    with mcp.Client.start(server.stdio()) as client:
        client.await_ready(timeout=20)
        done = client.call_tool("task_required", {**args, "outcome": "error_result"}, timeout=10)
        assert done.is_error
        with pytest.raises(mcp.Error) as failed:
            client.call_tool("task_required", {**args, "outcome": "failed"}, timeout=10)
        # the JSON-RPC error tasks/result answers for a failed task
        assert (failed.value.kind, failed.value.code, failed.value.message) == (
            "server",
            -32603,
            "task failed",
        )
        with pytest.raises(mcp.Error) as cancelled:
            client.call_tool("task_required", {**args, "outcome": "cancelled"}, timeout=10)
        assert cancelled.value.kind == "cancelled"
