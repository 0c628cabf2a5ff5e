"""The Python API of conduit_mcp.testing: ScriptedServer, its log readers, Stdio specs."""

from __future__ import annotations

import asyncio
import doctest
import subprocess
import sys

import orjson
import pytest

import conduit_mcp.testing as testing
from conduit_mcp.testing import ScriptedServer
from conduit_mcp.transports.stdio_spec import Stdio

pytestmark = pytest.mark.timeout(30)


def test_module_docstring_example_runs():
    failures, attempted = doctest.testmod(testing, optionflags=doctest.ELLIPSIS)
    assert attempted > 0 and failures == 0


def test_command_and_files(tmp_path):
    srv = ScriptedServer(
        tmp_path / "w",
        era="legacy",
        versions=["2025-06-18"],
        page_size=3,
        name="nm",
        extra_args=["--ttl-ms", "5"],
        rules=[{"match": {"method": "ping"}, "action": "drop"}],
    )
    cmd = srv.command()
    assert cmd[0] == sys.executable
    assert cmd[1:3] == ["-m", "conduit_mcp.testing"]
    for pair in (
        ["--era", "legacy"],
        ["--versions", "2025-06-18"],
        ["--page-size", "3"],
        ["--name", "nm"],
    ):
        i = cmd.index(pair[0])
        assert cmd[i : i + 2] == pair
    assert cmd[-2:] == ["--ttl-ms", "5"]
    assert srv.script_path.parent == tmp_path / "w"
    assert orjson.loads(srv.script_path.read_bytes()) == {
        "rules": [{"match": {"method": "ping"}, "action": "drop"}]
    }
    assert srv.log() == [] and srv.starts() == 0
    other = ScriptedServer(tmp_path / "w", name="nm")
    assert other.log_path != srv.log_path and other.script_path != srv.script_path


def test_stdio_spec(tmp_path):
    srv = ScriptedServer(tmp_path)
    spec = srv.stdio(env={"A": "1"}, cwd=str(tmp_path), close_grace=0.5)
    assert isinstance(spec, Stdio)
    assert spec.command == sys.executable
    assert list(spec.args) == srv.command()[1:]
    assert spec.env["A"] == "1" and "PYTHONPATH" in spec.env
    assert spec.cwd == str(tmp_path) and spec.close_grace == 0.5
    # The spec really starts the server (here with a plain subprocess).
    request = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {
            "name": "env",
            "arguments": {"name": "A"},
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {},
            },
        },
    }
    proc = subprocess.run(
        [spec.command, *spec.args],
        input=orjson.dumps(request) + b"\n",
        capture_output=True,
        env=spec.environment(),
        cwd=spec.cwd,
        timeout=20,
    )
    assert proc.returncode == 0
    response = orjson.loads(proc.stdout)
    assert response["result"]["structuredContent"]["value"] == "1"
    assert srv.received("tools/call")[0]["params"]["arguments"] == {"name": "A"}


def test_log_entries_and_wait_for(spawn):
    srv, peer = spawn()
    peer.modern("server/discover")
    peer.notify("notifications/cancelled", {"requestId": 99})
    started = srv.wait_for("started")
    assert started["pid"] == peer.proc.pid and started["start"] == 1
    entry = srv.wait_for("notifications/cancelled")
    assert entry["dir"] == "in" and entry["params"] == {"requestId": 99}
    assert entry["id"] is None and entry["method"] == "notifications/cancelled"
    assert srv.wait_for({"event": "cancelled", "id": 99})["found"] is False
    assert srv.wait_for(lambda e: e.get("method") == "server/discover")["id"] == 1
    assert srv.cancelled_ids() == [99]
    assert srv.received("server/discover")[0]["t"] <= entry["t"]
    with pytest.raises(TimeoutError, match="never/happens"):
        srv.wait_for("never/happens", timeout=0.05)
    with pytest.raises(TypeError):
        srv.find(42)


def test_wait_for_count(spawn):
    srv, peer = spawn()
    for _ in range(3):
        peer.modern("tools/list")
    assert srv.wait_for("tools/list", count=3)["id"] == 3


def test_wait_for_async(spawn):
    srv, peer = spawn()

    async def main():
        peer.send_request("tools/list", {})
        return await srv.wait_for_async("tools/list")

    assert asyncio.run(main())["method"] == "tools/list"


def test_log_ignores_a_torn_last_line(tmp_path):
    srv = ScriptedServer(tmp_path)
    with open(srv.log_path, "ab") as f:
        f.write(b'{"event":"started","pid":1}\n{"event":"cancel')
    assert srv.log() == [{"event": "started", "pid": 1}]
    with open(srv.log_path, "ab") as f:
        f.write(b'led","id":3}\n')
    assert srv.events("cancelled") == [{"event": "cancelled", "id": 3}]
    assert srv.starts() == 1 and srv.pids() == [1]


def test_log_covers_restarts(spawn):
    srv, first = spawn()
    first.modern("server/discover")
    first.close()
    _, second = spawn(srv)
    second.modern("server/discover")
    assert srv.wait_for("started", count=2)["pid"] == second.proc.pid
    assert [e["pid"] for e in srv.received("server/discover")] == srv.pids()


def test_bad_era_is_refused(tmp_path):
    with pytest.raises(ValueError):
        ScriptedServer(tmp_path, era="future")
