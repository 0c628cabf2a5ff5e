"""Scripted rules: every action, nth/times, process filters, and invalid scripts."""

from __future__ import annotations

import subprocess
import sys
import time

import orjson
import pytest

from conduit_mcp.testing import ScriptedServer
from conduit_mcp.testing.raw.stdio import envelope

pytestmark = pytest.mark.timeout(30)

ADD = {"name": "add", "arguments": {"a": 1, "b": 2}}


def call_add(peer):
    return peer.send_request("tools/call", envelope(ADD))


def test_error_action(spawn):
    rules = [
        {
            "match": {"method": "tools/list"},
            "action": {"error": {"code": -32603, "message": "boom", "data": [1]}},
        }
    ]
    srv, peer = spawn(rules=rules)
    assert peer.modern("tools/list")["error"] == {"code": -32603, "message": "boom", "data": [1]}
    assert srv.wait_for("rule")["rule"] == 0


def test_result_action_is_verbatim(spawn):
    rules = [{"match": {"tool": "add"}, "action": {"result": {"anything": True}}}]
    _, peer = spawn(rules=rules)
    assert peer.modern("tools/call", ADD)["result"] == {"anything": True}


def test_drop_action_never_answers(spawn):
    srv, peer = spawn(rules=[{"match": {"tool": "add"}, "action": "drop", "times": 1}])
    dropped = call_add(peer)
    answered = call_add(peer)
    seen = []
    peer.expect(lambda m: seen.append(m) or m.get("id") == answered)
    assert [m["id"] for m in seen] == [answered]
    peer.notify("notifications/cancelled", {"requestId": dropped})
    assert srv.wait_for({"event": "cancelled", "id": dropped})["found"] is False


def test_delay_action_then_default(spawn):
    _, peer = spawn(rules=[{"match": {"method": "server/discover"}, "action": {"delay": 0.3}}])
    started = time.monotonic()
    assert peer.modern("server/discover")["result"]["resultType"] == "complete"
    assert time.monotonic() - started >= 0.3


def test_delay_is_cancellable_and_composes(spawn):
    rules = [
        {
            "match": {"tool": "add"},
            "action": {"delay": 0.2, "error": {"code": 1, "message": "late"}},
        }
    ]
    srv, peer = spawn(rules=rules)
    cancelled = call_add(peer)
    peer.notify("notifications/cancelled", {"requestId": cancelled})
    assert srv.wait_for({"event": "cancelled", "id": cancelled})["found"] is True
    kept = call_add(peer)
    seen = []
    response = peer.expect(lambda m: seen.append(m) or m.get("id") == kept)
    assert response["error"]["message"] == "late" and len(seen) == 1


def test_exit_action(spawn):
    srv, peer = spawn(rules=[{"match": {"method": "server/discover"}, "action": "exit"}])
    peer.send_request("server/discover", envelope())
    assert peer.wait() == 3
    assert peer.recv_line() is None
    assert srv.events("exit")[-1]["code"] == 3
    _, custom = spawn(rules=[{"match": {"method": "initialize"}, "action": {"exit": 9}}])
    custom.send_request("initialize", {})
    assert custom.wait() == 9


def test_garbage_action(spawn):
    rules = [
        {"match": {"tool": "add", "nth": 1}, "action": "garbage"},
        {"match": {"tool": "add", "nth": 2}, "action": {"garbage": "custom junk"}},
    ]
    _, peer = spawn(rules=rules)
    call_add(peer)
    assert b"not JSON" in peer.recv_line()
    call_add(peer)
    assert peer.recv_line() == b"custom junk"
    third = call_add(peer)
    assert peer.recv()["id"] == third


def test_respond_twice(spawn):
    _, peer = spawn(rules=[{"match": {"tool": "add"}, "action": {"respond_twice": True}}])
    request_id = call_add(peer)
    first, second = peer.recv(), peer.recv()
    assert first == second and first["id"] == request_id
    assert first["result"]["structuredContent"] == {"sum": 3}


