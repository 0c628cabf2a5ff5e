"""A real MCP peer on the ``fastmcp`` package (4.1.6), for the Hub's interop test.

Not a test module. It needs fastmcp, which stays out of ``.venv``: ``make peers`` puts it in
``.peers/python-time-*-fastmcp-*`` (with mcp-server-time). Run it:

    .peers/python-time-2026.10.19-fastmcp-4.1.6/bin/python tests/peers/fastmcp_peer.py

Tools ``add(a, b)`` and ``echo(text)``, the names modern_peer.py has too (so a Hub routes two
servers' ``add`` by their config keys), and ``whoami()``, which says which SDK answered.
"""

from __future__ import annotations

from fastmcp import FastMCP

server = FastMCP("conduit-fastmcp-peer", version="1.0.0")


@server.tool
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool
def echo(text: str) -> str:
    """Return the text unchanged."""
    return text


@server.tool
def whoami() -> str:
    """Name the SDK that serves this tool."""
    return "fastmcp"


if __name__ == "__main__":
    server.run("stdio", show_banner=False)
