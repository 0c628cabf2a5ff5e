"""A blocked caller reads its own answer from the stdio pipe (``StdioTransport.wait_here``,
docs/performance.md): the answer wakes the caller, not the I/O loop which then wakes it.
Nothing else may change: answers, progress, deadlines, faults, a close while it waits, and
the loop reading the pipe again once the caller is done. Real server processes; every wait
has a deadline.
"""

from __future__ import annotations

import asyncio
import os
import queue
import signal
import threading
import time
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.transports.process import SharedReader

pytestmark = pytest.mark.timeout(60)

DEADLINE = 1.5
LATE = 1.5


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The threads' names each read done in a caller's thread (wait_here)."""
    seen: list[str] = []
    original = SharedReader.read

    def counted(self: SharedReader) -> bool:
        seen.append(threading.current_thread().name)
        return original(self)

    monkeypatch.setattr(SharedReader, "read", counted)
    return seen


def test_sequential_calls_are_read_by_their_caller(make_server, reads) -> None:
    server = make_server()
    client = mcp.Client.start(server.stdio())
    try:
        client.await_ready(timeout=10)
        for i in range(20):
            assert client.call_tool("add", {"a": i, "b": 1}, timeout=10).text == str(i + 1)
        assert reads, "no answer was read in the caller's thread"
        assert set(reads) == {threading.current_thread().name}

        # Given back: the loop reads the pipe for a call it does not wait on in a thread.
        async def aio() -> str:
            return (await client.aio.call_tool("add", {"a": 2, "b": 2}, timeout=10)).text

        before = len(reads)
        assert asyncio.run(aio()) == "4"
        assert len(reads) == before
        # and a caller on another thread takes it in turn
        out: list[str] = []
        t = threading.Thread(
            target=lambda: out.append(client.call_tool("add", {"a": 1, "b": 1}, timeout=10).text)
        )
        t.start()
        t.join(timeout=15)
        assert out == ["2"]
    finally:
        client.stop()


def test_progress_and_notifications_while_the_caller_reads(make_server, reads) -> None:
    server = make_server()
    client = mcp.Client.start(server.stdio())
    try:
        client.await_ready(timeout=10)
        seen: list[Any] = []
        result = client.call_tool(
            "progress", {"steps": 3, "delay": 0.01}, timeout=10, on_progress=seen.append
        )
        assert not result.is_error
        assert [p.progress for p in seen] == [1, 2, 3]
        notes: queue.Queue[Any] = queue.Queue()
        client.subscribe_notifications(notes, ["notifications/message"])
        client.call_tool(
            "notify",
            {"method": "notifications/message", "params": {"level": "info", "data": "x"}},
            timeout=10,
        )
        assert notes.get(timeout=10).params["data"] == "x"
        assert reads
    finally:
        client.stop()


# (rule action, extra server arguments, the outcomes allowed)
FAULTS: dict[str, tuple[Any, list[str], set[str]]] = {
    "crash": ("exit", [], {"transport"}),
    "never": ("drop", [], {"timeout"}),
    "garbage": ("garbage", [], {"timeout"}),
    "wrong_id": ("wrong_id", [], {"timeout"}),
    "respond_twice": ("respond_twice", [], {"ok"}),
    "close_stdout": ("close_stdout", ["--ignore-eof"], {"transport"}),
    "slow_answer": ({"delay": 5}, [], {"timeout"}),
}


@pytest.mark.parametrize("fault", list(FAULTS))
def test_a_lone_call_meets_each_fault(make_server, reads, fault: str) -> None:
    action, extra, allowed = FAULTS[fault]
    rule = {"match": {"tool": "echo"}, "action": action, "times": 1, "process": 1}
    server = make_server(rules=[rule], extra_args=extra)
    client = mcp.Client.start(
        server.stdio(close_grace=0.3), backoff=lambda attempt: 0.02, max_reconnects=None
    )
    try:
        client.await_ready(timeout=10)
        client.call_tool("add", {"a": 0, "b": 0}, timeout=10)
        started = time.monotonic()
        try:
            client.call_tool("echo", {"text": "hi"}, timeout=DEADLINE)
            outcome = "ok"
        except mcp.Error as exc:
            outcome = exc.kind
        took = time.monotonic() - started
        assert outcome in allowed, outcome
        assert took <= DEADLINE + LATE, took
        assert reads
        assert client.await_ready(timeout=10).state == "ready"
        assert client.call_tool("add", {"a": 2, "b": 3}, timeout=5).text == "5"
    finally:
        client.stop()


def test_a_close_ends_the_callers_read_at_once(make_server, reads, monkeypatch) -> None:
    """The server never answers and ignores its stdin's end: the caller, reading the pipe,
    hears of the close from the connection (its wake fd), not when the process is gone."""
    rule = {"match": {"tool": "echo"}, "action": "drop", "times": 1, "process": 1}
    server = make_server(rules=[rule], extra_args=["--ignore-eof"])
    client = mcp.Client.start(server.stdio(close_grace=5))
    client.await_ready(timeout=10)
    client.call_tool("add", {"a": 0, "b": 0}, timeout=10)
    out: list[tuple[str, float]] = []

    def call() -> None:
        started = time.monotonic()
        try:
            client.call_tool("echo", {"text": "hi"}, timeout=30)
            out.append(("ok", time.monotonic() - started))
        except mcp.Error as exc:
            out.append((exc.kind, time.monotonic() - started))

    taken = threading.Event()
    original = SharedReader.take

    def take(self: SharedReader) -> bool:
        got = original(self)
        if got and threading.current_thread().name == "caller":
            taken.set()
        return got

    monkeypatch.setattr(SharedReader, "take", take)
    before = len(reads)
    t = threading.Thread(target=call, name="caller")
    t.start()
    try:
        assert taken.wait(10), "the caller never took the pipe"
        closing = threading.Thread(target=client.close)
        closing.start()
        t.join(timeout=4)
        assert out, "the call was still waiting 4 s after the close"
        assert out[0][0] in {"closed", "transport"}, out
    finally:
        client.stop()
        t.join(timeout=15)
    assert len(reads) == before  # nothing was read: the call ended through its wake fd


def test_ctrl_c_ends_the_callers_read_and_gives_the_pipe_back(make_server, reads) -> None:
    """SIGINT while the main thread reads the pipe for a call the server never answers:
    KeyboardInterrupt reaches the caller at once, and the loop reads the pipe again."""
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("signals go to the main thread")
    rule = {"match": {"tool": "echo"}, "action": "drop", "times": 1, "process": 1}
    server = make_server(rules=[rule])
    client = mcp.Client.start(server.stdio())
    try:
        client.await_ready(timeout=10)
        client.call_tool("add", {"a": 0, "b": 0}, timeout=10)
        before = len(reads)
        timer = threading.Timer(0.5, lambda: os.kill(os.getpid(), signal.SIGINT))
        timer.start()
        started = time.monotonic()
        with pytest.raises(KeyboardInterrupt):
            client.call_tool("echo", {"text": "hi"}, timeout=20)
        assert time.monotonic() - started < 5
        timer.join(timeout=5)

        async def aio() -> str:
            return (await client.aio.call_tool("add", {"a": 2, "b": 2}, timeout=10)).text

        assert asyncio.run(aio()) == "4"  # read by the loop: the pipe was given back
        # A blocking caller takes the pipe again. Not necessarily on its first call: the
        # loop may read a fast answer before the caller has taken the pipe (then the
        # caller finds it on its queue and reads nothing), so up to 20 calls.
        for i in range(20):
            assert client.call_tool("add", {"a": i, "b": 2}, timeout=10).text == str(i + 2)
            if len(reads) > before:
                break
        assert len(reads) > before, "no later call was read in the caller's thread"
    finally:
        client.stop()


class Paused:
    """Once ``armed``, each ``tools/call`` frame's writer is held up for 20 ms right after
    its write (as a thread preempted there is); ``reads`` has each read's thread, with
    whether it carried a tool's answer."""

    def __init__(self) -> None:
        self.armed = False
        self.reads: list[tuple[str, bool]] = []

    def answers(self) -> list[str]:
        return [name for name, answer in self.reads if answer]


