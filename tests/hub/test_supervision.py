"""Killing each part of a hub, and what the user sees: a member's server, a member's
connection actor, the view actor; a member that gives up is restarted by the hub with
backoff, and one that keeps giving up is left closed (``max_restarts``)."""

from __future__ import annotations

import queue
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.hub.view_actor import Crash
from conduit_mcp.testing.waiting import until

from .conftest import MISSING, scripted

pytestmark = pytest.mark.timeout(60)

StartHub = Callable[..., mcp.Hub]


def test_a_killed_member_server_comes_back_and_its_tools_return(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"a": scripted(), "b": scripted()}})
    hub.await_ready(timeout=20, servers="all")
    first = hub.call_tool("b.pid").text
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(hub.call_tool, "b.never", {}, timeout=20)
        hub.wait_for(lambda h: h.client("b").status().state == "ready", timeout=5)
        with pytest.raises(mcp.Error) as crash:
            hub.call_tool("b.crash", timeout=5)
        # the call in flight on the dead server fails (it may have run: never retried)
        with pytest.raises(mcp.Error) as lost:
            pending.result(timeout=20)
    assert crash.value.kind == "transport" and lost.value.kind == "transport"
    # a's tools never left the view
    assert hub.tool("a.add") is not None
    # b may still read "ready" until its connection sees the exit: wait for the new server

    def new_pid() -> bool:
        try:
            return hub.call_tool("b.pid", timeout=5).text != first
        except mcp.Error:
            return False

    hub.await_ready(timeout=20, servers=["b"])
    until(new_pid, what="b's new server", timeout=20)
    assert hub.call_tool("b.pid").text != first
    assert hub.tool("b.add") is not None


def test_a_killed_member_connection_actor_is_restarted_by_its_tree(
    start_hub: StartHub, crashable: Any
) -> None:
    hub = start_hub({"mcpServers": {"a": scripted(), "b": scripted()}})
    hub.await_ready(timeout=20, servers="all")
    client = hub.client("b")
    old = client._runtime().registry.get("connection")
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(hub.call_tool, "b.never", {}, timeout=20)
        hub.wait_for(lambda h: len(pending.running() * [1]) == 1, timeout=5)
        old.tell(crashable())
        with pytest.raises(mcp.Error) as lost:
            pending.result(timeout=20)
    assert lost.value.kind in ("transport", "unavailable")
    # the member's own supervisor restarts the connection: same member, a new connection,
    # and ready (the view may still list b as ready from before the crash)
    hub.wait_for(
        lambda h: (
            client._runtime().registry.get("connection") not in (None, old)
            and h.status()["b"].state == "ready"
            and "b" in h._board.view.ready
        ),
        timeout=20,
    )
    assert hub.client("b") is client
    assert hub.call_tool("b.add", {"a": 1, "b": 1}).text == "2"
    assert hub.tool("b.add") is not None and hub.tool("a.add") is not None


def test_a_killed_view_actor_is_restarted_and_the_view_stays_readable(
    start_hub: StartHub,
) -> None:
    hub = start_hub({"mcpServers": {"a": scripted(), "b": scripted()}})
    hub.await_ready(timeout=20, servers="all")
    board = hub._board
    old = board.view_ref
    assert old is not None
    before = hub.tools()
    old.tell(Crash())
    hub.wait_for(lambda h: board.view_ref not in (None, old), timeout=10)
    # the snapshot was readable all along, and calls never needed the view actor
    assert hub.tools() == before or {t.name for t in hub.tools()} == {t.name for t in before}
    assert hub.call_tool("a.add", {"a": 2, "b": 3}).text == "5"
    # the new view actor hears list_changed again
    hub.call_tool("b.add_tool", {"name": "after_crash"})
    hub.wait_for(lambda h: h.tool("b.after_crash") is not None, timeout=10)
    # and member status changes
    with pytest.raises(mcp.Error):
        hub.call_tool("a.crash", timeout=5)
    hub.wait_for(lambda h: h.tool("a.add") is None, timeout=10)
    hub.await_ready(timeout=20, servers=["a"])
    assert hub.tool("a.add") is not None


