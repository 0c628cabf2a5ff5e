"""Interop: ``InProcess`` with the official SDK's server objects (mcp 2.3.0, in the dev venv):
its ``MCPServer`` (the former FastMCP) and its low-level ``Server``, in both eras, with the
client's cache, notifications, handler, progress and logs over them (docs/inprocess.md)."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import pytest

import conduit_mcp as mcp

from .conftest import THREAD, wait_no_server_thread

pytestmark = pytest.mark.timeout(60)

sdk = pytest.importorskip("mcp.server.mcpserver")
lowlevel = pytest.importorskip("mcp.server")
mcp_types = pytest.importorskip("mcp.types")
# Module level: the SDK evaluates tool annotations in this module's globals.
Context = sdk.Context
InputRequiredResult = mcp_types.InputRequiredResult


def demo_server() -> Any:
    from mcp.server.mcpserver import MCPServer
    from pydantic import BaseModel

    server = MCPServer("demo", version="1.2.3")

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @server.tool()
    async def where() -> str:
        """The thread the tool runs on."""
        return threading.current_thread().name

    @server.tool()
    def explode(text: str) -> str:
        """Raises with its argument in the message."""
        raise ValueError(f"bad {text}")

    @server.tool()
    async def work(ctx: Context, steps: int) -> str:
        """Reports progress and logs."""
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps, f"step {i}")
        await ctx.info("worked")
        return f"did {steps}"

    class Login(BaseModel):
        name: str

    @server.tool()
    async def ask(ctx: Context) -> str:
        """Elicits a login."""
        answer = await ctx.elicit("login?", Login)
        return f"{answer.action} {answer.data.name if answer.data else None}"

    @server.tool()
    async def grow(ctx: Context, name: str) -> str:
        """Adds a tool and announces it."""
        server.add_tool(lambda: f"{name} here", name=name, description="added")
        if ctx.protocol_version and ctx.protocol_version >= "2026-07-28":
            await ctx.notify_tools_changed()
        else:
            await ctx.session.send_tool_list_changed()
        return "grown"

    @server.resource("test://hello")
    def hello() -> str:
        return "Hello, world!"

    @server.prompt()
    def greet(name: str) -> str:
        return f"Hello, {name}!"

    return server


class Answers(mcp.Handler):
    def __init__(self) -> None:
        self.logs: list[tuple[str, Any]] = []
        self.logged = threading.Event()

    def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
        return mcp.ElicitResult.accept({"name": "octocat"})

    def handle_log(
        self, level: str, data: Any, logger: str | None, ctx: mcp.HandlerContext
    ) -> None:
        self.logs.append((level, data))
        self.logged.set()


@pytest.mark.parametrize(("protocol", "era"), [("auto", "modern"), ("legacy", "legacy")])
def test_mcpserver_in_both_eras(start_client: Any, protocol: str, era: str) -> None:
    client = start_client(mcp.InProcess(demo_server()), protocol=protocol)
    assert client.call_tool("add", {"a": 2, "b": 40}).structured_content == {"result": 42}
    status = client.status()
    assert status.era == era
    assert client.server_info().name == "demo"
    names = {t.name for t in client.list_all_tools()}
    assert {"add", "where", "work", "ask"} <= names
    assert client.read_resource("test://hello").contents[0]["text"] == "Hello, world!"
    prompt = client.get_prompt("greet", {"name": "Ada"})
    assert prompt.messages[0]["content"]["text"] == "Hello, Ada!"


def test_the_servers_code_runs_on_its_own_thread(start_client: Any) -> None:
    """Not the caller's thread, nor an actor's, nor the client's I/O loop."""
    client = start_client(mcp.InProcess(demo_server()))
    ran_on = client.call_tool("where", {}).text
    assert ran_on == THREAD
    assert threading.current_thread().name != THREAD


