"""The three ways in: blocking, asyncio and Pykka futures, over the same core."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

import pykka
import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(30)


def test_asyncio_calls_never_block_the_loop(make_server, start_client):
    client = start_client(make_server().stdio())

    async def main() -> tuple[str, int]:
        await client.aio.await_ready(timeout=10)
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0.01)

        task = asyncio.create_task(ticker())
        result = await client.aio.call_tool("slow", {"seconds": 0.3})
        stop.set()
        await task
        return result.text, ticks

    text, ticks = asyncio.run(main())
    assert text
    assert ticks >= 10  # the loop kept running during the 0.3 s call


def test_asyncio_front_end_has_the_whole_api(make_server, start_client):
    client = start_client(make_server(page_size=2).stdio())
    loop_thread: list[int] = []

    async def main() -> None:
        await client.aio.await_ready(timeout=10)
        results = await asyncio.gather(
            *(client.aio.call_tool("add", {"a": i, "b": i}) for i in range(20))
        )
        assert [r.text for r in results] == [str(2 * i) for i in range(20)]
        tools = await client.aio.list_all_tools()
        assert "add" in {t.name for t in tools}
        assert (await client.aio.list_tools()).next_cursor is not None
        progress = await client.aio.call_tool(
            "progress",
            {"steps": 2},
            on_progress=lambda p: loop_thread.append(threading.get_ident()),
        )
        assert progress.is_error is False
        assert loop_thread == [threading.get_ident()] * 2  # progress ran on our loop
        with pytest.raises(mcp.Error) as err:
            await client.aio.call_tool("never", {}, timeout=0.2)
        assert err.value.kind == "timeout"
        assert (await client.aio.request("tools/list"))["tools"]

    asyncio.run(main())


class _Caller(pykka.ThreadingActor):
    """An application actor that calls the client without blocking its own thread."""

    def __init__(self, client: mcp.Client) -> None:
        super().__init__()
        self.client = client
        self.progress: list[Any] = []

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, tuple) and message[0] == "conduit_mcp.progress":
            self.progress.append(message[2]["progress"])
            return None
        if message == "call":
            # Returns at once: the future is resolved later by the connection.
            return self.client.futures.call_tool(
                "progress", {"steps": 3}, on_progress=self.actor_ref
            )
        if message == "progress":
            return list(self.progress)
        if message == "ping":
            return "pong"
        return None


def test_a_pykka_actor_calls_through_futures_without_blocking(make_server, start_client):
    server = make_server(rules=[{"match": {"method": "tools/call"}, "action": {"delay": 0.3}}])
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    actor = _Caller.start(client)
    try:
        future = actor.ask("call")
        # The actor is free while the call is in flight.
        assert actor.ask("ping", timeout=0.2) == "pong"
        result = future.get(timeout=10)
        assert isinstance(result, mcp.CallToolResult) and result.is_error is False
        assert actor.ask("progress") == [1, 2, 3]
        with pytest.raises(mcp.Error) as err:
            client.futures.call_tool("never", {}, timeout=0.2).get(timeout=5)
        assert err.value.kind == "timeout"
    finally:
        actor.stop()


def test_futures_front_end_refuses_a_callable_progress(make_server, start_client):
    client = start_client(make_server().stdio())
    with pytest.raises(mcp.Error) as err:
        client.futures.call_tool("add", {"a": 1, "b": 1}, on_progress=print)
    assert (err.value.kind, err.value.reason) == ("argument", "on_progress")


def test_a_caller_never_hangs_even_if_the_connection_cannot_answer(
    make_server, start_client, monkeypatch
):
    from conduit_mcp.actors.connection import Connection

    client = start_client(make_server().stdio())
    client.await_ready(timeout=10)
    # Fault injection: the connection swallows requests (a bug it must survive).
    monkeypatch.setattr(Connection, "_send_call", lambda self, call: None)
    started = time.monotonic()
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", {"a": 1, "b": 1}, timeout=0.2)
    assert err.value.kind == "timeout"

    async def main() -> None:
        with pytest.raises(mcp.Error) as aerr:
            await client.aio.call_tool("add", {"a": 1, "b": 1}, timeout=0.2)
        assert aerr.value.kind == "timeout"

    asyncio.run(main())
    assert time.monotonic() - started < 5  # each gave up at its deadline plus the 1 s grace
