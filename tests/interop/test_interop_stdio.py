"""conduit-mcp against real third-party MCP servers over stdio.

Peers (``make peers``; see ``tests/peers/README.md``):

* ``modern_peer.py``: the official ``mcp`` 2.3.0 ``MCPServer``, dual-era (2026-07-28 and the
  ``initialize`` handshake);
* ``legacy_peer.py``: ``mcp`` 1.30.0 ``FastMCP``, handshake only (latest 2025-11-25), answers a
  ``server/discover`` probe with -32602;
* npm ``@modelcontextprotocol/server-everything`` 2026.8.31 (TS SDK), handshake only, answers
  the probe with -32601.

Every test starts its own server process through the client; the ``start_client`` fixture stops
every client (and so its server) at teardown. Nothing sleeps to wait for an event: each wait is
on the event itself with a deadline (``await_ready``, ``wait_for_state``, futures).
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(60)

READY_TIMEOUT = 20.0
PEER_TOOLS = {
    "add",
    "echo",
    "slow_count",
    "add_dynamic_tool",
    "remove_dynamic_tool",
    "log_something",
}
STEP_PROGRESS = [(1.0, 3.0, "step 1/3"), (2.0, 3.0, "step 2/3"), (3.0, 3.0, "step 3/3")]

# protocol option -> (era, version, origin) the modern (mcp 2.3.0) peer must end up with.
MODERN_PEER_MODES = {
    "auto": ("modern", "2026-07-28", "probe"),
    "modern": ("modern", "2026-07-28", "pinned"),
    "legacy": ("legacy", "2025-11-25", "pinned"),
}


# -- helpers ----------------------------------------------------------------------------------


def child_pids(marker: str) -> list[int]:
    """Live (non-zombie) child processes of this test process whose argv mentions ``marker``.

    A /proc scan (Linux), so the test needs no psutil: the client spawns its stdio servers
    directly, so they are our children.
    """
    me = os.getpid()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
        except OSError:  # gone meanwhile
            continue
        # Fields after "(comm)": state, ppid, ... (comm may itself hold spaces or parens).
        state, ppid = stat[stat.rindex(")") + 2 :].split()[:2]
        if state == "Z" or int(ppid) != me:
            continue
        if any(marker.encode() in arg for arg in argv):
            found.append(int(entry))
    return sorted(found)


def stdio(cmd: list[str], **kw) -> mcp.Stdio:
    return mcp.Stdio(cmd[0], cmd[1:], **kw)


class ProgressLog:
    """An ``on_progress`` callback that records each update and the thread it ran in."""

    def __init__(self) -> None:
        self.events: list[tuple[float, float | None, str | None]] = []
        self.threads: set[int] = set()

    def __call__(self, p: mcp.Progress) -> None:
        self.events.append((p.progress, p.total, p.message))
        self.threads.add(threading.get_ident())


def assert_progress_in_caller_thread(log: ProgressLog, expected: list) -> None:
    assert log.events == expected
    progress = [e[0] for e in log.events]
    assert progress == sorted(progress) and len(set(progress)) == len(progress)
    assert log.threads == {threading.get_ident()}, "on_progress must run in the caller's thread"


# -- 1. mcp 2.3.0 (dual-era) peer --------------------------------------------------------------


@pytest.mark.interop
@pytest.mark.parametrize("protocol", list(MODERN_PEER_MODES))
def test_modern_peer_negotiates_lists_and_calls(
    start_client: Callable[..., mcp.Client], modern_peer_cmd: list[str], protocol: str
) -> None:
    era, version, origin = MODERN_PEER_MODES[protocol]
    client = start_client(stdio(modern_peer_cmd), protocol=protocol)

    status = client.await_ready(timeout=READY_TIMEOUT)
    assert (status.state, status.era, status.version, status.origin) == (
        "ready",
        era,
        version,
        origin,
    )
    assert status.reason is None
    info = client.server_info()
    assert info is not None
    assert (info.name, info.version) == ("conduit-modern-peer", "1.0.0")

    tools = {t.name: t for t in client.list_all_tools(timeout=10)}
    assert set(tools) == PEER_TOOLS
    assert set(tools["add"].input_schema["properties"]) == {"a", "b"}
    assert tools["add"].input_schema["required"] == ["a", "b"]

    result = client.call_tool("add", {"a": 2, "b": 3}, timeout=10)
    assert result.is_error is False
    assert result.text == "5"
    assert result.structured_content == {"result": 5}
    assert client.call_tool("echo", {"text": "héllo ✓"}, timeout=10).text == "héllo ✓"


@pytest.mark.interop
@pytest.mark.parametrize("protocol", list(MODERN_PEER_MODES))
def test_modern_peer_progress_in_callers_thread(
    start_client: Callable[..., mcp.Client], modern_peer_cmd: list[str], protocol: str
) -> None:
    client = start_client(stdio(modern_peer_cmd), protocol=protocol)
    assert client.await_ready(timeout=READY_TIMEOUT).era == MODERN_PEER_MODES[protocol][0]

    log = ProgressLog()
    result = client.call_tool(
        "slow_count", {"steps": 3, "delay": 0.05}, on_progress=log, timeout=10
    )
    assert (result.is_error, result.text) == (False, "counted to 3")
    assert_progress_in_caller_thread(log, STEP_PROGRESS)


@pytest.mark.interop
@pytest.mark.parametrize("protocol", list(MODERN_PEER_MODES))
def test_modern_peer_prompts_and_resources(
    start_client: Callable[..., mcp.Client], modern_peer_cmd: list[str], protocol: str
) -> None:
    client = start_client(stdio(modern_peer_cmd), protocol=protocol)
    client.await_ready(timeout=READY_TIMEOUT)

    prompts = client.list_all_prompts(timeout=10)
    assert [p.name for p in prompts] == ["greet"]
    assert prompts[0].arguments == ({"name": "name", "required": True},)
    prompt = client.get_prompt("greet", {"name": "Ada"}, timeout=10)
    assert prompt.messages == (
        {"role": "user", "content": {"type": "text", "text": "Please greet Ada."}},
    )

    resources = client.list_all_resources(timeout=10)
    assert [(r.uri, r.name, r.mime_type) for r in resources] == [
        ("peer://greeting", "greeting", "text/plain")
    ]
    read = client.read_resource("peer://greeting", timeout=10)
    assert read.contents == (
        {"uri": "peer://greeting", "mimeType": "text/plain", "text": "hello from the modern peer"},
    )


@pytest.mark.interop
@pytest.mark.parametrize("protocol", list(MODERN_PEER_MODES))
def test_modern_peer_errors(
    start_client: Callable[..., mcp.Client], modern_peer_cmd: list[str], protocol: str
) -> None:
    era = MODERN_PEER_MODES[protocol][0]
    client = start_client(stdio(modern_peer_cmd), protocol=protocol)
    client.await_ready(timeout=READY_TIMEOUT)

    # mcp 2.3.0 reports an unknown tool as a tool error (a result), in both eras.
    result = client.call_tool("no_such_tool", {}, timeout=10)
    assert result.is_error is True
    assert result.text == "Unknown tool: no_such_tool"

    # An unknown resource is a JSON-RPC error: -32602 with the uri in data.
    with pytest.raises(mcp.Error) as info:
        client.read_resource("peer://missing", timeout=10)
    err = info.value
    assert (err.kind, err.code, err.reason) == ("server", -32602, "resource_not_found")
    assert err.message == "Unknown resource: peer://missing"
    assert err.data == {"uri": "peer://missing"}

    # An unknown prompt: the SDK's handshake path answers code 0 with the ValueError's text,
    # its 2026-07-28 path a generic -32603. The client passes both through as `server`.
    with pytest.raises(mcp.Error) as info:
        client.get_prompt("no_such_prompt", timeout=10)
    err = info.value
    assert err.kind == "server"
    if era == "legacy":
        assert (err.code, err.message) == (0, "Unknown prompt: no_such_prompt")
    else:
        assert (err.code, err.reason, err.message) == (
            -32603,
            "internal_error",
            "Internal server error",
        )

    # The connection survives all of that.
    assert client.status().state == "ready"
    assert client.call_tool("add", {"a": 40, "b": 2}, timeout=10).text == "42"


# -- 2. mcp 1.30.0 (legacy-only) peer ----------------------------------------------------------


@pytest.mark.interop
def test_legacy_peer_auto_falls_back_to_initialize(
    start_client: Callable[..., mcp.Client], legacy_peer_cmd: list[str]
) -> None:
    client = start_client(stdio(legacy_peer_cmd), protocol="auto")

    status = client.await_ready(timeout=READY_TIMEOUT)
    assert (status.state, status.era, status.version, status.origin) == (
        "ready",
        "legacy",
        "2025-11-25",
        "probe",
    )
    info = client.server_info()
    assert info is not None
    assert (info.name, info.version) == ("conduit-legacy-peer", "1.0.0")

    assert {t.name for t in client.list_all_tools(timeout=10)} == PEER_TOOLS
    result = client.call_tool("add", {"a": 2, "b": 3}, timeout=10)
    assert (result.is_error, result.text, result.structured_content) == (False, "5", {"result": 5})

    log = ProgressLog()
    result = client.call_tool(
        "slow_count", {"steps": 3, "delay": 0.05}, on_progress=log, timeout=10
    )
    assert result.text == "counted to 3"
    assert_progress_in_caller_thread(log, STEP_PROGRESS)

    assert client.read_resource("peer://greeting", timeout=10).contents[0]["text"] == (
        "hello from the legacy peer"
    )


@pytest.mark.interop
def test_legacy_peer_pinned_modern_closes_without_fallback(
    start_client: Callable[..., mcp.Client], legacy_peer_cmd: list[str]
) -> None:
    client = start_client(stdio(legacy_peer_cmd), protocol="modern")

    with pytest.raises(mcp.Error) as info:
        client.await_ready(timeout=READY_TIMEOUT)
    assert (info.value.kind, info.value.reason) == ("closed", "legacy_server")

    status = client.wait_for_state("closed", timeout=5)
    # No fallback: nothing was negotiated, and the client does not try again by itself.
    assert (status.state, status.reason, status.era, status.version) == (
        "closed",
        "legacy_server",
        None,
        None,
    )
    with pytest.raises(mcp.Error) as info:
        client.call_tool("add", {"a": 1, "b": 2}, timeout=5)
    assert info.value.kind == "closed"
    assert client.status() == status


# -- 3. server-everything (TS SDK) -------------------------------------------------------------


@pytest.mark.interop
def test_everything_auto_echo_and_long_running_progress(
    start_client: Callable[..., mcp.Client], everything_cmd: list[str]
) -> None:
    # The default, minimal environment (get-env dumps the server's whole environment).
    client = start_client(stdio(everything_cmd), protocol="auto")

    status = client.await_ready(timeout=READY_TIMEOUT)
    assert (status.state, status.era, status.version, status.origin) == (
        "ready",
        "legacy",
        "2025-11-25",
        "probe",
    )
    info = client.server_info()
    assert info is not None
    assert (info.name, info.version) == ("mcp-servers/everything", "2.0.0")

    names = {t.name for t in client.list_all_tools(timeout=10)}
    assert {"echo", "get-env", "trigger-long-running-operation"} <= names

    echoed = client.call_tool("echo", {"message": "hi there"}, timeout=10)
    assert (echoed.is_error, echoed.text) == (False, "Echo: hi there")

    log = ProgressLog()
    result = client.call_tool(
        "trigger-long-running-operation", {"duration": 1, "steps": 4}, on_progress=log, timeout=15
    )
    assert result.is_error is False
    assert result.text.startswith("Long running operation completed. Duration: 1 seconds, Steps: 4")
    assert_progress_in_caller_thread(log, [(float(i), 4.0, None) for i in range(1, 5)])

    # Only the minimal environment reached the server: nothing else of ours leaked into it.
    minimal = mcp.Stdio(everything_cmd[0]).environment()
    assert json.loads(client.call_tool("get-env", {}, timeout=10).text) == minimal


# -- 4. the server dies mid-call ---------------------------------------------------------------


@pytest.mark.interop
def test_modern_peer_killed_mid_call_fails_call_and_reconnects(
    start_client: Callable[..., mcp.Client], modern_peer_cmd: list[str]
) -> None:
    marker = "modern_peer.py"
    client = start_client(stdio(modern_peer_cmd), protocol="auto")
    assert client.await_ready(timeout=READY_TIMEOUT).state == "ready"
    pids = child_pids(marker)
    assert len(pids) == 1, pids
    old_pid = pids[0]

    started = threading.Event()
    with ThreadPoolExecutor(1) as pool:
        pending = pool.submit(
            client.call_tool,
            "slow_count",
            {"steps": 200, "delay": 0.05},
            on_progress=lambda p: started.set(),
            timeout=30,
        )
        assert started.wait(10), "slow_count never reported progress"
        os.kill(old_pid, signal.SIGKILL)
        killed_at = time.monotonic()
        error = pending.exception(timeout=5)
        failed_after = time.monotonic() - killed_at

    assert isinstance(error, mcp.Error), error
    assert error.kind == "transport"
    assert failed_after < 1.0, f"the pending call failed {failed_after:.2f} s after the kill"

    def reconnected(status: mcp.Status) -> bool:
        return status.state == "ready" and any(p != old_pid for p in child_pids(marker))

    status = client.wait_for_state(reconnected, timeout=20)
    assert (status.era, status.version) == ("modern", "2026-07-28")
    new_pids = child_pids(marker)
    assert len(new_pids) == 1 and new_pids[0] != old_pid

    assert client.call_tool("add", {"a": 20, "b": 22}, timeout=10).text == "42"

    client.stop()
    assert client.status().state == "closed"
    assert child_pids(marker) == [], "stop() left the server process running"


# -- 5. the asyncio front end -------------------------------------------------------------------


@pytest.mark.interop
def test_modern_peer_asyncio_gather(
    start_client: Callable[..., mcp.Client], modern_peer_cmd: list[str]
) -> None:
    client = start_client(stdio(modern_peer_cmd), protocol="auto")

    async def main() -> tuple[mcp.Status, list[mcp.CallToolResult], ProgressLog, int]:
        status = await client.aio.await_ready(timeout=READY_TIMEOUT)
        results = await asyncio.wait_for(
            asyncio.gather(
                *(
                    client.aio.call_tool("add", {"a": i, "b": 100 * i}, timeout=10)
                    for i in range(10)
                )
            ),
            timeout=20,
        )
        log = ProgressLog()
        counted = await client.aio.call_tool(
            "slow_count", {"steps": 3, "delay": 0.05}, on_progress=log, timeout=10
        )
        assert counted.text == "counted to 3"
        return status, list(results), log, threading.get_ident()

    status, results, log, loop_thread = asyncio.run(main())
    assert (status.state, status.era, status.version) == ("ready", "modern", "2026-07-28")
    assert [r.text for r in results] == [str(101 * i) for i in range(10)]
    assert [r.structured_content for r in results] == [{"result": 101 * i} for i in range(10)]
    assert not any(r.is_error for r in results)
    # on_progress ran on the caller's loop (here: this thread, where asyncio.run runs it).
    assert log.events == STEP_PROGRESS
    assert log.threads == {loop_thread}
