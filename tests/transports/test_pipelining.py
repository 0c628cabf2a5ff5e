"""Pipelining (issue 23): a burst of requests is written with one syscall (the stdio
transport's cork/flush, driven by the connection), and the answers of one read settle an
asyncio caller loop's futures with one wake-up. Real pipes, a real server process, real
loops; every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import os
import sys
import textwrap
import threading
from pathlib import Path
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.replies import AsyncReply
from conduit_mcp.transports import loop as io_loop
from conduit_mcp.transports.stdio import Stdio, StdioTransport

pytestmark = pytest.mark.timeout(30)

# Answers tools/call "echo" with "<i>:<lines in the read that carried the request>".
SERVER = textwrap.dedent(
    """
    import json, os, sys
    rest = b""
    while True:
        chunk = os.read(0, 1 << 20)
        if not chunk:
            break
        lines = (rest + chunk).split(b"\\n")
        rest = lines.pop()
        lines = [line for line in lines if line.strip()]
        out = []
        for line in lines:
            msg = json.loads(line)
            if "id" not in msg or "method" not in msg:
                continue
            method = msg["method"]
            if method == "initialize":
                result = {"protocolVersion": msg["params"]["protocolVersion"],
                          "capabilities": {"tools": {}},
                          "serverInfo": {"name": "lines", "version": "1"}}
            elif method == "tools/call":
                i = msg["params"]["arguments"]["i"]
                result = {"content": [{"type": "text", "text": f"{i}:{len(lines)}"}],
                          "isError": False}
            else:
                out.append({"jsonrpc": "2.0", "id": msg["id"],
                            "error": {"code": -32601, "message": "no"}})
                continue
            out.append({"jsonrpc": "2.0", "id": msg["id"], "result": result})
        data = b"".join(json.dumps(m).encode() + b"\\n" for m in out)
        while data:
            data = data[os.write(1, data):]
    """
)


@pytest.fixture(scope="module")
def client(tmp_path_factory: pytest.TempPathFactory) -> Any:
    script = Path(tmp_path_factory.mktemp("pipelining")) / "lines_server.py"
    script.write_text(SERVER)
    c = mcp.Client.start(mcp.Stdio(sys.executable, [str(script)]), protocol="legacy")
    c.await_ready(timeout=15)
    yield c
    c.stop()


def _pipe_transport() -> tuple[StdioTransport, int, int]:
    read_fd, write_fd = os.pipe()
    os.set_blocking(write_fd, False)
    os.set_blocking(read_fd, False)
    transport = StdioTransport(Stdio("true"), None, 1, max_frame=1024)
    transport._fd = write_fd  # what _spawn sets once the process runs
    return transport, read_fd, write_fd


def test_a_corked_transport_writes_nothing_until_flush_then_everything_at_once() -> None:
    transport, read_fd, write_fd = _pipe_transport()
    try:
        transport.cork()
        transport.send({"jsonrpc": "2.0", "id": 1, "method": "ping"})
        transport.cancel(1, "gave up")  # a notification keeps its place behind the request
        transport.send({"jsonrpc": "2.0", "id": 2, "method": "ping"})
        with pytest.raises(BlockingIOError):
            os.read(read_fd, 4096)  # held: not one byte written yet
        transport.flush()
        data = os.read(read_fd, 4096)
        lines = data.splitlines()
        assert [line[:30] for line in lines] == [
            b'{"jsonrpc":"2.0","id":1,"metho',
            b'{"jsonrpc":"2.0","method":"not',
            b'{"jsonrpc":"2.0","id":2,"metho',
        ]
        transport.send({"jsonrpc": "2.0", "id": 3, "method": "ping"})  # uncorked: at once
        assert os.read(read_fd, 4096).startswith(b'{"jsonrpc":"2.0","id":3,')
    finally:
        transport._fd = None
        os.close(read_fd)
        os.close(write_fd)


def test_32_tasks_and_32_threads_each_get_their_own_answer_once(client: Any) -> None:
    async def burst() -> list[str]:
        async def one(i: int) -> str:
            result = await client.aio.call_tool("echo", {"i": i}, timeout=10)
            return str(result.text)

        return await asyncio.gather(*(one(i) for i in range(64)))

    texts = asyncio.run(burst())
    assert [int(t.split(":")[0]) for t in texts] == list(range(64))
    # Pipelined: some read of the server carried more than one request.
    assert max(int(t.split(":")[1]) for t in texts) > 1

    got: dict[int, str] = {}
    errors: list[BaseException] = []

    def caller(i: int) -> None:
        try:
            got[i] = str(client.call_tool("echo", {"i": 100 + i}, timeout=10).text)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=caller, args=(i,)) for i in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(15)
    assert not errors
    assert sorted(int(v.split(":")[0]) for v in got.values()) == [100 + i for i in range(32)]


def test_answers_of_one_io_loop_turn_wake_a_caller_loop_once() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        wakes = 0
        real = loop.call_soon_threadsafe

        def counting(*args: Any, **kwargs: Any) -> Any:
            nonlocal wakes
            wakes += 1
            return real(*args, **kwargs)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign]
        futures = [loop.create_future() for _ in range(10)]
        replies = [AsyncReply(loop, f) for f in futures]

        def answer_all() -> None:  # what the reader does with one read: on the I/O loop
            for i, reply in enumerate(replies):
                if i == 3:
                    reply.fail_soon(mcp.Error("protocol", "server_error", "three"))
                else:
                    reply.ok_soon({"i": i})
            replies[0].ok_soon({"i": "again"})  # answered already: ignored

        io_loop.call_soon(answer_all)
        done = await asyncio.wait_for(asyncio.gather(*futures, return_exceptions=True), 10)
        assert wakes == 1
        assert [d if i == 3 else d["i"] for i, d in enumerate(done)][:3] == [0, 1, 2]
        assert isinstance(done[3], mcp.Error) and str(done[3]).endswith("three")
        assert [d["i"] for d in done[4:]] == list(range(4, 10))

    asyncio.run(main())


def test_an_answer_settled_outside_any_loop_still_reaches_its_caller() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        reply = AsyncReply(loop, future)
        # an in-process server's own thread: no loop runs there
        threading.Thread(target=reply.ok_soon, args=({"ok": 1},)).start()
        assert await asyncio.wait_for(future, 10) == {"ok": 1}

    asyncio.run(main())


def test_the_calls_32_tasks_make_in_one_loop_turn_go_out_together(client: Any) -> None:
    """Each asyncio call is sent by its own loop (no pool worker), but not one write each:
    the calls the tasks make in one turn of the loop go in one batch (Handle.tell_soon)."""

    async def burst() -> list[str]:
        await client.aio.call_tool("echo", {"i": -1}, timeout=10)  # warm, and idle again

        async def one(i: int) -> str:
            result = await client.aio.call_tool("echo", {"i": i}, timeout=10)
            return str(result.text)

        return await asyncio.gather(*(one(i) for i in range(32)))

    texts = asyncio.run(burst())
    assert [int(t.split(":")[0]) for t in texts] == list(range(32))
    # Each answer says how many requests the server's read carried: the reads add up to
    # sum(1/n). One write per call would be 32 reads; the first call goes at once (no
    # batch to wait for), the 31 others in one write.
    reads = sum(1 / int(t.split(":")[1]) for t in texts)
    assert reads <= 4, texts


def test_one_turn_of_calls_to_many_clients_goes_out_per_client_in_order(
    tmp_path: Path,
) -> None:
    """A gateway's fan-out: one loop turn makes calls to several clients, interleaved. Each
    client's calls of the turn go out together, in the order they were made, and each
    caller gets its own answer (Handle.tell_soon groups the turn by connection)."""
    script = tmp_path / "lines.py"
    script.write_text(SERVER)
    clients = [
        mcp.Client.start(mcp.Stdio(sys.executable, [str(script)]), protocol="legacy")
        for _ in range(3)
    ]
    try:
        for c in clients:
            c.await_ready(timeout=10)

        async def fan_out() -> list[list[str]]:
            for c in clients:  # warm, and idle again
                await c.aio.call_tool("echo", {"i": -1}, timeout=10)

            async def one(c: Any, i: int) -> str:
                return str((await c.aio.call_tool("echo", {"i": i}, timeout=10)).text)

            # interleaved: client 0, 1, 2, 0, 1, 2, ...
            tasks = [one(clients[i % 3], i) for i in range(30)]
            texts = await asyncio.gather(*tasks)
            return [list(texts[k::3]) for k in range(3)]

        per_client = asyncio.run(fan_out())
        for k, texts in enumerate(per_client):
            assert [int(t.split(":")[0]) for t in texts] == list(range(k, 30, 3))
            # one write per call would be 10 reads for a client; the turn's calls went
            # together (the first of the turn's may go at once, alone)
            assert sum(1 / int(t.split(":")[1]) for t in texts) <= 3, texts
    finally:
        mcp.Client.stop_all(clients, timeout=10)
