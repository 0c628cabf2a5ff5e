"""An accepted form elicitation gets the requested schema's defaults for what it left out
(``conduit_mcp.protocol.elicit_defaults``; MCP 2025-11-25 "Elicitation", SEP-1034): pure."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conduit_mcp.protocol.elicit_defaults import fill_defaults

# The schema of the conformance harness's elicitation-sep1034-client-defaults scenario.
SEP1034 = {
    "type": "object",
    "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {
            "type": "string",
            "enum": ["active", "inactive", "pending"],
            "default": "active",
        },
        "verified": {"type": "boolean", "default": True},
    },
    "required": [],
}


def test_every_primitive_kind_gets_its_default_on_an_empty_accept():
    assert fill_defaults({"action": "accept"}, SEP1034)["content"] == {
        "name": "John Doe",
        "age": 30,
        "score": 95.5,
        "status": "active",
        "verified": True,
    }


def test_an_answered_field_is_never_replaced_whatever_its_value():
    answer = {"action": "accept", "content": {"name": "", "verified": False, "age": 0}}
    content = fill_defaults(answer, SEP1034)["content"]
    assert (content["name"], content["verified"], content["age"]) == ("", False, 0)
    assert (content["score"], content["status"]) == (95.5, "active")
    assert answer == {"action": "accept", "content": {"name": "", "verified": False, "age": 0}}


@pytest.mark.parametrize("action", ["decline", "cancel"])
def test_only_an_accept_gets_defaults(action):
    assert fill_defaults({"action": action}, SEP1034) == {"action": action}


@pytest.mark.parametrize(
    "prop",
    [
        {"type": "integer", "default": "30"},
        {"type": "integer", "default": True},
        {"type": "integer", "default": 1.5},
        {"type": "number", "default": "95.5"},
        {"type": "boolean", "default": "true"},
        {"type": "string", "default": 7},
        {"type": "string", "enum": ["a", "b"], "default": "c"},
        {"type": "string", "oneOf": [{"const": "a", "title": "A"}], "default": "b"},
        {"type": "array", "items": {"enum": ["a"]}, "default": ["a", "z"]},
        {"type": "array", "default": [1]},
        {"type": "object", "default": {"deep": 1}},
        {"default": "untyped"},
    ],
)
def test_a_default_that_does_not_fit_its_property_is_not_used(prop):
    schema = {"properties": {"f": prop}}
    assert fill_defaults({"action": "accept"}, schema) == {"action": "accept"}


@pytest.mark.parametrize(
    ("prop", "value"),
    [
        ({"type": "string", "oneOf": [{"const": "a", "title": "A"}], "default": "a"}, "a"),
        ({"type": "array", "items": {"anyOf": [{"const": "x"}]}, "default": ["x"]}, ["x"]),
        ({"type": "array", "items": {"type": "string"}, "default": []}, []),
        ({"type": "number", "default": 3}, 3),
    ],
)
def test_enums_multi_select_and_integer_numbers_fit(prop, value):
    schema = {"properties": {"f": prop}}
    assert fill_defaults({"action": "accept"}, schema)["content"] == {"f": value}


@pytest.mark.parametrize(
    "schema", [None, "x", {}, {"properties": None}, {"properties": ["f"]}, {"properties": {1: {}}}]
)
def test_a_schema_without_properties_changes_nothing(schema: Any):
    answer = {"action": "accept", "content": {"a": "b"}}
    assert fill_defaults(answer, schema) is answer


@given(
    st.dictionaries(st.text(max_size=5), st.one_of(st.text(max_size=5), st.integers()), max_size=5),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=5),
)
def test_what_the_handler_answered_always_survives(answered, defaults):
    schema = {"properties": {k: {"type": "integer", "default": v} for k, v in defaults.items()}}
    out = fill_defaults({"action": "accept", "content": dict(answered)}, schema)
    content = out["content"]
    assert {k: content[k] for k in answered} == answered
    assert set(content) == set(answered) | set(defaults)
