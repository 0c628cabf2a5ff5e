"""SKILL.md frontmatter as YAML 1.2 core-schema values (``protocol/skills.py`` says why).

PyYAML's safe loader (no Python objects) with only the core schema's implicit types
(``true``/``false`` as booleans, ``~``/``null`` as null, decimal, ``0o`` and ``0x``
integers, floats; no timestamps, no YAML 1.1 ``yes``/``no``, octals or sexagesimals), and
neither anchors and aliases (no expansion bombs) nor duplicate keys. Kept apart from
``skills.py`` so that importing the client never imports the parser.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

__all__ = ["load_core"]


_FLOAT = re.compile(
    r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)"
    r"|\.(?:nan|NaN|NAN)"
)


class _CoreLoader(yaml.SafeLoader):
    """PyYAML's safe loader with the YAML 1.2 core schema's implicit types only, and neither
    aliases nor duplicate keys (see the module's docstring)."""

    yaml_implicit_resolvers: dict[str, list[tuple[str, re.Pattern[str]]]] = {}

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            raise yaml.YAMLError("aliases are not accepted in skill frontmatter")
        event = self.peek_event()  # type: ignore[no-untyped-call]
        if getattr(event, "anchor", None) is not None:
            raise yaml.YAMLError("anchors are not accepted in skill frontmatter")
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> dict[Any, Any]:
        keys = [self.construct_object(key, deep=True) for key, _ in node.value]
        if len({_key(k) for k in keys}) != len(keys):
            raise yaml.YAMLError("a key appears twice in skill frontmatter")
        return super().construct_mapping(node, deep=True)

    def construct_core_int(self, node: Any) -> int:
        text = str(self.construct_scalar(node))
        sign, digits = (-1, text[1:]) if text[:1] == "-" else (1, text.lstrip("+"))
        if digits[:2] == "0x":
            return sign * int(digits[2:], 16)
        if digits[:2] == "0o":
            return sign * int(digits[2:], 8)
        return sign * int(digits, 10)


_CoreLoader.add_implicit_resolver(
    "tag:yaml.org,2002:bool",
    re.compile(r"true|True|TRUE|false|False|FALSE"),
    list("tTfF"),
)
_CoreLoader.add_implicit_resolver(
    "tag:yaml.org,2002:null", re.compile(r"~|null|Null|NULL|"), ["~", "n", "N", ""]
)
_CoreLoader.add_implicit_resolver(
    "tag:yaml.org,2002:int",
    re.compile(r"[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+"),
    list("-+0123456789"),
)
_CoreLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+.0123456789"))
_CoreLoader.add_constructor("tag:yaml.org,2002:int", _CoreLoader.construct_core_int)
# The resolvers match whole scalars: PyYAML's resolver uses re.match, so anchor the ends.
for _first, _resolvers in _CoreLoader.yaml_implicit_resolvers.items():
    _CoreLoader.yaml_implicit_resolvers[_first] = [
        (tag, re.compile(f"(?:{pattern.pattern})\\Z")) for tag, pattern in _resolvers
    ]


def _key(value: Any) -> str:
    """A mapping key as the JSON a server renders would hold it (JSON keys are strings)."""
    if value is True or value is False:
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return str(value)
    raise yaml.YAMLError("a frontmatter key is not a scalar")


def _as_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {_key(k): _as_json(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_as_json(v) for v in value]
    if isinstance(value, bytes):  # !!binary: no JSON counterpart
        raise yaml.YAMLError("binary values are not accepted in skill frontmatter")
    return value


def load_core(text: str) -> Any:
    """``text`` parsed as one YAML document, as JSON values (keys as strings).

    >>> load_core("a: 012\\nb: yes\\nc: 0x1f\\nd: 2026-01-02\\ne: true\\n")
    {'a': 12, 'b': 'yes', 'c': 31, 'd': '2026-01-02', 'e': True}
    """
    # The loader is safe (no Python objects) and alias-free.
    return _as_json(yaml.load(text, Loader=_CoreLoader))
