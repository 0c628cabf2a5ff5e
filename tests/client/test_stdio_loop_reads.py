"""An asyncio caller's loop reads the answer to its lone stdio call itself
(``transports/loop_reads.py``, docs/performance.md): the answer wakes the caller's loop, not
the I/O loop which then wakes it. Nothing else may change: answers, progress, notifications,
deadlines, faults, a close, a cancelled task, two loops on one client; and what the server
sends is still read when the application's loop is blocked, stopped or closed while it holds
the pipe (the watchdog). Real server processes; every wait has a deadline.
"""

from __future__ import annotations

import asyncio
import os
import queue
import threading
import time
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.transports.loop_reads import WATCH_EVERY
from conduit_mcp.transports.process import SharedReader

pytestmark = pytest.mark.timeout(60)

DEADLINE = 1.5
LATE = 1.5


class Seen:
    """What the monkeypatched reader saw: the threads its loop reads ran in, and each
    reader a loop took (with an event per take)."""

    def __init__(self) -> None:
        self.reads: list[str] = []
        self.readers: list[SharedReader] = []
        self.taken = threading.Event()


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> Seen:
    out = Seen()
    read_for, take_for = SharedReader.read_for, SharedReader.take_for

    def counted(self: SharedReader, lp: Any) -> None:
        out.reads.append(threading.current_thread().name)
        read_for(self, lp)

    def took(self: SharedReader, lp: Any, token: Any, watch: bool = True) -> bool:
        got = take_for(self, lp, token, watch)
        if got:
            out.readers.append(self)
            out.taken.set()
        return got

    monkeypatch.setattr(SharedReader, "read_for", counted)
    monkeypatch.setattr(SharedReader, "take_for", took)
    return out


def until(check: Any, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.01)
    return bool(check())


async def taken(seen: Seen, seconds: float = 10.0) -> None:
    """Wait (on the loop, never blocking it) until a loop has taken the pipe."""
    deadline = time.monotonic() + seconds
    while not seen.taken.is_set():
        assert time.monotonic() < deadline, "no loop took the pipe"
        await asyncio.sleep(0.005)


async def held_call(client: mcp.Client, seen: Seen, seconds: float) -> asyncio.Future[Any]:
    """A ``slow`` call whose pipe this loop still holds once it is sent (not a given: the
    client's own list fetches may be in flight beside it, and then the loop does not keep
    the pipe): up to ten tries."""
    for _ in range(10):
        seen.taken.clear()
        task = asyncio.ensure_future(client.aio.call_tool("slow", {"seconds": seconds}, timeout=10))
        await taken(seen)
        if seen.readers[-1].held_by_loop():
            return task
        await asyncio.wait_for(task, 10)
    raise AssertionError("the loop never kept the pipe for its call")


def test_sequential_aio_calls_are_read_by_their_loop(make_server, seen) -> None:
    server = make_server()
    client = mcp.Client.start(server.stdio())
    try:
        client.await_ready(timeout=10)

        async def calls() -> list[str]:
            return [
                (await client.aio.call_tool("add", {"a": i, "b": 1}, timeout=10)).text
                for i in range(20)
            ]

        assert asyncio.run(calls()) == [str(i + 1) for i in range(20)]
        assert seen.reads, "no answer was read on the caller's loop"
        assert set(seen.reads) == {threading.current_thread().name}
        assert seen.readers and not any(r.held_by_loop() for r in seen.readers)
        # Given back: a blocking call, and a loop in another thread, are answered.
        assert client.call_tool("add", {"a": 1, "b": 1}, timeout=10).text == "2"
        out: list[str] = []

        def other() -> None:
            async def one() -> str:
                return (await client.aio.call_tool("add", {"a": 3, "b": 4}, timeout=10)).text

            out.append(asyncio.run(one()))

        t = threading.Thread(target=other, name="other-loop")
        t.start()
        t.join(timeout=15)
        assert out == ["7"]
    finally:
        client.stop()


def test_progress_and_a_notification_while_the_loop_reads(make_server, seen) -> None:
    server = make_server()
    client = mcp.Client.start(server.stdio())
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, ["notifications/message"])
    try:
        client.await_ready(timeout=10)
        got: list[Any] = []

        async def calls() -> tuple[bool, str]:
            result = await client.aio.call_tool(
                "progress", {"steps": 3, "delay": 0.01}, timeout=10, on_progress=got.append
            )
            await client.aio.call_tool(
                "notify",
                {"method": "notifications/message", "params": {"level": "info", "data": "x"}},
                timeout=10,
            )
            after = (await client.aio.call_tool("add", {"a": 2, "b": 2}, timeout=10)).text
            return result.is_error, after

        assert asyncio.run(calls()) == (False, "4")
        assert [p.progress for p in got] == [1, 2, 3]
        assert notes.get(timeout=10).params["data"] == "x"
        assert seen.reads
        assert not any(r.held_by_loop() for r in seen.readers)
    finally:
        client.stop()


