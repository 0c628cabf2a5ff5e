"""Typed metadata through the public API, against the scripted server (``--metadata``) in both
eras, and against a hostile one whose lists carry every bad shape."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.protocol.metadata import MAX_ICONS

pytestmark = pytest.mark.timeout(60)

READY = 20.0


@pytest.fixture
def start_client() -> Iterator[Callable[..., mcp.Client]]:
    clients: list[mcp.Client] = []

    def start(transport: Any, **options: Any) -> mcp.Client:
        options.setdefault("backoff", lambda attempt: 0.01)
        client = mcp.Client.start(transport, **options)
        clients.append(client)
        client.await_ready(timeout=READY)
        return client

    yield start
    for client in clients:
        client.stop()


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_server_info_tools_prompts_resources_and_templates_carry_typed_metadata(
    make_server, start_client, era: str
) -> None:
    server = make_server(era=era, extra_args=["--metadata"])
    client = start_client(server.stdio())
    assert client.status().era == era

    info = client.server_info()
    assert info is not None
    assert (info.name, info.title, info.website_url) == (
        "scripted",
        "Scripted test server",
        "https://example.com/scripted",
    )
    assert info.description == "Deterministic tools for exercising MCP clients."
    # Three icons offered; the javascript: one is refused, the other two are typed.
    assert len(info.raw["icons"]) == 3
    png, svg = info.icons
    assert png.is_data and png.mime_type == "image/png" and png.sizes == ("1x1",)
    assert (svg.src, svg.mime_type, svg.sizes, svg.theme) == (
        "https://example.com/scripted.svg",
        "image/svg+xml",
        ("any",),
        "dark",
    )

    tools = {tool.name: tool for tool in client.list_all_tools()}
    add = tools["add"]
    assert add.title == "Add numbers" and add.display_name == "Add numbers"
    assert add.annotations == mcp.ToolAnnotations("Add", True, None, None, False)
    assert add.annotations is not None and add.annotations.read_only
    assert not add.annotations.destructive and not add.annotations.open_world
    assert add.icons == (
        mcp.Icon("https://example.com/add.png", "image/png", ("48x48", "96x96"), "light"),
    )
    assert add.meta == {"example.com/category": "math"}
    echo = tools["echo"]
    assert echo.title == "Echo text" and echo.annotations == mcp.ToolAnnotations(
        title="Echo text", idempotent_hint=True
    )
    crash = tools["crash"]
    assert crash.annotations is not None and crash.annotations.destructive
    assert crash.title is None and crash.display_name == "crash"
    plain = tools["pid"]
    assert (plain.title, plain.annotations, plain.icons, plain.meta) == (None, None, (), None)
    assert client.tool("add") == add  # the cached point read is the same typed value

    greet = next(p for p in client.list_all_prompts() if p.name == "greet")
    assert greet.title == "Greeting" and len(greet.icons) == 1 and greet.icons[0].is_data
    assert greet.meta == {"example.com/tone": "friendly"}

    hello = next(r for r in client.list_all_resources() if r.name == "hello")
    assert (hello.title, hello.size, hello.meta) == ("Hello", 13, {"example.com/origin": "static"})
    assert hello.annotations == mcp.Annotations(("user", "assistant"), 0.8, "2025-01-12T15:00:58Z")
    assert hello.icons == (mcp.Icon("https://example.com/text.png", "image/png"),)
    blob = next(r for r in client.list_all_resources() if r.name == "blob")
    assert (blob.title, blob.icons, blob.annotations, blob.size) == (None, (), None, None)

    (item,) = client.list_all_resource_templates()
    assert item.title == "Item" and item.annotations == mcp.Annotations(("assistant",))
    assert len(item.icons) == 1


def test_the_asyncio_front_end_sees_the_same_metadata(make_server, start_client) -> None:
    client = start_client(make_server(era="modern", extra_args=["--metadata"]).stdio())

    async def read() -> tuple[Any, Any]:
        tools = await client.aio.list_all_tools()
        return next(t for t in tools if t.name == "add"), client.server_info()

    add, info = asyncio.run(read())
    assert add.annotations == mcp.ToolAnnotations("Add", True, None, None, False)
    assert info is not None and len(info.icons) == 2


# A server whose lists carry every bad shape of metadata: each item must still be listed.
HOSTILE_TOOLS = [
    {
        "name": "bad_shapes",
        "inputSchema": {"type": "object"},
        "title": {"text": "no"},
        "icons": "https://example.com/i.png",
        "annotations": ["readOnlyHint"],
        "_meta": "x",
    },
    {
        "name": "unsafe_icons",
        "inputSchema": {"type": "object"},
        "icons": [
            {"src": "javascript:alert(document.cookie)"},
            {"src": "file:///etc/passwd"},
            {"src": "http://example.com/plain-http.png"},
            {"src": "https://user:pw@example.com/creds.png"},
            {"src": "data:text/html;base64,PHNjcmlwdD4="},
            {"src": "https://example.com/ok.png", "theme": "neon"},
            {"src": "https://example.com/ok.png", "mimeType": "text/html"},
            {"src": "https://example.com/kept.png"},
        ],
        "annotations": {"readOnlyHint": "true", "destructiveHint": 0, "title": 3},
    },
    {
        "name": "icon_flood",
        "inputSchema": {"type": "object"},
        "icons": [{"src": f"https://example.com/{i}.png"} for i in range(5000)],
    },
]
HOSTILE_RESOURCES = [
    {
        "uri": "test://hostile",
        "name": "hostile",
        "size": -5,
        "annotations": {"audience": ["root", "user", {"x": 1}], "priority": 7},
        "icons": [None, 3, {"src": None}],
    }
]
HOSTILE_INFO = {
    "name": "hostile",
    "version": "6.6.6",
    "title": 3,
    "description": ["x"],
    "websiteUrl": "javascript:alert(1)",
    "icons": {"src": "https://example.com/i.png"},
}


def test_a_hostile_servers_metadata_is_dropped_and_every_item_stays_listed(
    make_server, start_client
) -> None:
    rules = [
        {"match": {"method": "tools/list"}, "action": {"result": {"tools": HOSTILE_TOOLS}}},
        {
            "match": {"method": "resources/list"},
            "action": {"result": {"resources": HOSTILE_RESOURCES}},
        },
        {
            "match": {"method": "initialize"},
            "action": {
                "result": {
                    "protocolVersion": "2025-11-25",
                    "capabilities": {"tools": {}, "resources": {}},
                    "serverInfo": HOSTILE_INFO,
                }
            },
        },
    ]
    client = start_client(make_server(era="legacy", rules=rules).stdio())
    info = client.server_info()
    assert info is not None and (info.name, info.version) == ("hostile", "6.6.6")
    assert (info.title, info.description, info.website_url, info.icons) == (None, None, None, ())

    tools = {tool.name: tool for tool in client.list_all_tools()}
    assert list(tools) == ["bad_shapes", "unsafe_icons", "icon_flood"]
    bad = tools["bad_shapes"]
    assert (bad.title, bad.icons, bad.annotations, bad.meta) == (None, (), None, None)
    assert bad.raw["annotations"] == ["readOnlyHint"]  # still there for whoever wants it
    unsafe = tools["unsafe_icons"]
    assert unsafe.icons == (mcp.Icon("https://example.com/kept.png"),)
    assert unsafe.annotations == mcp.ToolAnnotations()  # no hint survived: the defaults apply
    assert unsafe.annotations.destructive and not unsafe.annotations.read_only
    assert len(tools["icon_flood"].icons) == MAX_ICONS

    (hostile,) = client.list_all_resources()
    assert hostile.size is None and hostile.icons == ()
    assert hostile.annotations == mcp.Annotations(("user",))
