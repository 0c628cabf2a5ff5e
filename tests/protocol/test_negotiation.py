"""protocol.negotiation: the probe classifier (docs/connection.md, "Era discovery"), discover and
initialize result checks.
"""

from __future__ import annotations

import orjson
import pytest

from conduit_mcp.errors import Error
from conduit_mcp.protocol.negotiation import (
    AuthRequired,
    Close,
    DiscoverInfo,
    HttpProbe,
    Legacy,
    Modern,
    ProbeError,
    ProbeExit,
    ProbeResult,
    ProbeTimeout,
    Reconnect,
    Rediscover,
    check_initialize,
    classify_probe,
    parse_discover,
)

pytestmark = pytest.mark.timeout(20)

V = "2026-07-28"
DISCOVER_RESULT = {
    "resultType": "complete",
    "supportedVersions": ["2026-07-28"],
    "capabilities": {"tools": {}, "resources": {}},
    "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "ExampleServer", "version": "1.0.0"}},
    "instructions": "This server provides weather and resource utilities.",
    "ttlMs": 3600000,
    "cacheScope": "public",
}


def classify(outcome: object, kind: str = "stdio", mode: str = "auto", retried: bool = False):
    return classify_probe(outcome, kind, mode=mode, offered=V, retried=retried)  # type: ignore[arg-type]


def unsupported(*supported: str) -> ProbeError:
    return ProbeError(
        -32022,
        "Unsupported protocol version",
        {"supported": list(supported), "requested": V},
    )


def http(status: int, body: object = None) -> HttpProbe:
    if body is None or isinstance(body, bytes):
        return HttpProbe(status, body)
    return HttpProbe(status, orjson.dumps(body))


def kind_of(decision: object) -> str:
    return type(decision).__name__


# -- DiscoverResult ------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["stdio", "http"])
@pytest.mark.parametrize("mode", ["auto", "modern"])
def test_discover_result_is_modern(kind: str, mode: str) -> None:
    decision = classify(ProbeResult(DISCOVER_RESULT), kind, mode)
    assert isinstance(decision, Modern)
    assert decision.version == V
    assert decision.info.versions == (V,)
    assert decision.info.capabilities == {"tools": {}, "resources": {}}
    assert decision.info.server_info == {"name": "ExampleServer", "version": "1.0.0"}
    assert decision.info.instructions.startswith("This server")
    assert decision.info.raw is DISCOVER_RESULT


def test_discover_result_offered_not_listed_picks_mutual_modern() -> None:
    result = {"supportedVersions": ["2027-01-01", V], "capabilities": {}}
    decision = classify_probe(
        ProbeResult(result), "stdio", mode="auto", offered="2099-01-01", retried=False
    )
    assert decision == Modern(V, parse_discover(result))


def test_discover_result_with_no_mutual_version_closes() -> None:
    result = {"supportedVersions": ["2099-01-01"], "capabilities": {}}
    assert classify(ProbeResult(result)) == Close(
        "no_mutual_version", "the server supports no protocol version we do", None
    )
    assert classify(ProbeResult(result), mode="modern").reason == "no_mutual_version"


def test_discover_result_listing_only_legacy_goes_initialize_in_auto() -> None:
    result = {"supportedVersions": ["2099-01-01", "2025-06-18"], "capabilities": {}}
    assert classify(ProbeResult(result)) == Legacy("server_prefers_legacy", "2025-06-18")
    assert classify(ProbeResult(result), mode="modern").reason == "no_mutual_version"


@pytest.mark.parametrize(
    "result",
    [{}, {"tools": []}, {"supportedVersions": "2026-07-28"}, None, [], "x", {"resultType": "x"}],
)
def test_not_a_discover_result_is_legacy_evidence(result: object) -> None:
    assert classify(ProbeResult(result)) == Legacy("not_discover_result")
    assert classify(ProbeResult(result), mode="modern").reason == "legacy_server"


# -- -32022 ----------------------------------------------------------------------------------


def test_32022_naming_a_mutual_modern_version_rediscovers_once() -> None:
    outcome = ProbeError(-32022, "m", {"supported": ["2099-01-01", "2026-07-28"]})
    decision = classify_probe(outcome, "stdio", mode="auto", offered="2099-01-01", retried=False)
    assert decision == Rediscover(V)
    again = classify_probe(outcome, "stdio", mode="auto", offered=V, retried=True)
    assert isinstance(again, Close) and again.reason == "version_refused"