@pytest.fixture
def paused_writes(monkeypatch: pytest.MonkeyPatch) -> Paused:
    from conduit_mcp.transports.stdio import StdioTransport

    send_bytes, on_stdout = StdioTransport.send_bytes, StdioTransport._on_stdout
    out = Paused()

    def paused(self: StdioTransport, data: bytes) -> None:
        send_bytes(self, data)
        if out.armed and b'"tools/call"' in data:
            time.sleep(0.02)  # not a wait for an event: the writer's thread held up

    def noted(self: StdioTransport, data: bytes) -> None:
        out.reads.append((threading.current_thread().name, b'"content"' in data))
        on_stdout(self, data)

    monkeypatch.setattr(StdioTransport, "send_bytes", paused)
    monkeypatch.setattr(StdioTransport, "_on_stdout", noted)
    return out


def test_an_answer_back_before_its_caller_waits_is_still_read_by_the_caller(
    make_server, paused_writes
) -> None:
    """The pipe is taken for the caller before its call is written: a server that answers
    while the caller is still held up after its write cannot have the answer read by the
    I/O loop (which would then wake the caller, the path this saves)."""
    server = make_server()
    client = mcp.Client.start(server.stdio())
    try:
        client.await_ready(timeout=10)
        for i in range(3):  # the client's own first fetches done, and their cache stores
            client.call_tool("add", {"a": i, "b": 1}, timeout=10)
        paused_writes.armed = True
        before = len(paused_writes.answers())
        for i in range(10):
            assert client.call_tool("add", {"a": i, "b": 1}, timeout=10).text == str(i + 1)
        answers = paused_writes.answers()[before:]
        assert answers == [threading.current_thread().name] * 10
    finally:
        client.stop()


def test_an_answer_back_before_its_loop_waits_is_still_read_by_the_loop(
    make_server, paused_writes
) -> None:
    """As above for an asyncio caller: the pipe is its loop's before the call is written."""
    server = make_server()
    client = mcp.Client.start(server.stdio())
    try:
        client.await_ready(timeout=10)

        async def calls(n: int) -> list[str]:
            return [
                (await client.aio.call_tool("add", {"a": i, "b": 1}, timeout=10)).text
                for i in range(n)
            ]

        asyncio.run(calls(3))
        paused_writes.armed = True
        before = len(paused_writes.answers())
        assert asyncio.run(calls(10)) == [str(i + 1) for i in range(10)]
        answers = paused_writes.answers()[before:]
        assert answers == [threading.current_thread().name] * 10
    finally:
        client.stop()
