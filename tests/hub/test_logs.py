"""``Hub.set_logging_level`` through the public API (docs/hub.md, "Server logs"): one level
for every member on the three front ends, in both eras, kept for the members that are still
connecting and for those the hub starts later (a restart, ``add_server``), with each
server's outcome reported."""

from __future__ import annotations

import asyncio
import logging
import queue
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import conduit_mcp as mcp

from .conftest import MISSING, scripted

pytestmark = pytest.mark.timeout(60)

StartHub = Callable[..., mcp.Hub]


class Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.queue: queue.Queue[logging.LogRecord] = queue.Queue()

    def emit(self, record: logging.LogRecord) -> None:
        self.queue.put(record)


@pytest.fixture
def server_logs() -> Iterator[Records]:
    """Every record under ``conduit_mcp.server`` (each member logs on its own child)."""
    lg = logging.getLogger("conduit_mcp.server")
    handler, level = Records(), lg.level
    lg.addHandler(handler)
    lg.setLevel(logging.DEBUG)
    yield handler
    lg.removeHandler(handler)
    lg.setLevel(level)


def logs(hub: mcp.Hub, server: str, level: str) -> str:
    """What the server did with a log at ``level``: "logged" or "suppressed" (its answer)."""
    return hub.call_tool(f"{server}.log", {"level": level, "data": f"{server} {level}"}).text


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_level_set_before_the_members_are_ready_reaches_each_of_them(
    start_hub: StartHub, server_logs: Records, era: str
) -> None:
    hub = start_hub({"mcpServers": {"a": scripted(), "b": scripted()}}, protocol=era)
    # At once, while both still connect: nobody is asked, the level is kept for both.
    outcomes = hub.set_logging_level("warning")
    assert list(outcomes) == ["a", "b"]
    hub.await_ready(timeout=20, servers="all")
    for server in ("a", "b"):
        assert logs(hub, server, "info") == "suppressed"
        assert logs(hub, server, "error") == "logged"
        record = server_logs.queue.get(timeout=10)
        assert record.name == f"conduit_mcp.server.{hub.name}/{server}"
        assert record.getMessage().endswith(f"{server} error")


def test_each_server_s_outcome_is_reported_and_a_later_member_starts_with_the_level(
    start_hub: StartHub,
) -> None:
    quiet = scripted("--no-logging")
    hub = start_hub(
        {"mcpServers": {"a": scripted(), "quiet": quiet, "gone": MISSING}}, protocol="legacy"
    )
    hub.await_ready(timeout=20, servers=["a", "quiet"])
    outcomes = hub.set_logging_level("error")
    assert outcomes["a"] is None
    assert (outcomes["quiet"].kind, outcomes["quiet"].reason) == ("unavailable", "not_supported")  # type: ignore[union-attr]
    gone = outcomes["gone"]
    assert gone is not None and (gone.kind, gone.reason) == ("unavailable", "server_not_ready")
    assert gone.data["server"] == "gone"
    assert logs(hub, "a", "warning") == "suppressed"
    # A server added later starts with the hub's level, over its own log_level option.
    hub.add_server("late", scripted(), timeout=10)
    hub.await_ready(timeout=20, servers=["late"])
    assert logs(hub, "late", "warning") == "suppressed"
    assert logs(hub, "late", "critical") == "logged"


def test_a_member_the_hub_restarts_comes_back_with_the_level(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"b": scripted()}}, max_reconnects=0, protocol="legacy")
    hub.await_ready(timeout=20, servers="all")
    assert hub.set_logging_level("critical") == {"b": None}
    first = hub.client("b")
    with pytest.raises(mcp.Error):
        hub.call_tool("b.crash", timeout=5)
    hub.wait_for(lambda h: h.restarts()["b"] == 1 and h.status()["b"].state == "ready", 20)
    assert hub.client("b") is not first
    # A new session starts at the server's default level: the hub's is set again.
    assert logs(hub, "b", "error") == "suppressed"
    assert logs(hub, "b", "critical") == "logged"


def test_aio_and_futures_report_the_same_outcomes(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"a": scripted(), "gone": MISSING}}, protocol="modern")
    hub.await_ready(timeout=20, servers=["a"])

    async def main() -> dict[str, mcp.Error | None]:
        return await hub.aio.set_logging_level("error", timeout=10)

    via_aio = asyncio.run(main())
    assert via_aio["a"] is None and via_aio["gone"].reason == "server_not_ready"  # type: ignore[union-attr]
    assert logs(hub, "a", "warning") == "suppressed"
    via_futures = hub.futures.set_logging_level("debug", timeout=10).get(timeout=20)
    assert via_futures["a"] is None and via_futures["gone"].reason == "server_not_ready"  # type: ignore[union-attr]
    assert logs(hub, "a", "info") == "logged"


@pytest.mark.parametrize("level", ["WARN", "", 3, None])
def test_a_bad_level_is_refused_at_once_and_nothing_is_kept(
    start_hub: StartHub, level: Any
) -> None:
    hub = start_hub({"mcpServers": {"a": scripted()}}, protocol="modern")
    hub.await_ready(timeout=20, servers="all")
    for call in (
        lambda: hub.set_logging_level(level),
        lambda: hub.futures.set_logging_level(level),
        lambda: asyncio.run(hub.aio.set_logging_level(level)),
    ):
        with pytest.raises(mcp.Error) as info:
            call()
        assert (info.value.kind, info.value.reason) == ("argument", "level")
    with pytest.raises(mcp.Error) as bad_timeout:
        hub.set_logging_level("info", timeout=-1)
    assert (bad_timeout.value.kind, bad_timeout.value.reason) == ("argument", "timeout")
    # Nothing was kept: no level was ever asked for, so the server sends no log at all.
    assert logs(hub, "a", "emergency") == "suppressed"


def test_a_stopped_hub_refuses(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"a": scripted()}})
    hub.stop()
    with pytest.raises(mcp.Error) as info:
        hub.set_logging_level("info")
    assert (info.value.kind, info.value.reason) == ("closed", "stopped")
