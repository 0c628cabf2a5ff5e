"""Turning result objects into the typed values of ``conduit_mcp.types``.

Every parser checks shapes up front and raises ``Error("protocol", "bad_result", ...)`` for
a malformed result, so a caller never sees a KeyError or TypeError from deep inside. The
rule of thumb: required identity fields (a tool's ``name``, a resource's ``uri``) and the
type of every field that is present are checked; absent optional fields get a neutral
default (older servers omit fields: parse leniently). The messages name
the field, never its value (a result may carry anything). Metadata (``title``, ``icons``,
``annotations``, ``_meta``, a resource's ``size``, the server's ``description`` and
``websiteUrl``) is the exception: ``conduit_mcp.protocol.metadata`` drops a malformed piece
instead of failing the item.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Final, Literal, TypeGuard

import orjson

from ..errors import Error
from ..types import (
    CallToolResult,
    CompleteResult,
    GetPromptResult,
    Page,
    Progress,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    ServerInfo,
    Tool,
)
from .metadata import (
    parse_annotations,
    parse_icons,
    parse_meta,
    parse_size,
    parse_title,
    parse_tool_annotations,
    parse_website_url,
)

ListKind = Literal["tools", "prompts", "resources", "resource_templates", "skills"]


def _bad(what: str) -> Error:
    return Error("protocol", "bad_result", f"malformed result: {what}")


def _object(value: Any, what: str) -> dict[str, Any]:
    if type(value) is not dict:
        raise _bad(f"{what} is not an object")
    return value


def _opt_str(obj: dict[str, Any], key: str, what: str) -> str | None:
    value = obj.get(key)
    if value is None or type(value) is str:
        return value
    raise _bad(f"{what}.{key} is not a string")


def _req_str(obj: dict[str, Any], key: str, what: str) -> str:
    value = obj.get(key)
    if type(value) is not str:
        raise _bad(f"{what}.{key} is missing or not a string")
    return value


def _opt_obj(obj: dict[str, Any], key: str, what: str) -> dict[str, Any] | None:
    value = obj.get(key)
    if value is None or type(value) is dict:
        return value
    raise _bad(f"{what}.{key} is not an object")


def _list(obj: dict[str, Any], key: str, what: str, *, required: bool) -> list[Any]:
    value = obj.get(key)
    if type(value) is list:
        return value
    if value is None and not required:
        return []
    raise _bad(f"{what}.{key} is {'not a list' if value is not None else 'missing'}")


def _objects(items: list[Any], what: str) -> tuple[dict[str, Any], ...]:
    for i, item in enumerate(items):
        if type(item) is not dict:
            raise _bad(f"{what}[{i}] is not an object")
    return tuple(items)


def check_result_type(result: dict[str, Any]) -> None:
    """Accept only complete results (MCP spec 2026-07-28, Basic, "Result types").

    An absent ``resultType`` MUST be treated as ``"complete"`` (every legacy result, and
    lenient modern servers). ``"input_required"`` (multi-round-trip requests) is not
    implemented yet, so it is refused with its own reason rather than misread as data. Any
    other value MUST be considered invalid (``"task"`` is only legal after opting in to the
    Tasks extension, which this client does not declare).
    """
    kind = result.get("resultType")
    if kind is None or kind == "complete":
        return
    if kind == "input_required":
        raise Error(
            "protocol",
            "input_required_unsupported",
            "the server needs input (multi-round-trip request), which this client does "
            "not support yet",
        )
    raise Error("protocol", "unknown_result_type", "the server sent an unknown resultType")


def _result(result: Any, what: str) -> dict[str, Any]:
    obj = _object(result, what)
    check_result_type(obj)
    return obj


def parse_server_info(value: Any) -> ServerInfo | None:
    """The server's ``Implementation``, or None when absent or not an object (informational)."""
    if type(value) is not dict:
        return None
    name, version, description = value.get("name"), value.get("version"), value.get("description")
    return ServerInfo(
        name if type(name) is str else "",
        version if type(version) is str else "",
        parse_title(value.get("title")),
        description=description if type(description) is str else None,
        website_url=parse_website_url(value.get("websiteUrl")),
        icons=parse_icons(value.get("icons")),
        raw=value,
    )


def _tool(item: dict[str, Any], what: str) -> Tool:
    annotations = parse_tool_annotations(item.get("annotations"))
    # Before 2025-06-18 the display name lived in annotations.title.
    title = parse_title(item.get("title")) or (annotations.title if annotations else None)
    schema = _opt_obj(item, "inputSchema", what)
    return Tool(
        _req_str(item, "name", what),
        _opt_str(item, "description", what),
        # inputSchema is required by the schema; a server omitting it (seen in hand-written
        # servers for argument-less tools) gets an empty schema instead of a failed page.
        {} if schema is None else schema,
        _opt_obj(item, "outputSchema", what),
        title=title,
        annotations=annotations,
        icons=parse_icons(item.get("icons")),
        meta=parse_meta(item.get("_meta")),
        raw=item,
    )


def _prompt(item: dict[str, Any], what: str) -> Prompt:
    return Prompt(
        _req_str(item, "name", what),
        _opt_str(item, "description", what),
        _objects(_list(item, "arguments", what, required=False), f"{what}.arguments"),
        title=parse_title(item.get("title")),
        icons=parse_icons(item.get("icons")),
        meta=parse_meta(item.get("_meta")),
        raw=item,
    )


def _resource(item: dict[str, Any], what: str) -> Resource:
    return Resource(
        _req_str(item, "uri", what),
        _req_str(item, "name", what),
        _opt_str(item, "description", what),
        _opt_str(item, "mimeType", what),
        title=parse_title(item.get("title")),
        icons=parse_icons(item.get("icons")),
        annotations=parse_annotations(item.get("annotations")),
        size=parse_size(item.get("size")),
        meta=parse_meta(item.get("_meta")),
        raw=item,
    )