def test_respond_twice_after_slow_work(spawn):
    _, peer = spawn(rules=[{"match": {"tool": "slow"}, "action": "respond_twice"}])
    request_id = peer.send_request(
        "tools/call", envelope({"name": "slow", "arguments": {"seconds": 0.05}})
    )
    assert [peer.recv()["id"], peer.recv()["id"]] == [request_id, request_id]


def test_wrong_id(spawn):
    rules = [
        {"match": {"tool": "add", "nth": 1}, "action": {"wrong_id": True}},
        {"match": {"tool": "add", "nth": 2}, "action": {"wrong_id": "who-asked"}},
    ]
    _, peer = spawn(rules=rules)
    request_id = call_add(peer)
    response = peer.recv()
    assert response["id"] != request_id and isinstance(response["id"], int)
    assert response["result"]["structuredContent"] == {"sum": 3}
    call_add(peer)
    assert peer.recv()["id"] == "who-asked"
    string_id = peer.send_request("tools/list", envelope(), id="abc")
    assert peer.recv()["id"] == string_id


def test_wrong_id_on_string_ids(spawn):
    _, peer = spawn(rules=[{"match": {"method": "tools/list"}, "action": "wrong_id"}])
    peer.send_request("tools/list", envelope(), id="abc")
    assert peer.recv()["id"] == "abc-wrong"


def test_close_stdout(spawn):
    srv, peer = spawn(rules=[{"match": {"method": "tools/list"}, "action": {"close_stdout": True}}])
    peer.modern("server/discover")
    peer.send_request("tools/list", envelope())
    assert peer.recv_line() is None  # EOF on stdout...
    assert peer.proc.poll() is None  # ...while the process keeps running
    srv.wait_for("stdout_closed")
    peer.send_request("tools/list", envelope())
    srv.wait_for("tools/list", count=2)  # it still reads stdin
    peer.close_stdin()
    assert peer.wait() == 0


def test_nth_and_times(spawn):
    rules = [
        {"match": {"tool": "add", "nth": 2}, "action": {"error": {"code": 2, "message": "second"}}},
        {
            "match": {"method": "tools/call"},
            "action": {"error": {"code": 9, "message": "limited"}},
            "times": 2,
        },
    ]
    _, peer = spawn(rules=rules)
    outcomes = []
    for _ in range(5):
        response = peer.modern("tools/call", ADD)
        outcomes.append(response["error"]["message"] if "error" in response else "ok")
    # call 1: rule 0 waits for nth 2, rule 1 fires (1/2); call 2: rule 0; call 3: rule 1 (2/2).
    assert outcomes == ["limited", "second", "limited", "ok", "ok"]


def test_tool_and_name_matching(spawn):
    rules = [
        {"match": {"tool": "echo"}, "action": {"error": {"code": 1, "message": "no echo"}}},
        {
            "match": {"method": "resources/read", "name": "test://item/1"},
            "action": {"result": {"contents": []}},
        },
    ]
    _, peer = spawn(rules=rules)
    assert (
        peer.modern("tools/call", {"name": "echo", "arguments": {"text": "x"}})["error"]["code"]
        == 1
    )
    assert "result" in peer.modern("tools/call", ADD)
    assert peer.modern("resources/read", {"uri": "test://item/1"})["result"] == {"contents": []}
    assert (
        peer.modern("resources/read", {"uri": "test://item/2"})["result"]["contents"][0]["text"]
        == "item 2"
    )


def test_rules_on_notifications(spawn):
    rules = [{"match": {"method": "notifications/cancelled"}, "action": "drop"}]
    srv, peer = spawn(rules=rules)
    slow = peer.send_request(
        "tools/call", envelope({"name": "slow", "arguments": {"seconds": 0.2}})
    )
    peer.notify("notifications/cancelled", {"requestId": slow})
    assert peer.response(slow)["result"]["content"][0]["text"] == "slept 0.2"  # not cancelled
    assert srv.events("cancelled") == []
    assert srv.events("rule")[0]["method"] == "notifications/cancelled"


