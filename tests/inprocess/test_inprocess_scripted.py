"""``InProcess`` with the scripted server: the whole client over a server object in this
process (both eras, the cache, notifications, the handler, progress, reconnects, limits),
through the public API (docs/inprocess.md)."""

from __future__ import annotations

import asyncio
import logging
import os
import queue
import time
from typing import Any

import pytest

import conduit_mcp as mcp

from .conftest import server_threads, wait_no_server_thread

pytestmark = pytest.mark.timeout(60)

TOOLS_CHANGED = "notifications/tools/list_changed"


def wait_note(notes: queue.Queue[Any], method: str, timeout: float = 5.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"no {method} within {timeout} s"
        try:
            note = notes.get(timeout=left)
        except queue.Empty:
            continue
        if note.method == method:
            return note


@pytest.mark.parametrize(("protocol", "era"), [("auto", "modern"), ("legacy", "legacy")])
def test_both_eras_over_a_server_in_this_process(
    make_server: Any, start_client: Any, protocol: str, era: str
) -> None:
    server = make_server()
    client = start_client(server.inprocess(), protocol=protocol)
    result = client.call_tool("add", {"a": 2, "b": 3})
    assert result.structured_content == {"sum": 5}
    assert client.status().era == era
    # the same process: the server's pid is ours, and no subprocess was started
    assert client.call_tool("pid", {}).text == str(os.getpid())
    assert server.received("tools/call")[0]["params"]["arguments"] == {"a": 2, "b": 3}
    assert server.starts() == 1
    assert (
        client.get_prompt("greet", {"name": "Ada"}).messages[0]["content"]["text"] == "Hello, Ada!"
    )
    assert client.read_resource("test://static/hello").contents[0]["text"] == "Hello, world!"


def test_the_cache_follows_the_servers_list_changed(make_server: Any, start_client: Any) -> None:
    server = make_server(extra_args=["--ttl-ms", "60000"])
    client = start_client(mcp.InProcess(server))
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[TOOLS_CHANGED])
    assert "dyn_0" not in [t.name for t in client.list_all_tools()]
    client.list_all_tools()  # fresh: served from the cache
    assert len(server.received("tools/list")) == 1
    client.await_listening(timeout=5)
    client.call_tool("add_tool", {"name": "dyn_0"})
    wait_note(notes, TOOLS_CHANGED)
    assert "dyn_0" in [t.name for t in client.list_all_tools()]
    assert client.call_tool("dyn_0", {}).text == "dyn_0 called"


class Assistant(mcp.Handler):
    def create_message(self, request: mcp.SamplingRequest, ctx: mcp.HandlerContext) -> Any:
        return mcp.SamplingResult("Paris", model="test-model")

    def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
        return mcp.ElicitResult.accept({"name": "octocat"})


