"""The request headers of modern Streamable HTTP (MCP spec 2026-07-28,
"Streamable HTTP"): names, values, ``x-mcp-header``.

Every modern POST mirrors parts of its body into headers so that intermediaries can route
without parsing JSON: ``MCP-Protocol-Version``, ``Mcp-Method``, ``Mcp-Name`` and, for
``tools/call``, one ``Mcp-Param-{Name}`` per argument the tool's ``inputSchema`` marks with
``"x-mcp-header": "{Name}"``. A server compares each header with the body and answers
``-32020`` (HeaderMismatch) when they disagree, so the rules here must match its own:

* :func:`encode_value` / :func:`decode_value`: the value encoding shared by ``Mcp-Name`` and
  ``Mcp-Param-*``, including the ``=?base64?...?=`` sentinel form.
* :func:`header_plan`: validate a tool's annotations once, at ``tools/list`` time, into a
  :data:`HeaderPlan`; :func:`filter_tools` drops the tools whose annotations are invalid, as
  the spec requires ("the client MUST exclude the invalid tool").
* :func:`param_headers` and :func:`request_headers`: the headers of one request.

No error raised here carries a header or argument value (docs/secrets.md): tool arguments
are mirrored into headers precisely because they matter (a tenant, a region, an account).
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple, TypeAlias

import orjson

from ..errors import Error

MCP_PROTOCOL_VERSION: Final = "MCP-Protocol-Version"
MCP_METHOD: Final = "Mcp-Method"
MCP_NAME: Final = "Mcp-Name"
#: Legacy era only (2025-03-26 .. 2025-11-25): modern servers ignore it and never mint one.
MCP_SESSION_ID: Final = "Mcp-Session-Id"
PARAM_PREFIX: Final = "Mcp-Param-"
#: The JSON Schema extension keyword that asks for a ``Mcp-Param-*`` header.
X_MCP_HEADER: Final = "x-mcp-header"

#: The params field mirrored into ``Mcp-Name``, by method. The ``tasks/*`` rows come from
#: the Tasks extension (SEP-2663): there ``Mcp-Name`` carries ``params.taskId``.
NAME_FIELDS: Final[Mapping[str, str]] = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}

#: JavaScript's safe integer bound: an integer header value must lie within ±MAX_SAFE_INTEGER.
MAX_SAFE_INTEGER: Final = 2**53 - 1

_PREFIX: Final = "=?base64?"
_SUFFIX: Final = "?="
_SENTINEL_MIN: Final = len(_PREFIX) + len(_SUFFIX)
# RFC 9110 §5.6.2: token = 1*tchar.
_TOKEN: Final = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]+")
_PRIMITIVE: Final = frozenset({"string", "integer", "boolean"})
_MARKER: Final = b'"x-mcp-header"'

# JSON Schema keywords whose values are schema positions, by shape (2020-12 plus the draft-7
# names still common in tool schemas). Only ``properties`` keeps a position statically
# reachable; every other one makes an annotation below it invalid. Instance-data keywords
# (``default``, ``examples``, ``const``, ``enum``) are deliberately absent: an
# ``x-mcp-header`` key inside a default value is data, not an annotation. ``$ref`` is a
# string, never followed: a referenced definition is reached through ``$defs`` or
# ``definitions``, which are walked, and so rejected.
_SUB_ONE: Final = frozenset(
    {
        "items",
        "additionalItems",
        "unevaluatedItems",
        "contains",
        "additionalProperties",
        "unevaluatedProperties",
        "propertyNames",
        "not",
        "if",
        "then",
        "else",
        "contentSchema",
    }
)
_SUB_LIST: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems"})
_SUB_MAP: Final = frozenset(
    {"patternProperties", "dependentSchemas", "dependencies", "$defs", "definitions"}
)


# -- value encoding --------------------------------------------------------------------------


def _is_sentinel(text: str) -> bool:
    return len(text) >= _SENTINEL_MIN and text.startswith(_PREFIX) and text.endswith(_SUFFIX)


def encode_value(value: str | int | bool) -> str:
    """The header form of a ``Mcp-Name`` or ``Mcp-Param-*`` value (spec 2026-07-28, "Value Encoding").

    Integers are written in decimal and booleans as ``true``/``false``. A string is sent as
    it is when it is safe ASCII: visible characters and inner spaces only (0x20-0x7E), no
    leading or trailing space, not looking like the sentinel itself. Anything else is sent as
    ``=?base64?{base64(utf8)}?=``: non-ASCII, control characters (tab, CR, LF included), edge
    whitespace, a value that starts with ``=?base64?`` and ends with ``?=``, and the empty
    string (an empty field value is dropped or read as absent by some HTTP stacks, and the
    server would then report a missing header).

    >>> encode_value("us-west1"), encode_value(42), encode_value(True)
    ('us-west1', '42', 'true')
    >>> encode_value("Hello, 世界")
    '=?base64?SGVsbG8sIOS4lueVjA==?='
    >>> encode_value("=?base64?literal?=")
    '=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?='
    >>> encode_value(" padded ")
    '=?base64?IHBhZGRlZCA=?='
    """
    t = type(value)
    if t is str:
        text: str = value  # type: ignore[assignment]
    elif t is bool:
        return "true" if value else "false"
    elif isinstance(value, int):  # int and its subclasses (IntEnum); bool is final
        try:
            return str(int(value))
        except ValueError:  # beyond int's 4300-digit str conversion limit
            raise Error(
                "argument", "x_mcp_header_value", "an integer header value is too large"
            ) from None
    elif isinstance(value, str):
        text = str(value)
    else:
        raise Error(
            "argument",
            "x_mcp_header_value",
            f"a header value must be a string, integer or boolean, not {t.__name__}",
        )
    # isprintable() on an ASCII string is exactly 0x20-0x7E: tab, CR, LF and DEL are not.
    if (
        text
        and text.isascii()
        and text.isprintable()
        and text[0] != " "
        and text[-1] != " "
        and not _is_sentinel(text)
    ):
        return text
    try:
        raw = text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate: orjson would refuse the body as well
        raise Error(
            "argument", "x_mcp_header_value", "a header value is not valid Unicode text"
        ) from None
    return _PREFIX + base64.b64encode(raw).decode() + _SUFFIX


def decode_value(text: str) -> str:
    """The value a ``Mcp-Name`` or ``Mcp-Param-*`` header carries: the inverse of :func:`encode_value`.

    A plain value is returned as it is; a sentinel is decoded. A malformed sentinel (invalid
    or non-canonical base64, or bytes that are not UTF-8) raises
    ``Error("protocol", "x_mcp_header_encoding")``, so a corrupt header never compares equal
    to a body value by accident. Integers and booleans come back as their text.

    >>> decode_value("=?base64?SGVsbG8sIOS4lueVjA==?=")
    'Hello, 世界'
    >>> decode_value("=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?=")
    '=?base64?literal?='
    >>> decode_value("us-west1")
    'us-west1'
    """
    if not _is_sentinel(text):
        return text
    payload = text[len(_PREFIX) : -len(_SUFFIX)]
    try:
        raw = base64.b64decode(payload, validate=True)
        # validate=True still accepts non-zero padding bits; the encoder never writes them.
        if base64.b64encode(raw).decode() != payload:
            raise ValueError("non-canonical base64")
        return raw.decode("utf-8")
    except (binascii.Error, ValueError):  # UnicodeDecodeError is a ValueError
        raise Error(
            "protocol", "x_mcp_header_encoding", "a header value is a malformed base64 sentinel"
        ) from None


# -- x-mcp-header annotations ----------------------------------------------------------------


class HeaderField(NamedTuple):
    """Where one ``Mcp-Param-*`` header takes its value from.

    ``path`` is the chain of ``properties`` keys from the schema root to the annotated
    property (``("region",)`` for a top-level one); ``type`` its JSON type, one of
    ``"string"``, ``"integer"``, ``"boolean"``.
    """

    path: tuple[str, ...]
    type: str


#: Header name as annotated (``"Region"``, sent as ``Mcp-Param-Region``) to its field.
HeaderPlan: TypeAlias = Mapping[str, HeaderField]


def _invalid(message: str) -> Error:
    return Error("protocol", "invalid_x_mcp_header", message)


def _where(path: tuple[str, ...]) -> str:
    """A property path for a message: schema structure, never an argument value; cut short."""
    return f"property {_arg(path)}" if path else "the schema root"


def _has_marker(schema: Any) -> bool:
    """Whether the text ``"x-mcp-header"`` occurs anywhere in the schema's JSON.

    One C-level ``orjson.dumps`` and a ``bytes`` search: about 20x cheaper than walking the
    dicts in Python, and almost every schema has no annotation at all. A false positive (the
    text in a description) only costs the walk. A schema orjson cannot dump (it came from
    JSON, so that means a caller-built one) is walked.
    """
    try:
        return _MARKER in orjson.dumps(schema)
    except TypeError:  # orjson.JSONEncodeError
        return True


def header_plan(input_schema: Any) -> HeaderPlan:
    """Validate a tool's ``x-mcp-header`` annotations and say which headers its calls carry.

    Raises ``Error("protocol", "invalid_x_mcp_header")`` naming the first violated rule
    (spec 2026-07-28, "Streamable HTTP"): the annotation must be a non-empty RFC 9110 token (which rules out CR,
    LF and every other control character), case-insensitively unique within the schema, on
    an ``integer``, ``string`` or ``boolean`` property (a nullable one like
    ``["string", "null"]`` is accepted: null omits the header), and on a property reached
    from the root only through ``properties`` keys. An annotation under ``items``,
    ``oneOf``/``anyOf``/``allOf``/``not``, ``if``/``then``/``else``, ``$defs``,
    ``additionalProperties``, ``patternProperties`` and the like, or on the root itself, is
    invalid. The message names the property path and the rule, never the annotation.

    A schema without annotations (nearly all of them) yields an empty plan after one
    ``orjson.dumps``; one with annotations is walked once, validating as it goes.

    >>> header_plan({"type": "object", "properties": {"q": {"type": "string"}}})
    {}
    >>> header_plan({"properties": {"region": {"type": "string", "x-mcp-header": "Region"}}})
    {'Region': HeaderField(path=('region',), type='string')}
    >>> header_plan({"properties": {"n": {"type": "number", "x-mcp-header": "N"}}})
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: protocol (invalid_x_mcp_header): x-mcp-header on property 'n' must be on an integer, string or boolean property, not number
    """
    if not isinstance(input_schema, Mapping) or not _has_marker(input_schema):
        return {}
    plan: dict[str, HeaderField] = {}
    seen: dict[str, tuple[str, ...]] = {}
    # An explicit stack, not recursion: a hostile schema may nest thousands of levels deep.
    # Each entry: the properties path (None once off the chain), the node, and the first
    # keyword other than "properties" crossed to get there (for the message).
    stack: list[tuple[tuple[str, ...] | None, Any, str]] = [((), input_schema, "")]
    pop = stack.pop
    push = stack.append
    while stack:
        path, node, via = pop()
        if not isinstance(node, Mapping):
            continue
        if X_MCP_HEADER in node:
            if path is None:
                raise _invalid(
                    f"x-mcp-header under {_arg((via,))} is not statically reachable: only "
                    "'properties' keys may lead from the root to an annotated property"
                )
            name, field = _check(path, node)
            folded = name.lower()
            if folded in seen:
                raise _invalid(
                    f"x-mcp-header on {_where(path)} repeats the header of {_where(seen[folded])} "
                    "(names are compared case-insensitively)"
                )
            seen[folded] = field.path
            plan[name] = field
        for key, value in node.items():
            if key == "properties":
                if isinstance(value, Mapping):
                    for prop, sub in value.items():
                        if path is not None and type(prop) is str:
                            push(((*path, prop), sub, via))
                        else:
                            push((None, sub, via or "properties"))
            elif type(key) is not str:
                continue
            elif key in _SUB_ONE:
                off = via or key
                if key == "items" and type(value) is list:  # the draft-7 tuple form
                    stack.extend((None, sub, off) for sub in value)
                else:
                    push((None, value, off))
            elif key in _SUB_LIST:
                if type(value) is list:
                    stack.extend((None, sub, via or key) for sub in value)
            elif key in _SUB_MAP and isinstance(value, Mapping):
                stack.extend((None, sub, via or key) for sub in value.values())
    return plan


def _check(path: tuple[str, ...], node: Mapping[str, Any]) -> tuple[str, HeaderField]:
    """Validate the annotation on one schema position; the header name and its field."""
    where = _where(path)
    name = node[X_MCP_HEADER]
    if not path:
        raise _invalid(
            f"x-mcp-header on {where}: it must be on a property reached through "
            "'properties' keys only"
        )
    if type(name) is not str:
        raise _invalid(f"x-mcp-header on {where} must be a string, not {type(name).__name__}")
    if not name:
        raise _invalid(f"x-mcp-header on {where} is empty")
    if "\r" in name or "\n" in name:
        raise _invalid(f"x-mcp-header on {where} contains CR or LF")
    if _TOKEN.fullmatch(name) is None:
        raise _invalid(f"x-mcp-header on {where} is not an RFC 9110 token (1*tchar)")
    kind = node.get("type")
    if type(kind) is list:
        # A nullable primitive, ["string", "null"]: null (or absence) omits the header.
        kinds = [k for k in kind if k != "null"]
        kind = kinds[0] if len(kinds) == 1 else kind
    if type(kind) is not str or kind not in _PRIMITIVE:
        shown = kind if type(kind) is str and len(kind) <= 20 else type(kind).__name__
        raise _invalid(
            f"x-mcp-header on {where} must be on an integer, string or boolean property, "
            f"not {shown}"
        )
    return name, HeaderField(path, kind)


def param_headers(plan: HeaderPlan, arguments: Mapping[str, Any] | None) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers of a ``tools/call`` with these ``arguments``.

    One header per planned field whose value is present and not null (a missing
    intermediate object omits it too), encoded with :func:`encode_value`. A value of the
    wrong JSON type (a bool for an integer: bool is an int subclass in Python; a float for an
    integer; a number for a string) or an integer beyond ±(2^53-1) raises
    ``Error("argument", "x_mcp_header_value")`` naming the argument, never its value: the
    server would reject the call anyway, and an early, local error says why.

    >>> plan = header_plan({"properties": {"region": {"type": "string", "x-mcp-header": "Region"}}})
    >>> param_headers(plan, {"region": "us-west1", "query": "SELECT 1"})
    {'Mcp-Param-Region': 'us-west1'}
    >>> param_headers(plan, {"region": None})
    {}
    """
    if not plan:
        return {}
    if arguments is None:
        return {}
    if not isinstance(arguments, Mapping):
        raise Error("argument", "arguments", "tool arguments must be a mapping")
    headers: dict[str, str] = {}
    for name, (path, kind) in plan.items():
        value: Any = arguments
        for key in path:
            if not isinstance(value, Mapping):
                value = None
                break
            value = value.get(key)
        if value is None:
            continue
        t = type(value)
        if kind == "string":
            ok = isinstance(value, str)
        elif kind == "integer":
            ok = t is int or (isinstance(value, int) and not isinstance(value, bool))
            if ok and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER:
                raise Error(
                    "argument",
                    "x_mcp_header_value",
                    f"argument {_arg(path)} (sent as {PARAM_PREFIX}{name}) is outside the "
                    "safe integer range ±(2^53-1)",
                )
        else:
            ok = t is bool
        if not ok:
            raise Error(
                "argument",
                "x_mcp_header_value",
                f"argument {_arg(path)} (sent as {PARAM_PREFIX}{name}) must be a {kind}, "
                f"not {t.__name__}",
            )
        headers[PARAM_PREFIX + name] = encode_value(value)
    return headers


