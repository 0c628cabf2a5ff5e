"""Qualified names: the separator, the hooks for model APIs that forbid dots, collisions
reported (never a silent overwrite) with both tools reachable by the tuple form."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

import conduit_mcp as mcp
from conduit_mcp.hub import MODEL_SAFE
from conduit_mcp.hub.names import Naming
from conduit_mcp.hub.view import MemberLists, merge
from conduit_mcp.types import Prompt, Resource, Tool

from .conftest import scripted

pytestmark = pytest.mark.timeout(60)

StartHub = Callable[..., mcp.Hub]


def _tool(name: str) -> Tool:
    return Tool(name, None, {})


def test_merge_keeps_config_order_and_reports_every_collision() -> None:
    a = MemberLists(
        "a",
        tools=(("t", _tool("x")),),
        prompts=(("p", Prompt("x")),),
        resources=(Resource("file:///same", "same"),),
    )
    b = MemberLists(
        "b",
        tools=(("t", _tool("y")), ("b.z", _tool("z"))),
        prompts=(("p", Prompt("y")),),
        resources=(Resource("file:///same", "same"), Resource("file:///b", "b")),
    )
    view = merge(["b", "a"], {"a": a, "b": b}, {"a", "b"}, 7, ready={"a"})
    assert view.tool_routes["t"] == ("b", "y")  # b comes first in the config
    assert [t.name for t in view.tools] == ["t", "b.z"]
    assert {(c.kind, c.name) for c in view.collisions} == {
        ("tools", "t"),
        ("prompts", "p"),
        ("resources", "file:///same"),
    }
    assert view.resource_routes == {"file:///same": "b", "file:///b": "b"}
    assert view.ready == {"a"} and view.listed == {"a", "b"}
    shown = merge(["a", "b"], {"a": a, "b": b}, {"a"}, 8)
    assert shown.tool_routes == {"t": ("a", "x")} and shown.collisions == ()


def test_naming_round_trip() -> None:
    n = Naming("__", pattern=MODEL_SAFE)
    assert n.qualify("files", "read") == "files__read"
    assert n.unqualify("files__read__all") == ("files", "read__all")
    assert n.acceptable("files__read") and not n.acceptable("files.read")
    assert not n.acceptable("x" * 65)


def test_a_separator_for_model_apis(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"files": scripted()}}, separator="__", name_pattern=MODEL_SAFE)
    hub.await_ready(timeout=20)
    assert hub.tool("files__add") is not None and hub.tool("files.add") is None
    assert hub.call_tool("files__add", {"a": 1, "b": 2}).text == "3"
    assert all(t.name.startswith("files__") for t in hub.tools())


def test_two_copies_of_one_server_never_collide_by_default(start_hub: StartHub) -> None:
    # the official SDK's ClientSessionGroup raises here: same server name, same tools
    hub = start_hub({"mcpServers": {"one": scripted(), "two": scripted()}})
    hub.await_ready(timeout=20, servers="all")
    # tools and prompts are qualified by the config key: no collision
    assert {c.kind for c in hub.collisions()} <= {"resources", "resource_templates"}
    assert hub.call_tool("one.add", {"a": 1, "b": 1}).text == "2"
    # a URI is not qualified: both copies list it, the collision says so, the first
    # server in config order serves the plain URI and the tuple form reaches either
    uri = "test://static/hello"
    assert any(
        c.name == uri and c.servers == (("one", uri), ("two", uri)) for c in hub.collisions()
    )
    assert hub.resource_server(uri) == "one"
    assert hub.read_resource(("two", uri)).contents
    assert hub.call_tool("two.add", {"a": 2, "b": 2}).text == "4"


def test_a_hook_that_maps_two_names_to_one_is_reported_and_both_stay_reachable(
    start_hub: StartHub, caplog: pytest.LogCaptureFixture
) -> None:
    # a careless hook: drops the server name, so one.add and two.add are both "add"
    hub = start_hub(
        {"mcpServers": {"one": scripted(), "two": scripted()}},
        qualify=lambda server, name: name,
        unqualify=lambda qualified: None,
    )
    hub.await_ready(timeout=20, servers="all")
    # unqualify does not undo qualify: refused, reported, reachable by tuple
    assert hub.tools() == ()
    assert ("one", "add") in hub.misnamed() and ("two", "add") in hub.misnamed()
    assert hub.call_tool(("one", "add"), {"a": 1, "b": 1}).text == "2"
    assert hub.call_tool(("two", "add"), {"a": 1, "b": 2}).text == "3"


def test_a_collision_keeps_the_first_and_warns(
    start_hub: StartHub, caplog: pytest.LogCaptureFixture
) -> None:
    # a hook that is one-to-one for each server, but both servers say "same_tool"
    def qualify(server: str, name: str) -> str:
        return "same" if name == "echo" else f"{server}-{name}"

    def unqualify(qualified: str) -> tuple[str, str] | None:
        if qualified == "same":
            return ("one", "echo")
        server, _, name = qualified.partition("-")
        return (server, name) if name else None

    with caplog.at_level(logging.WARNING, logger="conduit_mcp.hub"):
        hub = start_hub(
            {"mcpServers": {"one": scripted(), "two": scripted()}},
            qualify=qualify,
            unqualify=unqualify,
        )
        hub.await_ready(timeout=20, servers="all")
    assert hub.route("same") == ("one", "echo")
    assert ("two", "echo") in hub.misnamed()  # unqualify("same") is one's, not two's
    assert hub.call_tool(("two", "echo"), {"text": "hi"}).text == "hi"


def test_a_real_collision_is_in_collisions(
    start_hub: StartHub, caplog: pytest.LogCaptureFixture
) -> None:
    # both servers' "echo" qualify to "echo", and unqualify cannot tell them apart: a hook
    # whose unqualify returns the caller's own server is not one-to-one across servers
    table = {"one": "one", "two": "two"}

    def qualify(server: str, name: str) -> str:
        return name if name == "echo" else f"{table[server]}-{name}"

    seen: list[str] = []

    def unqualify(qualified: str) -> tuple[str, str] | None:
        if qualified == "echo":
            seen.append(qualified)
            # each server's check sees its own name back (a hook that remembers the caller)
            return (current[0], "echo")
        server, _, name = qualified.partition("-")
        return (server, name) if name else None

    current = ["one"]

    def qualify_tracking(server: str, name: str) -> str:
        current[0] = server
        return qualify(server, name)

    with caplog.at_level(logging.WARNING, logger="conduit_mcp.hub"):
        hub = start_hub(
            {"mcpServers": {"one": scripted(), "two": scripted()}},
            qualify=qualify_tracking,
            unqualify=unqualify,
        )
        hub.await_ready(timeout=20, servers="all")
    collisions = [c for c in hub.collisions() if c.name == "echo"]
    assert len(collisions) == 1
    assert collisions[0].servers == (("one", "echo"), ("two", "echo"))
    assert hub.route("echo") == ("one", "echo")  # the first in config order keeps the name
    assert hub.call_tool(("two", "echo"), {"text": "two"}).text == "two"
    assert any("collision" in r.getMessage() for r in caplog.records)
