"""Typed metadata against the official ``mcp`` 2.3.0 server, both eras; and, on the same
hostile lists, what the official client does (the "typed metadata" row of
docs/comparison.md, "Features", checked rather than remembered)."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

import conduit_mcp as mcp

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

PEER = Path(__file__).parent / "peers" / "metadata_peer.py"


@pytest.fixture(scope="module")
def peer_cmd(modern_peer_cmd: list[str]) -> list[str]:
    """argv of the metadata peer; ``modern_peer_cmd`` first checks that mcp 2.3.0 is there
    (a missing peer skips locally and fails in CI, as for every interop peer)."""
    return [modern_peer_cmd[0], str(PEER)]


@pytest.mark.parametrize(("protocol", "era"), [("auto", "modern"), ("legacy", "legacy")])
def test_the_official_servers_metadata_arrives_typed(
    peer_cmd: list[str], protocol: str, era: str
) -> None:
    with mcp.Client.start(mcp.Stdio(peer_cmd[0], peer_cmd[1:]), protocol=protocol) as client:
        assert client.await_ready(timeout=20).era == era
        info = client.server_info()
        assert info is not None
        assert (info.name, info.version, info.title) == (
            "conduit-metadata-peer",
            "2.0.0",
            "Metadata peer",
        )
        assert info.description == "Declares icons, titles and annotations."
        assert info.website_url == "https://example.com/peer"
        # The SDK sends all three icons; the http: one is refused (https: or data: only).
        assert len(info.raw["icons"]) == 3
        assert [icon.src[:6] for icon in info.icons] == ["data:i", "https:"]
        assert info.icons[1].theme == "dark" and info.icons[0].sizes == ("1x1",)

        tools = {tool.name: tool for tool in client.list_all_tools()}
        add = tools["add"]
        assert add.display_name == "Add numbers"
        assert add.annotations == mcp.ToolAnnotations("Add", True, None, True, False)
        assert add.icons == (mcp.Icon("https://example.com/add.png", "image/png", ("48x48",)),)
        assert add.meta == {"example.com/category": "math"}
        wipe = tools["wipe"]
        assert wipe.annotations is not None and wipe.annotations.destructive
        assert wipe.display_name == "wipe"

        (greet,) = client.list_all_prompts()
        assert greet.title == "Greeting" and greet.icons[0].theme == "light"
        (greeting,) = client.list_all_resources()
        assert greeting.title == "Greeting text"
        assert greeting.annotations == mcp.Annotations(("user",), 0.5)
        assert greeting.meta == {"example.com/origin": "peer"}
        (item,) = client.list_all_resource_templates()
        assert item.title == "Item" and item.icons[0].sizes == ("any",)
        assert item.annotations == mcp.Annotations(("assistant",))


UNSAFE_ICONS = {
    "name": "a",
    "inputSchema": {"type": "object"},
    "icons": [{"src": "javascript:alert(1)"}, {"src": "file:///etc/passwd"}],
}
ICONS_NOT_A_LIST = {"name": "a", "inputSchema": {"type": "object"}, "icons": "x"}
STRING_HINT = {
    "name": "a",
    "inputSchema": {"type": "object"},
    "annotations": {"readOnlyHint": "yes"},
}
UNKNOWN_THEME = {
    "name": "a",
    "inputSchema": {"type": "object"},
    "icons": [{"src": "https://example.com/i.png", "theme": "neon"}],
}
FINE = {"name": "b", "inputSchema": {"type": "object"}}


def _official_list(server: Any, tools: list[dict[str, Any]]) -> Any:
    import anyio
    from mcp import Client, StdioServerParameters

    server.set_rules([{"match": {"method": "tools/list"}, "action": {"result": {"tools": tools}}}])
    cmd = server.command()
    params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=server.env())

    async def run() -> Any:
        async with Client(params, mode="legacy", read_timeout_seconds=20) as client:
            return (await client.list_tools()).tools

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return anyio.run(run)


def _contains(error: BaseException, kind: type[BaseException]) -> bool:
    if isinstance(error, kind):
        return True
    return isinstance(error, BaseExceptionGroup) and any(
        _contains(inner, kind) for inner in error.exceptions
    )


def _conduit_list(server: Any, tools: list[dict[str, Any]]) -> list[mcp.Tool]:
    server.set_rules([{"match": {"method": "tools/list"}, "action": {"result": {"tools": tools}}}])
    with mcp.Client.start(server.stdio()) as client:
        client.await_ready(timeout=20)
        return client.list_all_tools()


def test_on_the_same_hostile_lists_the_official_client_fails_or_trusts_and_conduit_does_neither(
    make_server, peer_cmd: list[str]
) -> None:
    from pydantic import ValidationError

    server = make_server(era="legacy")
    # Unsafe schemes: the official client hands them over; conduit drops them.
    (official,) = _official_list(server, [UNSAFE_ICONS])
    assert [icon.src for icon in official.icons] == ["javascript:alert(1)", "file:///etc/passwd"]
    assert _conduit_list(server, [UNSAFE_ICONS])[0].icons == ()
    # A malformed icons field or theme: the official client loses the whole list.
    for bad in (ICONS_NOT_A_LIST, UNKNOWN_THEME):
        with pytest.raises(BaseException) as info:  # anyio may wrap it in a group
            _official_list(server, [bad, FINE])
        assert _contains(info.value, ValidationError)
        assert [tool.name for tool in _conduit_list(server, [bad, FINE])] == ["a", "b"]
    # A string hint: pydantic's lax mode reads "yes" as read-only; conduit reads no hint.
    (official,) = _official_list(server, [STRING_HINT])
    assert official.annotations.read_only_hint is True
    (tool,) = _conduit_list(server, [STRING_HINT])
    assert tool.annotations is not None and tool.annotations.read_only_hint is None
    assert not tool.annotations.read_only
