"""A real legacy-era MCP peer on the official ``mcp`` 1.30.0 ``FastMCP`` (latest 2025-11-25).

It has no ``server/discover``: over stdio it answers a 2026-07-28 probe with -32602, so a client
in ``auto`` mode must fall back to ``initialize``. Not a test module. Run it with the legacy venv
(``make peers``):

    .venv-legacy/bin/python tests/peers/legacy_peer.py stdio
    .venv-legacy/bin/python tests/peers/legacy_peer.py http --port 39022   # http://127.0.0.1:39022/mcp

Same tools as ``modern_peer.py``: add, echo, slow_count (progress), add_dynamic_tool /
remove_dynamic_tool (send notifications/tools/list_changed), log_something; resource
``peer://greeting``; prompt ``greet``. State is process-global.
"""

from __future__ import annotations

import argparse
import asyncio
import functools

from mcp.server.fastmcp import Context, FastMCP
from mcp.server.lowlevel import NotificationOptions

PEER_VERSION = "1.0.0"


def build(host: str = "127.0.0.1", port: int = 39022) -> FastMCP:
    server = FastMCP(
        "conduit-legacy-peer",
        instructions="Interop peer for conduit-mcp tests (mcp 1.30.0, legacy only).",
        log_level="WARNING",
        host=host,
        port=port,
        streamable_http_path="/mcp",
    )
    low = server._mcp_server
    low.version = PEER_VERSION
    # Advertise listChanged (FastMCP's default initialization options advertise none).
    low.create_initialization_options = functools.partial(  # type: ignore[method-assign]
        low.create_initialization_options,
        notification_options=NotificationOptions(
            tools_changed=True, prompts_changed=True, resources_changed=True
        ),
    )

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    @server.tool()
    async def slow_count(steps: int, delay: float, ctx: Context) -> str:
        """Count to `steps`, sleeping `delay` s before each step and reporting progress after it."""
        for i in range(1, steps + 1):
            await asyncio.sleep(delay)
            await ctx.report_progress(i, steps, f"step {i}/{steps}")
        return f"counted to {steps}"

    @server.tool()
    async def add_dynamic_tool(name: str, ctx: Context) -> str:
        """Register a tool called `name` (returns "dynamic <name>: <text>") and announce it."""

        def dynamic(text: str = "") -> str:
            return f"dynamic {name}: {text}"

        server.add_tool(dynamic, name=name, description=f"dynamic tool {name}")
        await ctx.session.send_tool_list_changed()
        return f"added {name}"

    @server.tool()
    async def remove_dynamic_tool(name: str, ctx: Context) -> str:
        """Remove the tool called `name` and announce the change."""
        server.remove_tool(name)
        await ctx.session.send_tool_list_changed()
        return f"removed {name}"

    @server.tool()
    async def log_something(level: str, text: str, ctx: Context) -> str:
        """Send a notifications/message at `level`."""
        await ctx.log(level, text, logger_name="peer")  # type: ignore[arg-type]
        return "logged"

    @server.resource("peer://greeting", name="greeting", mime_type="text/plain")
    def greeting() -> str:
        """A static text resource."""
        return "hello from the legacy peer"

    @server.prompt()
    def greet(name: str) -> str:
        """A one-message prompt."""
        return f"Please greet {name}."

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transport", choices=["stdio", "http"], nargs="?", default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=39022)
    args = parser.parse_args()
    server = build(args.host, args.port)
    server.run("stdio" if args.transport == "stdio" else "streamable-http")


if __name__ == "__main__":
    main()
