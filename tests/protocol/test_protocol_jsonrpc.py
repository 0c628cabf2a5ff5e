"""protocol.jsonrpc: encode, decode (classification) and server errors."""

from __future__ import annotations

import pickle
import tracemalloc
from collections.abc import Callable

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conduit_mcp.errors import Error
from conduit_mcp.protocol import jsonrpc
from conduit_mcp.protocol.jsonrpc import (
    ErrorResponse,
    Invalid,
    Notification,
    Request,
    Response,
    decode,
    encode,
    encode_kept,
    error_reason,
    server_error,
)

pytestmark = pytest.mark.timeout(20)

SECRET = "s3cret-value-never-shown"


# -- encode ------------------------------------------------------------------------------


def test_encode_is_one_compact_line() -> None:
    msg = {"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"text": "a\nb", "é": "ü"}}
    out = encode(msg)
    assert out.endswith(b"\n")
    assert out.count(b"\n") == 1  # the embedded newline is escaped
    assert orjson.loads(out) == msg
    assert "ü".encode() in out  # compact UTF-8, not \u escapes


@pytest.mark.parametrize(
    "value",
    [
        {SECRET},
        object(),
        10**30 + int("".join(str(ord(c)) for c in SECRET[:5])),
        {1: SECRET},
        SECRET + "\ud800",
    ],
)
def test_encode_refuses_without_showing_the_value(value: object) -> None:
    with pytest.raises(Error) as info:
        encode({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"a": value}})
    err = info.value
    assert (err.kind, err.reason) == ("argument", "not_json")
    shown = str(err) + repr(err) + repr(err.args) + str(err.__cause__) + str(err.__context__)
    assert SECRET not in shown
    assert str(10**30)[:10] not in shown
    assert err.__cause__ is None and err.__suppress_context__


def test_encode_names_the_cause() -> None:
    with pytest.raises(Error) as info:
        encode({"a": {1, 2}})
    assert "set" in info.value.message


def _allocated(make: Callable[[], bytes]) -> tuple[bytes, int]:
    """What ``make()`` returns and the bytes still allocated for it (tracemalloc)."""
    tracemalloc.start()
    try:
        out = make()
        size = tracemalloc.get_traced_memory()[0]
    finally:
        tracemalloc.stop()
    return out, size


@pytest.mark.parametrize("length", [0, 10, 100, 1_000, 3_000, 20_000, 200_000])
def test_encode_kept_holds_only_its_own_bytes(length: int) -> None:
    # A frame held while it waits (an HTTP body until its answer, a queued answer) must
    # cost what its length says: orjson's own output keeps the buffer it wrote into
    message = {"jsonrpc": "2.0", "id": 1, "method": "x", "params": {"text": "a" * length}}
    frame, held = _allocated(lambda: encode_kept(message))
    assert frame == encode(message) and type(frame) is bytes
    assert held <= len(frame) + 200, f"{held} bytes held for a {len(frame)}-byte frame"


def test_encode_kept_leaves_a_frame_past_its_bound_as_orjson_made_it() -> None:
    # Past KEEP_COPY_BELOW the buffer is an mmap whose untouched tail is not resident, and a
    # copy would hold the frame twice while it is made
    message = {"text": "a" * jsonrpc.KEEP_COPY_BELOW}
    assert encode_kept(message) == encode(message)


def test_encode_kept_refuses_what_encode_refuses() -> None:
    with pytest.raises(Error) as info:
        encode_kept({"a": {1, 2}})
    assert (info.value.kind, info.value.reason) == ("argument", "not_json")


# -- decode ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        (b'{"jsonrpc":"2.0","id":1,"result":{"a":1}}', Response(1, {"a": 1})),
        (b'{"jsonrpc":"2.0","id":"x-1","result":{}}', Response("x-1", {})),
        (b'{"jsonrpc":"2.0","id":0,"result":null}', Response(0, None)),
        (
            b'{"jsonrpc":"2.0","id":3,"error":{"code":-32601,"message":"Method not found"}}',
            ErrorResponse(3, -32601, "Method not found", None),
        ),
        (
            b'{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"m","data":[1]}}',
            ErrorResponse(None, -32000, "m", [1]),
        ),
        (
            b'{"id":"server-error","jsonrpc":"2.0","error":{"code":-32600,"message":"M"}}',
            ErrorResponse("server-error", -32600, "M", None),
        ),
        (
            b'{"jsonrpc":"2.0","id":4,"error":{"code":-1}}',
            ErrorResponse(4, -1, "", None),
        ),
        (
            b'{"jsonrpc":"2.0","method":"notifications/progress","params":{"progress":1}}',
            Notification("notifications/progress", {"progress": 1}),
        ),
        (
            b'{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}',
            Notification("notifications/tools/list_changed", None),
        ),
        (b'{"jsonrpc":"2.0","id":"p1","method":"ping"}', Request("p1", "ping", None)),
        (
            b'{"jsonrpc":"2.0","id":9,"method":"roots/list","params":{}}',
            Request(9, "roots/list", {}),
        ),
        (b'  {"jsonrpc":"2.0","id":1,"result":{}}  ', Response(1, {})),
    ],
)
def test_decode_valid(line: bytes, expected: object) -> None:
    got = decode(line)
    assert got == expected
    assert type(got) is type(expected)


