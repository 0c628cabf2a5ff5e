"""Changing a running hub: add_server, remove_server, reload (only what changed restarts)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

import conduit_mcp as mcp
import conduit_mcp.testing

from .conftest import scripted

pytestmark = pytest.mark.timeout(60)

StartHub = Callable[..., mcp.Hub]


def test_add_a_config_entry_or_a_transport_and_remove_it(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"a": scripted()}})
    hub.await_ready(timeout=20)
    hub.add_server("b", scripted("--era", "legacy"))
    hub.add_server("c", mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"]), request_timeout=5)
    hub.await_ready(timeout=20, servers=["b", "c"])
    assert hub.servers() == ("a", "b", "c")
    assert hub.call_tool("c.add", {"a": 1, "b": 1}).text == "2"
    assert hub.status()["b"].era == "legacy"
    client_c = hub.client("c")
    hub.remove_server("c")
    assert hub.servers() == ("a", "b")
    assert hub.tool("c.add") is None
    assert client_c.status().state == "closed"  # its server was stopped
    with pytest.raises(mcp.Error) as info:
        hub.call_tool("c.add", {})
    assert info.value.reason == "unknown_tool"
    with pytest.raises(mcp.Error) as info:
        hub.remove_server("c")
    assert info.value.reason == "unknown_server"
    for name, entry, reason in (
        ("x.y", scripted(), "servers.x.y"),
        ("d", {"command": 3}, "servers.d.command"),
        ("d", 42, "servers.d"),
    ):
        with pytest.raises(mcp.Error) as info:
            hub.add_server(name, entry)  # type: ignore[arg-type]
        assert (info.value.kind, info.value.reason) == ("config", reason)


def test_reload_restarts_only_what_changed(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"keep": scripted(), "change": scripted(), "drop": scripted()}})
    hub.await_ready(timeout=20, servers="all")
    kept, changed = hub.client("keep"), hub.client("change")
    kept_pid = hub.call_tool("keep.pid").text
    done = hub.reload(
        {
            "mcpServers": {
                "keep": scripted(),
                "change": scripted("--name", "renamed"),
                "new": scripted(),
                "off": {**scripted(), "disabled": True},
            }
        }
    )
    assert done == {
        "added": ["new"],
        "removed": ["drop"],
        "restarted": ["change"],
        "kept": ["keep"],
    }
    assert hub.client("keep") is kept and hub.call_tool("keep.pid").text == kept_pid
    hub.await_ready(timeout=20, servers=["change", "new"])
    assert hub.client("change") is not changed
    assert changed.status().state == "closed"
    assert hub.client("change").server_info().name == "renamed"
    assert hub.servers() == ("keep", "change", "new")
    assert hub.tool("drop.add") is None
    # a bad config changes nothing
    with pytest.raises(mcp.Error) as info:
        hub.reload({"mcpServers": {"keep": {"command": ""}}})
    assert info.value.reason == "servers.keep.command"
    assert hub.servers() == ("keep", "change", "new")


def test_an_in_process_server_is_a_member_too(start_hub: StartHub, tmp_path: Path) -> None:
    hub = start_hub({"mcpServers": {"a": scripted()}})
    hub.add_server("mem", mcp.testing.ScriptedServer(tmp_path).inprocess())
    hub.await_ready(timeout=20, servers="all")
    assert hub.tool("mem.add") is not None
    assert hub.call_tool(("mem", "add"), {"a": 2, "b": 3}).text == "5"
    hub.remove_server("mem")
    assert hub.tool("mem.add") is None
