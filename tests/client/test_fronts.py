"""The three ways in: blocking, asyncio and Pykka futures, over the same core."""

from __future__ import annotations

import asyncio
import dataclasses
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path
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


def _public(cls: type) -> set[str]:
    return {n for n in dir(cls) if not n.startswith("_")}


def test_the_three_front_ends_have_the_same_request_methods():
    from conduit_mcp.client import CLIENT_ONLY

    blocking = _public(mcp.Client) - CLIENT_ONLY
    asyncio_side = _public(mcp.AsyncClient)
    futures_side = _public(mcp.FutureClient)
    # Only the asyncio side has its own stop (awaitable) besides Client's; the rest of
    # the lifecycle, the state read without messaging, the cache reads, subscriptions and
    # credentials are Client's alone (CLIENT_ONLY): they serve every front end.
    assert asyncio_side - {"stop"} == blocking - {"stop"}
    assert futures_side == blocking - {"stop"}
    assert "list_all_tools" in futures_side and "await_ready" in futures_side
    assert CLIENT_ONLY <= _public(mcp.Client) | {"aio", "futures", "name"}


def test_async_with_stops_the_client_and_stop_never_blocks_the_loop(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio())

    async def main() -> int:
        ticks = 0
        done = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not done.is_set():
                ticks += 1
                await asyncio.sleep(0.005)

        async with client.aio as aio:
            await aio.await_ready(timeout=10)
            assert (await aio.call_tool("add", {"a": 1, "b": 2})).text == "3"
            task = asyncio.create_task(ticker())
            await asyncio.sleep(0)
        # __aexit__ awaited stop(): the client is closed and the loop kept ticking meanwhile.
        done.set()
        await task
        return ticks

    ticks = asyncio.run(main())
    assert client.status().state == "closed"
    assert ticks >= 1
    assert server.wait_for("eof", timeout=5)  # the server's stdin was closed


def test_futures_front_end_awaits_ready_and_lists_every_page(make_server, start_client):
    client = start_client(make_server(page_size=2).stdio())
    status = client.futures.await_ready(timeout=10).get(timeout=10)
    assert status.state == "ready"
    tools = client.futures.list_all_tools().get(timeout=10)
    assert "add" in {t.name for t in tools} and len(tools) > 2
    assert client.tool("add") is not None  # stored in the cache before the future resolved
    assert client.futures.list_all_tools().get(timeout=1) == tools  # from the cache


class _DoomedCaller(pykka.ThreadingActor):
    """An actor that starts a slow call through client.futures, then is stopped."""

    def __init__(self, client: mcp.Client) -> None:
        super().__init__()
        self.client = client
        self.future: pykka.Future[mcp.CallToolResult] | None = None

    def on_receive(self, message: Any) -> Any:
        if message == "call":
            self.future = self.client.futures.call_tool("slow", {"seconds": 30}, timeout=60)
        return None


