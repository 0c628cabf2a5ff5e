"""A legacy-only MCP peer on the official ``mcp`` 1.30.0 ``FastMCP`` whose tools ask the client.

Not a test module (pytest does not enter ``peers`` folders: mcp 2.x, in the main venv, has no
``mcp.server.fastmcp``). Run it with the legacy venv (``make peers``):

    .venv-legacy/bin/python tests/interop/peers/handler_legacy_peer.py stdio
    .venv-legacy/bin/python tests/interop/peers/handler_legacy_peer.py http --port 39032

Tools, each a standalone server request in the middle of the call (what most servers in the
wild still run):

* ``ask_name()``: ``ctx.elicit`` (form, related to the call): ``"hello <name>"``, or
  ``"declined"`` / ``"cancelled"``;
* ``sample(prompt)``: ``session.create_message`` (related to the call):
  ``"<model>: <text>"``;
* ``roots()``: ``session.list_roots()``, which the SDK sends with no related request (over
  HTTP: on the session's GET stream): the roots as a JSON list of ``[uri, name]``.
"""

from __future__ import annotations

import argparse
import json

from mcp.server.fastmcp import Context, FastMCP
from mcp.types import SamplingMessage, TextContent
from pydantic import BaseModel


class Name(BaseModel):
    name: str


def build(host: str, port: int) -> FastMCP:
    server = FastMCP(
        "conduit-handler-legacy-peer",
        log_level="WARNING",
        host=host,
        port=port,
        streamable_http_path="/mcp",
    )

    @server.tool()
    async def ask_name(ctx: Context) -> str:
        """Ask the user's name."""
        answer = await ctx.elicit("What is your name?", Name)
        if answer.action == "accept":
            return f"hello {answer.data.name}"
        return {"decline": "declined", "cancel": "cancelled"}[answer.action]

    @server.tool()
    async def sample(prompt: str, ctx: Context) -> str:
        """Sample the client's model."""
        result = await ctx.session.create_message(
            messages=[SamplingMessage(role="user", content=TextContent(type="text", text=prompt))],
            max_tokens=32,
            related_request_id=ctx.request_id,
        )
        content = result.content
        text = content.text if isinstance(content, TextContent) else repr(content)
        return f"{result.model}: {text}"

    @server.tool()
    async def roots(ctx: Context) -> str:
        """The client's roots."""
        listed = await ctx.session.list_roots()
        return json.dumps([[str(r.uri), r.name] for r in listed.roots])

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("transport", choices=["stdio", "http"], nargs="?", default="stdio")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=39032)
    args = parser.parse_args()
    server = build(args.host, args.port)
    server.run("stdio" if args.transport == "stdio" else "streamable-http")


if __name__ == "__main__":
    main()