@pytest.mark.parametrize(
    ("line", "reason", "id"),
    [
        (b"not json", "not_json", None),
        (b"", "not_json", None),
        (b"\xff\xfe{}", "not_json", None),
        (b'{"jsonrpc":"2.0","id":1,"result":{}} trailing', "not_json", None),
        (b"[1, 2]", "batch", None),
        (b'"text"', "not_object", None),
        (b"42", "not_object", None),
        (b"null", "not_object", None),
        (b'{"id":1,"result":{}}', "bad_jsonrpc", 1),
        (b'{"jsonrpc":"1.0","id":1,"result":{}}', "bad_jsonrpc", 1),
        (b'{"jsonrpc":2.0,"id":1,"result":{}}', "bad_jsonrpc", 1),
        (b'{"jsonrpc":"2.0","result":{}}', "bad_id", None),
        (b'{"jsonrpc":"2.0","id":null,"result":{}}', "bad_id", None),
        (b'{"jsonrpc":"2.0","id":true,"result":{}}', "bad_id", None),
        (b'{"jsonrpc":"2.0","id":[1],"result":{}}', "bad_id", None),
        (b'{"jsonrpc":"2.0","id":1,"result":{},"error":{"code":1}}', "result_and_error", 1),
        (b'{"jsonrpc":"2.0","id":5}', "unrecognised", 5),
        (b'{"jsonrpc":"2.0"}', "unrecognised", None),
        (b'{"jsonrpc":"2.0","id":2,"error":"boom"}', "bad_error", 2),
        (b'{"jsonrpc":"2.0","id":2,"error":{"code":"x","message":"m"}}', "bad_error", 2),
        (b'{"jsonrpc":"2.0","id":2,"error":{"code":true,"message":"m"}}', "bad_error", 2),
        (b'{"jsonrpc":"2.0","error":{"code":1,"message":"m"}}', "bad_id", None),
        (b'{"jsonrpc":"2.0","id":7,"method":5}', "bad_method", 7),
        (b'{"jsonrpc":"2.0","method":null}', "bad_method", None),
        (b'{"jsonrpc":"2.0","id":7,"method":"m","params":[1]}', "bad_params", 7),
        (b'{"jsonrpc":"2.0","method":"m","params":"x"}', "bad_params", None),
        (b'{"jsonrpc":"2.0","id":null,"method":"m"}', "bad_id", None),
        (b'{"jsonrpc":"2.0","id":{},"method":"m"}', "bad_id", None),
    ],
)
def test_decode_invalid(line: bytes, reason: str, id: object) -> None:
    assert decode(line) == Invalid(reason, id)


def test_decode_keeps_ids_exactly() -> None:
    assert decode(b'{"jsonrpc":"2.0","id":"007","result":{}}').id == "007"
    big = decode(b'{"jsonrpc":"2.0","id":9223372036854775807,"result":{}}')
    assert big.id == 9223372036854775807 and type(big.id) is int
    huge = decode(b'{"jsonrpc":"2.0","id":123456789012345678901234567890,"result":{}}')
    # orjson turns a >64-bit integer into a float: kept as received, never matches ours.
    assert type(huge) is Response and type(huge.id) is float


def test_decode_accepts_bytearray_memoryview_and_str() -> None:
    raw = b'{"jsonrpc":"2.0","id":1,"result":{}}'
    for line in (bytearray(raw), memoryview(raw), raw.decode()):
        assert decode(line) == Response(1, {})


def test_decode_error_message_not_a_string_is_coerced() -> None:
    got = decode(b'{"jsonrpc":"2.0","id":1,"error":{"code":-1,"message":42}}')
    assert got == ErrorResponse(1, -1, "42", None)


def test_decode_never_raises_on_deep_nesting() -> None:
    line = b"[" * 5000 + b"]" * 5000
    assert type(decode(line)) is Invalid


def test_inbound_shapes_support_match() -> None:
    match decode(b'{"jsonrpc":"2.0","id":1,"result":{"x":2}}'):
        case Response(id=1, result={"x": x}):
            assert x == 2
        case _:
            pytest.fail("no match")


# -- constants and server errors -----------------------------------------------------------