def _arg(path: tuple[str, ...]) -> str:
    text = repr(".".join(path))
    return text if len(text) <= 80 else text[:76] + "..." + text[0]


def filter_tools(
    tools: Sequence[Mapping[str, Any]],
) -> tuple[list[Mapping[str, Any]], list[tuple[str, str]], dict[str, HeaderPlan]]:
    """Split a ``tools/list`` page by the validity of its ``x-mcp-header`` annotations.

    Returns ``(kept, dropped, plans)``: the tools to expose, in order; ``(name, reason)``
    for each tool excluded (the spec: the client MUST exclude it and SHOULD log a warning
    naming the tool and the reason); and the :data:`HeaderPlan` of each kept tool that has
    at least one header, by tool name. A page without any annotation costs one
    ``orjson.dumps`` of the whole page.

    >>> ok = {"name": "a", "inputSchema": {"type": "object"}}
    >>> bad = {"name": "b", "inputSchema": {"x-mcp-header": "B"}}
    >>> kept, dropped, plans = filter_tools([ok, bad])
    >>> [t["name"] for t in kept], [name for name, _ in dropped], plans
    (['a'], ['b'], {})
    """
    if not _has_marker(tools if isinstance(tools, list | tuple) else list(tools)):
        return list(tools), [], {}
    kept: list[Mapping[str, Any]] = []
    dropped: list[tuple[str, str]] = []
    plans: dict[str, HeaderPlan] = {}
    for tool in tools:
        name = tool.get("name") if isinstance(tool, Mapping) else None
        name = name if type(name) is str else ""
        schema = tool.get("inputSchema") if isinstance(tool, Mapping) else None
        try:
            plan = header_plan(schema)
        except Error as exc:
            dropped.append((name, exc.message))
            continue
        kept.append(tool)
        if plan:
            plans[name] = plan
    return kept, dropped, plans


