"""Handshakes and era rules of the scripted server, driven with raw JSON lines."""

from __future__ import annotations

import pytest

from conduit_mcp.testing.raw.stdio import envelope

pytestmark = pytest.mark.timeout(30)

SERVER_INFO = "io.modelcontextprotocol/serverInfo"
LEGACY = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]


def test_modern_discover_result(spawn):
    srv, peer = spawn(name="disco")
    result = peer.modern("server/discover")["result"]
    assert result == {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {
            "tools": {"listChanged": True},
            "prompts": {"listChanged": True},
            "resources": {"subscribe": True, "listChanged": True},
            "completions": {},
            "logging": {},
            "extensions": {"io.modelcontextprotocol/tasks": {}},
        },
        "_meta": {SERVER_INFO: {"name": "disco", "version": "1.0.0"}},
        "instructions": result["instructions"],
        "ttlMs": 0,
        "cacheScope": "public",
    }
    assert isinstance(result["instructions"], str) and result["instructions"]
    assert srv.wait_for({"event": "era", "era": "modern"})


def test_modern_call_carries_result_type_and_server_info(spawn):
    _, peer = spawn()
    result = peer.call("add", {"a": 2, "b": 40})["result"]
    assert result["resultType"] == "complete"
    assert result["_meta"][SERVER_INFO]["name"] == "scripted"
    assert result["content"] == [{"type": "text", "text": "42"}]
    assert result["structuredContent"] == {"sum": 42}
    listed = peer.modern("tools/list")["result"]
    assert listed["ttlMs"] == 0 and listed["cacheScope"] == "public"
    assert "ttlMs" not in result  # tools/call is not cacheable