def test_progress_read_with_its_answer_runs_before_the_call_returns(make_server, seen) -> None:
    """The server writes its progress and the result at once, so the caller's loop reads
    them together: a future with no progress to run is settled in the read's own callback,
    but this one only at the loop's next turn, after the progress callback was run."""
    server = make_server()
    client = mcp.Client.start(server.stdio())
    try:
        client.await_ready(timeout=10)
        rounds: list[list[float]] = []

        async def calls() -> None:
            for _ in range(10):
                got: list[Any] = []
                await client.aio.call_tool(
                    "progress", {"steps": 5, "delay": 0}, timeout=10, on_progress=got.append
                )
                rounds.append([p.progress for p in got])
                # and a call with no progress after it, settled in the read's callback
                assert (await client.aio.call_tool("add", {"a": 2, "b": 2})).text == "4"

        asyncio.run(calls())
        assert rounds == [[1, 2, 3, 4, 5]] * 10
        assert seen.reads
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
def test_a_lone_aio_call_meets_each_fault(make_server, seen, fault: str) -> None:
    action, extra, allowed = FAULTS[fault]
    rule = {"match": {"tool": "echo"}, "action": action, "times": 1, "process": 1}
    server = make_server(rules=[rule], extra_args=extra)
    client = mcp.Client.start(
        server.stdio(close_grace=0.3), backoff=lambda attempt: 0.02, max_reconnects=None
    )

    async def faulty() -> tuple[str, float]:
        await client.aio.call_tool("add", {"a": 0, "b": 0}, timeout=10)
        started = time.monotonic()
        try:
            await client.aio.call_tool("echo", {"text": "hi"}, timeout=DEADLINE)
            outcome = "ok"
        except mcp.Error as exc:
            outcome = exc.kind
        return outcome, time.monotonic() - started

    try:
        client.await_ready(timeout=10)
        outcome, took = asyncio.run(faulty())
        assert outcome in allowed, outcome
        assert took <= DEADLINE + LATE, took
        assert seen.readers
        assert until(lambda: not any(r.held_by_loop() for r in seen.readers), 5)
        assert client.await_ready(timeout=10).state == "ready"
        assert client.call_tool("add", {"a": 2, "b": 3}, timeout=5).text == "5"
    finally:
        client.stop()


def test_a_close_ends_the_loops_wait_at_once(make_server, seen) -> None:
    """The server never answers and ignores its stdin's end: the awaiting task hears of the
    close from the connection, not when the process is gone."""
    rule = {"match": {"tool": "echo"}, "action": "drop", "times": 1, "process": 1}
    server = make_server(rules=[rule], extra_args=["--ignore-eof"])
    client = mcp.Client.start(server.stdio(close_grace=5))
    client.await_ready(timeout=10)

    async def call() -> tuple[str, float]:
        await client.aio.call_tool("add", {"a": 0, "b": 0}, timeout=10)
        seen.taken.clear()
        task = asyncio.ensure_future(client.aio.call_tool("echo", {"text": "hi"}, timeout=30))
        await taken(seen)
        closing = threading.Thread(target=client.close)
        closing.start()
        started = time.monotonic()
        try:
            await asyncio.wait_for(task, 4)
            return "ok", time.monotonic() - started
        except mcp.Error as exc:
            return exc.kind, time.monotonic() - started
        finally:
            closing.join(timeout=10)

    try:
        kind, took = asyncio.run(call())
        assert kind in {"closed", "transport"}, kind
        assert took < 4
        assert not any(r.held_by_loop() for r in seen.readers)
    finally:
        client.stop()


def test_the_awaiting_task_cancelled_gives_the_pipe_back(make_server, seen) -> None:
    server = make_server()
    client = mcp.Client.start(server.stdio())

    async def cancelled() -> bool:
        seen.taken.clear()
        task = asyncio.ensure_future(client.aio.call_tool("never", {}, timeout=30))
        await taken(seen)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            return True
        return False

    try:
        client.await_ready(timeout=10)
        assert asyncio.run(cancelled())
        assert not any(r.held_by_loop() for r in seen.readers)
        started = time.monotonic()
        assert client.call_tool("add", {"a": 1, "b": 2}, timeout=10).text == "3"
        assert time.monotonic() - started < 2
    finally:
        client.stop()


