"""A real MCP peer on the official ``mcp`` 2.3.0 server (dual-era: handshake and 2026-07-28).

Not a test module (pytest collects only ``test_*.py``). Run it:

    .venv/bin/python tests/peers/modern_peer.py stdio
    .venv/bin/python tests/peers/modern_peer.py http --port 39021     # http://127.0.0.1:39021/mcp

Tools: add, echo, slow_count (progress), add_dynamic_tool / remove_dynamic_tool (list changes),
log_something; resource ``peer://greeting``; prompt ``greet``. State is process-global: a dynamic
tool added by one session is seen by every later session of the same process.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import warnings

from mcp.server import NotificationOptions
from mcp.server.mcpserver import Context, MCPServer
from mcp_types.version import MODERN_PROTOCOL_VERSIONS

warnings.filterwarnings("ignore", message=".*SEP-2577.*")

PEER_VERSION = "1.0.0"

server = MCPServer(
    "conduit-modern-peer",
    version=PEER_VERSION,
    instructions="Interop peer for conduit-mcp tests (mcp 2.3.0).",
    log_level="WARNING",
)

# Handshake-era sessions: advertise tools/prompts/resources.listChanged (the SDK's default
# initialization options advertise none, although we do send tools/list_changed).
server._lowlevel_server.create_initialization_options = functools.partial(  # type: ignore[method-assign]
    server._lowlevel_server.create_initialization_options,
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


async def _tools_changed(ctx: Context) -> None:
    if ctx.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await ctx.notify_tools_changed()  # subscriptions/listen streams (2026-07-28)
    else:
        await ctx.session.send_tool_list_changed()  # notifications/tools/list_changed


@server.tool()
async def add_dynamic_tool(name: str, ctx: Context) -> str:
    """Register a tool called `name` (returns "dynamic <name>: <text>") and announce the change."""

    def dynamic(text: str = "") -> str:
        return f"dynamic {name}: {text}"

    server.add_tool(dynamic, name=name, description=f"dynamic tool {name}")
    await _tools_changed(ctx)
    return f"added {name}"


@server.tool()
async def remove_dynamic_tool(name: str, ctx: Context) -> str:
    """Remove the tool called `name` and announce the change."""
    server.remove_tool(name)
    await _tools_changed(ctx)
    return f"removed {name}"


@server.tool()
async def log_something(level: str, text: str, ctx: Context) -> str:
    """Send a notifications/message at `level` (legacy logging; modern needs the logLevel opt-in)."""
    await ctx.log(level, text, logger_name="peer")  # type: ignore[arg-type]
    return "logged"


@server.resource("peer://greeting", name="greeting", mime_type="text/plain")
def greeting() -> str:
    """A static text resource."""
    return "hello from the modern peer"


@server.prompt()
def greet(name: str) -> str:
    """A one-message prompt."""
    return f"Please greet {name}."


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("transport", choices=["stdio", "http"], nargs="?", default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=39021)
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio")
    else:
        server.run("streamable-http", host=args.host, port=args.port, streamable_http_path="/mcp")


if __name__ == "__main__":
    main()