def test_rules_without_method_do_not_match_notifications(spawn):
    srv, peer = spawn(
        rules=[{"match": {}, "action": {"error": {"code": 4, "message": "every request"}}}]
    )
    peer.notify("notifications/initialized")
    assert peer.modern("tools/list")["error"]["code"] == 4
    assert len(srv.events("rule")) == 1


def test_probe_dropped_falls_back_to_initialize(spawn):
    # A dropped discover does not decide the era, so initialize still works in both mode.
    _, peer = spawn(rules=[{"match": {"method": "server/discover"}, "action": "drop"}])
    peer.send_request("server/discover", envelope())
    assert peer.initialize()["result"]["protocolVersion"] == "2025-11-25"


def test_first_process_only_survives_restarts(spawn):
    rules = [{"match": {"method": "server/discover"}, "action": "exit", "first_process_only": True}]
    srv, first = spawn(rules=rules)
    first.send_request("server/discover", envelope())
    assert first.wait() == 3
    _, second = spawn(srv)
    assert second.modern("server/discover")["result"]["resultType"] == "complete"
    assert srv.starts() == 2
    assert srv.pids() == [first.proc.pid, second.proc.pid]
    assert [e["start"] for e in srv.events("started")] == [1, 2]
    assert srv.starts_path.read_text() == "2"


def test_process_k(spawn):
    rules = [
        {
            "match": {"method": "tools/list"},
            "action": {"error": {"code": 1, "message": "third"}},
            "process": 3,
        }
    ]
    srv = spawn.server(rules=rules)
    codes = []
    for _ in range(3):
        _, peer = spawn(srv)
        response = peer.modern("tools/list")
        codes.append(response["error"]["code"] if "error" in response else 0)
        peer.close()
    assert codes == [0, 0, 1]


def test_set_rules_applies_to_the_next_process(spawn):
    srv = spawn.server()
    _, before = spawn(srv)
    srv.wait_for("started")  # the script is read at start
    srv.set_rules(
        [{"match": {"method": "tools/list"}, "action": {"error": {"code": 5, "message": "new"}}}]
    )
    assert "result" in before.modern("tools/list")
    _, after = spawn(srv)
    assert after.modern("tools/list")["error"]["code"] == 5


@pytest.mark.parametrize(
    "rules",
    [
        [{"action": "explode"}],
        [{"match": {"method": "x"}}],
        [{"match": {"nth": 0}, "action": "drop"}],
        [{"match": {"colour": "red"}, "action": "drop"}],
        [{"match": {}, "action": {"error": {"message": "no code"}}}],
        [{"match": {}, "action": {"drop": True, "exit": True}}],
        [{"match": {}, "action": {"delay": -1}}],
        [{"match": {}, "action": {"exit": 300}}],
        [{"match": {"method": "tools/list", "tool": "add"}, "action": "drop"}],
        [{"match": {}, "action": "drop", "times": 0}],
        [{"match": {}, "action": "drop", "extra": 1}],
    ],
)
def test_invalid_rules_are_refused(tmp_path, rules):
    with pytest.raises(ValueError):
        ScriptedServer(tmp_path, rules=rules)


def test_invalid_script_file_exits_2(tmp_path):
    script = tmp_path / "bad.json"
    script.write_bytes(orjson.dumps({"rules": [{"action": "explode"}]}))
    proc = subprocess.run(
        [sys.executable, "-m", "conduit_mcp.testing", "--script", str(script)],
        input=b"",
        capture_output=True,
        timeout=20,
    )
    assert proc.returncode == 2
    assert b"rule 0" in proc.stderr and proc.stdout == b""
    missing = subprocess.run(
        [sys.executable, "-m", "conduit_mcp.testing", "--script", str(tmp_path / "none.json")],
        input=b"",
        capture_output=True,
        timeout=20,
    )
    assert missing.returncode == 2 and b"cannot read script" in missing.stderr
