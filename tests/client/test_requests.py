"""The request rules (docs/connection.md, "Requests"), one by one, against a real scripted server subprocess."""

from __future__ import annotations

import os
import signal
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(30)

SLOW_DISCOVER = [{"match": {"method": "server/discover"}, "action": {"delay": 0.6}}]


def test_call_tool_returns_a_typed_result(make_server, start_client):
    client = start_client(make_server().stdio())
    result = client.call_tool("add", {"a": 1, "b": 2})
    assert isinstance(result, mcp.CallToolResult)
    assert (result.text, result.structured_content, result.is_error) == ("3", {"sum": 3}, False)


def test_a_tool_error_is_a_result_not_an_exception(make_server, start_client):
    client = start_client(make_server().stdio())
    assert client.call_tool("fail").is_error is True


def test_a_server_error_is_kind_server_with_its_code(make_server, start_client):
    client = start_client(make_server().stdio())
    with pytest.raises(mcp.Error) as err:
        client.call_tool("error", {"code": -32099, "message": "nope"})
    assert (err.value.kind, err.value.code) == ("server", -32099)


def test_requests_before_ready_are_queued_and_replayed(make_server, start_client):
    server = make_server(rules=SLOW_DISCOVER)
    client = start_client(server.stdio())
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(client.call_tool, "add", {"a": i, "b": 1}) for i in range(4)]
        assert [f.result(timeout=10).text for f in futures] == ["1", "2", "3", "4"]


def test_one_beyond_max_queued_is_refused_at_once(make_server, start_client):
    server = make_server(rules=SLOW_DISCOVER)
    client = start_client(server.stdio(), max_queued=2)
    with ThreadPoolExecutor(2) as pool:
        queued = [pool.submit(client.call_tool, "add", {"a": 1, "b": 1}) for _ in range(2)]
        # wait until both are queued: the server has not answered discover yet, so the
        # only way to know is that a third is refused — retry until the two are counted
        deadline = time.monotonic() + 5
        while True:
            try:
                client.call_tool("add", {"a": 1, "b": 1}, timeout=5)
            except mcp.Error as exc:
                if exc.kind == "overloaded":
                    assert exc.reason == "max_queued"
                    break
                raise
            assert time.monotonic() < deadline, "third request was never refused"
        assert [f.result(timeout=10).text for f in queued] == ["2", "2"]


def test_await_ready_counts_against_max_queued(make_server, start_client):
    server = make_server(rules=SLOW_DISCOVER)
    client = start_client(server.stdio(), max_queued=1)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(client.await_ready, 10)
        with pytest.raises(mcp.Error) as err:
            deadline = time.monotonic() + 5
            while time.monotonic() < deadline:
                client.call_tool("add", {"a": 1, "b": 1}, timeout=5)
        assert err.value.kind == "overloaded"
        assert first.result(timeout=10).state == "ready"


def test_a_queued_request_past_its_deadline_times_out_and_is_never_sent(make_server, start_client):
    server = make_server(rules=[{"match": {"method": "server/discover"}, "action": {"delay": 2.0}}])
    client = start_client(server.stdio())
    started = time.monotonic()
    with pytest.raises(mcp.Error) as err:
        client.call_tool("echo", {"text": "late"}, timeout=0.2)
    assert err.value.kind == "timeout"
    assert time.monotonic() - started < 1.5  # at its deadline, not when ready (2 s)
    client.await_ready(timeout=10)
    client.call_tool("add", {"a": 1, "b": 1})
    assert [m["params"]["name"] for m in server.received("tools/call")] == ["add"]


def test_one_beyond_max_in_flight_is_overloaded(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio(), max_in_flight=2)
    client.await_ready(timeout=10)
    with ThreadPoolExecutor(2) as pool:
        slow = [pool.submit(client.call_tool, "never", {}, timeout=2) for _ in range(2)]
        server.wait_for(lambda e: len(server.received("tools/call")) >= 2, timeout=5)
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", {"a": 1, "b": 1})
        assert (err.value.kind, err.value.reason) == ("overloaded", "max_in_flight")
        for f in slow:
            with pytest.raises(mcp.Error):
                f.result(timeout=5)
    assert client.call_tool("add", {"a": 1, "b": 1}).text == "2"