def test_two_loops_on_one_client(make_server, seen) -> None:
    """A loop holds the pipe for a slow call; another loop's calls, in flight beside it,
    are read by the I/O loop (the pipe is given back at their send) and answered at once."""
    server = make_server()
    client = mcp.Client.start(server.stdio())
    slow: list[str] = []
    holding = threading.Event()

    def first() -> None:
        async def one() -> str:
            task = await held_call(client, seen, 1.0)
            holding.set()
            return (await task).text

        slow.append(asyncio.run(one()))

    try:
        client.await_ready(timeout=10)
        t = threading.Thread(target=first, name="first-loop")
        t.start()
        assert holding.wait(10)

        async def quick() -> list[float]:
            took = []
            for i in range(10):
                started = time.monotonic()
                answer = await client.aio.call_tool("add", {"a": i, "b": 0}, timeout=10)
                assert answer.text == str(i)
                took.append(time.monotonic() - started)
            return took

        took = asyncio.run(quick())
        assert max(took) < 0.5, took
        t.join(timeout=15)
        assert len(slow) == 1
    finally:
        client.stop()


def test_a_blocked_loop_does_not_keep_the_server_waiting(make_server, seen) -> None:
    """The loop holding the pipe blocks (a task that never yields) before the server writes:
    the watchdog takes the pipe back, so the server's notification reaches a subscriber on
    another thread while the loop is still blocked, and the call's answer is kept for it."""
    rule = {"match": {"tool": "notify"}, "action": {"delay": 0.3}, "times": 1}
    server = make_server(rules=[rule])
    client = mcp.Client.start(server.stdio())
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, ["notifications/message"])

    async def blocked() -> tuple[Any, float, str]:
        seen.taken.clear()
        task = asyncio.ensure_future(
            client.aio.call_tool(
                "notify",
                {"method": "notifications/message", "params": {"level": "info", "data": "y"}},
                timeout=10,
            )
        )
        await taken(seen)
        started = time.monotonic()
        try:
            # Blocks this loop on purpose: only another thread can read the pipe now.
            note = notes.get(timeout=5)
        except queue.Empty:
            note = None
        heard = time.monotonic() - started
        result = await asyncio.wait_for(task, 5)
        return note, heard, "error" if result.is_error else "ok"

    try:
        client.await_ready(timeout=10)
        note, heard, outcome = asyncio.run(blocked())
        assert note is not None, "the notification was not read while the loop was blocked"
        assert note.params["data"] == "y"
        assert heard < 0.3 + 20 * WATCH_EVERY, heard
        assert outcome == "ok"
        assert not any(r.held_by_loop() for r in seen.readers)
    finally:
        client.stop()


def test_a_loop_that_stops_running_while_it_holds_the_pipe(make_server, seen) -> None:
    """``run_until_complete`` returns with the call still awaited: the loop no longer runs,
    the answer comes and stays unread there, and the watchdog takes the pipe back."""
    server = make_server()
    client = mcp.Client.start(server.stdio())
    loop = asyncio.new_event_loop()
    try:
        client.await_ready(timeout=10)

        async def start() -> asyncio.Future[Any]:
            return await held_call(client, seen, 0.2)

        task = loop.run_until_complete(start())
        reader = seen.readers[-1]
        assert reader.held_by_loop()
        assert until(lambda: not reader.held_by_loop(), 5), "the pipe was never taken back"
        assert client.call_tool("add", {"a": 1, "b": 1}, timeout=5).text == "2"
        # The loop runs again: its call was answered meanwhile, by the I/O loop.
        assert loop.run_until_complete(asyncio.wait_for(task, 5)).text.startswith("slept")
    finally:
        loop.close()
        client.stop()


def test_a_loop_closed_while_it_holds_the_pipe(make_server, seen) -> None:
    """The loop is closed with its call in flight: the watchdog takes the pipe back at its
    next tick, before the answer comes."""
    server = make_server()
    client = mcp.Client.start(server.stdio())
    loop = asyncio.new_event_loop()
    try:
        client.await_ready(timeout=10)

        async def start() -> asyncio.Future[Any]:
            return await held_call(client, seen, 3)

        task = loop.run_until_complete(start())
        reader = seen.readers[-1]
        task.cancel()  # never run: the loop closes first (the task is dropped with it)
        loop.close()
        started = time.monotonic()
        assert until(lambda: not reader.held_by_loop(), 2), "the pipe was never taken back"
        assert time.monotonic() - started < 2
        assert client.call_tool("add", {"a": 1, "b": 1}, timeout=5).text == "2"
    finally:
        if not loop.is_closed():
            loop.close()
        client.stop()


