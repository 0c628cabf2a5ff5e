"""A hub of many servers: its lists fetched a bounded number at a time, every one of them
reaching the view (the figures of a hub of thousands are in ``benchmarks/hub_bench.py``,
row ``many``)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.hub import view_actor
from conduit_mcp.testing.waiting import until

from .conftest import scripted

pytestmark = pytest.mark.timeout(90)

StartHub = Callable[..., mcp.Hub]


def test_fetches_run_at_most_max_fetches_at_once_and_every_server_gets_listed(
    start_hub: StartHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(view_actor, "MAX_FETCHES", 2)
    original = view_actor._fetch
    release = threading.Event()
    lock = threading.Lock()
    active = [0, 0]  # running now, most at once

    def held(*args: Any) -> Any:
        with lock:
            active[0] += 1
            active[1] = max(active[1], active[0])
        try:
            release.wait(timeout=30)  # bounded: the test sets it once all are ready
            return original(*args)
        finally:
            with lock:
                active[0] -= 1

    monkeypatch.setattr(view_actor, "_fetch", held)
    names = [f"s{i}" for i in range(6)]
    hub = start_hub({"mcpServers": {name: scripted() for name in names}})
    # Every member is ready (so each has asked for a fetch), and the view has none yet:
    # exactly two fetches run, the four others wait their turn.
    until(
        lambda: all(s.state == "ready" for s in hub.status().values()) and len(hub.status()) == 6,
        what="all six members ready",
        timeout=60,
    )
    until(lambda: active[0] == 2, what="two fetches running", timeout=10)
    assert hub.tools() == ()
    release.set()
    hub.await_ready(timeout=30, servers="all")
    assert {t.name for t in hub.tools() if t.name.endswith(".add")} == {f"{n}.add" for n in names}
    assert active[1] == 2


def test_the_view_starts_no_notifier_and_still_hears_list_changes(start_hub: StartHub) -> None:
    """The view hears a member's refreshed lists through a watcher of its own: a
    notification subscription would start a notifier thread per member (a hub of 5,000
    servers held 5,000 of them, waiting)."""
    hub = start_hub({"mcpServers": {"a": scripted(), "b": scripted()}})
    hub.await_ready(timeout=30, servers="all")
    hub.call_tool("a.add_tool", {"name": "fresh"})  # the server sends tools/list_changed
    hub.wait_for(lambda h: h.tool("a.fresh") is not None, timeout=10)
    assert not [t.name for t in threading.enumerate() if t.name.startswith("Notifier")]
