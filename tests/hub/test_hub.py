"""The Hub through its public API: starting, the merged view, routing, status, errors."""

from __future__ import annotations

import queue
import time
from collections.abc import Callable

import pytest

import conduit_mcp as mcp

from .conftest import MISSING, scripted

pytestmark = pytest.mark.timeout(60)

StartHub = Callable[..., mcp.Hub]


#: A server asleep in its start never sees stdin close: stop it after 0.2 s, not the default
#: 2 s, and the test does not wait out the grace it is not about.
QUICK_CLOSE = {"close_grace": 0.2}


def test_a_dead_entry_and_a_hanging_one_delay_none_of_the_others(start_hub: StartHub) -> None:
    hub = start_hub(
        {
            "mcpServers": {
                "a": scripted(),
                "gone": MISSING,
                "hang": scripted("--startup-delay", "60", conduit=QUICK_CLOSE),
                "b": scripted("--era", "legacy"),
            }
        }
    )
    status = hub.await_ready(timeout=20, servers=["a", "b"])
    assert (status["a"].state, status["b"].state) == ("ready", "ready")
    assert status["hang"].state != "ready"
    assert list(status) == ["a", "gone", "hang", "b"]  # config order
    names = {t.name for t in hub.tools()}
    assert {"a.add", "b.add", "a.echo", "b.echo"} <= names
    assert not any(n.startswith(("gone.", "hang.")) for n in names)
    assert hub.call_tool("a.add", {"a": 1, "b": 2}).text == "3"
    assert hub.call_tool(("b", "add"), {"a": 2, "b": 2}).text == "4"
    assert hub.tool("b.add") is not None and hub.tool("b.add").name == "b.add"
    assert hub.tool("nope.add") is None


@pytest.mark.parametrize("server", ["gone", "hang"])
def test_a_call_to_a_server_not_ready_fails_at_once_naming_it(
    start_hub: StartHub, server: str
) -> None:
    hub = start_hub(
        {
            "mcpServers": {
                "a": scripted(),
                "gone": MISSING,
                "hang": scripted("--startup-delay", "60", conduit=QUICK_CLOSE),
            }
        }
    )
    hub.await_ready(timeout=20, servers=["a"])
    started = time.monotonic()
    with pytest.raises(mcp.Error) as info:
        hub.call_tool(f"{server}.add", {"a": 1, "b": 2}, timeout=30)
    # never the call's deadline (30 s): measured in benchmarks/hub_bench.py (well under 10 ms)
    assert time.monotonic() - started < 5
    e = info.value
    assert (e.kind, e.reason) == ("unavailable", "server_not_ready")
    assert e.data["server"] == server and repr(server) in e.message
    assert e.data["state"] != "ready"
    # the tuple form, the other request kinds, and request() all say the same
    for call in (
        lambda: hub.call_tool((server, "add"), {}),
        lambda: hub.get_prompt((server, "plain")),
        lambda: hub.read_resource((server, "test://x")),
        lambda: hub.request(server, "tools/list"),
    ):
        with pytest.raises(mcp.Error) as again:
            call()
        assert (again.value.kind, again.value.reason) == ("unavailable", "server_not_ready")


def test_a_missing_command_says_why_in_its_status_and_errors(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"gone": MISSING}}, max_restarts=1000)
    hub.wait_for(lambda h: h.status()["gone"].reason is not None, timeout=10)
    assert hub.status()["gone"].state != "ready"
    with pytest.raises(mcp.Error) as info:
        hub.call_tool("gone.add")
    assert info.value.data["reason"] is not None
    assert info.value.data["reason"] in info.value.message