def test_a_failed_read_on_the_loop_gives_the_pipe_back(make_server, seen, monkeypatch, caplog):
    """A bug in the handling of a read (here forced, once) on the caller's loop is logged
    on conduit_mcp's logger, the I/O loop reads from then on, and the call meets its
    deadline instead of waiting without end."""
    from conduit_mcp.transports.stdio import StdioTransport

    original = StdioTransport._on_stdout
    failed = threading.Event()
    main = threading.get_ident()

    def on_stdout(self: StdioTransport, data: bytes) -> None:
        if threading.get_ident() == main and not failed.is_set():
            failed.set()
            raise RuntimeError("forced")
        original(self, data)

    monkeypatch.setattr(StdioTransport, "_on_stdout", on_stdout)
    server = make_server()
    client = mcp.Client.start(server.stdio())

    async def calls() -> list[str]:
        out = []
        for i in range(20):
            try:
                r = await client.aio.call_tool("add", {"a": i, "b": 0}, timeout=DEADLINE)
                out.append(r.text)
            except mcp.Error as exc:
                out.append(exc.kind)
            if failed.is_set() and len(out) > 2 and out[-1] != "timeout":
                break
        return out

    try:
        client.await_ready(timeout=10)
        with caplog.at_level("ERROR", logger="conduit_mcp.stdio"):
            out = asyncio.run(calls())
        assert failed.is_set(), "no read was handled on the loop"
        # What that read carried is lost (a call it answered meets its deadline); the
        # calls after it are answered.
        assert set(out) <= {"timeout"} | {str(i) for i in range(20)}, out
        assert out[-1].isdigit(), out
        assert any("caller's loop failed" in r.getMessage() for r in caplog.records)
        assert not any(r.held_by_loop() for r in seen.readers)
    finally:
        client.stop()


def _epolls() -> int:
    count = 0
    for fd in os.listdir("/proc/self/fd"):
        try:
            if os.readlink(f"/proc/self/fd/{fd}") == "anon_inode:[eventpoll]":
                count += 1
        except OSError:
            pass
    return count


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="counts /proc/self/fd")
def test_a_loops_epoll_is_closed_once_it_is_done(make_server, seen) -> None:
    """Each ``asyncio.run`` is a new loop with an epoll of its own for the pipe: closed
    once no pipe has been held for a second, whoever still references the loop object."""
    server = make_server()
    client = mcp.Client.start(server.stdio())
    try:
        client.await_ready(timeout=10)
        before = _epolls()

        async def calls() -> None:
            for i in range(3):
                await client.aio.call_tool("add", {"a": i, "b": 1}, timeout=10)

        kept = []
        for _ in range(5):
            loop = asyncio.new_event_loop()
            loop.run_until_complete(calls())
            loop.close()
            kept.append(loop)  # the application keeps its closed loops
        assert seen.reads
        assert until(lambda: _epolls() <= before, 5), (before, _epolls())
        # and a new loop takes the pipe again
        seen.taken.clear()
        asyncio.run(calls())
        assert seen.taken.is_set()
    finally:
        client.stop()


def test_one_loop_two_clients(make_server, seen) -> None:
    """One loop awaits calls to two clients at once and one after the other: each answer
    reaches its own caller, and neither pipe is left held."""
    a = mcp.Client.start(make_server().stdio())
    b = mcp.Client.start(make_server().stdio())

    async def calls() -> list[tuple[str, str]]:
        out = []
        for i in range(20):
            ra, rb = await asyncio.gather(
                a.aio.call_tool("add", {"a": i, "b": 0}, timeout=10),
                b.aio.call_tool("add", {"a": i, "b": 100}, timeout=10),
            )
            out.append((ra.text, rb.text))
            one = await a.aio.call_tool("add", {"a": i, "b": 1}, timeout=10)
            two = await b.aio.call_tool("add", {"a": i, "b": 2}, timeout=10)
            out.append((one.text, two.text))
        return out

    try:
        a.await_ready(timeout=10)
        b.await_ready(timeout=10)
        out = asyncio.run(calls())
        want = []
        for i in range(20):
            want += [(str(i), str(i + 100)), (str(i + 1), str(i + 2))]
        assert out == want
        assert seen.reads
        assert not any(r.held_by_loop() for r in seen.readers)
    finally:
        mcp.Client.stop_all([a, b])
