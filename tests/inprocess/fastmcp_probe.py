"""Drives a ``fastmcp.FastMCP`` server object through ``conduit_mcp.InProcess`` and prints
what the client observed, as one JSON object (tests/inprocess/test_inprocess_fastmcp.py
asserts on it).

It runs in ``make peers``'s venv of fastmcp (fastmcp cannot go into ``.venv``: its
dependencies would move the dev venv's pins). conduit's own dependencies come from the dev
venv's site-packages, added after this venv's own (``CONDUIT_DEV_SITE``), so every package
both hold (mcp, pydantic, anyio) is fastmcp's; the repository is on ``PYTHONPATH``.
"""

import json
import os
import site
import sys
import threading
from typing import Any


def build() -> Any:
    from fastmcp import Context, FastMCP

    server = FastMCP("fast-demo")

    @server.tool
    def add(a: int, b: int) -> int:
        """Add two numbers."""
        return a + b

    @server.tool
    async def where() -> str:
        """The thread the tool runs on."""
        return threading.current_thread().name

    async def work(steps: int, ctx: Context) -> str:
        """Reports progress."""
        for i in range(1, steps + 1):
            await ctx.report_progress(i, steps)
        return f"did {steps}"

    server.tool(work)

    @server.resource("test://hello")
    def hello() -> str:
        return "Hello, world!"

    @server.prompt
    def greet(name: str) -> str:
        return f"Hello, {name}!"

    return server


def run(server: Any, protocol: str) -> dict[str, Any]:
    import conduit_mcp as mcp

    with mcp.Client.start(mcp.InProcess(server), protocol=protocol) as client:
        seen: list[Any] = []
        out = {
            "spec": repr(mcp.InProcess(server)),
            "add": client.call_tool("add", {"a": 2, "b": 40}).structured_content,
            "era": client.status().era,
            "server": client.server_info().name,
            "tools": sorted(t.name for t in client.list_all_tools()),
            "where": client.call_tool("where", {}).text,
            "caller": threading.current_thread().name,
            "work": client.call_tool("work", {"steps": 3}, on_progress=seen.append).text,
            "resource": client.read_resource("test://hello").contents[0]["text"],
            "prompt": client.get_prompt("greet", {"name": "Ada"}).messages[0]["content"]["text"],
        }
        out["progress"] = [p.progress for p in seen]
        out["bad_is_error"] = client.call_tool("add", {"a": "x"}).is_error
        return out


def main() -> None:
    site.addsitedir(os.environ["CONDUIT_DEV_SITE"])
    import fastmcp

    server = build()
    report = {"fastmcp": fastmcp.__version__, "auto": run(server, "auto")}
    report["legacy"] = run(server, "legacy")
    json.dump(report, sys.stdout)


if __name__ == "__main__":
    main()
