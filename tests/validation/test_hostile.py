"""Hostile schemas: ``$ref``s to the network never fetched, and every bound of compiling and
matching enforced at its edge (docs/validation.md, "Hostile schemas")."""

from __future__ import annotations

from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.protocol import schema as rules

from .conftest import add_tool, structured

pytestmark = pytest.mark.timeout(60)


def nested(depth: int) -> dict[str, Any]:
    """A schema whose objects and arrays nest exactly ``depth`` deep."""
    schema: dict[str, Any] = {"type": "object"} if depth % 2 else {"type": "object", "default": []}
    for _ in range((depth - 1) // 2):
        schema = {"type": "object", "properties": {"a": schema}}  # two levels each
    return schema


def depth_of(value: Any) -> int:
    if isinstance(value, dict):
        return 1 + max((depth_of(v) for v in value.values()), default=0)
    if isinstance(value, list):
        return 1 + max((depth_of(v) for v in value), default=0)
    return 0


def refused(client: mcp.Client, name: str) -> mcp.Error:
    with pytest.raises(mcp.Error) as caught:
        client.call_tool(name)
    assert (caught.value.kind, caught.value.reason) == ("protocol", "invalid_output_schema")
    return caught.value


@pytest.mark.parametrize(
    "where",
    [
        lambda url: {"$ref": url},
        lambda url: {"type": "object", "properties": {"a": {"$ref": url}}},
        lambda url: {"$defs": {"x": {"$ref": url + "#/x"}}, "$ref": "#/$defs/x"},
        lambda url: {"$id": url, "$ref": "other.json"},
    ],
    ids=["top", "nested", "through-defs", "relative-to-id"],
)
def test_a_ref_to_the_network_is_never_fetched(scripted, start_client, schema_host, where):
    base, hits = schema_host
    client = start_client(scripted.stdio())
    name = add_tool(client, output_schema=where(f"{base}/out.json"), result=structured("x"))
    error = refused(client, name)
    assert base not in error.message
    assert hits == []
    # arguments too: an inputSchema that refers outside itself is left to the server
    checking = start_client(scripted.stdio(), validate_arguments=True, validate_output=False)
    name = add_tool(checking, input_schema=where(f"{base}/in.json"))
    assert checking.call_tool(name, {"text": "hi"}).structured_content == {
        "arguments": {"text": "hi"}
    }
    assert hits == []


def test_a_local_ref_resolves(scripted, start_client):
    client = start_client(scripted.stdio())
    schema = {
        "$defs": {"n": {"type": "integer"}},
        "type": "object",
        "properties": {"n": {"$ref": "#/$defs/n"}},
    }
    good = add_tool(client, output_schema=schema, result=structured({"n": 1}))
    bad = add_tool(client, output_schema=schema, result=structured({"n": "one"}))
    assert client.call_tool(good).structured_content == {"n": 1}
    with pytest.raises(mcp.Error) as caught:
        client.call_tool(bad)
    assert caught.value.data["path"] == "/n"


def test_nesting_at_the_bound_compiles_one_deeper_is_refused(scripted, start_client):
    at, over = nested(rules.MAX_SCHEMA_DEPTH), nested(rules.MAX_SCHEMA_DEPTH + 1)
    assert (depth_of(at), depth_of(over)) == (rules.MAX_SCHEMA_DEPTH, rules.MAX_SCHEMA_DEPTH + 1)
    client = start_client(scripted.stdio())
    ok = add_tool(client, output_schema=at, result=structured({}))
    assert client.call_tool(ok).structured_content == {}
    deep = add_tool(client, output_schema=over, result=structured({}))
    assert f"deeper than {rules.MAX_SCHEMA_DEPTH}" in refused(client, deep).message


def test_pattern_length_at_the_bound_compiles_one_longer_is_refused(scripted, start_client):
    client = start_client(scripted.stdio())
    size = rules.MAX_PATTERN_CHARS
    ok = add_tool(
        client,
        output_schema={"type": "string", "pattern": "a" * size},
        result=structured("a" * size),
    )
    assert client.call_tool(ok).structured_content == "a" * size
    long = add_tool(
        client, output_schema={"type": "string", "pattern": "a" * (size + 1)}, result=structured("")
    )
    assert "pattern is longer" in refused(client, long).message
    keys = add_tool(
        client,
        output_schema={"type": "object", "patternProperties": {"b" * (size + 1): {}}},
        result=structured({}),
    )
    refused(client, keys)


def test_all_patterns_at_the_bound_compile_one_more_character_is_refused(scripted, start_client):
    client = start_client(scripted.stdio())
    count = rules.MAX_PATTERNS_CHARS // rules.MAX_PATTERN_CHARS

    def schema(extra: int) -> dict[str, Any]:
        props = {f"p{i}": {"pattern": "a" * rules.MAX_PATTERN_CHARS} for i in range(count)}
        props["last"] = {"pattern": "a" * extra}
        return {"type": "object", "properties": props}

    ok = add_tool(client, output_schema=schema(0), result=structured({}))
    assert client.call_tool(ok).structured_content == {}
    over = add_tool(client, output_schema=schema(1), result=structured({}))
    assert "in all" in refused(client, over).message


def test_schema_size_bound_at_its_edge():
    def padded(size: int) -> dict[str, Any]:
        schema: dict[str, Any] = {"description": ""}
        schema["description"] = "x" * (size - rules.json_size(schema))
        assert rules.json_size(schema) == size
        return schema

    rules.check_bounds(padded(rules.MAX_SCHEMA_BYTES))
    with pytest.raises(rules.SchemaProblem, match="larger than"):
        rules.check_bounds(padded(rules.MAX_SCHEMA_BYTES + 1))


def test_a_schema_over_the_size_bound_is_refused(scripted, start_client):
    client = start_client(scripted.stdio())
    big = {"type": "object", "description": "x" * rules.MAX_SCHEMA_BYTES}
    name = add_tool(client, output_schema=big, result=structured({}))
    assert "larger than" in refused(client, name).message


@pytest.mark.parametrize(
    "pattern",
    [
        "^(a+)+$",  # catastrophic for a backtracking engine: linear on this one
        "^(?=a)(a|aa)+$",  # lookaround: the backtracking engine, within its budget
        "(\\w+\\s?)*(?<!x)$",  # lookbehind: past the budget, counted as not matching
    ],
)
def test_a_catastrophic_pattern_ends_quickly(scripted, start_client, pattern):
    client = start_client(scripted.stdio())
    schema = {"type": "object", "properties": {"s": {"type": "string", "pattern": pattern}}}
    name = add_tool(client, output_schema=schema, result=structured({"s": "a" * 50_000 + "!"}))
    with pytest.raises(mcp.Error) as caught:
        client.call_tool(name, timeout=20)
    assert caught.value.reason == "invalid_structured_content"
    assert caught.value.data == {"tool": name, "path": "/s", "keyword": "pattern"}


def test_a_pattern_over_the_compiled_size_bound_is_refused(scripted, start_client):
    client = start_client(scripted.stdio())
    name = add_tool(
        client,
        output_schema={"type": "string", "pattern": "(a{1000}){1000}"},
        result=structured(""),
    )
    refused(client, name)


def test_a_deep_value_under_a_recursive_schema(scripted, start_client):
    client = start_client(scripted.stdio())
    schema = {"type": "object", "additionalProperties": {"$ref": "#"}}
    value: dict[str, Any] = {}
    for _ in range(200):  # orjson writes at most 255 levels: the call that adds it
        value = {"a": value}
    leaf = value
    for _ in range(199):
        leaf = leaf["a"]
    leaf["a"] = 1  # the deepest value is not an object
    name = add_tool(client, output_schema=schema, result=structured(value))
    with pytest.raises(mcp.Error) as caught:
        client.call_tool(name)
    assert caught.value.reason == "invalid_structured_content"
    path = caught.value.data["path"]
    # the path names the deepest segments only
    assert path.startswith("/...") and path.count("/") == rules.MAX_SEGMENTS + 1


def test_a_huge_key_is_cut_in_the_path(scripted, start_client):
    client = start_client(scripted.stdio())
    key = "k" * 10_000
    schema = {"type": "object", "additionalProperties": {"type": "integer"}}
    name = add_tool(client, output_schema=schema, result=structured({key: "v"}))
    with pytest.raises(mcp.Error) as caught:
        client.call_tool(name)
    assert caught.value.data["path"] == "/" + "k" * rules.MAX_SEGMENT_CHARS + "..."
