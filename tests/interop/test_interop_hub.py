"""The Hub over one ``mcpServers`` config of real third-party servers, as a host would write it.

* ``everything``: npm server-everything over stdio (TS SDK, handshake era only);
* ``everything_http``: the same over streamable HTTP (bound to 127.0.0.1, clean environment);
* ``official``: the official ``mcp`` 2.3.0 ``MCPServer`` (tests/peers/modern_peer.py, stdio);
* ``fastmcp``: the ``fastmcp`` 4.1.6 package (tests/peers/fastmcp_peer.py, stdio; its venv is
  ``make peers``'s ``.peers/python-time-*-fastmcp-*``, never ``.venv``);
* ``time``: ``mcp-server-time`` from PyPI (same venv), as a desktop host runs it;
* ``broken``: a command that does not exist.

What a user sees through the Hub: every tool under ``<config key>.<name>`` (``official.add``
and ``fastmcp.add`` both, though both servers call it ``add``), calls routed to the server
that lists the tool, and ``broken`` unavailable at once, never a wait for a deadline; then
the same file through ``conduit-mcp status`` and ``tools``.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import conduit_mcp as mcp

from ..conftest import REPO_ROOT, missing_peer
from .http_peer import HttpPeer, free_port

pytestmark = [pytest.mark.interop, pytest.mark.timeout(180)]

BIND_LOCALHOST = REPO_ROOT / "tests" / "peers" / "bind-localhost.cjs"
FASTMCP_PEER = REPO_ROOT / "tests" / "peers" / "fastmcp_peer.py"
READY = 90.0
LIVE = ["everything", "everything_http", "official", "fastmcp", "time"]


def python_peers_venv() -> Path:
    """``make peers``'s venv of mcp-server-time and fastmcp (a folder named by both
    versions)."""
    found = sorted((REPO_ROOT / ".peers").glob("python-time-*-fastmcp-*/.stamp-installed"))
    if not found:
        missing_peer("mcp-server-time and fastmcp (the .peers/python-time-*-fastmcp-* venv)")
    return found[-1].parent


@pytest.fixture(scope="module")
def config_file(
    tmp_path_factory: pytest.TempPathFactory, everything_js: Path, modern_peer_cmd: list[str]
) -> Iterator[Path]:
    venv = python_peers_venv()
    node = shutil.which("node") or "node"
    port = free_port()
    http = HttpPeer(
        [node, "--require", str(BIND_LOCALHOST), str(everything_js), "streamableHttp"],
        port,
        ready=["listening on port"],
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "PORT": str(port)},
    )
    servers: dict[str, Any] = {
        # A stdio server gets a minimal environment (no secret of ours reaches get-env).
        "everything": {"command": node, "args": [str(everything_js), "stdio"]},
        "everything_http": {"type": "http", "url": http.url},
        "official": {"command": modern_peer_cmd[0], "args": modern_peer_cmd[1:]},
        "fastmcp": {"command": str(venv / "bin" / "python"), "args": [str(FASTMCP_PEER)]},
        "time": {
            "command": str(venv / "bin" / "mcp-server-time"),
            "args": ["--local-timezone", "${HUB_TEST_TZ:-UTC}"],
        },
        "broken": {"command": str(tmp_path_factory.mktemp("hub") / "no-such-server")},
    }
    path = tmp_path_factory.mktemp("hub") / "mcp.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    try:
        yield path
    finally:
        http.kill()


@pytest.fixture(scope="module")
def hub(config_file: Path) -> Iterator[mcp.Hub]:
    with mcp.Hub.start(mcp.load_config(config_file)) as started:
        yield started


def test_broken_entry_is_unavailable_at_once_while_the_others_start(hub: mcp.Hub) -> None:
    # Before anything else: the others may still be starting, and it does not wait for them.
    t0 = time.monotonic()
    with pytest.raises(mcp.Error) as caught:
        hub.call_tool(("broken", "anything"), {}, timeout=60)
    assert time.monotonic() - t0 < 5.0  # not its 60 s deadline
    assert (caught.value.kind, caught.value.reason) == ("unavailable", "server_not_ready")
    assert "broken" in caught.value.message
    status = hub.await_ready(READY, servers=LIVE)
    assert {name: s.state for name, s in status.items()} == {
        **dict.fromkeys(LIVE, "ready"),
        "broken": "closed",
    }
    assert status["broken"].reason == "spawn_failed"
    # The eras each peer speaks: the TS SDK only the handshake one, the Python SDKs both.
    assert status["everything"].era == status["everything_http"].era == "legacy"
    assert status["official"].era == status["fastmcp"].era == status["time"].era == "modern"


def test_every_tool_is_listed_qualified_by_its_config_key(hub: mcp.Hub) -> None:
    hub.await_ready(READY, servers=LIVE)
    names = {t.name for t in hub.tools()}
    assert {
        "everything.echo",
        "everything_http.echo",
        "everything.get-sum",
        "official.add",
        "official.slow_count",
        "fastmcp.add",
        "fastmcp.whoami",
        "time.convert_time",
        "time.get_current_time",
    } <= names
    assert not any(n.startswith("broken.") for n in names)
    assert [c for c in hub.collisions() if c.kind == "tools"] == []  # keys keep them apart
    tool = hub.tool("fastmcp.add")
    assert tool is not None and tool.input_schema["required"] == ["a", "b"]
    assert hub.tool("fastmcp.nope") is None


def test_calls_are_routed_to_the_server_that_lists_the_tool(hub: mcp.Hub) -> None:
    hub.await_ready(READY, servers=LIVE)
    assert hub.call_tool("official.add", {"a": 1, "b": 2}, timeout=30).text == "3"
    assert hub.call_tool("fastmcp.add", {"a": 20, "b": 22}, timeout=30).text == "42"
    assert hub.call_tool("fastmcp.whoami", {}, timeout=30).text == "fastmcp"
    assert hub.call_tool(("official", "echo"), {"text": "tuple"}, timeout=30).text == "tuple"
    echoed = hub.call_tool("everything.echo", {"message": "stdio"}, timeout=30)
    assert echoed.text == "Echo: stdio"
    summed = hub.call_tool("everything_http.get-sum", {"a": 2, "b": 5}, timeout=30)
    assert "7" in (summed.text or "")
    converted = hub.call_tool(
        "time.convert_time",
        {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
        timeout=30,
    )
    assert converted.structured_content is not None
    assert converted.structured_content["target"]["datetime"].endswith("T21:00:00+09:00")
    with pytest.raises(mcp.Error) as caught:
        hub.call_tool("official.ad", {"a": 1, "b": 2}, timeout=30)
    assert (caught.value.kind, caught.value.reason) == ("argument", "unknown_tool")
    assert "official.add" in caught.value.message


def test_the_same_file_through_the_command_line(config_file: Path) -> None:
    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "conduit_mcp", *args, "--config", str(config_file)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
            env={**os.environ, "HUB_TEST_TZ": "Europe/Paris"},
        )

    done = cli("status", "--timeout", "90")
    rows = {line.split()[0]: line.split() for line in done.stdout.splitlines()}
    assert done.returncode == 3, done.stderr  # broken is not ready
    assert {name: rows[name][1] for name in [*LIVE, "broken"]} == {
        **dict.fromkeys(LIVE, "ready"),
        "broken": "closed",
    }
    done = cli("call", "time.get_current_time", '{"timezone": "Europe/Paris"}', "--json")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["structuredContent"]["timezone"] == "Europe/Paris"
    done = cli("call", "fastmcp.whoami")
    assert (done.returncode, done.stdout) == (0, "fastmcp\n"), done.stderr
