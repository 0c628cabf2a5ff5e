"""protocol.http_headers: value encoding, x-mcp-header plans, and request headers
(MCP spec 2026-07-28, "Streamable HTTP")."""

from __future__ import annotations

import base64
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conduit_mcp.errors import Error
from conduit_mcp.protocol import http_headers as hh
from conduit_mcp.protocol.http_headers import (
    MAX_SAFE_INTEGER,
    HeaderField,
    decode_value,
    encode_value,
    filter_tools,
    header_plan,
    param_headers,
    request_headers,
)

pytestmark = pytest.mark.timeout(30)

V = "2026-07-28"


def schema(**props: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props}


def annotated(name: Any, type_: Any = "string", **extra: Any) -> dict[str, Any]:
    return {"type": type_, "x-mcp-header": name, **extra}


def invalid(input_schema: Any) -> str:
    with pytest.raises(Error) as info:
        header_plan(input_schema)
    assert (info.value.kind, info.value.reason) == ("protocol", "invalid_x_mcp_header")
    return info.value.message


# -- names ---------------------------------------------------------------------------------


def test_header_names() -> None:
    assert hh.MCP_PROTOCOL_VERSION == "MCP-Protocol-Version"
    assert hh.MCP_METHOD == "Mcp-Method"
    assert hh.MCP_NAME == "Mcp-Name"
    assert hh.MCP_SESSION_ID == "Mcp-Session-Id"
    assert hh.PARAM_PREFIX == "Mcp-Param-"


# -- value encoding ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "encoded"),
    [  # the spec's table (streamable-http.mdx, "Value Encoding")
        ("us-west1", "us-west1"),
        ("Hello, 世界", "=?base64?SGVsbG8sIOS4lueVjA==?="),
        (" padded ", "=?base64?IHBhZGRlZCA=?="),
        ("line1\nline2", "=?base64?bGluZTEKbGluZTI=?="),
        ("=?base64?literal?=", "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="),
    ],
)
def test_spec_examples(value: str, encoded: str) -> None:
    assert encode_value(value) == encoded
    assert decode_value(encoded) == value


def test_integers_and_booleans() -> None:
    assert encode_value(42) == "42"
    assert encode_value(-7) == "-7"
    assert encode_value(0) == "0"
    assert encode_value(True) == "true"
    assert encode_value(False) == "false"


@pytest.mark.parametrize(
    "value",
    ["a\tb", "\ttab", "del\x7f", "nul\x00", "cr\r", "trailing ", " leading", "é", "", "\u2028"],
)
def test_unsafe_strings_are_base64(value: str) -> None:
    encoded = encode_value(value)
    assert encoded.startswith("=?base64?") and encoded.endswith("?=")
    assert base64.b64decode(encoded[9:-2]).decode() == value


@pytest.mark.parametrize(
    "value", ["a b", "x", "!#$%&'()*+,-./:;<=>?@[\\]^_`{|}~", "=?base64?=", "?="]
)
def test_safe_strings_are_sent_as_they_are(value: str) -> None:
    assert encode_value(value) == value
    assert decode_value(value) == value


def test_int_subclass_and_huge_int() -> None:
    import enum

    class Level(enum.IntEnum):
        HIGH = 3

    assert encode_value(Level.HIGH) == "3"
    with pytest.raises(Error) as info:
        encode_value(10**5000)
    assert (info.value.kind, info.value.reason) == ("argument", "x_mcp_header_value")


def test_unsupported_values_raise_without_echo() -> None:
    for bad in (1.5, None, b"bytes", ["x"]):
        with pytest.raises(Error) as info:
            encode_value(bad)  # type: ignore[arg-type]
        assert (info.value.kind, info.value.reason) == ("argument", "x_mcp_header_value")
    with pytest.raises(Error) as info:
        encode_value("secret\ud800")
    assert "secret" not in str(info.value)


