"""An official ``mcp`` 2.3.0 ``MCPServer`` that declares every piece of display metadata.

Not a test module. Run it: ``.venv/bin/python tests/metadata/peers/metadata_peer.py`` (stdio,
both eras). The server, a tool, a prompt, a resource and a template each carry a title,
icons (one of them ``http:``, which a client must refuse), annotations and ``_meta``, built
with the SDK's own types, so the JSON is what that SDK really sends.
"""

from __future__ import annotations

import warnings

from mcp.server.mcpserver import MCPServer
from mcp.types import Annotations, Icon, ToolAnnotations

warnings.filterwarnings("ignore", message=".*SEP-2577.*")

PNG = "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="

server = MCPServer(
    "conduit-metadata-peer",
    title="Metadata peer",
    description="Declares icons, titles and annotations.",
    website_url="https://example.com/peer",
    icons=[
        Icon(src=PNG, mime_type="image/png", sizes=["1x1"]),
        Icon(src="https://example.com/peer-dark.svg", mime_type="image/svg+xml", theme="dark"),
        Icon(src="http://example.com/plain-http.png"),
    ],
    version="2.0.0",
    log_level="WARNING",
)


@server.tool(
    title="Add numbers",
    annotations=ToolAnnotations(
        title="Add", read_only_hint=True, idempotent_hint=True, open_world_hint=False
    ),
    icons=[Icon(src="https://example.com/add.png", mime_type="image/png", sizes=["48x48"])],
    meta={"example.com/category": "math"},
)
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@server.tool(annotations=ToolAnnotations(destructive_hint=True))
def wipe() -> str:
    """Pretend to delete everything."""
    return "wiped"


@server.prompt(title="Greeting", icons=[Icon(src=PNG, theme="light")])
def greet(name: str) -> str:
    """Greet someone by name."""
    return f"Hello, {name}!"


@server.resource(
    "peer://greeting",
    title="Greeting text",
    icons=[Icon(src="https://example.com/text.png")],
    annotations=Annotations(audience=["user"], priority=0.5),
    meta={"example.com/origin": "peer"},
)
def greeting() -> str:
    """A fixed greeting."""
    return "hello from the peer"


@server.resource(
    "peer://item/{item_id}",
    title="Item",
    icons=[Icon(src="https://example.com/item.png", sizes=["any"])],
    annotations=Annotations(audience=["assistant"]),
)
def item(item_id: str) -> str:
    """One item."""
    return f"item {item_id}"


if __name__ == "__main__":
    server.run("stdio")