# -- request metadata ------------------------------------------------------------------------


def _header_safe(text: str) -> bool:
    return bool(text) and text.isascii() and text.isprintable()


def request_headers(method: str, params: Mapping[str, Any] | None, version: str) -> dict[str, str]:
    """``MCP-Protocol-Version``, ``Mcp-Method`` and, where required, ``Mcp-Name`` (spec 2026-07-28, "Streamable HTTP").

    ``Mcp-Name`` is ``params.name`` for ``tools/call`` and ``prompts/get``, ``params.uri``
    for ``resources/read`` (and ``params.taskId`` for the Tasks extension's ``tasks/*``),
    encoded with :func:`encode_value`. A missing or non-string source raises
    ``Error("argument", <field>)``: the server would answer -32020 for the missing header.
    The method and version are sent as they are, so they must be printable ASCII
    (``Error("argument", "method")`` otherwise; no value is echoed).

    >>> request_headers("tools/call", {"name": "get_weather"}, "2026-07-28")
    {'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/call', 'Mcp-Name': 'get_weather'}
    >>> request_headers("tools/list", None, "2026-07-28")
    {'MCP-Protocol-Version': '2026-07-28', 'Mcp-Method': 'tools/list'}
    """
    if type(method) is not str or not _header_safe(method):
        raise Error("argument", "method", "the method must be a non-empty printable ASCII string")
    if type(version) is not str or not _header_safe(version):
        raise Error("argument", "version", "the protocol version must be printable ASCII")
    headers = {MCP_PROTOCOL_VERSION: version, MCP_METHOD: method}
    field = NAME_FIELDS.get(method)
    if field is not None:
        value = params.get(field) if isinstance(params, Mapping) else None
        if not isinstance(value, str):
            raise Error("argument", field, f"{method} needs params.{field} as a string")
        headers[MCP_NAME] = encode_value(value)
    return headers