def test_unsupported_modern_version_is_32022(spawn):
    srv, peer = spawn()
    error = peer.modern("server/discover", version="1900-01-01")["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "1900-01-01"}
    # A legacy version named in the modern envelope is unsupported as well.
    error = peer.modern("tools/list", version="2025-11-25")["error"]
    assert error["code"] == -32022 and error["data"]["requested"] == "2025-11-25"
    assert srv.events("era") == []  # refused requests decide no era
    assert peer.modern("server/discover")["result"]["resultType"] == "complete"
    assert srv.wait_for("era")["era"] == "modern"
    assert peer.initialize()["error"]["code"] == -32022


def test_missing_meta_fields_are_32602(spawn):
    _, peer = spawn(era="modern")
    assert peer.request("tools/list", {})["error"]["code"] == -32602
    assert peer.request("tools/list")["error"]["code"] == -32602
    no_caps = {"_meta": {"io.modelcontextprotocol/protocolVersion": "2026-07-28"}}
    error = peer.request("tools/list", no_caps)["error"]
    assert error["code"] == -32602 and "clientCapabilities" in error["message"]
    bad_version_type = envelope()
    bad_version_type["_meta"]["io.modelcontextprotocol/protocolVersion"] = 20260728
    assert peer.request("tools/list", bad_version_type)["error"]["code"] == -32602
    bad_level = envelope(**{"io.modelcontextprotocol/logLevel": "loud"})
    assert peer.request("tools/list", bad_level)["error"]["code"] == -32602


def test_modern_has_no_ping_and_unknown_methods_are_32601(spawn):
    _, peer = spawn()
    assert peer.modern("ping")["error"]["code"] == -32601
    assert peer.modern("no/such/method")["error"]["code"] == -32601
    assert peer.modern("logging/setLevel", {"level": "info"})["error"]["code"] == -32601


def test_legacy_handshake_in_both_mode(spawn):
    srv, peer = spawn(name="dual")
    result = peer.initialize("2025-06-18")["result"]
    assert result["protocolVersion"] == "2025-06-18"
    assert result["serverInfo"] == {"name": "dual", "version": "1.0.0"}
    assert result["capabilities"]["tools"] == {"listChanged": True}
    assert "resultType" not in result
    assert peer.request("ping")["result"] == {}
    called = peer.request("tools/call", {"name": "add", "arguments": {"a": 1, "b": 2}})["result"]
    assert called == {"content": [{"type": "text", "text": "3"}], "structuredContent": {"sum": 3}}
    srv.wait_for("notifications/initialized")
    assert srv.events("initialize")[0]["version"] == "2025-06-18"


def test_initialize_with_unknown_version_gets_newest_legacy(spawn):
    _, peer = spawn()
    assert peer.initialize("2099-01-01")["result"]["protocolVersion"] == "2025-11-25"


def test_both_mode_locks_the_era(spawn):
    _, modern = spawn()
    modern.modern("server/discover")
    error = modern.initialize()["error"]
    assert error["code"] == -32022
    assert error["data"] == {"supported": ["2026-07-28"], "requested": "2025-11-25"}

    _, legacy = spawn()
    legacy.initialize()
    assert legacy.modern("tools/list")["error"]["code"] == -32600
    assert legacy.request("server/discover")["error"]["code"] == -32601
    assert "tools" in legacy.request("tools/list")["result"]


def test_legacy_only_mode(spawn):
    srv, peer = spawn(era="legacy")
    error = peer.modern("server/discover")["error"]
    assert error["code"] == -32601 and error["message"] == "Method not found"
    assert peer.request("ping")["result"] == {}  # pings are allowed before initialize
    early = peer.request("tools/list")["error"]
    assert early["code"] == -32602
    result = peer.initialize("2024-11-05")["result"]
    assert result["protocolVersion"] == "2024-11-05"
    # Legacy servers ignore the modern envelope.
    assert "tools" in peer.modern("tools/list")["result"]
    assert srv.log()[0]["legacy_versions"] == LEGACY


def test_modern_only_mode(spawn):
    _, peer = spawn(era="modern")
    assert peer.initialize()["error"]["code"] == -32601
    assert peer.request("ping")["error"]["code"] == -32601
    assert peer.modern("server/discover")["result"]["supportedVersions"] == ["2026-07-28"]


def test_custom_versions(spawn):
    _, peer = spawn(versions=["2099-01-01", "2026-07-28", "2025-06-18"])
    assert peer.modern("server/discover", version="2099-01-01")["result"]["supportedVersions"] == [
        "2099-01-01",
        "2026-07-28",
    ]
    _, legacy = spawn(versions=["2099-01-01", "2026-07-28", "2025-06-18"])
    assert legacy.initialize("2025-11-25")["result"]["protocolVersion"] == "2025-06-18"


def test_no_legacy_versions_refuses_initialize(spawn):
    _, peer = spawn(versions=["2026-07-28"])
    error = peer.initialize()["error"]
    assert error["code"] == -32602
    assert error["data"] == {"supported": [], "requested": "2025-11-25"}


def test_advertise_legacy(spawn):
    _, peer = spawn(extra_args=["--advertise-legacy"])
    assert peer.modern("server/discover")["result"]["supportedVersions"] == ["2026-07-28", *LEGACY]
    _, other = spawn(extra_args=["--advertise-legacy"])
    refused = other.modern("server/discover", version="1.0")["error"]
    assert refused["code"] == -32022
    assert refused["data"]["supported"] == ["2026-07-28", *LEGACY]
    # The refusal decided nothing: the client may switch to a listed legacy version.
    assert other.initialize("2025-06-18")["result"]["protocolVersion"] == "2025-06-18"


def test_server_options_name_ttl_scope(spawn):
    _, peer = spawn(
        name="named",
        extra_args=["--ttl-ms", "5000", "--cache-scope", "private", "--instructions", "hi"],
    )
    result = peer.modern("server/discover")["result"]
    assert (result["ttlMs"], result["cacheScope"], result["instructions"]) == (
        5000,
        "private",
        "hi",
    )
    read = peer.modern("resources/read", {"uri": "test://static/hello"})["result"]
    assert read["ttlMs"] == 5000 and read["cacheScope"] == "private"


def test_malformed_input(spawn):
    _, peer = spawn()
    peer.send_raw(b"{not json\n")
    assert peer.recv() == {
        "jsonrpc": "2.0",
        "id": None,
        "error": {"code": -32700, "message": "Parse error"},
    }
    peer.send_raw(b"[1, 2]\n")
    assert peer.recv()["error"]["code"] == -32600
    peer.send({"jsonrpc": "2.0", "id": 9})
    assert peer.recv()["error"]["code"] == -32600
    peer.send_raw(b"\n   \n")  # blank lines are ignored
    assert peer.modern("server/discover")["result"]["resultType"] == "complete"
