"""``conduit-mcp`` against real third-party servers: the official ``mcp`` 2.3.0 server and npm
server-everything, over stdio and streamable HTTP (loopback), through the real script.

What a shell user sees: the tools table, a call's text, ``--json``, the progress bar on
stderr, ``--config`` entries, and exit code 0. Peers and their fixtures: ``tests/conftest.py``,
``tests/interop/http_peer.py``, ``tests/peers/README.md``.
"""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from .http_peer import HttpPeer, free_port

pytestmark = [pytest.mark.timeout(90), pytest.mark.interop]

BIND_LOCALHOST = Path(__file__).resolve().parent.parent / "peers" / "bind-localhost.cjs"


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conduit_mcp", *args],
        capture_output=True,
        text=True,
        timeout=80,
        check=False,
    )


def tool_names(table: str) -> set[str]:
    lines = table.splitlines()
    assert lines[0].split() == ["NAME", "DESCRIPTION"], table
    return {line.split()[0] for line in lines[1:]}


@pytest.fixture
def modern_http(modern_peer_cmd: list[str]) -> Iterator[HttpPeer]:
    port = free_port()
    peer = HttpPeer([*modern_peer_cmd[:-1], "http", "--port", str(port)], port, ready=[])
    yield peer
    peer.kill()


@pytest.fixture
def everything_http(everything_js: Path) -> Iterator[HttpPeer]:
    port = free_port()
    node = shutil.which("node") or "node"
    peer = HttpPeer(
        [node, "--require", str(BIND_LOCALHOST), str(everything_js), "streamableHttp"],
        port,
        ready=["listening on port"],
        env={"PATH": "/usr/bin:/bin:/usr/local/bin", "PORT": str(port)},
    )
    yield peer
    peer.kill()


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_official_server_over_stdio(modern_peer_cmd: list[str], protocol: str) -> None:
    server = ["--protocol", protocol, "--", *modern_peer_cmd]
    tools = cli("tools", *server)
    assert tools.returncode == 0, tools.stderr
    assert {"add", "echo", "slow_count"} <= tool_names(tools.stdout)
    added = cli("call", "add", '{"a": 2, "b": 40}', *server)
    assert (added.returncode, added.stdout) == (0, "42\n"), added.stderr
    counted = cli("call", "slow_count", '{"steps": 3, "delay": 0.01}', *server)
    assert (counted.returncode, counted.stdout) == (0, "counted to 3\n"), counted.stderr
    assert "progress [####################] 3/3 step 3/3" in counted.stderr
    status = cli("status", "--json", *server)
    shown = json.loads(status.stdout)
    expected = ("modern", "2026-07-28") if protocol == "auto" else ("legacy", "2025-11-25")
    assert (shown["status"]["era"], shown["status"]["version"]) == expected


def test_official_server_over_http(modern_http: HttpPeer) -> None:
    tools = cli("tools", "--url", modern_http.url)
    assert tools.returncode == 0, tools.stderr
    assert {"add", "echo", "slow_count"} <= tool_names(tools.stdout)
    added = cli("call", "add", '{"a": 2, "b": 40}', "--json", "--url", modern_http.url)
    assert added.returncode == 0, added.stderr
    assert json.loads(added.stdout)["structuredContent"] == {"result": 42}
    read = cli("read", "peer://greeting", "--url", modern_http.url)
    assert read.returncode == 0 and read.stdout.strip(), read.stderr


def test_everything_over_stdio_from_a_config_file(
    everything_cmd: list[str], tmp_path: Path
) -> None:
    config = tmp_path / "mcp.json"
    config.write_text(
        json.dumps(
            {
                "mcpServers": {
                    "everything": {"command": everything_cmd[0], "args": everything_cmd[1:]}
                }
            }
        )
    )
    server = ["--config", str(config), "--server", "everything"]
    tools = cli("tools", *server)
    assert tools.returncode == 0, tools.stderr
    assert {"echo", "get-env", "trigger-long-running-operation"} <= tool_names(tools.stdout)
    echoed = cli("call", "echo", '{"message": "hi there"}', *server)
    assert (echoed.returncode, echoed.stdout) == (0, "Echo: hi there\n"), echoed.stderr
    # the server got the minimal environment, nothing more of this process's
    env = cli("call", "get-env", "--json", *server)
    seen = json.loads(json.loads(env.stdout)["content"][0]["text"])
    assert set(seen) <= {"HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER"}


def test_everything_over_http(everything_http: HttpPeer) -> None:
    tools = cli("tools", "--url", everything_http.url)
    assert tools.returncode == 0, tools.stderr
    assert {"echo", "trigger-long-running-operation"} <= tool_names(tools.stdout)
    echoed = cli("call", "echo", '{"message": "over http"}', "--url", everything_http.url)
    assert (echoed.returncode, echoed.stdout) == (0, "Echo: over http\n"), echoed.stderr
    long = cli(
        "call",
        "trigger-long-running-operation",
        '{"duration": 1, "steps": 2}',
        "--url",
        everything_http.url,
    )
    assert long.returncode == 0, long.stderr
    assert long.stdout.startswith("Long running operation completed")
    assert "progress [####################] 2/2" in long.stderr


def test_the_helps_server_everything_example_runs(everything_cmd: list[str]) -> None:
    # The --help example that starts server-everything with npx, run against the local copy:
    # the tool it calls exists and answers (it once called `add`, which that server lacks).
    from conduit_mcp.cli.parser import EXAMPLES

    npx = "-- npx -y @modelcontextprotocol/server-everything"
    (line,) = [line for line in EXAMPLES.splitlines() if line.endswith(npx)]
    words = shlex.split(line.strip()[: -len(npx)])
    assert words[:2] == ["conduit-mcp", "call"], line
    done = cli(*words[1:], "--", *everything_cmd)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