@pytest.mark.parametrize(
    "bad",
    [
        "=?base64?%%%?=",  # not base64
        "=?base64?SGVsbG8?=",  # missing padding
        "=?base64?SGVsbG9=?=",  # non-canonical: non-zero padding bits
        "=?base64?" + base64.b64encode(b"\xff\xfe").decode() + "?=",  # not UTF-8
        "=?base64?SGVs bG8=?=",  # whitespace inside
    ],
)
def test_malformed_sentinel_raises(bad: str) -> None:
    with pytest.raises(Error) as info:
        decode_value(bad)
    assert (info.value.kind, info.value.reason) == ("protocol", "x_mcp_header_encoding")


def test_empty_sentinel_is_the_empty_string() -> None:
    assert encode_value("") == "=?base64??="
    assert decode_value("=?base64??=") == ""


def _header_safe(encoded: str) -> bool:
    return (
        encoded.isascii()
        and encoded.isprintable()
        and encoded != ""
        and encoded[0] != " "
        and encoded[-1] != " "
    )


@settings(max_examples=500)
@given(st.text())
def test_text_round_trip_and_output_is_header_safe(value: str) -> None:
    encoded = encode_value(value)
    assert _header_safe(encoded)
    assert decode_value(encoded) == value


@settings(max_examples=200)
@given(st.integers() | st.booleans())
def test_int_and_bool_round_trip(value: int | bool) -> None:
    encoded = encode_value(value)
    assert _header_safe(encoded)
    expected = ("true" if value else "false") if isinstance(value, bool) else str(value)
    assert decode_value(encoded) == expected


@settings(max_examples=300)
@given(st.text(alphabet=st.sampled_from("=?base64 Aa\t é")))
def test_sentinel_lookalikes_round_trip(value: str) -> None:
    assert decode_value(encode_value(value)) == value


def test_interoperates_with_the_official_sdk_codec() -> None:
    inbound = pytest.importorskip("mcp.shared.inbound")  # imported once, outside the timing

    @settings(max_examples=300)
    @given(st.text())
    def check(value: str) -> None:
        # what the SDK's server reads from our header, and we from its client's
        assert inbound.decode_header_value(encode_value(value)) == value
        assert decode_value(inbound.encode_header_value(value)) == value

    check()


# -- header_plan ---------------------------------------------------------------------------


def test_schema_without_annotations_has_an_empty_plan() -> None:
    assert header_plan(schema(q={"type": "string"})) == {}
    assert header_plan({}) == {}
    assert header_plan(None) == {}
    assert header_plan(["not", "a", "schema"]) == {}
    # the text in a description is not an annotation (the fast check has a false positive)
    assert header_plan(schema(q={"type": "string", "description": '"x-mcp-header"'})) == {}


def test_plan_maps_names_to_paths_and_types() -> None:
    plan = header_plan(
        schema(
            region=annotated("Region"),
            count=annotated("Count", "integer"),
            dry=annotated("Dry-Run", "boolean"),
            query={"type": "string"},
            scope={
                "type": "object",
                "properties": {"tenant": annotated("Tenant"), "items": annotated("Items")},
            },
        )
    )
    assert plan == {
        "Region": HeaderField(("region",), "string"),
        "Count": HeaderField(("count",), "integer"),
        "Dry-Run": HeaderField(("dry",), "boolean"),
        "Tenant": HeaderField(("scope", "tenant"), "string"),
        "Items": HeaderField(("scope", "items"), "string"),  # a property named "items" is fine
    }


def test_nullable_primitive_is_accepted() -> None:
    plan = header_plan(schema(r=annotated("R", ["string", "null"])))
    assert plan == {"R": HeaderField(("r",), "string")}


@pytest.mark.parametrize(
    ("name", "problem"),
    [
        ("", "empty"),
        ("Has Space", "token"),
        ("Ré", "token"),
        ("a:b", "token"),
        ("a/b", "token"),
        ("Bad\r\nX-Injected: 1", "CR or LF"),
        ("Tab\t", "token"),
        (12, "must be a string"),
        (None, "must be a string"),
    ],
)
def test_annotation_value_must_be_a_token(name: Any, problem: str) -> None:
    message = invalid(schema(p=annotated(name)))
    assert problem in message
    assert "'p'" in message
    if isinstance(name, str) and name:
        assert name not in message  # the annotation itself is never echoed