def test_deadline_cancels_at_the_server_and_times_out(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    started = time.monotonic()
    with pytest.raises(mcp.Error) as err:
        client.call_tool("never", {}, timeout=0.3)
    elapsed = time.monotonic() - started
    assert (err.value.kind, err.value.reason) == ("timeout", "deadline")
    assert 0.25 <= elapsed < 1.0
    call_id = server.received("tools/call")[-1]["id"]
    cancel = server.wait_for(
        lambda e: (
            e.get("method") == "notifications/cancelled" and e["params"]["requestId"] == call_id
        ),
        timeout=5,
    )
    assert cancel["params"]["reason"] == "timeout"


def test_a_caller_that_gives_up_cancels_at_the_server(make_server, start_client):
    import asyncio

    server = make_server()
    client = start_client(server.stdio())
    client.await_ready(timeout=10)

    async def main() -> None:
        task = asyncio.ensure_future(client.aio.call_tool("never", {}, timeout=10))
        await asyncio.get_running_loop().run_in_executor(
            None, lambda: server.wait_for("tools/call", timeout=5)
        )
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(main())
    call_id = server.received("tools/call")[-1]["id"]
    cancel = server.wait_for(
        lambda e: (
            e.get("method") == "notifications/cancelled" and e["params"]["requestId"] == call_id
        ),
        timeout=5,
    )
    assert cancel["params"]["reason"] == "caller_down"


def test_a_progress_callback_that_raises_abandons_the_request(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio())

    def boom(progress: mcp.Progress) -> None:
        raise RuntimeError("user code")

    with pytest.raises(RuntimeError):
        client.call_tool("progress", {"steps": 3, "delay": 0.2}, on_progress=boom)
    assert server.wait_for("notifications/cancelled", timeout=5)


def test_late_responses_are_dropped(make_server, start_client):
    server = make_server(
        rules=[
            {
                "match": {"method": "tools/call", "tool": "echo"},
                "action": {"delay": 0.4},
                "times": 1,
            }
        ]
    )
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    with pytest.raises(mcp.Error) as err:
        client.call_tool("echo", {"text": "slow"}, timeout=0.1)
    assert err.value.kind == "timeout"
    # The late answer arrives while this call is in flight; it must not be taken for it.
    assert client.call_tool("slow", {"seconds": 0.5}).text != "slow"
    assert client.call_tool("echo", {"text": "next"}).text == "next"


def test_a_duplicate_answer_and_a_foreign_id_are_dropped(make_server, start_client):
    server = make_server(
        rules=[
            {
                "match": {"method": "tools/call", "tool": "add"},
                "action": {"respond_twice": True},
                "times": 1,
            },
            {
                "match": {"method": "tools/call", "tool": "echo"},
                "action": {"wrong_id": True},
                "times": 1,
            },
        ]
    )
    client = start_client(server.stdio())
    assert client.call_tool("add", {"a": 1, "b": 1}).text == "2"
    with pytest.raises(mcp.Error) as err:
        client.call_tool("echo", {"text": "x"}, timeout=0.3)
    assert err.value.kind == "timeout"
    assert client.call_tool("add", {"a": 2, "b": 2}).text == "4"
    assert client.status().state == "ready"


def test_killing_the_server_mid_call_fails_it_with_transport_within_a_second(
    make_server, start_client
):
    server = make_server()
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    pid = server.pids()[-1]
    with ThreadPoolExecutor(1) as pool:
        call = pool.submit(client.call_tool, "never", {}, timeout=10)
        server.wait_for("tools/call", timeout=5)
        killed = time.monotonic()
        os.kill(pid, signal.SIGKILL)
        with pytest.raises(mcp.Error) as err:
            call.result(timeout=5)
        assert time.monotonic() - killed < 1.0
    assert err.value.kind == "transport"
    client.wait_for_state(lambda s: s.state == "ready" and server.starts() == 2, timeout=10)
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    # Nothing was retried on the new process.
    second = [e for e in server.received("tools/call") if e.get("pid") != pid]
    assert [e["params"]["name"] for e in second] == ["add"]


def test_ids_are_never_reused_across_reconnects(make_server, start_client):
    server = make_server()
    # request ids only: no tool list, and so no listen, for the output check
    client = start_client(server.stdio(), validate_output=False)
    client.call_tool("add", {"a": 1, "b": 1})
    os.kill(server.pids()[-1], signal.SIGKILL)
    client.wait_for_state(lambda s: s.state == "ready" and server.starts() == 2, timeout=10)
    client.call_tool("add", {"a": 1, "b": 1})
    ids = [
        e["id"]
        for e in server.log()
        if e.get("dir") == "in" and "id" in e and e.get("id") is not None
    ]
    assert len(ids) == len(set(ids))
    assert ids == sorted(ids)


def test_progress_runs_in_the_callers_thread(make_server, start_client):
    client = start_client(make_server().stdio())
    seen: list[tuple[float, float | None, int]] = []
    result = client.call_tool(
        "progress",
        {"steps": 3, "delay": 0.01},
        on_progress=lambda p: seen.append((p.progress, p.total, threading.get_ident())),
    )
    assert result.is_error is False
    assert [(p, t) for p, t, _ in seen] == [(1, 3), (2, 3), (3, 3)]
    assert {tid for _, _, tid in seen} == {threading.get_ident()}


def test_progress_token_is_the_request_id(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio())
    client.call_tool("progress", {"steps": 1}, on_progress=lambda p: None)
    call = server.received("tools/call")[-1]
    assert call["params"]["_meta"]["progressToken"] == call["id"]


def test_a_garbage_line_does_not_break_the_connection(make_server, start_client):
    client = start_client(make_server().stdio())
    assert client.call_tool("garbage").is_error is False
    assert client.call_tool("add", {"a": 1, "b": 1}).text == "2"


def test_a_response_over_max_frame_fails_its_request_at_once(make_server, start_client):
    client = start_client(make_server().stdio(), max_frame=4096)
    began = time.monotonic()
    with pytest.raises(mcp.Error) as err:
        client.call_tool("big", {"size": 100_000}, timeout=10)
    assert time.monotonic() - began < 5  # at once, not after the deadline
    assert (err.value.kind, err.value.reason) == ("protocol", "response_too_large")
    assert "max_frame" in err.value.message
    assert client.call_tool("big", {"size": 100}).text == "x" * 100
    assert client.status().state == "ready"


def test_stderr_is_kept_apart_and_bounded(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio(stderr_limit=64))
    result = client.call_tool("stderr", {"text": "E" * 200 + "tail"})
    assert "tail" not in result.text
    # The answer comes on stdout and the text on stderr: two pipes, read by two readers, so
    # the answer can be here before the stderr reader has run. Wait for it with a deadline.
    deadline = time.monotonic() + 10
    while not client.stderr().rstrip(b"\n").endswith(b"tail"):
        assert time.monotonic() < deadline, f"stderr never ended with the text: {client.stderr()!r}"
        time.sleep(0.01)
    assert len(client.stderr()) <= 64


def test_env_and_cwd_reach_the_server(make_server, start_client, tmp_path):
    server = make_server()
    client = start_client(server.stdio(env={"CONDUIT_TEST_VAR": "here"}, cwd=str(tmp_path)))
    assert client.call_tool("env", {"name": "CONDUIT_TEST_VAR"}).text == "here"
    assert client.call_tool("cwd").text == str(tmp_path)


def test_unserialisable_arguments_fail_the_call_not_the_connection(make_server, start_client):
    client = start_client(make_server().stdio())
    with pytest.raises(mcp.Error) as err:
        client.call_tool("echo", {"text": object()})
    assert err.value.kind == "argument"
    assert client.call_tool("add", {"a": 1, "b": 1}).text == "2"


def test_bad_arguments_are_refused_in_the_caller(make_server, start_client):
    client = start_client(make_server().stdio())
    for call in (
        lambda: client.call_tool(""),
        lambda: client.call_tool("x", [1, 2]),
        lambda: client.call_tool("x", timeout=-1),
        lambda: client.list_tools(3),
    ):
        with pytest.raises(mcp.Error) as err:
            call()
        assert err.value.kind == "argument"


def test_lists_one_page_and_all_pages(make_server, start_client):
    client = start_client(make_server(page_size=3).stdio())
    first = client.list_tools()
    assert len(first.items) == 3 and first.next_cursor is not None
    every = client.list_all_tools()
    assert len(every) > 3
    assert [t.name for t in every][:3] == [t.name for t in first.items]
    assert "add" in {t.name for t in every}


def test_prompts_resources_templates_and_completion(make_server, start_client):
    client = start_client(make_server().stdio())
    assert "greet" in {p.name for p in client.list_all_prompts()}
    prompt = client.get_prompt("greet", {"name": "Ada"})
    assert "Ada" in str(prompt.messages)
    assert "test://static/hello" in {r.uri for r in client.list_all_resources()}
    assert client.read_resource("test://static/hello").contents
    assert client.list_all_resource_templates()[0].uri_template == "test://item/{id}"
    done = client.complete({"type": "ref/prompt", "name": "greet"}, {"name": "name", "value": "A"})
    assert isinstance(done, mcp.CompleteResult)


def test_generic_request_and_ping(make_server, start_client):
    client = start_client(make_server().stdio())
    assert "tools" in client.request("tools/list")
    assert client.ping() is None
    legacy = start_client(make_server().stdio(), protocol="legacy")
    assert legacy.ping() is None


def test_a_legacy_server_ping_is_answered_and_unknown_requests_refused(make_server, start_client):
    client = start_client(make_server().stdio(), protocol="legacy")
    pong = client.call_tool("client_request", {"method": "ping"})
    assert pong.is_error is False and "{}" in pong.text
    refused = client.call_tool("client_request", {"method": "vendor/unknown"})
    assert "-32601" in refused.text  # the client answered Method not found


def test_a_server_whose_cursors_never_end_is_cut_off(make_server, start_client):
    endless = {"result": {"tools": [], "nextCursor": "", "resultType": "complete"}}
    server = make_server(rules=[{"match": {"method": "tools/list"}, "action": endless}])
    client = start_client(server.stdio())
    with pytest.raises(mcp.Error) as err:
        client.list_all_tools(timeout=30)
    assert (err.value.kind, err.value.reason) == ("protocol", "too_many_pages")
    # an empty-string cursor is a cursor, not the end: it was sent back every time
    assert server.received("tools/list")[-1]["params"]["cursor"] == ""


def test_tool_arguments_must_be_a_mapping_with_string_keys(make_server, start_client):
    """Checked before anything is sent, in a copy: a dict of plain ``str`` keys (the common
    case, checked in C) and any other mapping are accepted; a non-string key or a
    non-mapping is an ``argument`` error naming it."""
    import types

    client = start_client(make_server().stdio())
    client.await_ready(timeout=10)
    arguments = {"a": 1, "b": 2}
    assert client.call_tool("add", arguments).text == "3"
    assert arguments == {"a": 1, "b": 2}  # the caller's dict is not changed
    assert client.call_tool("add", types.MappingProxyType({"a": 3, "b": 2})).text == "5"
    for bad in ({"a": 1, 2: 2}, {(1,): 1}, [("a", 1)], "a=1"):
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", bad)
        assert (err.value.kind, err.value.reason) == ("argument", "arguments")
        assert "string keys" in str(err.value)
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", {"a": 1, "b": 2}, meta={1: "x"})
    assert (err.value.kind, err.value.reason) == ("argument", "meta")
    assert client.call_tool("add", {"a": 1, "b": 1}).text == "2"