@pytest.mark.parametrize("mode", ["auto", "modern"])
def test_32022_second_refusal_closes(mode: str) -> None:
    decision = classify(unsupported(V, "2025-11-25"), mode=mode, retried=True)
    assert isinstance(decision, Close) and decision.reason == "version_refused"


@pytest.mark.parametrize("mode", ["auto", "modern"])
@pytest.mark.parametrize(
    "data",
    [
        {"supported": ["1999-01-01"], "requested": V},
        {"supported": [], "requested": V},
        {"requested": V},
        {"supported": "2026-07-28"},
        None,
        "garbage",
    ],
)
def test_32022_without_common_version_closes(mode: str, data: object) -> None:
    decision = classify(ProbeError(-32022, "Unsupported protocol version", data), mode=mode)
    assert isinstance(decision, Close) and decision.reason == "no_mutual_version"
    assert decision.data == data


def test_32022_listing_the_refused_version_is_retried_once() -> None:
    # docs/connection.md, "Era discovery": -32022 with a mutual version -> discover once more;
    # a transient refusal (rolling upgrade) gets its one retry, a second one closes.
    assert classify(unsupported(V)) == Rediscover(V)
    decision = classify(unsupported(V), retried=True)
    assert isinstance(decision, Close) and decision.reason == "version_refused"


def test_32022_naming_only_a_legacy_version() -> None:
    # A -32022 may list legacy versions; choosing one means the initialize flow (auto only).
    assert classify(unsupported("2025-11-25", "2025-06-18")) == Legacy(
        "server_prefers_legacy", "2025-11-25"
    )
    decision = classify(unsupported("2025-11-25"), mode="modern")
    assert isinstance(decision, Close) and decision.reason == "no_mutual_version"


# -- other modern errors -----------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["stdio", "http"])
@pytest.mark.parametrize("mode", ["auto", "modern"])
def test_32021_missing_capability_closes(kind: str, mode: str) -> None:
    data = {"requiredCapabilities": {"elicitation": {}}}
    decision = classify(ProbeError(-32021, "needs elicitation", data), kind, mode)
    assert isinstance(decision, Close)
    assert decision.reason == "missing_client_capability"
    assert decision.data == data
    assert "needs elicitation" in decision.message


def test_32020_header_mismatch_closes_never_falls_back() -> None:
    decision = classify(ProbeError(-32020, "mcp-method header does not match"), "http")
    assert isinstance(decision, Close) and decision.reason == "header_mismatch"


@pytest.mark.parametrize("code", [-32001, -32003, -32004])
def test_retired_draft_codes_are_not_modern(code: int) -> None:
    data = {"supported": ["2026-07-28"]}
    assert classify(ProbeError(code, "draft", data)) == Legacy("probe_error")
    assert classify(ProbeError(code, "draft", data), mode="modern").reason == "legacy_server"


# -- legacy evidence on stdio (what real legacy servers answer a probe) ---------------------


@pytest.mark.parametrize(
    "outcome",
    [
        ProbeError(-32602, "Invalid request parameters"),  # mcp 1.30.0
        ProbeError(-32601, "Method not found"),  # server-everything
        ProbeError(-32600, "Invalid Request"),
        ProbeError(-32603, "Internal error"),
        ProbeError(-32000, "Server not initialized"),
        ProbeError(-32002, "whatever"),
        ProbeError(1, "custom"),
    ],
)
def test_stdio_any_other_error_is_legacy_evidence(outcome: ProbeError) -> None:
    assert classify(outcome) == Legacy("probe_error")
    decision = classify(outcome, mode="modern")
    assert isinstance(decision, Close) and decision.reason == "legacy_server"


@pytest.mark.parametrize("kind", ["stdio", "http"])
def test_timeout_is_legacy_evidence(kind: str) -> None:
    assert classify(ProbeTimeout(), kind) == Legacy("probe_timeout")
    decision = classify(ProbeTimeout(), kind, mode="modern")
    assert isinstance(decision, Close) and decision.reason == "legacy_server"


def test_exit_reconnects_and_next_attempt_is_legacy_in_auto() -> None:
    assert classify(ProbeExit(), "stdio") == Reconnect("server_exited", next_legacy=True)
    assert classify(ProbeExit(), "stdio", mode="modern") == Reconnect(
        "server_exited", next_legacy=False
    )


