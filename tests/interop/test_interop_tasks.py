"""Tasks against real third-party servers.

* server-everything's ``simulate-research-query`` (the 2025-11-25 experimental tasks:
  ``execution.taskSupport: "required"``, four stages of 1 s each), over stdio and streamable
  HTTP: ``call_tool`` sends the ``task`` parameter, polls ``tasks/get`` and fetches
  ``tasks/result``; an ambiguous query asks the client's handler (elicitation, delivered
  through ``tasks/result``) and the answer shows in the report; a call whose deadline comes
  first fails with ``timeout`` at its deadline.
* fastmcp-tasks 4.1.4 on fastmcp-slim 4.1.4 (tests/peers/fastmcp_tasks_peer.py, in ``make
  peers``'s ``.peers/fastmcp-tasks-4.1.4``), the modern Tasks extension over streamable
  HTTP: a task polled to its result, a required task tool, ``start_task``'s handle, input
  requests answered by the handler with ``tasks/update``, and ``cancel()``.
"""

from __future__ import annotations

import asyncio
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import conduit_mcp as mcp

from ..conftest import REPO_ROOT, missing_peer
from .http_peer import HttpPeer, free_port

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

BIND_LOCALHOST = Path(__file__).resolve().parent.parent / "peers" / "bind-localhost.cjs"
TOOL = "simulate-research-query"


class Clarifier(mcp.Handler):
    async def elicit(self, request: Any, ctx: Any) -> mcp.ElicitResult:
        return mcp.ElicitResult.accept({"interpretation": "technical"})


@pytest.fixture(scope="module")
def everything_url(everything_js: Path) -> Iterator[str]:
    port = free_port()
    node = shutil.which("node") or "node"
    peer = HttpPeer(
        [node, "--require", str(BIND_LOCALHOST), str(everything_js), "streamableHttp"],
        port,
        ready=["listening on port"],
        env={"PATH": "/usr/bin:/bin", "PORT": str(port)},
    )
    yield peer.url
    peer.kill()


@pytest.fixture
def spec(everything_js: Path, everything_url: str) -> Callable[[str], mcp.Stdio | mcp.Http]:
    node = shutil.which("node") or "node"

    def make(transport: str) -> mcp.Stdio | mcp.Http:
        if transport == "stdio":
            return mcp.Stdio(node, [str(everything_js), "stdio"], env={"PATH": "/usr/bin:/bin"})
        return mcp.Http(everything_url)

    return make


def test_a_required_task_tool_completes_over_stdio(
    spec: Callable[[str], mcp.Stdio | mcp.Http],
) -> None:
    with mcp.Client.start(spec("stdio")) as client:
        client.await_ready(timeout=20)
        assert client.status().era == "legacy"
        started = time.monotonic()
        result = client.call_tool(TOOL, {"topic": "tasks"}, timeout=30)
        took = time.monotonic() - started
    assert not result.is_error
    assert result.text.startswith("# Research Report: tasks")
    assert 3.5 < took < 15  # four stages of 1 s, polled, not answered at once


def test_input_required_asks_the_handler_over_http(
    spec: Callable[[str], mcp.Stdio | mcp.Http],
) -> None:
    async def main(client: mcp.Client) -> mcp.CallToolResult:
        await client.aio.await_ready(timeout=20)
        return await client.aio.call_tool(TOOL, {"topic": "tasks", "ambiguous": True}, timeout=30)

    with mcp.Client.start(spec("http"), handler=Clarifier()) as client:
        result = asyncio.run(main(client))
    assert "- **Clarification**: technical" in result.text


def test_a_deadline_before_the_end_is_a_timeout(
    spec: Callable[[str], mcp.Stdio | mcp.Http],
) -> None:
    with mcp.Client.start(spec("http")) as client:
        client.await_ready(timeout=20)
        started = time.monotonic()
        with pytest.raises(mcp.Error) as err:
            client.futures.call_tool(TOOL, {"topic": "late"}, timeout=1.0).get(timeout=10)
        took = time.monotonic() - started
    assert (err.value.kind, err.value.reason) == ("timeout", "deadline")
    assert 0.9 < took < 3.0


# -- fastmcp-tasks: the modern extension ---------------------------------------------------

TASKS_PEER = REPO_ROOT / "tests" / "peers" / "fastmcp_tasks_peer.py"


class Colour(mcp.Handler):
    async def elicit(self, request: Any, ctx: Any) -> mcp.ElicitResult:
        return mcp.ElicitResult.accept({"value": "blue"})


@pytest.fixture(scope="module")
def fastmcp_tasks() -> Iterator[mcp.Client]:
    found = sorted((REPO_ROOT / ".peers").glob("fastmcp-tasks-*/.stamp-slim-*"))
    if not found:
        missing_peer("fastmcp-tasks and fastmcp-slim (the .peers/fastmcp-tasks-* venv)")
    python = found[-1].parent / "bin" / "python"
    port = free_port()
    peer = HttpPeer(
        [str(python), str(TASKS_PEER), "--port", str(port)],
        port,
        ready=["Uvicorn running"],
        env={"PATH": "/usr/bin:/bin", "HOME": str(found[-1].parent)},
    )
    client = mcp.Client.start(mcp.Http(peer.url), handler=Colour())
    client.await_ready(timeout=20)
    yield client
    client.stop()
    peer.kill()


def test_fastmcp_tasks_call_tool_is_polled_to_its_result(fastmcp_tasks: mcp.Client) -> None:
    assert fastmcp_tasks.status().era == "modern"
    started = time.monotonic()
    assert fastmcp_tasks.call_tool("slow", {"seconds": 0.5, "text": "hi"}, timeout=15).text == "hi"
    assert time.monotonic() - started >= 0.5
    required = fastmcp_tasks.call_tool("must_task", {"text": "x"}, timeout=15)
    assert required.text == "tasked: x"
    assert fastmcp_tasks.call_tool("quick", {"text": "now"}, timeout=15).text == "now"


def test_fastmcp_tasks_input_requests_go_to_the_handler(fastmcp_tasks: mcp.Client) -> None:
    handle = fastmcp_tasks.start_task("ask", {"question": "colour?"})
    assert handle.result(timeout=15).text == "answer: blue"
    assert len(handle.record["answered"]) == 1  # fastmcp scopes its keys; answered once


def test_fastmcp_tasks_handle_and_cancel(fastmcp_tasks: mcp.Client) -> None:
    handle = fastmcp_tasks.start_task("slow", {"seconds": 30, "text": "never"})
    assert handle.record["era"] == "modern" and handle.record["tool"] == "slow"
    assert not handle.wait(0.3)
    handle.cancel()
    with pytest.raises(mcp.Error) as err:
        handle.result(timeout=10)
    assert err.value.kind == "cancelled"
