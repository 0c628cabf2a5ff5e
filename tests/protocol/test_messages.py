"""protocol.meta and protocol.messages: the requests and notifications we send."""

from __future__ import annotations

import copy
from importlib import metadata
from types import MappingProxyType

import orjson
import pytest

from conduit_mcp.errors import Error
from conduit_mcp.protocol import meta
from conduit_mcp.protocol.jsonrpc import encode
from conduit_mcp.protocol.messages import (
    DISCOVER,
    cancelled,
    client_info,
    discover_request,
    error_response,
    initialize_params,
    initialized,
    notification,
    request,
    result_response,
)

pytestmark = pytest.mark.timeout(20)

INFO = {"name": "conduit-mcp", "version": "1.0"}
CAPS = {"elicitation": {}}
V = "2026-07-28"


def modern(id: int, method: str, params: object, **kw: object) -> dict:
    return request(
        id, method, params, era="modern", version=V, client_info=INFO, capabilities=CAPS, **kw
    )  # type: ignore[arg-type]


def legacy(id: int, method: str, params: object, **kw: object) -> dict:
    return request(
        id,
        method,
        params,
        era="legacy",
        version="2025-11-25",
        client_info=INFO,
        capabilities=CAPS,
        **kw,  # type: ignore[arg-type]
    )


def test_meta_keys() -> None:
    assert meta.META_VERSION == "io.modelcontextprotocol/protocolVersion"
    assert meta.META_CLIENT_INFO == "io.modelcontextprotocol/clientInfo"
    assert meta.META_CLIENT_CAPS == "io.modelcontextprotocol/clientCapabilities"
    assert meta.META_SERVER_INFO == "io.modelcontextprotocol/serverInfo"
    assert meta.META_SUBSCRIPTION_ID == "io.modelcontextprotocol/subscriptionId"
    assert meta.META_LOG_LEVEL == "io.modelcontextprotocol/logLevel"
    assert meta.META_PROGRESS_TOKEN == "progressToken"


def test_modern_request_without_params_matches_spec_example() -> None:
    assert modern(1, "tools/list", None) == {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/list",
        "params": {
            "_meta": {
                "io.modelcontextprotocol/protocolVersion": V,
                "io.modelcontextprotocol/clientInfo": INFO,
                "io.modelcontextprotocol/clientCapabilities": CAPS,
            }
        },
    }


def test_modern_request_with_params_and_progress() -> None:
    msg = modern(7, "tools/call", {"name": "add", "arguments": {"a": 1}}, progress_token=7)
    assert msg["params"]["name"] == "add"
    assert msg["params"]["arguments"] == {"a": 1}
    assert msg["params"]["_meta"] == {
        meta.META_VERSION: V,
        meta.META_CLIENT_INFO: INFO,
        meta.META_CLIENT_CAPS: CAPS,
        "progressToken": 7,
    }


def test_modern_request_does_not_mutate_caller_params_or_meta() -> None:
    params = {"name": "t", "_meta": {"traceparent": "00-abc", meta.META_VERSION: "old"}}
    before = copy.deepcopy(params)
    msg = modern(2, "tools/call", params, progress_token="p")
    assert params == before
    assert msg["params"] is not params
    assert msg["params"]["_meta"] is not params["_meta"]
    # caller keys kept; the three reserved keys are ours
    assert msg["params"]["_meta"]["traceparent"] == "00-abc"
    assert msg["params"]["_meta"][meta.META_VERSION] == V
    assert msg["params"]["_meta"]["progressToken"] == "p"


def test_modern_request_keeps_caller_progress_token_when_none_given() -> None:
    msg = modern(3, "x", {"_meta": {"progressToken": "mine"}})
    assert msg["params"]["_meta"]["progressToken"] == "mine"


def test_modern_request_accepts_any_mapping() -> None:
    params = MappingProxyType({"name": "t", "_meta": MappingProxyType({"k": 1})})
    msg = modern(4, "tools/call", params)
    assert msg["params"]["name"] == "t" and msg["params"]["_meta"]["k"] == 1
    encode(msg)  # plain dicts all the way: serialisable