def test_every_tchar_is_accepted() -> None:
    name = "!#$%&'*+-.^_`|~09AZaz"
    assert header_plan(schema(p=annotated(name))) == {name: HeaderField(("p",), "string")}


def test_names_are_case_insensitively_unique() -> None:
    message = invalid(schema(a=annotated("Region"), b=annotated("REGION")))
    assert "repeats" in message
    # across nesting levels too
    invalid(schema(a=annotated("X"), o={"type": "object", "properties": {"b": annotated("x")}}))


@pytest.mark.parametrize(
    "type_", ["number", "object", "array", "null", None, ["string", "integer"], 5]
)
def test_only_string_integer_boolean(type_: Any) -> None:
    message = invalid(schema(p=annotated("P", type_)))
    assert "integer, string or boolean" in message


UNREACHABLE: list[dict[str, Any]] = [
    {"x-mcp-header": "Root", "type": "string"},
    schema(list={"type": "array", "items": annotated("I")}),
    schema(tuple={"type": "array", "items": [annotated("I")]}),
    schema(tuple={"type": "array", "prefixItems": [annotated("I")]}),
    schema(c={"type": "array", "contains": annotated("I")}),
    schema(o={"oneOf": [annotated("O")]}),
    schema(o={"anyOf": [{"type": "string"}, annotated("O")]}),
    schema(o={"allOf": [annotated("O")]}),
    schema(o={"not": annotated("O")}),
    {"type": "object", "oneOf": [schema(p=annotated("P"))]},
    {"type": "object", "if": schema(p=annotated("P"))},
    {"type": "object", "then": schema(p=annotated("P"))},
    {"type": "object", "else": schema(p=annotated("P"))},
    {"type": "object", "$defs": {"d": annotated("D")}, "properties": {"p": {"$ref": "#/$defs/d"}}},
    {"type": "object", "definitions": {"d": annotated("D")}},
    {"type": "object", "additionalProperties": annotated("A")},
    {"type": "object", "patternProperties": {"^x": annotated("A")}},
    {"type": "object", "dependentSchemas": {"a": schema(b=annotated("B"))}},
    {"type": "object", "propertyNames": annotated("N")},
    {"type": "object", "unevaluatedProperties": annotated("U")},
    # once off the chain, "properties" below does not bring it back
    {"type": "object", "anyOf": [{"properties": {"deep": {"properties": {"p": annotated("P")}}}}]},
    schema(o={"type": "object", "additionalProperties": schema(p=annotated("P"))}),
]


@pytest.mark.parametrize("bad_schema", UNREACHABLE)
def test_annotation_must_be_statically_reachable(bad_schema: dict[str, Any]) -> None:
    message = invalid(bad_schema)
    assert "reach" in message or "root" in message


def test_verdicts_agree_with_the_official_sdk() -> None:
    inbound = pytest.importorskip("mcp.shared.inbound")
    for bad in UNREACHABLE:
        if type(bad.get("properties", {}).get("tuple", {}).get("items")) is list:
            continue  # the SDK does not walk draft-7's tuple form of "items"; we reject it
        assert inbound.find_invalid_x_mcp_header(bad) is not None, bad
    for bad in (schema(p=annotated("a b")), schema(a=annotated("A"), b=annotated("a"))):
        assert inbound.find_invalid_x_mcp_header(bad) is not None
    good = schema(
        a=annotated("A"), o={"type": "object", "properties": {"b": annotated("B", "integer")}}
    )
    assert inbound.find_invalid_x_mcp_header(good) is None
    assert {f"{hh.PARAM_PREFIX}{k}" for k in header_plan(good)} == set(
        inbound.mcp_param_headers(inbound.x_mcp_header_map(good), {"a": "x", "o": {"b": 1}})
    )