def test_a_member_that_gives_up_is_restarted_by_the_hub(start_hub: StartHub) -> None:
    # max_reconnects=0: the member's client gives up at its first failure (it exits,
    # on_give_up="stop"), so each restart below is the hub's
    hub = start_hub({"mcpServers": {"a": scripted(), "b": scripted()}}, max_reconnects=0)
    hub.await_ready(timeout=20, servers="all")
    notes: queue.Queue[mcp.HubNotification] = queue.Queue()
    hub.subscribe_notifications(notes, methods=["test/after"])
    first = hub.client("b")
    with pytest.raises(mcp.Error):
        hub.call_tool("b.crash", timeout=5)
    hub.wait_for(
        lambda h: "b" in h._board.members and h._board.members["b"].client not in (None, first),
        timeout=10,
    )
    hub.await_ready(timeout=20, servers=["b"])
    assert hub.client("b") is not first
    assert hub.restarts() == {"a": 0, "b": 1}
    assert hub.call_tool("b.add", {"a": 1, "b": 1}).text == "2"
    # the hub's subscribers hear the new incarnation, once
    hub.call_tool("b.notify", {"method": "test/after"})
    hub.call_tool("b.notify", {"method": "test/after"})
    got = [notes.get(timeout=10), notes.get(timeout=10)]
    assert [n.server for n in got] == ["b", "b"]
    hub.call_tool("a.notify", {"method": "test/after"})
    assert notes.get(timeout=10).server == "a"
    assert notes.empty()


EXITS = {"command": sys.executable, "args": ["-c", "raise SystemExit(3)"]}


def test_a_member_that_keeps_giving_up_is_left_closed(start_hub: StartHub) -> None:
    hub = start_hub(
        {"mcpServers": {"a": scripted(), "gone": EXITS}},
        max_reconnects=0,
        max_restarts=2,
        max_seconds=60,
        restart_base=0.01,
    )
    hub.await_ready(timeout=20, servers=["a"])
    hub.wait_for(lambda h: h.status()["gone"].reason == "max_restarts", timeout=20)
    status = hub.status()["gone"]
    assert status.state == "closed"
    # the limit at its edge: 2 restarts allowed, the third exit leaves it closed
    assert hub.restarts() == {"a": 0, "gone": 2}
    with pytest.raises(mcp.Error) as info:
        hub.call_tool("gone.add")
    assert (info.value.reason, info.value.data["reason"]) == ("server_not_ready", "max_restarts")
    assert hub.status()["a"].state == "ready"
    # add_server starts it afresh (the count starts again)
    hub.add_server("gone", scripted())
    hub.await_ready(timeout=20, servers=["gone"])
    assert hub.restarts()["gone"] == 0


def test_max_restarts_zero_never_restarts(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"gone": EXITS}}, max_reconnects=0, max_restarts=0)
    hub.wait_for(lambda h: h.status()["gone"].reason == "max_restarts", timeout=20)
    assert hub.restarts() == {"gone": 0}


def test_on_give_up_close_keeps_a_member_closed_to_show_why(start_hub: StartHub) -> None:
    hub = start_hub(
        {"mcpServers": {"gone": {**EXITS, "conduit": {"on_give_up": "close", "max_reconnects": 0}}}}
    )
    hub.wait_for(lambda h: h.status()["gone"].state == "closed", timeout=20)
    assert hub.status()["gone"].reason == "max_reconnects"
    assert hub._board.members["gone"].gen == 1  # never restarted


def test_a_missing_command_is_closed_at_once_not_restarted(start_hub: StartHub) -> None:
    # no retry can fix a missing command (the client closes at once, spawn_failed): the hub
    # leaves it closed; add_server or reload starts it again
    hub = start_hub({"mcpServers": {"gone": MISSING}})
    hub.wait_for(lambda h: h.status()["gone"].state == "closed", timeout=20)
    assert hub.status()["gone"].reason == "spawn_failed"
    with pytest.raises(mcp.Error) as info:
        hub.call_tool("gone.read")
    assert "spawn_failed" in info.value.message
    assert hub._board.members["gone"].gen == 1  # never restarted


def test_a_listing_that_fails_is_fetched_again(start_hub: StartHub, tmp_path: Any) -> None:
    import json

    script = tmp_path / "drop_first_list.json"
    rule = {"match": {"method": "tools/list"}, "action": "drop", "times": 1}
    script.write_text(json.dumps({"rules": [rule]}))
    hub = start_hub({"mcpServers": {"a": scripted("--script", str(script))}}, list_timeout=0.5)
    # the first tools/list is never answered: that fetch times out, the next one succeeds
    hub.await_ready(timeout=20, servers=["a"])
    assert hub.tool("a.add") is not None
