"""The official ``mcp`` client (2.3.0) against the scripted server, in every era setting."""

from __future__ import annotations

import asyncio
import sys

import pytest

from conduit_mcp.testing import ScriptedServer

mcp_client = pytest.importorskip("mcp.client.client")
mcp_stdio = pytest.importorskip("mcp.client.stdio")

pytestmark = [pytest.mark.timeout(30), pytest.mark.interop]


@pytest.mark.parametrize(
    ("era", "mode", "version"),
    [
        ("both", "auto", "2026-07-28"),
        ("modern", "auto", "2026-07-28"),
        ("legacy", "auto", "2025-11-25"),
        ("both", "legacy", "2025-11-25"),
    ],
)
def test_official_client(tmp_path, era, mode, version):
    srv = ScriptedServer(tmp_path, era=era, page_size=5)
    params = mcp_stdio.StdioServerParameters(command=sys.executable, args=srv.args(), env=srv.env())

    async def main():
        progress = []

        async def on_progress(value, total, message):
            progress.append((value, total, message))

        async with mcp_client.Client(params, mode=mode) as client:
            assert client.protocol_version == version
            assert client.server_info.name == "scripted"
            added = await client.call_tool("add", {"a": 1, "b": 2})
            assert added.structured_content == {"sum": 3}
            page = await client.list_tools()
            assert len(page.tools) == 5 and page.next_cursor
            prompt = await client.get_prompt("greet", {"name": "Ada"})
            assert prompt.messages[0].content.text == "Hello, Ada!"
            read = await client.read_resource("test://item/5")
            assert read.contents[0].text == "item 5"
            done = await client.call_tool(
                "progress", {"steps": 2, "delay": 0.01}, progress_callback=on_progress
            )
            assert done.content[0].text == "done 2 steps"
            assert progress == [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")]

    asyncio.run(main())
    assert srv.starts() == 1
    assert srv.received("tools/call")