def _template(item: dict[str, Any], what: str) -> ResourceTemplate:
    return ResourceTemplate(
        _req_str(item, "uriTemplate", what),
        _req_str(item, "name", what),
        _opt_str(item, "description", what),
        _opt_str(item, "mimeType", what),
        title=parse_title(item.get("title")),
        icons=parse_icons(item.get("icons")),
        annotations=parse_annotations(item.get("annotations")),
        meta=parse_meta(item.get("_meta")),
        raw=item,
    )


def _skill(item: dict[str, Any], what: str) -> Any:
    # Imported on first use: the YAML parser it needs is not loaded by clients without skills.
    from .skills import parse_skill

    return parse_skill(item, what)


_PAGES: Final[dict[str, tuple[str, Callable[[dict[str, Any], str], Any]]]] = {
    "tools": ("tools", _tool),
    "prompts": ("prompts", _prompt),
    "resources": ("resources", _resource),
    "resource_templates": ("resourceTemplates", _template),
    "skills": ("skills", _skill),
}


def json_size(value: Any) -> int:
    """The size in bytes of ``value`` as compact JSON: what a decoded page weighed on the
    wire, give or take whitespace, for bounding a whole ``list_all_*`` walk by size.

    >>> json_size({"tools": [], "nextCursor": "c"})
    29
    """
    try:
        return len(orjson.dumps(value))
    except TypeError:  # an integer over 64 bits (decoded by the fallback decoder)
        return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def parse_page(kind: ListKind, result: Any) -> Page[Any]:
    """One page of ``tools/list``, ``prompts/list``, ``resources/list``,
    ``resources/templates/list`` or ``skills/list`` (the skills extension).

    ``nextCursor`` absent (or null, which some serialisers write for "absent") ends the
    list; any string, including ``""``, is a cursor to send back (MCP spec 2026-07-28,
    Server utilities, "Pagination"). The caching hints ``ttlMs``/``cacheScope`` stay in
    ``raw`` for the cache to read.
    """
    spec = _PAGES.get(kind)
    if spec is None:
        raise Error("argument", "kind", f"kind must be one of {', '.join(_PAGES)}")
    key, parse_item = spec
    obj = _result(result, f"{key} page")
    items = _list(obj, key, "result", required=True)
    parsed = []
    for i, item in enumerate(items):
        what = f"{key}[{i}]"
        parsed.append(parse_item(_object(item, what), what))
    return Page(tuple(parsed), _opt_str(obj, "nextCursor", "result"), obj)


def parse_call_tool(result: Any) -> CallToolResult:
    """A ``tools/call`` result. ``isError: true`` is returned, not raised: it is a result.

    ``content`` is required by the schema but treated as empty when absent, so a tool that
    answers only ``structuredContent`` is still readable.
    """
    obj = _result(result, "tools/call result")
    content = _objects(_list(obj, "content", "result", required=False), "result.content")
    is_error = obj.get("isError", False)
    if is_error is None:
        is_error = False
    elif type(is_error) is not bool:
        raise _bad("result.isError is not a boolean")
    return CallToolResult(
        content, obj.get("structuredContent"), is_error, _opt_obj(obj, "_meta", "result"), obj
    )


def parse_get_prompt(result: Any) -> GetPromptResult:
    """A ``prompts/get`` result: an optional description and the prompt's messages."""
    obj = _result(result, "prompts/get result")
    messages = _objects(_list(obj, "messages", "result", required=True), "result.messages")
    return GetPromptResult(_opt_str(obj, "description", "result"), messages, obj)


def parse_read_resource(result: Any) -> ReadResourceResult:
    """A ``resources/read`` result; its caching hints stay in ``raw``."""
    obj = _result(result, "resources/read result")
    contents = _objects(_list(obj, "contents", "result", required=True), "result.contents")
    return ReadResourceResult(contents, obj)


def parse_complete(result: Any) -> CompleteResult:
    """A ``completion/complete`` result: ``{"completion": {values, total?, hasMore?}}``."""
    obj = _result(result, "completion/complete result")
    completion = _object(obj.get("completion"), "result.completion")
    values = _list(completion, "values", "result.completion", required=True)
    if not all(type(v) is str for v in values):
        raise _bad("result.completion.values holds a non-string")
    total = completion.get("total")
    if total is not None and type(total) is not int:
        raise _bad("result.completion.total is not an integer")
    has_more = completion.get("hasMore")
    if has_more is not None and type(has_more) is not bool:
        raise _bad("result.completion.hasMore is not a boolean")
    return CompleteResult(tuple(values), total, bool(has_more), obj)


def _number(value: object) -> TypeGuard[int | float]:
    # JSON numbers only: a bool is an int to isinstance(), not to the protocol.
    t = type(value)
    return t is int or t is float


def parse_progress(params: Any) -> tuple[int | str, Progress] | None:
    """``notifications/progress`` params as ``(progressToken, Progress)``, or None.

    None for malformed params: a notification cannot be answered, so the connection drops
    it rather than failing the request it would belong to. The token must be an int or a
    string (``ProgressToken``) and ``progress`` a number; ``total`` and ``message`` are
    dropped when they have the wrong type.
    """
    if type(params) is not dict:
        return None
    token = params.get("progressToken")
    progress = params.get("progress")
    if not (type(token) is int or type(token) is str) or not _number(progress):
        return None
    total = params.get("total")
    message = params.get("message")
    return token, Progress(
        float(progress),
        float(total) if _number(total) else None,
        message if type(message) is str else None,
    )
