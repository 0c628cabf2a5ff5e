"""The public API as a type checker sees it: a small user program checked with mypy --strict.

The program is written to a temporary folder and checked against this checkout (MYPYPATH),
reporting errors in the program only. A second program holds mistakes mypy must reject.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = [pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]

GOOD = """
    from typing import Any, assert_type

    import pykka

    import conduit_mcp as mcp


    def start() -> mcp.Client:
        return mcp.Client.start(mcp.Stdio("server"), max_in_flight=8, protocol="auto")


    def blocking(client: mcp.Client) -> None:
        assert_type(client.call_tool("add", {"a": 1}), mcp.CallToolResult)
        assert_type(client.list_tools(), mcp.Page[mcp.Tool])
        assert_type(client.list_all_tools(), tuple[mcp.Tool, ...])
        assert_type(client.tool("add"), mcp.Tool | None)
        assert_type(client.get_prompt("p"), mcp.GetPromptResult)
        assert_type(client.read_resource("file:///a"), mcp.ReadResourceResult)
        assert_type(client.request("x/y"), dict[str, Any])
        assert_type(client.status().state, mcp.State)
        assert_type(client.await_ready(), mcp.Status)


    async def asyncio_side(client: mcp.Client) -> None:
        assert_type(await client.aio.call_tool("add"), mcp.CallToolResult)
        assert_type(await client.aio.list_all_prompts(), tuple[mcp.Prompt, ...])
        async with client.aio as aio:
            await aio.stop()


    def futures_side(client: mcp.Client) -> None:
        assert_type(client.futures.call_tool("add"), pykka.Future[mcp.CallToolResult])
        assert_type(client.futures.list_tools(), pykka.Future[mcp.Page[mcp.Tool]])


    def errors(e: mcp.Error) -> None:
        assert_type(e.kind, mcp.Kind)
        options: mcp.ClientOptions = {"request_timeout": 5.0, "on_give_up": "stop"}
        mcp.Client.start(mcp.Http("http://127.0.0.1:1/mcp"), **options)
"""

BAD = """
    import conduit_mcp as mcp

    mcp.Client.start(mcp.Stdio("server"), max_in_fligth=8)
    mcp.Client.start(mcp.Stdio("server"), on_give_up="explode")
    mcp.Error("timeuot", "deadline")
    text: str = mcp.Client.whereis("a").call_tool("add")
"""


def test_mypy_accepts_the_typed_api_and_rejects_misspellings(tmp_path: Path) -> None:
    (tmp_path / "good.py").write_text(textwrap.dedent(GOOD))
    (tmp_path / "bad.py").write_text(textwrap.dedent(BAD))
    env = {**os.environ, "MYPYPATH": str(ROOT)}
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--strict",
        "--follow-imports=silent",
        "--cache-dir",
        str(tmp_path / ".mypy_cache"),
        "--no-error-summary",
    ]
    good = subprocess.run(
        [*command, str(tmp_path / "good.py")], capture_output=True, text=True, env=env
    )
    assert good.returncode == 0, good.stdout + good.stderr
    bad = subprocess.run(
        [*command, str(tmp_path / "bad.py")], capture_output=True, text=True, env=env
    )
    lines = bad.stdout.splitlines()
    assert any(":4: error:" in line and "max_in_fligth" in line for line in lines), bad.stdout
    assert any(":5: error:" in line for line in lines), bad.stdout  # on_give_up="explode"
    assert any(":6: error:" in line for line in lines), bad.stdout  # the kind "timeuot"
    assert any(":7: error:" in line for line in lines), bad.stdout  # not a str