def test_error_code_constants() -> None:
    assert (jsonrpc.PARSE_ERROR, jsonrpc.INVALID_REQUEST) == (-32700, -32600)
    assert (jsonrpc.METHOD_NOT_FOUND, jsonrpc.INVALID_PARAMS, jsonrpc.INTERNAL_ERROR) == (
        -32601,
        -32602,
        -32603,
    )
    assert jsonrpc.HEADER_MISMATCH == -32020
    assert jsonrpc.MISSING_REQUIRED_CLIENT_CAPABILITY == -32021
    assert jsonrpc.UNSUPPORTED_PROTOCOL_VERSION == -32022
    assert (
        jsonrpc.RETIRED_HEADER_MISMATCH,
        jsonrpc.RETIRED_MISSING_REQUIRED_CLIENT_CAPABILITY,
        jsonrpc.RETIRED_UNSUPPORTED_PROTOCOL_VERSION,
    ) == (-32001, -32003, -32004)
    assert jsonrpc.MODERN_ERROR_CODES == {-32020, -32021, -32022}
    assert (jsonrpc.RESOURCE_NOT_FOUND, jsonrpc.URL_ELICITATION_REQUIRED) == (-32002, -32042)


@pytest.mark.parametrize(
    ("code", "reason"),
    [
        (-32700, "parse_error"),
        (-32600, "invalid_request"),
        (-32601, "method_not_found"),
        (-32602, "invalid_params"),
        (-32603, "internal_error"),
        (-32020, "header_mismatch"),
        (-32021, "missing_client_capability"),
        (-32022, "unsupported_protocol_version"),
        (-32002, "resource_not_found"),
        (-32042, "url_elicitation_required"),
        (-32000, "other"),
        (-32004, "other"),
        (42, "other"),
    ],
)
def test_server_error_reasons(code: int, reason: str) -> None:
    assert error_reason(code) == reason
    err = server_error(ErrorResponse(1, code, "boom", {"k": "v"}), "tools/call")
    assert (err.kind, err.reason, err.code, err.data) == ("server", reason, code, {"k": "v"})
    assert err.message == "boom"
    assert "'v'" not in repr(err)  # data is never in repr


def test_server_error_resource_not_found_in_modern_numbering() -> None:
    resp = ErrorResponse(1, -32602, "Resource not found", {"uri": "file:///x"})
    assert server_error(resp, "resources/read").reason == "resource_not_found"
    assert server_error(resp, "tools/call").reason == "invalid_params"
    no_uri = ErrorResponse(1, -32602, "missing uri", None)
    assert server_error(no_uri, "resources/read").reason == "invalid_params"


def test_server_error_truncates_long_messages() -> None:
    err = server_error(ErrorResponse(1, -32603, "x" * 10_000, None), "tools/call")
    assert len(err.message) == jsonrpc.MAX_SERVER_MESSAGE == 500
    assert err.message.endswith("\u2026")
    exact = server_error(ErrorResponse(1, -32603, "y" * 500, None), "tools/call")
    assert exact.message == "y" * 500


def test_server_error_empty_message_names_the_method() -> None:
    err = server_error(ErrorResponse(1, -32000, "", None), "prompts/get")
    assert "prompts/get" in err.message and "-32000" in err.message


def test_server_error_pickles() -> None:
    err = server_error(ErrorResponse(1, -32601, "nope", None), "tools/list")
    copy = pickle.loads(pickle.dumps(err))
    assert (copy.kind, copy.reason, copy.code, copy.message) == (
        "server",
        "method_not_found",
        -32601,
        "nope",
    )


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200))
def test_decode_never_raises_on_any_bytes(line: bytes) -> None:
    assert isinstance(decode(line), Response | ErrorResponse | Notification | Request | Invalid)


json_scalars = st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text(max_size=5)
json_any = st.recursive(
    json_scalars,
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=3), c, max_size=3),
    max_leaves=8,
)
members = st.fixed_dictionaries(
    {},
    optional={
        "jsonrpc": st.sampled_from(["2.0", "1.0", 2]),
        "id": json_any,
        "method": json_any,
        "params": json_any,
        "result": json_any,
        "error": json_any
        | st.fixed_dictionaries(
            {"code": json_any}, optional={"message": json_any, "data": json_any}
        ),
    },
)


@settings(max_examples=500, deadline=None)
@given(members)
def test_decode_classifies_any_object_consistently(msg: dict) -> None:
    got = decode(orjson.dumps(msg))
    if type(got) is Response:
        assert msg["jsonrpc"] == "2.0" and "error" not in msg and "method" not in msg
        assert got.id == msg["id"] and got.result == msg["result"]
    elif type(got) is ErrorResponse:
        assert type(got.code) is int and type(got.message) is str
    elif type(got) is Request:
        assert got.id == msg["id"] and got.method == msg["method"]
        assert got.params is None or type(got.params) is dict
    elif type(got) is Notification:
        assert "id" not in msg and got.method == msg["method"]
    else:
        assert type(got) is Invalid and got.reason
