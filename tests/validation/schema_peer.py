"""Official ``mcp`` 2.3.0 servers whose tools declare output schemas, for the validation tests.

Not a test module (pytest collects only ``test_*.py``). Two servers, one per argument:

    .venv/bin/python tests/validation/schema_peer.py mcpserver   # MCPServer: schemas from types
    .venv/bin/python tests/validation/schema_peer.py lowlevel    # low-level Server: scripted lies

``mcpserver``: tools whose ``outputSchema`` the SDK derives from their return types (a
pydantic model with a nested model, so ``$defs`` and local ``$ref``), as real servers publish
them. ``lowlevel``: the low-level ``Server``, which checks nothing of what its handlers return,
so its tools can break their own declared schemas: ``honest`` keeps it, ``liar`` answers a
string where its schema says integer, ``silent`` answers no ``structuredContent`` at all.
"""

from __future__ import annotations

import sys
import warnings

import anyio
import mcp_types as types
from mcp.server.lowlevel import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from pydantic import BaseModel

warnings.filterwarnings("ignore", message=".*SEP-2577.*")


class Point(BaseModel):
    x: int
    y: int


class Shape(BaseModel):
    name: str
    corners: list[Point]


typed = MCPServer("schema-peer-typed", version="1.0.0", log_level="WARNING")


@typed.tool()
def square(side: int) -> Shape:
    """A square of the given side, from the origin."""
    corners = [(0, 0), (side, 0), (side, side), (0, side)]
    return Shape(name="square", corners=[Point(x=x, y=y) for x, y in corners])


COUNT_SCHEMA = {
    "type": "object",
    "properties": {"count": {"type": "integer"}},
    "required": ["count"],
}
ARGS_SCHEMA = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}


async def list_tools(ctx: object, params: object) -> types.ListToolsResult:
    return types.ListToolsResult(
        tools=[
            types.Tool(name=name, input_schema=ARGS_SCHEMA, output_schema=COUNT_SCHEMA)
            for name in ("honest", "liar", "silent")
        ]
    )


async def call_tool(ctx: object, params: types.CallToolRequestParams) -> types.CallToolResult:
    n = (params.arguments or {}).get("n", 0)
    text = [types.TextContent(type="text", text=str(n))]
    if params.name == "honest":
        return types.CallToolResult(content=text, structured_content={"count": n})
    if params.name == "liar":
        return types.CallToolResult(content=text, structured_content={"count": str(n)})
    return types.CallToolResult(content=text)


lowlevel = Server("schema-peer-lowlevel", on_list_tools=list_tools, on_call_tool=call_tool)


async def run_lowlevel() -> None:
    async with stdio_server() as (read, write):
        await lowlevel.run(read, write, lowlevel.create_initialization_options())


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "mcpserver"
    if which == "mcpserver":
        typed.run("stdio")
    else:
        anyio.run(run_lowlevel)


if __name__ == "__main__":
    main()
