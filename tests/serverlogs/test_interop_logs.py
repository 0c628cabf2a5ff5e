"""Server logs against real servers: the official ``mcp`` 2.3.0 ``MCPServer`` (both eras; it
logs with ``ctx.log`` but declares no ``logging`` capability) and npm
``@modelcontextprotocol/server-everything`` (legacy; declares ``logging``, honours
``logging/setLevel``, and its ``toggle-simulated-logging`` sends one message at a random
level at once, then one every 5 s)."""

from __future__ import annotations

import logging
import queue
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import conduit_mcp as mcp

pytestmark = [pytest.mark.interop, pytest.mark.timeout(90)]

READY = 20.0
PY_LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}


def peer(cmd: list[str]) -> mcp.Stdio:
    # mcp 2.3.0 warns (MCPDeprecationWarning, SEP-2577) when a tool logs: not our concern.
    return mcp.Stdio(cmd[0], ["-W", "ignore", *cmd[1:]])


def test_the_official_modern_server_logs_for_requests_that_carry_the_level(
    modern_peer_cmd: list[str],
    start_client: Callable[..., mcp.Client],
    capture: Callable[[str], Any],
) -> None:
    records = capture("conduit_mcp.server.official-modern")
    client = start_client(peer(modern_peer_cmd), protocol="modern", name="official-modern")
    assert client.await_ready(READY).era == "modern"
    assert "logging" not in (client.server_capabilities() or {})
    client.set_logging_level("info")  # not refused: modern, the level is a _meta field
    client.call_tool("log_something", {"level": "debug", "text": "below info"})
    client.call_tool("log_something", {"level": "warning", "text": "50% done\nforged"})
    record = records.next()
    assert (record.levelno, record.getMessage()) == (
        logging.WARNING,
        "peer: 50% done\\nforged",
    )
    assert (record.mcp_logger, record.mcp_data) == ("peer", "50% done\nforged")  # type: ignore[attr-defined]
    client.call_tool("log_something", {"level": "error", "text": "second"})
    # The debug one was never sent: the next record is the error.
    assert records.next().getMessage() == "peer: second"


def test_the_official_server_in_the_legacy_era_refuses_setlevel_but_its_logs_arrive(
    modern_peer_cmd: list[str],
    start_client: Callable[..., mcp.Client],
    capture: Callable[[str], Any],
) -> None:
    records = capture("conduit_mcp.server.official-legacy")
    handler_logs: queue.Queue[tuple[str, Any, str | None]] = queue.Queue()

    class Keep(mcp.Handler):
        def handle_log(self, level: str, data: Any, logger: str | None, ctx: Any) -> None:
            handler_logs.put((level, data, logger))

    client = start_client(
        peer(modern_peer_cmd), protocol="legacy", name="official-legacy", handler=Keep()
    )
    assert client.await_ready(READY).era == "legacy"
    with pytest.raises(mcp.Error) as info:
        client.set_logging_level("debug")
    assert (info.value.kind, info.value.reason) == ("unavailable", "not_supported")
    client.call_tool("log_something", {"level": "error", "text": "anyway"})
    record = records.next()
    assert (record.levelno, record.getMessage()) == (logging.ERROR, "peer: anyway")
    assert handler_logs.get(timeout=10) == ("error", "anyway", "peer")


def test_server_everything_sets_the_level_and_its_logs_map_to_python_levels(
    everything_js: Path,
    start_client: Callable[..., mcp.Client],
    capture: Callable[[str], Any],
) -> None:
    records = capture("conduit_mcp.server.everything")
    node = shutil.which("node") or "node"
    client = start_client(
        mcp.Stdio(node, [str(everything_js), "stdio"]), protocol="legacy", name="everything"
    )
    assert client.await_ready(READY).era == "legacy"
    assert "logging" in (client.server_capabilities() or {})
    client.set_logging_level("debug")
    client.call_tool("toggle-simulated-logging", {})
    # Its first message, sent at once at a random level: every level passes debug.
    record = records.next()
    assert record.name == "conduit_mcp.server.everything"
    assert record.levelno == PY_LEVELS[record.mcp_level]  # type: ignore[attr-defined]
    assert "message" in record.getMessage()
    client.call_tool("toggle-simulated-logging", {})


def _http_peer_module() -> Any:
    """tests/interop/http_peer.py (a sibling test folder's helper, loaded by path)."""
    import importlib.util

    path = Path(__file__).resolve().parent.parent / "interop" / "http_peer.py"
    spec = importlib.util.spec_from_file_location("serverlogs_http_peer", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_official_sse_server_logs_over_the_http_sse_transport(
    modern_peer_cmd: list[str],
    start_client: Callable[..., mcp.Client],
    capture: Callable[[str], Any],
) -> None:
    """The 2024-11-05 HTTP+SSE transport (``mcp.Sse``) against the official SDK's SSE app:
    its log messages arrive on the one event stream."""
    hp = _http_peer_module()
    sse_peers = Path(__file__).resolve().parent.parent / "sse" / "sse_peers.py"
    port = hp.free_port()
    peer = hp.HttpPeer(
        [sys.executable, "-W", "ignore", str(sse_peers), "modern", "--port", str(port)],
        port,
        ready=[],
        path="/sse",
    )
    try:
        records = capture("conduit_mcp.server.official-sse")
        client = start_client(mcp.Sse(peer.url), name="official-sse")
        assert client.await_ready(READY).era == "legacy"
        client.call_tool("log_something", {"level": "critical", "text": "over sse"})
        record = records.next()
        assert (record.levelno, record.getMessage()) == (logging.CRITICAL, "peer: over sse")
        client.stop()
    finally:
        peer.kill()