def test_legacy_request_has_no_meta_without_progress() -> None:
    assert legacy(1, "tools/list", None) == {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    params = {"name": "add", "arguments": {}}
    msg = legacy(2, "tools/call", params)
    assert msg["params"] == params and msg["params"] is not params
    assert "_meta" not in msg["params"]


def test_legacy_request_with_progress_token() -> None:
    assert legacy(5, "tools/list", None, progress_token=5)["params"] == {
        "_meta": {"progressToken": 5}
    }
    params = {"name": "t", "_meta": {"custom": 1}}
    msg = legacy(6, "tools/call", params, progress_token=6)
    assert msg["params"]["_meta"] == {"custom": 1, "progressToken": 6}
    assert params == {"name": "t", "_meta": {"custom": 1}}


@pytest.mark.parametrize("params", [[1, 2], "x", 3])
def test_request_rejects_non_mapping_params(params: object) -> None:
    with pytest.raises(Error) as info:
        modern(1, "x", params)
    assert (info.value.kind, info.value.reason) == ("argument", "params")


def test_request_rejects_non_mapping_meta() -> None:
    with pytest.raises(Error) as info:
        modern(1, "x", {"_meta": "nope"})
    assert info.value.reason == "params._meta"
    with pytest.raises(Error):
        legacy(1, "x", {"_meta": [1]}, progress_token=1)


def test_request_rejects_unknown_era() -> None:
    with pytest.raises(Error) as info:
        request(1, "x", None, era="future", version=V, client_info=INFO, capabilities={})  # type: ignore[arg-type]
    assert (info.value.kind, info.value.reason) == ("argument", "era")


def test_discover_request() -> None:
    msg = discover_request(0, V, INFO, {})
    assert DISCOVER == "server/discover"
    assert msg["method"] == DISCOVER
    assert msg["params"] == {
        "_meta": {meta.META_VERSION: V, meta.META_CLIENT_INFO: INFO, meta.META_CLIENT_CAPS: {}}
    }


def test_notifications() -> None:
    assert notification("notifications/x") == {"jsonrpc": "2.0", "method": "notifications/x"}
    assert notification("n", {"a": 1}) == {"jsonrpc": "2.0", "method": "n", "params": {"a": 1}}
    assert initialized() == {"jsonrpc": "2.0", "method": "notifications/initialized"}
    assert "id" not in initialized()


def test_cancelled() -> None:
    assert cancelled(5, "timeout") == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": 5, "reason": "timeout"},
    }
    assert cancelled("r") == {
        "jsonrpc": "2.0",
        "method": "notifications/cancelled",
        "params": {"requestId": "r"},
    }


def test_initialize_params() -> None:
    assert initialize_params("2025-11-25", CAPS, INFO) == {
        "protocolVersion": "2025-11-25",
        "capabilities": CAPS,
        "clientInfo": INFO,
    }


def test_responses_to_server_requests() -> None:
    assert result_response("p1", {}) == {"jsonrpc": "2.0", "id": "p1", "result": {}}
    assert error_response(3, -32601, "Method not found") == {
        "jsonrpc": "2.0",
        "id": 3,
        "error": {"code": -32601, "message": "Method not found"},
    }
    assert error_response(3, -1, "m", {"x": 1})["error"]["data"] == {"x": 1}


def test_client_info_defaults_to_package() -> None:
    info = client_info()
    assert info == {"name": "conduit-mcp", "version": metadata.version("conduit-mcp")}
    assert client_info("app", "2.0") == {"name": "app", "version": "2.0"}


def test_request_encodes_to_one_line() -> None:
    line = encode(modern(9, "tools/call", {"name": "a\nb"}, progress_token=9))
    assert line.count(b"\n") == 1
    assert orjson.loads(line)["params"]["_meta"]["progressToken"] == 9