def test_unreachable_message_names_the_keyword() -> None:
    assert "'oneOf'" in invalid(schema(o={"oneOf": [annotated("O")]}))


def test_instance_data_keywords_are_not_walked() -> None:
    data = {"x-mcp-header": "NotAnAnnotation"}
    s = schema(
        p={"type": "object", "default": data, "examples": [data], "const": data, "enum": [data]}
    )
    assert header_plan(s) == {}


def test_deeply_nested_schema_does_not_recurse() -> None:
    node: dict[str, Any] = annotated("Deep")
    for i in range(3000):  # beyond orjson's and Python's recursion limits
        node = {"type": "object", "properties": {f"k{i % 3}": node}}
    plan = header_plan(node)
    assert list(plan) == ["Deep"]
    assert len(plan["Deep"].path) == 3000


def test_mapping_types_other_than_dict() -> None:
    from types import MappingProxyType

    s = MappingProxyType({"properties": MappingProxyType({"r": MappingProxyType(annotated("R"))})})
    assert header_plan(s) == {"R": HeaderField(("r",), "string")}


# -- param_headers -------------------------------------------------------------------------

PLAN = header_plan(
    schema(
        region=annotated("Region"),
        n=annotated("N", "integer"),
        flag=annotated("Flag", "boolean"),
        o={"type": "object", "properties": {"tenant": annotated("Tenant")}},
    )
)


def test_param_headers_for_present_values() -> None:
    headers = param_headers(
        PLAN, {"region": "us-west1", "n": -3, "flag": False, "o": {"tenant": "ü"}, "other": 1}
    )
    assert headers == {
        "Mcp-Param-Region": "us-west1",
        "Mcp-Param-N": "-3",
        "Mcp-Param-Flag": "false",
        "Mcp-Param-Tenant": "=?base64?w7w=?=",
    }


def test_absent_and_null_values_omit_the_header() -> None:
    assert param_headers(PLAN, {}) == {}
    assert param_headers(PLAN, None) == {}
    assert param_headers(PLAN, {"region": None, "n": None, "o": None}) == {}
    assert param_headers(PLAN, {"o": "not an object"}) == {}
    assert param_headers(PLAN, {"o": {"tenant": None}}) == {}
    assert param_headers({}, {"region": 5}) == {}  # no plan: nothing checked


def test_integer_range_exactly_at_and_one_over() -> None:
    assert param_headers(PLAN, {"n": MAX_SAFE_INTEGER}) == {"Mcp-Param-N": "9007199254740991"}
    assert param_headers(PLAN, {"n": -MAX_SAFE_INTEGER}) == {"Mcp-Param-N": "-9007199254740991"}
    for bad in (MAX_SAFE_INTEGER + 1, -MAX_SAFE_INTEGER - 1, 10**400):
        with pytest.raises(Error) as info:
            param_headers(PLAN, {"n": bad})
        assert (info.value.kind, info.value.reason) == ("argument", "x_mcp_header_value")
        assert str(bad) not in str(info.value)


@pytest.mark.parametrize(
    "arguments",
    [
        {"n": True},  # bool is an int subclass in Python, not a JSON integer
        {"n": 1.0},
        {"n": "1"},
        {"region": 7},
        {"region": True},
        {"flag": 1},
        {"flag": "true"},
        {"o": {"tenant": ["list"]}},
    ],
)
def test_wrong_json_type_raises(arguments: dict[str, Any]) -> None:
    with pytest.raises(Error) as info:
        param_headers(PLAN, arguments)
    assert (info.value.kind, info.value.reason) == ("argument", "x_mcp_header_value")


def test_value_never_in_the_error() -> None:
    plan = header_plan(schema(token=annotated("Token", "integer")))
    with pytest.raises(Error) as info:
        param_headers(plan, {"token": "sk-very-secret"})
    assert "sk-very-secret" not in str(info.value)
    assert "'token'" in info.value.message and "Mcp-Param-Token" in info.value.message


