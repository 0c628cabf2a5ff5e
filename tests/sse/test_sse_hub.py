"""A config entry of ``type: "sse"`` reaches a legacy HTTP+SSE server through the Hub: the
loader builds an ``Sse`` transport with the entry's headers, and the Hub lists and routes its
tools like any other member's."""

from __future__ import annotations

import sys

import pytest

import conduit_mcp as mcp

from .sse_server import SseServer

pytestmark = pytest.mark.timeout(30)

TOKEN = "sse-hub-t0k"


def test_a_type_sse_entry_is_an_sse_member_of_the_hub() -> None:
    server = SseServer(token=TOKEN)
    config = {
        "mcpServers": {
            "old": {
                "type": "sse",
                "url": server.url,
                "headers": {"Authorization": f"Bearer {TOKEN}"},
            },
            "local": {"command": sys.executable, "args": ["-m", "conduit_mcp.testing"]},
        }
    }
    try:
        with mcp.Hub.start(mcp.load_config(config)) as hub:
            hub.await_ready(timeout=15, servers="all")
            status = hub.status()["old"]
            assert (status.state, status.era) == ("ready", "legacy")
            assert hub.tool("old.add") is not None
            assert hub.call_tool("old.add", {"a": 1, "b": 2}, timeout=5).text == "3"
            assert hub.call_tool(("local", "add"), {"a": 2, "b": 2}, timeout=5).text == "4"
        # the token went as the entry's header, on the stream and on every POST
        assert server.headers and all(
            h.get("Authorization") == f"Bearer {TOKEN}" for h in server.headers
        )
    finally:
        server.stop()