def test_unknown_names_get_the_closest_ones(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"files": scripted(), "git": scripted()}})
    hub.await_ready(timeout=20, servers="all")
    with pytest.raises(mcp.Error) as info:
        hub.call_tool("files.ad", {"a": 1, "b": 2})
    assert (info.value.kind, info.value.reason) == ("argument", "unknown_tool")
    assert "files.add" in info.value.data["closest"] and "files.add" in info.value.message
    with pytest.raises(mcp.Error) as info:
        hub.call_tool(("fils", "add"), {})
    assert (info.value.kind, info.value.reason) == ("argument", "unknown_server")
    assert info.value.data["closest"] == ["files"]
    with pytest.raises(mcp.Error) as info:
        hub.request("gti", "ping")
    assert info.value.data["closest"] == ["git"]
    with pytest.raises(mcp.Error) as info:
        hub.get_prompt("files.plian")
    assert (info.value.reason, info.value.data["closest"][0]) == ("unknown_prompt", "files.plain")
    with pytest.raises(mcp.Error) as info:
        hub.read_resource("test://nowhere-listed")
    assert info.value.reason == "unknown_resource"
    for bad in (None, "", ("a",), ("a", 1), 3):
        with pytest.raises(mcp.Error) as info:
            hub.call_tool(bad)  # type: ignore[arg-type]
        assert info.value.kind == "argument"


def test_await_ready_any_all_and_names(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"a": scripted(), "gone": MISSING}})
    status = hub.await_ready(timeout=20)  # "any"
    assert status["a"].state == "ready"
    with pytest.raises(mcp.Error) as info:
        hub.await_ready(timeout=0.3, servers="all")
    assert (info.value.kind, info.value.reason) == ("timeout", "deadline")
    assert "gone" in info.value.message and "a (" not in info.value.message
    with pytest.raises(mcp.Error) as info:
        hub.await_ready(timeout=1, servers=["a", "nope"])
    assert (info.value.kind, info.value.reason) == ("argument", "unknown_server")
    with pytest.raises(mcp.Error) as info:
        hub.await_ready(timeout=-1)
    assert info.value.kind == "argument"


def test_ready_means_its_lists_are_in_the_view(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"a": scripted("--extra-tools", "50")}})
    hub.await_ready(timeout=20, servers=["a"])
    # no wait after await_ready: the lists are there
    assert hub.tool("a.extra_49") is not None
    assert {p.name for p in hub.prompts()} >= {"a.plain"}
    assert hub.resources() and all(hub.resource_server(r.uri) == "a" for r in hub.resources())


def test_routed_calls_of_every_kind(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"a": scripted(), "b": scripted()}})
    hub.await_ready(timeout=20, servers="all")
    progress: list[mcp.Progress] = []
    result = hub.call_tool("b.progress", {"steps": 3}, on_progress=progress.append, timeout=10)
    assert not result.is_error and len(progress) == 3
    prompt = hub.get_prompt("a.plain")
    assert prompt.messages
    uri = hub.resources()[0].uri
    assert hub.read_resource(uri).contents
    assert hub.read_resource(("b", uri)).contents
    assert hub.request("a", "tools/list")["tools"]
    template = hub.resource_templates()[0]
    completed = hub.complete(
        {"type": "ref/resource", "uri": template.uri_template}, {"name": "x", "value": ""}
    )
    assert isinstance(completed, mcp.CompleteResult)


def test_notifications_are_tagged_with_their_server(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"a": scripted(), "b": scripted()}})
    hub.await_ready(timeout=20, servers="all")
    notes: queue.Queue[mcp.HubNotification] = queue.Queue()
    hub.subscribe_notifications(notes, methods=["notifications/message"])
    only_b: queue.Queue[mcp.HubNotification] = queue.Queue()
    hub.subscribe_notifications(only_b, methods=["notifications/message"], servers=["b"])
    hub.call_tool(
        "b.notify", {"method": "notifications/message", "params": {"level": "info", "data": "x"}}
    )
    hub.call_tool(
        "a.notify", {"method": "notifications/message", "params": {"level": "info", "data": "y"}}
    )
    got = {notes.get(timeout=10).server, notes.get(timeout=10).server}
    assert got == {"a", "b"}
    assert only_b.get(timeout=10).server == "b"
    assert only_b.empty()
    hub.unsubscribe_notifications(notes)
    note = HubNote = mcp.HubNotification("a", "m", {"data": "s3cret"})
    assert "s3cret" not in repr(note) and HubNote.server == "a"


def test_tools_of_a_down_server_leave_the_view_and_come_back(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"a": scripted(), "b": scripted()}})
    hub.await_ready(timeout=20, servers="all")
    pid = hub.call_tool("b.pid").text
    with pytest.raises(mcp.Error):
        hub.call_tool("b.crash", timeout=5)
    # what the user sees: b's tools leave the view, a call fails at once, then they return
    hub.wait_for(lambda h: h.tool("b.add") is None, timeout=10)
    hub.await_ready(timeout=20, servers=["b"])
    assert hub.tool("b.add") is not None
    assert hub.call_tool("b.pid").text != pid
    assert hub.tool("a.add") is not None


