"""Compiling a tool's JSON Schema into a validator, and naming the first place a value fails it.

A tool's ``outputSchema`` and ``inputSchema`` come from the server, so they are hostile input
like anything else it sends. The rules here keep compiling and validating bounded:

* **Never the network.** A ``$ref`` resolves inside the schema document (and the bundled
  meta-schemas) only: the validator is built ``offline``, so a ``$ref`` to an ``http`` URL is
  a schema that does not compile, never a request (docs/validation.md, "Hostile schemas").
* **Bounded size and depth**, checked by one walk before the validator sees the schema:
  at most :data:`MAX_SCHEMA_BYTES` of JSON, :data:`MAX_SCHEMA_DEPTH` nested containers,
  :data:`MAX_PATTERN_CHARS` in one ``pattern`` (or ``patternProperties`` key) and
  :data:`MAX_PATTERNS_CHARS` in all of them.
* **Bounded regular expressions.** Patterns run on jsonschema-rs's fancy-regex engine with a
  backtracking budget (:data:`BACKTRACK_LIMIT`) and compiled-size caps, so a catastrophic
  pattern (``^(a+)+$``) cannot take a caller's thread for seconds.

Messages name the failing path (a JSON Pointer into the value) and the schema keyword, never
a value: a tool's arguments and results may carry anything (docs/secrets.md).

Pure: no threads, no I/O, no clock. The cache of compiled validators is
``conduit_mcp.validation``.

>>> check = compile_schema({"type": "object", "properties": {"n": {"type": "integer"}}})
>>> first_failure(check, {"n": 1}) is None
True
>>> first_failure(check, {"n": "a secret"})
Failure(path='/n', keyword='type')
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import jsonschema_rs

from ..errors import Error
from .results import json_size

#: The largest schema compiled, in bytes of its JSON: compiling costs about 70 ms a MiB.
MAX_SCHEMA_BYTES: Final = 1024 * 1024
#: The deepest nesting of objects and arrays in a schema (jsonschema-rs's own bound is
#: about twice this; ours is checked first, so the error says which limit it was).
MAX_SCHEMA_DEPTH: Final = 128
#: The longest one ``pattern`` (or ``patternProperties`` key), in characters.
MAX_PATTERN_CHARS: Final = 8192
#: The most pattern text in one schema, in characters (compiling costs about 1.5 µs each).
MAX_PATTERNS_CHARS: Final = 65536
#: The backtracking steps one pattern match may take before it counts as not matching.
BACKTRACK_LIMIT: Final = 100_000
#: The compiled size of one pattern, and of its lazy DFA's cache, in bytes.
REGEX_SIZE_LIMIT: Final = 1024 * 1024
#: How much of one path segment an error names (a hostile key can be a megabyte long).
MAX_SEGMENT_CHARS: Final = 64
#: How many path segments an error names (the deepest are kept, with ``/...`` before them).
MAX_SEGMENTS: Final = 32

_PATTERNS: Final = jsonschema_rs.FancyRegexOptions(
    backtrack_limit=BACKTRACK_LIMIT, size_limit=REGEX_SIZE_LIMIT, dfa_size_limit=REGEX_SIZE_LIMIT
)


class SchemaProblem(Exception):
    """A schema that cannot be compiled: ``why`` says which rule it broke, in words that
    name no value of it."""

    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why


@dataclass(frozen=True, slots=True)
class Failure:
    """Where a value first fails its schema: ``path``, a JSON Pointer (RFC 6901) into the
    value (``""``: the value itself), and the schema ``keyword`` that failed (``type``,
    ``required``, ...)."""

    path: str
    keyword: str


def _walk(schema: Any) -> Iterator[tuple[int, str]]:
    """Every container's depth (kind ``""``) and every pattern text (kind the text), for
    :func:`check_bounds`; iterative, so a deep schema costs no Python stack."""
    stack: list[tuple[Any, int]] = [(schema, 1)]
    while stack:
        node, depth = stack.pop()
        if type(node) is dict:
            yield depth, ""
            for key, value in node.items():
                if key == "pattern" and type(value) is str:
                    yield depth, value
                elif key == "patternProperties" and type(value) is dict:
                    for pattern in value:
                        yield depth, pattern
                if type(value) in (dict, list):
                    stack.append((value, depth + 1))
        elif type(node) is list:
            yield depth, ""
            stack.extend((item, depth + 1) for item in node if type(item) in (dict, list))


def check_bounds(schema: Any) -> None:
    """Raise :class:`SchemaProblem` if ``schema`` is over a size, depth or pattern bound.

    >>> check_bounds({"type": "string", "pattern": "^a+$"})
    >>> check_bounds({"pattern": "a" * (MAX_PATTERN_CHARS + 1)})
    Traceback (most recent call last):
    ...
    conduit_mcp.protocol.schema.SchemaProblem: a pattern is longer than 8192 characters
    """
    if json_size(schema) > MAX_SCHEMA_BYTES:
        raise SchemaProblem(f"the schema is larger than {MAX_SCHEMA_BYTES} bytes")
    total = 0
    for depth, pattern in _walk(schema):
        if depth > MAX_SCHEMA_DEPTH:
            raise SchemaProblem(f"the schema nests deeper than {MAX_SCHEMA_DEPTH} levels")
        if len(pattern) > MAX_PATTERN_CHARS:
            raise SchemaProblem(f"a pattern is longer than {MAX_PATTERN_CHARS} characters")
        total += len(pattern)
        if total > MAX_PATTERNS_CHARS:
            raise SchemaProblem(
                f"the schema's patterns are longer than {MAX_PATTERNS_CHARS} characters in all"
            )


def compile_schema(schema: Any) -> jsonschema_rs.Validator:
    """A validator for ``schema`` (draft from its ``$schema``, 2020-12 when it has none, as
    the MCP spec's tools page says), or :class:`SchemaProblem`.

    Formats are annotations, not assertions (the draft's default, and the official SDK's):
    a server's ``"format": "email"`` does not fail a result.

    >>> compile_schema({"$ref": "http://127.0.0.1:9/schema.json"})
    Traceback (most recent call last):
    ...
    conduit_mcp.protocol.schema.SchemaProblem: the schema is not valid JSON Schema or refers outside itself ($ref resolves only within the schema)
    """
    if type(schema) is not dict:
        raise SchemaProblem("the schema is not a JSON object")
    check_bounds(schema)
    try:
        return jsonschema_rs.validator_for(schema, offline=True, pattern_options=_PATTERNS)
    except (jsonschema_rs.ValidationError, jsonschema_rs.ReferencingError):
        # Its message quotes the schema (and so, maybe, a secret of the server's): not kept.
        raise SchemaProblem(
            "the schema is not valid JSON Schema or refers outside itself ($ref resolves "
            "only within the schema)"
        ) from None
    except (ValueError, TypeError, OverflowError):
        raise SchemaProblem("the schema nests too deeply or holds a number out of range") from None


def _segment(part: Any) -> str:
    text = str(part)
    if len(text) > MAX_SEGMENT_CHARS:
        text = text[:MAX_SEGMENT_CHARS] + "..."
    return text.replace("~", "~0").replace("/", "~1")


def pointer(parts: Any) -> str:
    """The JSON Pointer of a path (property names and indexes), each segment cut to
    :data:`MAX_SEGMENT_CHARS` and at most :data:`MAX_SEGMENTS` of them (the deepest).

    >>> pointer(["items", 3, "a/b"])
    '/items/3/a~1b'
    >>> pointer([])
    ''
    """
    segments = [_segment(part) for part in parts]
    if len(segments) > MAX_SEGMENTS:
        return "/..." + "".join("/" + s for s in segments[-MAX_SEGMENTS:])
    return "".join("/" + s for s in segments)


def _keyword(schema_path: Any) -> str:
    """The failing keyword: the last name of the error's schema path (an index is an
    ``anyOf``/``items`` position, not a keyword)."""
    for part in reversed(list(schema_path)):
        if isinstance(part, str):
            return _segment(part)
    return "schema"


def first_failure(validator: jsonschema_rs.Validator, value: Any) -> Failure | None:
    """None if ``value`` is valid, else where it first fails (the validator's first error, in
    the schema's order). The valid case is one ``is_valid`` call: the errors are looked at
    only for a value that fails.

    A value the validator cannot read (nested deeper than it recurses) fails at ``""``.
    """
    try:
        if validator.is_valid(value):
            return None
        error = next(iter(validator.iter_errors(value)), None)
    except (ValueError, TypeError, OverflowError):
        return Failure("", "depth")
    if error is None:  # is_valid and iter_errors disagree: never seen; fail safe
        return Failure("", "schema")
    return Failure(pointer(error.instance_path), _keyword(error.schema_path))


def error_for(failure: Failure, *, tool: str, what: str) -> Error:
    """The error of a failed check: ``what`` is ``"output"`` (the result's structured content:
    ``protocol``/``invalid_structured_content``) or ``"arguments"`` (``argument``/
    ``invalid_arguments``). It names the tool, the path and the keyword, never a value.

    >>> error_for(Failure("/n", "type"), tool="add", what="arguments").message
    "the arguments of tool 'add' do not match its inputSchema at /n (keyword 'type'); fix the arguments, or start the client with validate_arguments=False"
    """
    where = failure.path or "the top level"
    data = {"tool": tool, "path": failure.path, "keyword": failure.keyword}
    if what == "arguments":
        return Error(
            "argument",
            "invalid_arguments",
            f"the arguments of tool {tool!r} do not match its inputSchema at {where} "
            f"(keyword {failure.keyword!r}); fix the arguments, or start the client with "
            "validate_arguments=False",
            data=data,
        )
    return Error(
        "protocol",
        "invalid_structured_content",
        f"the structuredContent of tool {tool!r} does not match its outputSchema at {where} "
        f"(keyword {failure.keyword!r}); the server broke its own schema (start the client "
        "with validate_output=False to accept it anyway)",
        data=data,
    )
