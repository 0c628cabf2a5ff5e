"""A whole ``list_all_*`` walk is bounded by size (``max_list_bytes``), not only by pages:
a server whose cursors never end, with large pages, cannot grow the client without bound.
At the edge, for the blocking, asyncio and futures front ends."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson
import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(60)

FILLER = "x" * 2000


def _page(i: int, cursor: str | None) -> dict[str, Any]:
    tool = {"name": f"t{i}", "description": FILLER, "inputSchema": {"type": "object"}}
    page: dict[str, Any] = {"tools": [tool]}
    if cursor is not None:
        page["nextCursor"] = cursor
    return page


# Three pages: two that send the cursor back, then the last one.
PAGES = [_page(0, "c"), _page(0, "c"), _page(1, None)]
SIZE = sum(len(orjson.dumps(p)) for p in PAGES)
RULES = [
    {"match": {"method": "tools/list"}, "action": {"result": PAGES[0]}, "times": 2},
    {"match": {"method": "tools/list"}, "action": {"result": PAGES[2]}},
]


def _list_all(client: mcp.Client, front: str) -> tuple[mcp.Tool, ...]:
    if front == "blocking":
        return client.list_all_tools(refresh=True)
    if front == "asyncio":
        return asyncio.run(client.aio.list_all_tools(refresh=True))
    return client.futures.list_all_tools(refresh=True).get(timeout=20)


FRONTS = ["blocking", "asyncio", "futures"]


@pytest.mark.parametrize("front", FRONTS)
def test_a_list_of_exactly_max_list_bytes_is_returned(make_server, start_client, front) -> None:
    client = start_client(make_server(rules=RULES).stdio(), max_list_bytes=SIZE)
    client.await_ready(timeout=10)
    tools = _list_all(client, front)
    assert [t.name for t in tools] == ["t0", "t0", "t1"]


@pytest.mark.parametrize("front", FRONTS)
def test_a_list_one_byte_over_max_list_bytes_fails_naming_the_option(
    make_server, start_client, front
) -> None:
    # validate_output=False: the call below would list the tools again first (a fresh walk)
    client = start_client(
        make_server(rules=RULES).stdio(), max_list_bytes=SIZE - 1, validate_output=False
    )
    client.await_ready(timeout=10)
    with pytest.raises(mcp.Error) as info:
        _list_all(client, front)
    assert (info.value.kind, info.value.reason) == ("protocol", "list_too_large")
    assert "max_list_bytes" in str(info.value)
    assert info.value.data == {"limit": SIZE - 1, "pages": 3}
    # The client is unharmed, and nothing of the walk was cached.
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    assert client.cached_tools() is None


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_an_endless_cursor_stops_at_max_list_bytes_over_http(serve_http, start_client, era) -> None:
    # The cursor never ends; 64 KiB pages; a 1 MiB bound: stopped after 16 pages, not 1000.
    big = {"tools": [{"name": "t", "description": "y" * 65536, "inputSchema": {"type": "object"}}]}
    rules = [
        {"match": {"method": "tools/list"}, "action": {"result": {**big, "nextCursor": "again"}}}
    ]
    _server, srv = serve_http(era=era, rules=rules)
    client = start_client(mcp.Http(srv.url), max_list_bytes=1024 * 1024)
    client.await_ready(timeout=10)
    with pytest.raises(mcp.Error) as info:
        client.list_all_tools()
    assert info.value.reason == "list_too_large"
    assert info.value.data["pages"] == 16


def test_max_list_bytes_is_checked_at_start() -> None:
    with pytest.raises(mcp.Error) as info:
        mcp.Client.start(mcp.Stdio("true"), max_list_bytes=0)
    assert (info.value.kind, info.value.reason) == ("config", "max_list_bytes")


def test_a_refresh_over_an_endless_cursor_stops_at_max_list_bytes(
    make_server, start_client, caplog
) -> None:
    # The first listing is small and cached; after a list_changed the refresher walks an
    # endless cursor of 64 KiB pages: it stops at the bound (16 pages), not at 1000 pages.
    big = {"tools": [{"name": "t", "description": "y" * 65536, "inputSchema": {"type": "object"}}]}
    rules = [
        {"match": {"method": "tools/list"}, "action": {"result": PAGES[2]}, "times": 1},
        {"match": {"method": "tools/list"}, "action": {"result": {**big, "nextCursor": "again"}}},
    ]
    server = make_server(era="legacy", rules=rules)
    client = start_client(server.stdio(), protocol="legacy", max_list_bytes=1024 * 1024)
    client.await_ready(timeout=10)
    assert [t.name for t in client.list_all_tools()] == ["t1"]
    with caplog.at_level("INFO", logger="conduit_mcp.connection"):
        client.call_tool("changed", {"kind": "tools"})
        deadline = time.monotonic() + 10
        while "list_too_large" not in caplog.text and time.monotonic() < deadline:
            time.sleep(0.02)
    assert "refreshing the cached tools failed: protocol/list_too_large" in caplog.text
    assert len(server.received("tools/list")) == 1 + 16