def test_a_tool_that_raises_is_an_error_result(start_client: Any) -> None:
    client = start_client(mcp.InProcess(demo_server()))
    result = client.call_tool("explode", {"text": "input"})
    assert result.is_error
    assert client.call_tool("add", {"a": 1, "b": 1}).structured_content == {"result": 2}


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_progress_and_server_logs(start_client: Any, protocol: str) -> None:
    handler = Answers()
    client = start_client(mcp.InProcess(demo_server()), protocol=protocol, handler=handler)
    seen: list[Any] = []
    result = client.call_tool("work", {"steps": 3}, on_progress=seen.append)
    assert result.text == "did 3"
    assert [p.progress for p in seen] == [1, 2, 3]
    if protocol == "legacy":  # modern servers log only when a request asks (logLevel)
        assert handler.logged.wait(5)
        assert handler.logs[0] == ("info", "worked")


def test_the_handler_answers_an_elicitation(start_client: Any) -> None:
    client = start_client(mcp.InProcess(demo_server()), protocol="legacy", handler=Answers())
    assert client.call_tool("ask", {}).text == "accept octocat"


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_list_changed_reaches_subscribers_and_the_cache(start_client: Any, protocol: str) -> None:
    client = start_client(mcp.InProcess(demo_server()), protocol=protocol)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=["notifications/tools/list_changed"])
    assert "dyn" not in {t.name for t in client.list_all_tools()}
    client.await_listening(timeout=5)
    assert client.call_tool("grow", {"name": "dyn"}).text == "grown"
    note = notes.get(timeout=5)
    assert note.method == "notifications/tools/list_changed"
    assert "dyn" in {t.name for t in client.list_all_tools()}
    assert client.call_tool("dyn", {}).text == "dyn here"


def test_the_low_level_server(start_client: Any) -> None:
    from mcp.server import Server
    from mcp.types import CallToolResult, ListToolsResult, TextContent, Tool

    async def list_tools(ctx: Any, params: Any) -> ListToolsResult:
        schema = {"type": "object", "properties": {"text": {"type": "string"}}}
        return ListToolsResult(tools=[Tool(name="shout", inputSchema=schema)])

    async def call_tool(ctx: Any, params: Any) -> CallToolResult:
        text = str((params.arguments or {}).get("text", "")).upper()
        return CallToolResult(content=[TextContent(type="text", text=text)])

    server = Server("low", on_list_tools=list_tools, on_call_tool=call_tool)
    for protocol, era in (("auto", "modern"), ("legacy", "legacy")):
        client = start_client(mcp.InProcess(server), protocol=protocol)
        assert client.call_tool("shout", {"text": "hi"}).text == "HI"
        assert client.status().era == era
        assert [t.name for t in client.list_all_tools()] == ["shout"]
        client.stop()
    wait_no_server_thread()


def test_stop_cancels_a_tool_that_never_returns(start_client: Any) -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("stuck")
    release = threading.Event()

    @server.tool()
    async def hang() -> str:
        import anyio

        await anyio.sleep(3600)
        return "never"

    client = mcp.Client.start(mcp.InProcess(server, close_grace=0.2))
    client.await_ready(timeout=10)
    client.futures.call_tool("hang", {})
    started = time.monotonic()
    client.stop()
    wait_no_server_thread()
    assert time.monotonic() - started < 10
    release.set()