@pytest.mark.parametrize("mode", ["auto", "modern"])
def test_http_connection_lost_during_probe_is_no_era_evidence(mode: str) -> None:
    # A refused connection or a restarting HTTP server says nothing about its era.
    assert classify(ProbeExit(), "http", mode=mode) == Reconnect("unreachable")


# -- HTTP (MCP spec 2026-07-28, Transports, "Streamable HTTP"; real legacy servers) --------------


@pytest.mark.parametrize(
    ("probe", "reason"),
    [
        # server-everything (TS SDK 1.32.2, stateful)
        (
            http(
                400,
                {
                    "jsonrpc": "2.0",
                    "error": {"code": -32000, "message": "Bad Request: Server not initialized"},
                    "id": None,
                },
            ),
            "probe_error",
        ),
        # the same, as some real servers write it (a bare error object)
        (
            http(
                400, {"code": -32000, "message": "Bad Request: Server not initialized", "id": None}
            ),
            "probe_error",
        ),
        # mcp 1.30.0 FastMCP (stateful), and mcp 2.3.0 without MCP-Protocol-Version
        (
            http(
                400,
                {
                    "jsonrpc": "2.0",
                    "id": "server-error",
                    "error": {"code": -32600, "message": "Bad Request: Missing session ID"},
                },
            ),
            "probe_error",
        ),
        (http(400), "http_400"),
        (http(400, b""), "http_400"),
        (http(400, b"<html>bad</html>"), "http_400"),
        (http(400, {}), "http_400"),
        (http(404), "http_404"),
        (
            http(
                404,
                {
                    "jsonrpc": "2.0",
                    "id": 1,
                    "error": {"code": -32601, "message": "Method not found"},
                },
            ),
            "probe_error",
        ),
        (http(405), "http_405"),
        (http(406, b"Not Acceptable"), "http_406"),
        (http(200, {"jsonrpc": "2.0", "id": 1, "result": {}}), "not_discover_result"),
        (http(200, b"{}"), "http_200"),
        (http(202), "http_202"),
        (http(200, b"event: message\ndata: {}\n\n"), "http_200"),
        (
            http(
                500,
                {"jsonrpc": "2.0", "id": 1, "error": {"code": -32603, "message": "Internal error"}},
            ),
            "probe_error",
        ),
    ],
)
def test_http_legacy_evidence(probe: HttpProbe, reason: str) -> None:
    assert classify(probe, "http") == Legacy(reason)
    decision = classify(probe, "http", mode="modern")
    assert isinstance(decision, Close) and decision.reason == "legacy_server"


def test_http_400_with_32022_is_modern_handling() -> None:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": "2099-01-01"},
        },
    }
    decision = classify_probe(
        http(400, body), "http", mode="auto", offered="2099-01-01", retried=False
    )
    assert decision == Rediscover(V)
    decision = classify_probe(http(400, body), "http", mode="auto", offered=V, retried=True)
    assert isinstance(decision, Close) and decision.reason == "version_refused"
    bare = {"code": -32022, "message": "m", "data": {"supported": ["1999-01-01"]}}
    assert classify(http(400, bare), "http").reason == "no_mutual_version"


@pytest.mark.parametrize(
    ("code", "reason"), [(-32021, "missing_client_capability"), (-32020, "header_mismatch")]
)
def test_http_400_with_other_modern_errors_closes(code: int, reason: str) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "error": {"code": code, "message": "m"}}
    for mode in ("auto", "modern"):
        decision = classify(http(400, body), "http", mode)
        assert isinstance(decision, Close) and decision.reason == reason


def test_http_200_discover_result_is_modern() -> None:
    body = {"jsonrpc": "2.0", "id": 1, "result": DISCOVER_RESULT}
    decision = classify(http(200, body), "http")
    assert isinstance(decision, Modern) and decision.version == V


def test_http_200_with_legacy_error_is_legacy_evidence() -> None:
    body = {"jsonrpc": "2.0", "id": 1, "error": {"code": -32601, "message": "nope"}}
    assert classify(http(200, body), "http") == Legacy("probe_error")


@pytest.mark.parametrize("status", [401, 403])
def test_http_auth_is_not_era_evidence(status: int) -> None:
    assert classify(http(status), "http") == AuthRequired(status)
    assert classify(http(status), "http", mode="modern") == AuthRequired(status)