def test_arguments_must_be_a_mapping() -> None:
    with pytest.raises(Error) as info:
        param_headers(PLAN, ["region"])  # type: ignore[arg-type]
    assert info.value.kind == "argument"


# -- filter_tools --------------------------------------------------------------------------


def test_filter_tools_without_annotations_keeps_everything() -> None:
    tools = [{"name": f"t{i}", "inputSchema": schema(q={"type": "string"})} for i in range(5)]
    kept, dropped, plans = filter_tools(tools)
    assert kept == tools and kept is not tools
    assert (dropped, plans) == ([], {})
    assert filter_tools(tuple(tools))[0] == tools
    assert filter_tools([]) == ([], [], {})


def test_filter_tools_drops_invalid_and_plans_valid() -> None:
    good = {"name": "sql", "inputSchema": schema(region=annotated("Region"))}
    plain = {"name": "echo", "inputSchema": schema(text={"type": "string"})}
    bad_type = {"name": "num", "inputSchema": schema(x=annotated("X", "number"))}
    bad_dup = {"name": "dup", "inputSchema": schema(a=annotated("A"), b=annotated("a"))}
    kept, dropped, plans = filter_tools([good, plain, bad_type, bad_dup])
    assert kept == [good, plain]
    assert [name for name, _ in dropped] == ["num", "dup"]
    assert all("x-mcp-header" in reason for _, reason in dropped)
    assert plans == {"sql": {"Region": HeaderField(("region",), "string")}}


def test_filter_tools_tolerates_odd_entries() -> None:
    odd = {"inputSchema": {"x-mcp-header": "Root"}}
    kept, dropped, _ = filter_tools([odd, {"name": "ok"}])
    assert kept == [{"name": "ok"}]
    assert dropped[0][0] == ""


# -- request_headers -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("method", "params", "name"),
    [
        ("tools/call", {"name": "get_weather", "arguments": {}}, "get_weather"),
        ("prompts/get", {"name": "greet"}, "greet"),
        (
            "resources/read",
            {"uri": "file:///projects/myapp/config.json"},
            "file:///projects/myapp/config.json",
        ),
        ("tasks/get", {"taskId": "t-1"}, "t-1"),
    ],
)
def test_request_headers_with_name(method: str, params: dict[str, Any], name: str) -> None:
    assert request_headers(method, params, V) == {
        "MCP-Protocol-Version": V,
        "Mcp-Method": method,
        "Mcp-Name": name,
    }


def test_request_headers_without_name() -> None:
    for method in ("server/discover", "tools/list", "ping", "subscriptions/listen"):
        assert request_headers(method, {"name": "ignored"}, V) == {
            "MCP-Protocol-Version": V,
            "Mcp-Method": method,
        }


def test_mcp_name_is_encoded() -> None:
    headers = request_headers("resources/read", {"uri": "file:///tmp/naïve file.txt"}, V)
    assert headers["Mcp-Name"].startswith("=?base64?")
    assert decode_value(headers["Mcp-Name"]) == "file:///tmp/naïve file.txt"


def test_missing_name_raises() -> None:
    for params in (None, {}, {"name": 3}):
        with pytest.raises(Error) as info:
            request_headers("tools/call", params, V)
        assert (info.value.kind, info.value.reason) == ("argument", "name")
    with pytest.raises(Error) as info:
        request_headers("resources/read", {"name": "x"}, V)
    assert info.value.reason == "uri"


def test_method_and_version_must_be_header_safe() -> None:
    for method in ("", "bad\r\nX: y", "métho"):
        with pytest.raises(Error) as info:
            request_headers(method, None, V)
        assert (info.value.kind, info.value.reason) == ("argument", "method")
    with pytest.raises(Error) as info:
        request_headers("ping", None, "2026\n")
    assert info.value.reason == "version"