def test_a_server_whose_lifespan_raises_is_an_exit_naming_only_the_class(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import contextlib

    from mcp.server.mcpserver import MCPServer

    @contextlib.asynccontextmanager
    async def lifespan(server: Any) -> Any:
        raise RuntimeError("s3cret-dsn")
        yield

    client = mcp.Client.start(
        mcp.InProcess(MCPServer("broken", lifespan=lifespan)),
        max_reconnects=1,
        backoff=lambda attempt: 0.01,
    )
    try:
        with pytest.raises(mcp.Error) as err:
            client.call_tool("anything", {}, timeout=10)
        assert (err.value.kind, err.value.reason) == ("closed", "max_reconnects")
        assert err.value.data == {"last_reason": "exit", "detail": "RuntimeError"}
        assert "s3cret" not in caplog.text and "s3cret" not in str(err.value)
    finally:
        client.stop()
    wait_no_server_thread()


def test_a_deadline_cancels_a_call_the_server_never_answers(start_client: Any) -> None:
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("stuck")
    cancelled = threading.Event()

    @server.tool()
    async def hang() -> str:
        import anyio

        try:
            await anyio.sleep(3600)
        finally:
            cancelled.set()  # the server heard notifications/cancelled
        return "never"

    @server.tool()
    async def ping() -> str:
        return "pong"

    client = start_client(mcp.InProcess(server))
    with pytest.raises(mcp.Error) as err:
        client.call_tool("hang", {}, timeout=0.3)
    assert err.value.kind == "timeout"
    assert cancelled.wait(5)
    assert client.call_tool("ping", {}).text == "pong"


def test_one_server_object_serves_several_clients_at_once(start_client: Any) -> None:
    server = demo_server()
    clients = [start_client(mcp.InProcess(server)) for _ in range(3)]
    results: list[Any] = [None] * 3

    def work(i: int) -> None:
        results[i] = [
            clients[i].call_tool("add", {"a": i, "b": k}).structured_content for k in range(20)
        ]

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == [[{"result": i + k} for k in range(20)] for i in range(3)]


def test_what_the_server_changes_never_reaches_the_caller(start_client: Any) -> None:
    """Bytes cross, not objects: a server that mutates its arguments changes nothing of
    the caller's."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("mutator")

    @server.tool()
    async def scribble(items: list[str]) -> list[str]:
        items.append("server was here")
        return items

    client = start_client(mcp.InProcess(server))
    mine = ["a"]
    result = client.call_tool("scribble", {"items": mine})
    assert mine == ["a"]
    assert result.structured_content == {"result": ["a", "server was here"]}


def test_a_tool_that_blocks_its_loop_never_blocks_the_caller(start_client: Any) -> None:
    """The server's loop is its own thread's: a tool that blocks it holds up that server
    only, and the caller's deadline still ends the call on time."""
    from mcp.server.mcpserver import MCPServer

    server = MCPServer("blocking")
    release = threading.Event()

    @server.tool()
    async def block() -> str:
        release.wait(10)  # blocks the server's event loop, deliberately
        return "released"

    client = start_client(mcp.InProcess(server))
    client.await_ready(timeout=10)
    started = time.monotonic()
    with pytest.raises(mcp.Error) as err:
        client.call_tool("block", {}, timeout=0.3)
    assert err.value.kind == "timeout"
    assert time.monotonic() - started < 3
    assert client.status().state == "ready"
    release.set()
    assert client.call_tool("block", {}, timeout=10).text == "released"


def test_the_handler_answers_a_modern_input_round(start_client: Any) -> None:
    """Modern era: the tool returns ``input_required`` and the client's handler answers the
    round; the retry carries the answer and the echoed request state."""
    from mcp.server.mcpserver import MCPServer
    from mcp.types import ElicitRequest, ElicitRequestFormParams

    server = MCPServer("rounds")
    schema = {"type": "object", "properties": {"name": {"type": "string"}}}

    async def login(ctx: Context) -> InputRequiredResult | str:
        if not ctx.input_responses:
            params = ElicitRequestFormParams(message="login?", requested_schema=schema)
            return InputRequiredResult(
                input_requests={"who": ElicitRequest(params=params)}, request_state="s1"
            )
        answer: Any = ctx.input_responses["who"]
        return f"{answer.action} {answer.content['name']} {ctx.request_state}"

    server.add_tool(login)
    client = start_client(mcp.InProcess(server), handler=Answers())
    assert client.call_tool("login", {}).text == "accept octocat s1"
    assert client.status().era == "modern"
