"""An accepted form elicitation gets the requested schema's defaults for the fields it omits.

MCP 2025-11-25, client features, "Elicitation", "Requested Schema": each primitive property
may carry a ``default`` (SEP-1034: strings, numbers, integers, booleans, single- and
multi-select enums), and a client that accepts a form without a value for such a field
answers the default, as a form that shows the defaults pre-filled would. The library does it
once, for every handler, on the answer ``elicit`` returned and before it is sent: a handler
may answer ``ElicitResult.accept()`` or only the fields the person changed.

Only the schema's top-level ``properties`` are read (an elicitation schema is flat). A field
the handler answered is never replaced, whatever its value; a default whose type is not the
property's declared type (or, for an enum, not one of its values) is not used: it is the
server's mistake, and the server gets what the person answered. Pure: no I/O.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

__all__ = ["fill_defaults"]


def fill_defaults(answer: dict[str, Any], schema: Any) -> dict[str, Any]:
    """``answer`` (an ``ElicitResult`` dict, already checked) with the defaults of
    ``schema``'s properties that an ``accept`` left out; anything else as it is.

    >>> schema = {"type": "object", "properties": {
    ...     "name": {"type": "string", "default": "John Doe"},
    ...     "age": {"type": "integer", "default": 30},
    ...     "status": {"type": "string", "enum": ["active", "pending"], "default": "active"},
    ...     "note": {"type": "string"}}}
    >>> fill_defaults({"action": "accept", "content": {"name": "Ada"}}, schema)
    {'action': 'accept', 'content': {'name': 'Ada', 'age': 30, 'status': 'active'}}
    >>> fill_defaults({"action": "accept"}, schema)["content"]
    {'name': 'John Doe', 'age': 30, 'status': 'active'}
    >>> fill_defaults({"action": "decline"}, schema)
    {'action': 'decline'}
    """
    if answer.get("action") != "accept" or not isinstance(schema, Mapping):
        return answer
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return answer
    given = answer.get("content")
    content: dict[str, Any] = dict(given) if isinstance(given, Mapping) else {}
    added = False
    for name, prop in properties.items():
        if not isinstance(name, str) or name in content or not isinstance(prop, Mapping):
            continue
        if "default" in prop and _fits(prop, prop["default"]):
            content[name] = prop["default"]
            added = True
    if not added:
        return answer
    return {**answer, "content": content}


def _fits(prop: Mapping[str, Any], value: Any) -> bool:
    """Whether ``value`` is a valid answer for the primitive property ``prop``.

    >>> _fits({"type": "integer"}, 3), _fits({"type": "integer"}, True)
    (True, False)
    >>> _fits({"type": "number"}, 95.5), _fits({"type": "number"}, float("nan"))
    (True, False)
    >>> _fits({"type": "string", "enum": ["a", "b"]}, "c")
    False
    >>> _fits({"type": "array", "items": {"enum": ["a", "b"]}}, ["a"])
    True
    """
    kind = prop.get("type")
    if kind == "string":
        if not isinstance(value, str):
            return False
        allowed = _choices(prop)
        return allowed is None or value in allowed
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return False
        return math.isfinite(value)
    if kind == "array":
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            return False
        items = prop.get("items")
        allowed = _choices(items) if isinstance(items, Mapping) else None
        return allowed is None or all(v in allowed for v in value)
    return False


def _choices(prop: Mapping[str, Any]) -> set[str] | None:
    """The values an enum property allows (``enum``, or ``oneOf``/``anyOf`` of ``const``
    titled options), None when it is not an enum."""
    enum = prop.get("enum")
    if isinstance(enum, list):
        return {v for v in enum if isinstance(v, str)}
    for key in ("oneOf", "anyOf"):
        options = prop.get(key)
        if isinstance(options, list):
            return {
                o["const"]
                for o in options
                if isinstance(o, Mapping) and isinstance(o.get("const"), str)
            }
    return None