SAMPLE = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Capital?"}}],
        "maxTokens": 5,
    },
}
ELICIT = {
    "method": "elicitation/create",
    "params": {
        "message": "login?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
def test_the_handler_answers_what_the_server_asks(
    make_server: Any, start_client: Any, protocol: str
) -> None:
    """Legacy: real server-to-client requests; modern: input_required rounds."""
    client = start_client(mcp.InProcess(make_server()), protocol=protocol, handler=Assistant())
    sampled = client.call_tool("client_request", SAMPLE).structured_content["response"]
    assert sampled["content"] == {"type": "text", "text": "Paris"}
    elicited = client.call_tool("client_request", ELICIT).structured_content["response"]
    assert elicited == {"action": "accept", "content": {"name": "octocat"}}


def test_progress_reaches_the_caller(make_server: Any, start_client: Any) -> None:
    client = start_client(mcp.InProcess(make_server()))
    seen: list[Any] = []
    result = client.call_tool("progress", {"steps": 3, "delay": 0}, on_progress=seen.append)
    assert result.text == "done 3 steps"
    assert [p.progress for p in seen] == [1, 2, 3]


def test_a_server_that_exits_is_a_lost_connection_and_a_fresh_session(
    make_server: Any, start_client: Any
) -> None:
    server = make_server()
    client = start_client(mcp.InProcess(server))
    client.call_tool("echo", {"text": "warm"})
    with pytest.raises(mcp.Error) as err:
        client.call_tool("crash", {"code": 3})
    assert (err.value.kind, err.value.reason) == ("transport", "exit")
    assert "3" in err.value.message
    assert client.call_tool("add", {"a": 1, "b": 1}).structured_content == {"sum": 2}
    assert server.starts() == 2
    # the log tells the first session's end as the crash, once (as a process's would)
    assert [e["code"] for e in server.events("exit")] == [3]
    assert len(server_threads()) >= 1


def test_a_server_that_closes_its_output_fails_what_is_pending(
    make_server: Any, start_client: Any
) -> None:
    rules = [{"match": {"tool": "echo", "nth": 2}, "action": {"close_stdout": True}}]
    server = make_server(rules=rules)
    client = start_client(mcp.InProcess(server))
    client.call_tool("echo", {"text": "one"})
    started = time.monotonic()
    with pytest.raises(mcp.Error) as err:
        client.call_tool("echo", {"text": "two"}, timeout=30)
    assert (err.value.kind, err.value.reason) == ("transport", "output_closed")
    assert time.monotonic() - started < 10  # at once, not at the call's deadline
    assert client.call_tool("echo", {"text": "three"}).text == "three"


def test_a_response_over_max_frame_fails_its_call_at_once(
    make_server: Any, start_client: Any
) -> None:
    limit = 64 * 1024
    client = start_client(mcp.InProcess(make_server()), max_frame=limit)
    assert len(client.call_tool("big", {"size": limit - 1024}).text) == limit - 1024
    with pytest.raises(mcp.Error) as err:
        client.call_tool("big", {"size": limit}, timeout=30)
    assert (err.value.kind, err.value.reason) == ("protocol", "response_too_large")
    assert client.call_tool("echo", {"text": "still up"}).text == "still up"


def test_a_garbage_frame_leaves_the_connection_up(make_server: Any, start_client: Any) -> None:
    client = start_client(mcp.InProcess(make_server()))
    assert client.call_tool("garbage", {}).is_error is False
    assert client.call_tool("echo", {"text": "after"}).text == "after"


def test_unserialisable_arguments_are_refused_before_anything_is_sent(
    make_server: Any, start_client: Any
) -> None:
    server = make_server()
    client = start_client(mcp.InProcess(server))
    with pytest.raises(mcp.Error) as err:
        client.call_tool("echo", {"text": object()})
    assert err.value.kind == "argument"
    assert client.call_tool("echo", {"text": "ok"}).text == "ok"
    assert len(server.received("tools/call")) == 1


def test_stop_ends_the_servers_thread_and_session(make_server: Any) -> None:
    server = make_server()
    client = mcp.Client.start(mcp.InProcess(server))
    client.call_tool("echo", {"text": "x"})
    assert server_threads()
    client.stop()
    wait_no_server_thread()
    assert server.events("exit")[-1]["reason"] == "eof"


def test_a_pending_call_fails_closed_when_the_client_stops(make_server: Any) -> None:
    client = mcp.Client.start(mcp.InProcess(make_server()))
    client.await_ready(timeout=10)
    future = client.futures.call_tool("never", {})
    client.stop()
    with pytest.raises(mcp.Error) as err:
        future.get(timeout=10)
    assert err.value.kind == "closed"
    wait_no_server_thread()


def test_the_asyncio_front_over_inprocess(make_server: Any) -> None:
    server = make_server()

    async def main() -> tuple[Any, ...]:
        async with mcp.Client.start(mcp.InProcess(server)).aio as client:
            ticks = 0

            async def tick() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await asyncio.sleep(0.001)

            ticker = asyncio.get_running_loop().create_task(tick())
            slow = await client.call_tool("slow", {"seconds": 0.2})
            ticker.cancel()
            both = await asyncio.gather(
                client.call_tool("add", {"a": 1, "b": 2}), client.call_tool("echo", {"text": "e"})
            )
            return slow.text, ticks, both[0].structured_content, both[1].text

    _, ticks, summed, echoed = asyncio.run(main())
    assert ticks > 20  # the caller's loop ran while the server worked
    assert (summed, echoed) == ({"sum": 3}, "e")
    wait_no_server_thread()


def test_the_spec_checks_its_arguments(make_server: Any) -> None:
    with pytest.raises(mcp.Error) as err:
        mcp.InProcess(object())
    assert (err.value.kind, err.value.reason) == ("config", "inprocess.server")
    assert "ScriptedServer" in err.value.message and "FastMCP" in err.value.message
    for bad in (-0.001, True, "1", float("nan")):
        with pytest.raises(mcp.Error) as err:
            mcp.InProcess(make_server(), close_grace=bad)
        assert (err.value.kind, err.value.reason) == ("config", "inprocess.close_grace")
    assert mcp.InProcess(make_server(), close_grace=0).close_grace == 0


def test_nothing_of_a_call_reaches_a_log_or_a_repr(
    make_server: Any, start_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "s3cret-argument-value"
    server = make_server()
    spec = mcp.InProcess(server)
    assert repr(spec) == "InProcess(server='conduit_mcp.testing.ScriptedServer', close_grace=2.0)"
    with caplog.at_level(logging.DEBUG, logger="conduit_mcp"):
        client = start_client(spec)
        assert client.call_tool("echo", {"text": secret}).text == secret
        with pytest.raises(mcp.Error) as err:
            client.call_tool("crash", {"code": 1, "note": secret})
        client.call_tool("echo", {"text": "after"})
    assert secret not in caplog.text
    assert secret not in str(err.value) and secret not in repr(err.value)