def test_a_pykka_actor_that_dies_has_its_futures_requests_cancelled(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    actor = _DoomedCaller.start(client)
    actor.ask("call")
    call = server.wait_for("tools/call", timeout=5)
    started = time.monotonic()
    actor.stop()
    cancel = server.wait_for(
        lambda e: (
            e.get("method") == "notifications/cancelled" and e["params"]["requestId"] == call["id"]
        ),
        timeout=5,
    )
    # Cancelled within the watcher's poll, not at the 60 s deadline.
    assert cancel["params"]["reason"] == "caller_down"
    assert time.monotonic() - started < 2
    # The connection is fine and the watcher has let go of the request.
    assert client.call_tool("add", {"a": 1, "b": 1}).text == "2"


def test_futures_of_a_living_actor_or_a_plain_thread_are_not_cancelled(make_server, start_client):
    from conduit_mcp.caller_watch import WATCH

    server = make_server()
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    actor = _Caller.start(client)
    try:
        future = actor.ask("call")  # a progress call made by a living actor
        plain = client.futures.call_tool("slow", {"seconds": 0.2})  # from this thread
        assert future.get(timeout=10).is_error is False
        assert plain.get(timeout=10).text == "slept 0.2"
    finally:
        actor.stop()
    assert not server.received("notifications/cancelled")
    assert WATCH.pending() <= 1  # answered requests leave at the watcher's next look


# What a front end may differ in by design: how progress reaches the caller (a callable on
# the blocking and asyncio sides, an actor on the futures side).
_BY_DESIGN = {("FutureClient", "on_progress")}


def _raises(doc: str | None) -> str:
    """A docstring's ``Raises:`` section, whitespace folded (empty if it has none)."""
    text = doc or ""
    return " ".join(text.split("Raises:", 1)[1].split()) if "Raises:" in text else ""


def _shape(cls: type, name: str) -> tuple[list[tuple[Any, ...]], str]:
    """A method's parameters (name, kind, default, annotation) and its result type, with the
    front end's wrapper (coroutine, ``pykka.Future[...]``) taken off."""
    import inspect

    member = getattr(cls, name)
    sig = inspect.signature(member)
    params = [
        (
            p.name,
            p.kind,
            p.default,
            "by design" if (cls.__name__, p.name) in _BY_DESIGN else p.annotation,
        )
        for p in sig.parameters.values()
    ]
    result = str(sig.return_annotation)
    if cls is mcp.FutureClient:
        assert result.startswith("pykka.Future[") and result.endswith("]"), (name, result)
        result = result[len("pykka.Future[") : -1]
    if cls is mcp.AsyncClient:
        assert inspect.iscoroutinefunction(member), f"AsyncClient.{name} is not a coroutine"
    return params, result


def test_the_three_front_ends_have_the_same_signatures():
    from conduit_mcp.client import CLIENT_ONLY

    shared = _public(mcp.Client) - CLIENT_ONLY - {"stop"}
    drift = []
    for name in sorted(shared):
        blocking_params, blocking_result = _shape(mcp.Client, name)
        for cls in (mcp.AsyncClient, mcp.FutureClient):
            params, result = _shape(cls, name)
            expected = [
                (n, k, d, "by design" if (cls.__name__, n) in _BY_DESIGN else a)
                for n, k, d, a in blocking_params
            ]
            if params != expected or result != blocking_result:
                drift.append(f"{cls.__name__}.{name}{params} -> {result}")
    assert drift == [], "front ends drifted from Client:\n" + "\n".join(drift)


def test_the_three_front_ends_say_the_same_raises():
    """Each asyncio/futures method either defers to ``Client``'s ``Raises:`` or names no
    error kind or reason that ``Client``'s does not."""

    from conduit_mcp.client import CLIENT_ONLY

    shared = _public(mcp.Client) - CLIENT_ONLY - {"stop"}
    drift = []
    for name in sorted(shared):
        blocking = _raises(getattr(mcp.Client, name).__doc__)
        assert blocking, f"Client.{name} has no Raises: section"
        kinds = set(re.findall(r"``(\w+)``", blocking))
        for cls in (mcp.AsyncClient, mcp.FutureClient):
            section = _raises(getattr(cls, name).__doc__)
            if not section:
                drift.append(f"{cls.__name__}.{name}: no Raises: section")
            elif "as ``Client``'s method" not in section:
                extra = set(re.findall(r"``(\w+)``", section)) - kinds - {"get"}
                if extra:
                    drift.append(f"{cls.__name__}.{name}: {sorted(extra)} not in Client's")
    assert drift == [], "\n".join(drift)


# -- the generator: the request methods are written once (scripts/fronts_client.py) ------------

ROOT = Path(__file__).resolve().parents[2]
GENERATOR = ROOT / "scripts" / "gen_fronts.py"
FRONT_FILES = (
    "conduit_mcp/client.py",
    "conduit_mcp/aio.py",
    "conduit_mcp/futures.py",
    # the Hub's family (scripts/fronts_hub.py): gen_fronts renders every family
    "conduit_mcp/hub/hub.py",
    "conduit_mcp/hub/fronts.py",
    # the cluster's remote hub (scripts/fronts_cluster.py)
    "conduit_mcp/cluster/remote.py",
)


def _gen(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(GENERATOR), "--root", str(root), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def tree_copy(tmp_path: Path) -> Path:
    """The three front ends and pyproject.toml (ruff's settings) in a scratch repository."""
    for rel in (*FRONT_FILES, "pyproject.toml"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / rel, tmp_path / rel)
    return tmp_path


def test_the_checked_in_request_methods_are_what_the_spec_renders():
    done = _gen(ROOT, "--check")
    assert done.returncode == 0, done.stderr


def test_a_hand_edit_in_a_generated_region_fails_the_check_and_generation_undoes_it(tree_copy):
    aio = tree_copy / "conduit_mcp/aio.py"
    original = aio.read_text()
    edited = original.replace("max_total_timeout: float | None = None,", "", 1)
    assert edited != original
    aio.write_text(edited)
    check = _gen(tree_copy, "--check")
    assert check.returncode == 1
    assert "conduit_mcp/aio.py" in check.stderr and "client.py" not in check.stderr
    assert aio.read_text() == edited  # --check changes nothing
    fix = _gen(tree_copy)
    assert fix.returncode == 0, fix.stderr
    assert aio.read_text() == original
    assert _gen(tree_copy, "--check").returncode == 0


def test_a_front_end_without_its_region_is_named(tree_copy):
    futures = tree_copy / "conduit_mcp/futures.py"
    futures.write_text(futures.read_text().replace("# END GENERATED requests", "# the end"))
    done = _gen(tree_copy, "--check")
    assert done.returncode == 2
    assert "conduit_mcp/futures.py" in done.stderr and "END GENERATED requests" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_second_family_of_front_ends_is_rendered_from_its_own_spec(tmp_path, monkeypatch):
    """What the Hub does: its own three classes, each sending a routed call through a member
    client's matching front end (``$member``), from one spec."""
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    import fronts as gen

    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    member = (
        "import asyncio\n\nimport pykka\n\n\n"
        "class Member:\n    def echo(self, what, timeout):\n        return (what, timeout)\n\n\n"
        "class AsyncMember:\n    async def echo(self, what, timeout):\n"
        "        await asyncio.sleep(0)\n        return (what, timeout)\n\n\n"
        "class FutureMember:\n    def echo(self, what, timeout):\n"
        "        future = pykka.ThreadingFuture()\n        future.set((what, timeout))\n"
        "        return future\n\n\n"
        "class Client(Member):\n    aio = AsyncMember()\n    futures = FutureMember()\n"
    )
    (tmp_path / "member.py").write_text(member)
    region = "    # BEGIN GENERATED routed\n    # END GENERATED routed\n"
    front_end = (
        "class {}:\n    def _route(self, what):\n        return Client(), what.upper()\n\n" + region
    )
    # The blocking class in a file of its own, the other two sharing one (as the Hub's do).
    sources = {
        "blocking.py": "from member import Client\n\n\n" + front_end.format("Echo"),
        "fronts.py": "from member import Client\n\n\n"
        + front_end.format("AsyncEcho")
        + "\n\n"
        + front_end.format("FutureEcho"),
    }
    for name, text in sources.items():
        (tmp_path / name).write_text(text)
    echo = gen.Method(
        "echo",
        params="what: str, *, timeout: float | None = None",
        result="tuple[str, float | None]",
        body="""
            client, routed = self._route(what)  # resolved in the caller, never waiting
            client$member.echo(routed, timeout)
        """,
        doc="Say it back, louder.",
        raises="``argument`` for nothing to say.",
    )
    family = gen.Family(
        spec="tests/client/test_fronts.py",
        methods=[echo],
        fronts=[
            gen.Front("blocking.py", "Echo", gen.BLOCKING, "routed", {"member": ""}),
            gen.Front("fronts.py", "AsyncEcho", gen.ASYNCIO, "routed", {"member": ".aio"}),
            gen.Front("fronts.py", "FutureEcho", gen.FUTURES, "routed", {"member": ".futures"}),
        ],
    )
    assert gen.generate([family], tmp_path, check=False) == list(sources)
    assert gen.generate([family], tmp_path, check=True) == []  # rendered once, stable
    monkeypatch.syspath_prepend(str(tmp_path))
    spaces: dict[str, dict[str, Any]] = {}
    for name in sources:
        spaces[name] = {}
        exec(compile((tmp_path / name).read_text(), name, "exec"), spaces[name])
    assert spaces["blocking.py"]["Echo"]().echo("hi", timeout=1.0) == ("HI", 1.0)
    assert asyncio.run(spaces["fronts.py"]["AsyncEcho"]().echo("hi")) == ("HI", None)
    assert spaces["fronts.py"]["FutureEcho"]().echo("hi").get(timeout=1) == ("HI", None)
    text = (tmp_path / "fronts.py").read_text()
    assert "return await client.aio.echo(routed, timeout)" in text
    assert "return client.futures.echo(routed, timeout)" in text
    assert "# resolved in the caller, never waiting" in text
    assert "Do not edit" in text and "Raises:" in text
    assert "-> pykka.Future[tuple[str, float | None]]:" in text


def test_a_hand_written_copy_of_a_generated_method_is_refused(tree_copy):
    client = tree_copy / "conduit_mcp/client.py"
    text = client.read_text()
    stray = "    def ping(self) -> None:\n        pass\n\n    def _list_all("
    client.write_text(text.replace("    def _list_all(", stray, 1))
    done = _gen(tree_copy, "--check")
    assert done.returncode == 2
    assert "Client also defines ping by hand" in done.stderr


def test_a_spec_mistake_is_named_with_its_method(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "scripts"))
    import fronts as gen

    front = gen.Front("x.py", "X", gen.ASYNCIO)
    good = gen.Method(
        "m", params="*, timeout: float", result="int", body="self._f()", doc="d.", raises="r"
    )
    for bad, says in (
        ({"body": "x = self._f()"}, "m: a body must end with a call"),
        ({"body": "self._f($nothing)"}, "m: bad body for X"),
        ({"params": "*, on_progress: $progres = None"}, "m: bad params for asyncio"),
    ):
        with pytest.raises(gen.GenerationError, match=re.escape(says)):
            gen.render_method(dataclasses.replace(good, **bad), front)
    assert "return await self._f()" in gen.render_method(good, front)