def test_keep_leaves_a_down_servers_tools_listed(start_hub: StartHub) -> None:
    hub = start_hub(
        {"mcpServers": {"a": scripted(), "b": scripted()}},
        on_server_down="keep",
        backoff=lambda attempt: 30.0,
    )
    hub.await_ready(timeout=20, servers="all")
    with pytest.raises(mcp.Error):
        hub.call_tool("b.crash", timeout=5)
    hub.wait_for(lambda h: h.status()["b"].state != "ready", timeout=10)
    assert hub.tool("b.add") is not None  # still listed
    with pytest.raises(mcp.Error) as info:
        hub.call_tool("b.add", {"a": 1, "b": 1})
    assert info.value.reason == "server_not_ready"


def test_a_list_changed_shows_in_the_view(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"a": scripted(), "b": scripted()}})
    hub.await_ready(timeout=20, servers="all")
    hub.call_tool("a.add_tool", {"name": "fresh"})
    hub.wait_for(lambda h: h.tool("a.fresh") is not None, timeout=10)
    assert hub.tool("b.fresh") is None
    hub.call_tool("a.remove_tool", {"name": "fresh"})
    hub.wait_for(lambda h: h.tool("a.fresh") is None, timeout=10)


def test_start_refuses_bad_options() -> None:
    cases = [
        ({"separator": ""}, "separator"),
        ({"qualify": lambda s, n: n}, "qualify"),
        ({"on_server_down": "drop"}, "on_server_down"),
        ({"max_restarts": -1}, "max_restarts"),
        ({"restart_base": 0}, "restart_base"),
        ({"name_pattern": "("}, "name_pattern"),
        ({"max_in_flite": 3}, "unknown_option"),
    ]
    for options, reason in cases:
        with pytest.raises(mcp.Error) as info:
            mcp.Hub.start({"mcpServers": {"a": scripted()}}, **options)
        assert (info.value.kind, info.value.reason) == ("config", reason), options


def test_stop_closes_every_member_and_later_calls_say_so() -> None:
    import os

    hub = mcp.Hub.start({"mcpServers": {"a": scripted(), "b": scripted(), "gone": MISSING}})
    hub.await_ready(timeout=20, servers=["a", "b"])
    pids = [int(hub.call_tool(f"{s}.pid").text or "0") for s in ("a", "b")]
    clients = [hub.client("a"), hub.client("b")]
    hub.stop()
    hub.stop()  # idempotent
    assert all(c.status().state == "closed" for c in clients)
    for pid in pids:  # stop waited for the server processes to exit
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    for call in (
        lambda: hub.call_tool("a.add", {}),
        lambda: hub.request("a", "ping"),
        lambda: hub.read_resource("test://x"),
        lambda: hub.await_ready(timeout=1),
    ):
        with pytest.raises(mcp.Error) as info:
            call()
        assert (info.value.kind, info.value.reason) == ("closed", "stopped")


def test_an_asyncio_queue_gets_tagged_notifications_on_its_loop(start_hub: StartHub) -> None:
    import asyncio

    hub = start_hub({"mcpServers": {"a": scripted(), "b": scripted()}})
    hub.await_ready(timeout=20, servers="all")

    async def main() -> list[str]:
        notes: asyncio.Queue[mcp.HubNotification] = asyncio.Queue()
        hub.subscribe_notifications(notes, methods=["test/ping"])
        await hub.aio.call_tool("b.notify", {"method": "test/ping"})
        await hub.aio.call_tool("a.notify", {"method": "test/ping"})
        got = [await asyncio.wait_for(notes.get(), 10), await asyncio.wait_for(notes.get(), 10)]
        hub.unsubscribe_notifications(notes)
        return sorted(n.server for n in got)

    assert asyncio.run(main()) == ["a", "b"]
    with pytest.raises(mcp.Error) as info:
        hub.subscribe_notifications(asyncio.Queue())  # no running loop here
    assert info.value.reason == "subscriber"
    with pytest.raises(mcp.Error) as info:
        hub.subscribe_notifications(42)
    assert info.value.reason == "subscriber"