@pytest.mark.parametrize("status", [429, 500, 502, 503, 504])
def test_http_overload_or_outage_reconnects(status: int) -> None:
    for body in (None, b"<html>Bad gateway</html>"):
        assert classify(http(status, body), "http") == Reconnect(f"http_{status}")
        assert classify(http(status, body), "http", mode="modern") == Reconnect(f"http_{status}")


def test_http_probe_repr_hides_body() -> None:
    assert "secret" not in repr(HttpProbe(400, b"secret"))


# -- argument checks -------------------------------------------------------------------------


def test_classify_rejects_bad_arguments() -> None:
    with pytest.raises(Error) as info:
        classify(ProbeTimeout(), mode="legacy")
    assert (info.value.kind, info.value.reason) == ("argument", "mode")
    with pytest.raises(Error) as info:
        classify(ProbeTimeout(), "pigeon")
    assert info.value.reason == "transport_kind"
    with pytest.raises(Error) as info:
        classify({"result": {}})
    assert info.value.reason == "outcome"
    with pytest.raises(Error) as info:
        classify(http(400), "stdio")
    assert info.value.reason == "outcome"


# -- parse_discover --------------------------------------------------------------------------


def test_parse_discover_server_info_fallbacks() -> None:
    top = {"supportedVersions": [V], "serverInfo": {"name": "old", "version": "0"}}
    assert parse_discover(top).server_info == {"name": "old", "version": "0"}
    both = {**top, "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "new", "version": "1"}}}
    assert parse_discover(both).server_info == {"name": "new", "version": "1"}
    junk = {"supportedVersions": [V], "_meta": "x", "serverInfo": "y", "instructions": 3}
    info = parse_discover(junk)
    assert info.server_info is None and info.instructions is None
    assert info.capabilities == {}  # absent capabilities: lenient (older servers omit fields)


def test_parse_discover_keeps_only_string_versions_and_raw() -> None:
    result = {"supportedVersions": [V, 3, None], "capabilities": {}, "ttlMs": 5}
    info = parse_discover(result)
    assert isinstance(info, DiscoverInfo)
    assert info.versions == (V,)
    assert info.raw["ttlMs"] == 5


@pytest.mark.parametrize(
    "result",
    [{}, None, [], {"supportedVersions": None}, {"supportedVersions": [V], "capabilities": []}],
)
def test_parse_discover_rejects(result: object) -> None:
    with pytest.raises(Error) as info:
        parse_discover(result)
    assert (info.value.kind, info.value.reason) == ("protocol", "bad_discover_result")


# -- check_initialize ------------------------------------------------------------------------


def test_check_initialize_accepts_offered_or_older_legacy_version() -> None:
    result = {
        "protocolVersion": "2025-11-25",
        "capabilities": {"tools": {"listChanged": True}},
        "serverInfo": {"name": "mcp-servers/everything", "version": "2.0.0"},
        "instructions": "hi",
    }
    info = check_initialize(result, "2025-11-25")
    assert (info.version, info.capabilities, info.instructions) == (
        "2025-11-25",
        {"tools": {"listChanged": True}},
        "hi",
    )
    assert info.server_info == {"name": "mcp-servers/everything", "version": "2.0.0"}
    assert info.raw is result
    older = check_initialize({"protocolVersion": "2024-11-05"}, "2025-11-25")
    assert (older.version, older.capabilities, older.server_info) == ("2024-11-05", {}, None)


@pytest.mark.parametrize("version", ["2024-10-07", "2099-01-01", "2026-07-28", ""])
def test_check_initialize_unknown_version_disconnects(version: str) -> None:
    with pytest.raises(Error) as info:
        check_initialize({"protocolVersion": version, "capabilities": {}}, "2025-11-25")
    assert (info.value.kind, info.value.reason) == ("protocol", "unsupported_version")
    assert "2025-11-25" in info.value.message


@pytest.mark.parametrize(
    "result",
    [
        None,
        [],
        {},
        {"protocolVersion": 20251125},
        {"protocolVersion": "2025-11-25", "capabilities": []},
        {"protocolVersion": "2025-11-25", "serverInfo": "me"},
    ],
)
def test_check_initialize_malformed(result: object) -> None:
    with pytest.raises(Error) as info:
        check_initialize(result, "2025-11-25")
    assert (info.value.kind, info.value.reason) == ("protocol", "bad_initialize_result")
