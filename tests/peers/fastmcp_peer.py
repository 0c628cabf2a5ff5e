"""A real MCP peer on the ``fastmcp`` package (4.1.6), for the Hub's and the SSE interop tests.

Not a test module. It needs fastmcp, which stays out of ``.venv``: ``make peers`` puts it in
``.peers/python-time-*-fastmcp-*`` (with mcp-server-time). Run it:

    .peers/python-time-2026.10.19-fastmcp-4.1.6/bin/python tests/peers/fastmcp_peer.py
    ... tests/peers/fastmcp_peer.py sse --port 39041   # GET /sse, POST /messages/
    ... tests/peers/fastmcp_peer.py http --port 39042  # streamable HTTP at /mcp

stdio by default (the Hub's test); ``sse`` is fastmcp's HTTP+SSE app of 2024-11-05 and
``http`` its streamable HTTP app, both bound to 127.0.0.1 only. The paths are given to
``run`` explicitly, so a change of fastmcp's defaults (or a ``FASTMCP_*`` variable) cannot
move them under the tests.

Tools ``add(a, b)`` and ``echo(text)``, the names modern_peer.py has too (so a Hub routes two
servers' ``add`` by their config keys), and ``whoami()``, which says which SDK answered.
"""

from __future__ import annotations

import argparse

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


PATHS = {"sse": "/sse", "http": "/mcp"}


def main() -> None:
    parser = argparse.ArgumentParser(description="fastmcp 4.1.6 interop peer")
    parser.add_argument("transport", nargs="?", choices=["stdio", *PATHS], default="stdio")
    parser.add_argument("--port", type=int, help="required for sse and http")
    args = parser.parse_args()
    if args.transport == "stdio":
        server.run("stdio", show_banner=False)
        return
    if args.port is None:
        parser.error(f"{args.transport} needs --port")
    server.run(
        args.transport,
        show_banner=False,
        host="127.0.0.1",
        port=args.port,
        path=PATHS[args.transport],
        log_level="WARNING",
    )


if __name__ == "__main__":
    main()
