"""The static catalogue of the scripted MCP server, and the small pure helpers around it.

The built-in tool specs (name, description, input and output schemas), the prompts, resources,
resource templates and completion candidates, and the client capability that each
server-to-client request needs; plus stateless helpers for tool results (``text_content``,
``tool_error``), list cursors and deliberately wrong response ids. It exists so that what the
server offers is declared as data in one place, separate from the code that serves it;
:func:`describe_tools` exposes the tool list for documentation.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable
from typing import Any, TypeGuard

from .protocol import INVALID_PARAMS, LOG_LEVELS, RpcError

__all__ = ["describe_tools"]


def object_schema(properties: dict[str, Any], required: Iterable[str] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    req = list(required)
    if req:
        schema["required"] = req
    return schema


STRING = {"type": "string"}
NUMBER = {"type": "number"}

# (name, description, inputSchema, outputSchema or None)
TOOL_SPECS: list[tuple[str, str, dict[str, Any], dict[str, Any] | None]] = [
    (
        "add",
        "Add two numbers.",
        object_schema({"a": NUMBER, "b": NUMBER}, ("a", "b")),
        object_schema({"sum": NUMBER}, ("sum",)),
    ),
    ("echo", "Return the text unchanged.", object_schema({"text": STRING}, ("text",)), None),
    (
        "progress",
        "Report progress once per step (when the request has _meta.progressToken), then "
        "stay silent for `silence` seconds before answering.",
        object_schema(
            {
                "steps": {"type": "integer", "minimum": 0, "default": 3},
                "delay": {"type": "number", "minimum": 0, "default": 0.01},
                "silence": {"type": "number", "minimum": 0, "default": 0},
            }
        ),
        None,
    ),
    (
        "slow",
        "Answer after the given number of seconds.",
        object_schema({"seconds": {"type": "number", "minimum": 0}}, ("seconds",)),
        None,
    ),
    ("never", "Never answer (until cancelled).", object_schema({}), None),
    (
        "crash",
        "Exit the server process at once, without answering.",
        object_schema({"code": {"type": "integer", "minimum": 0, "maximum": 255, "default": 1}}),
        None,
    ),
    (
        "garbage",
        "Write a non-JSON line to stdout, then answer.",
        object_schema({"text": STRING}),
        None,
    ),
    (
        "big",
        "Return a text content of exactly `size` bytes.",
        object_schema({"size": {"type": "integer", "minimum": 0}}, ("size",)),
        None,
    ),
    (
        "stderr",
        "Write the text to stderr, then answer.",
        object_schema({"text": STRING}, ("text",)),
        None,
    ),
    ("fail", "Return a tool result with isError: true.", object_schema({"message": STRING}), None),
    (
        "error",
        "Answer with a JSON-RPC error.",
        object_schema(
            {"code": {"type": "integer"}, "message": STRING, "data": {}}, ("code", "message")
        ),
        None,
    ),
    (
        "notify",
        "Send `count` notifications of `method` (with `params`; `malformed`: as JSON-RPC "
        "1.0), then answer.",
        object_schema(
            {
                "method": STRING,
                "count": {"type": "integer", "minimum": 0, "default": 1},
                "params": {"type": "object"},
                "malformed": {"type": "boolean", "default": False},
            },
            ("method",),
        ),
        None,
    ),
    (
        "env",
        "Return the value of an environment variable (structuredContent.value, null if unset).",
        object_schema({"name": STRING}, ("name",)),
        object_schema({"name": STRING, "value": {"type": ["string", "null"]}}, ("name", "value")),
    ),
    ("cwd", "Return the server's working directory.", object_schema({}), None),
    ("pid", "Return the server's process id.", object_schema({}), None),
    (
        "log",
        "Emit notifications/message at `level` (if the request's or session's level allows).",
        object_schema(
            {"level": {"type": "string", "enum": list(LOG_LEVELS)}, "data": {}, "logger": STRING}
        ),
        None,
    ),
    (
        "changed",
        "Announce a change: kind tools|prompts|resources (list_changed) or resource (updated).",
        object_schema(
            {
                "kind": {"type": "string", "enum": ["tools", "prompts", "resources", "resource"]},
                "uri": STRING,
            },
            ("kind",),
        ),
        None,
    ),
    (
        "add_tool",
        "Add a dynamic tool (its inputSchema and outputSchema, and the result it answers, "
        "when given) and announce tools/list_changed.",
        object_schema(
            {
                "name": STRING,
                "input_schema": {"type": "object"},
                "output_schema": {"type": "object"},
                "result": {"type": "object"},
            },
            ("name",),
        ),
        None,
    ),
    (
        "remove_tool",
        "Remove a dynamic tool and announce tools/list_changed.",
        object_schema({"name": STRING}, ("name",)),
        None,
    ),
    (
        "client_request",
        "Ask the client (MRTR input_required when modern, a server request when legacy).",
        object_schema({"method": STRING, "params": {"type": "object"}}, ("method",)),
        None,
    ),
    (
        "end_listens",
        "End every subscriptions/listen stream (how: result or cancelled).",
        object_schema({"how": {"type": "string", "enum": ["result", "cancelled"]}}),
        None,
    ),
    ("cpu", "Return the server's CPU time (time.process_time()).", object_schema({}), None),
    (
        "ask",
        "Legacy: send server requests (any method and params), one after another or "
        "concurrently, on the call's stream (via post) or the GET stream (via get); optionally "
        "cancel one after cancel_after seconds, or send notifications/elicitation/complete "
        "(complete); answer every reply in order (structuredContent.answers).",
        object_schema(
            {
                "requests": {
                    "type": "array",
                    "items": object_schema(
                        {
                            "method": STRING,
                            "params": {"type": "object"},
                            "cancel_after": {"type": "number", "minimum": 0},
                            "complete": {"enum": [True, False, "before"]},
                        },
                        ("method",),
                    ),
                },
                "concurrent": {"type": "boolean", "default": False},
                "via": {"type": "string", "enum": ["post", "get"], "default": "post"},
                "timeout": {"type": "number", "default": 60},
                "cancel_grace": {"type": "number", "default": 0.2},
                "force": {"type": "boolean", "default": False},
                "detach": {"type": "boolean", "default": False},
            },
            ("requests",),
        ),
        None,
    ),
    (
        "learned",
        "Every server request sent so far and what the client answered (late and duplicate "
        "answers too), plus answers to ids the server never used.",
        object_schema({}),
        None,
    ),
    (
        "last_roots",
        "The last answer to a roots/list the server sent, and the roots/list_changed count.",
        object_schema({}),
        None,
    ),
    (
        "rounds",
        "Modern: scripted input_required rounds (inputRequests and/or requestState each), "
        "every retry checked (new id, state echoed, the keys asked); the final result reports "
        "every request of the conversation.",
        object_schema(
            {
                "rounds": {
                    "type": "array",
                    "items": object_schema(
                        {"inputRequests": {"type": "object"}, "requestState": STRING}
                    ),
                },
                "final_result_type": {"type": ["string", "null"], "default": "complete"},
                "endless": {"type": "boolean", "default": False},
                "check_capabilities": {"type": "boolean", "default": True},
                "strict": {"type": "boolean", "default": False},
                "tag": {},
            },
            ("rounds",),
        ),
        None,
    ),
    (
        "rounds_log",
        "Modern: every rounds conversation, and every request that carried inputResponses or "
        "requestState (stray: one that was not a rounds or client_request retry).",
        object_schema({}),
        None,
    ),
]

# Tools whose parameters travel in Mcp-Param-* headers too (--header-tools only, so the
# default tool list, and every count derived from it, stays as it was).
HEADER_TOOL_SPECS: list[tuple[str, str, dict[str, Any], dict[str, Any] | None]] = [
    (
        "weather",
        "Answer '<region> <days> <metric>' (each parameter mirrored in an Mcp-Param-* header).",
        object_schema(
            {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "days": {"type": "integer", "x-mcp-header": "Days"},
                "metric": {"type": "boolean", "x-mcp-header": "Metric"},
            },
            ("region",),
        ),
        None,
    ),
    (
        "bad_header",
        "An invalid x-mcp-header (on a number): a conforming client hides this tool.",
        object_schema({"v": {"type": "number", "x-mcp-header": "V"}}, ("v",)),
        None,
    ),
]

# Floods, for the client's flood bounds (--flood-tools only, so the default tool list stays
# as it was).
FLOOD_TOOL_SPECS: list[tuple[str, str, dict[str, Any], dict[str, Any] | None]] = [
    (
        "flood",
        "Send `count` server requests (`what` request: `method`, default ping), notifications "
        "(`what` notification: `method`) or progress reports (`what` progress) as fast as "
        "possible, without waiting for answers; `stop_reading` first stops reading the "
        "client's messages for good (stdio); `then` result (the default) answers, never "
        "does not.",
        object_schema(
            {
                "what": {"type": "string", "enum": ["request", "notification", "progress"]},
                "count": {"type": "integer", "minimum": 0},
                "method": STRING,
                "stop_reading": {"type": "boolean", "default": False},
                "then": {"type": "string", "enum": ["result", "never"], "default": "result"},
            },
            ("what", "count"),
        ),
        None,
    ),
]

PROMPTS: list[dict[str, Any]] = [
    {
        "name": "greet",
        "title": "Greeting",
        "description": "Greet someone by name.",
        "arguments": [{"name": "name", "description": "Who to greet", "required": True}],
    },
    {"name": "plain", "title": "Plain", "description": "A prompt without arguments."},
]
RESOURCES: list[dict[str, Any]] = [
    {"uri": "test://static/hello", "name": "hello", "title": "Hello", "mimeType": "text/plain"},
    {"uri": "test://static/blob", "name": "blob", "mimeType": "application/octet-stream"},
]
RESOURCE_TEMPLATES: list[dict[str, Any]] = [
    {"uriTemplate": "test://item/{id}", "name": "item", "title": "Item", "mimeType": "text/plain"}
]

# Display metadata (--metadata only, so the default lists, and every size derived from them,
# stay as they were): the server's Implementation extras and, by item name, what is merged
# into a tool, prompt, resource or template. The icons mix the spec's two safe forms (https:
# and data:) with one a client must refuse (javascript:).
_PNG_1X1 = (
    "data:image/png;base64,"
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
METADATA_SERVER: dict[str, Any] = {
    "title": "Scripted test server",
    "description": "Deterministic tools for exercising MCP clients.",
    "websiteUrl": "https://example.com/scripted",
    "icons": [
        {"src": _PNG_1X1, "mimeType": "image/png", "sizes": ["1x1"]},
        {
            "src": "https://example.com/scripted.svg",
            "mimeType": "image/svg+xml",
            "sizes": ["any"],
            "theme": "dark",
        },
        {"src": "javascript:alert(1)"},
    ],
}
METADATA_TOOLS: dict[str, dict[str, Any]] = {
    "add": {
        "title": "Add numbers",
        "icons": [
            {
                "src": "https://example.com/add.png",
                "mimeType": "image/png",
                "sizes": ["48x48", "96x96"],
                "theme": "light",
            }
        ],
        "annotations": {"title": "Add", "readOnlyHint": True, "openWorldHint": False},
        "_meta": {"example.com/category": "math"},
    },
    "echo": {"annotations": {"title": "Echo text", "idempotentHint": True}},
    "crash": {"annotations": {"readOnlyHint": False, "destructiveHint": True}},
}
METADATA_PROMPTS: dict[str, dict[str, Any]] = {
    "greet": {"icons": [{"src": _PNG_1X1}], "_meta": {"example.com/tone": "friendly"}},
}
METADATA_RESOURCES: dict[str, dict[str, Any]] = {
    "hello": {
        "icons": [{"src": "https://example.com/text.png", "mimeType": "image/png"}],
        "annotations": {
            "audience": ["user", "assistant"],
            "priority": 0.8,
            "lastModified": "2025-01-12T15:00:58Z",
        },
        "size": 13,
        "_meta": {"example.com/origin": "static"},
    },
}
METADATA_TEMPLATES: dict[str, dict[str, Any]] = {
    "item": {"icons": [{"src": _PNG_1X1}], "annotations": {"audience": ["assistant"]}},
}


def with_metadata(
    items: list[dict[str, Any]], extra: dict[str, dict[str, Any]]
) -> list[dict[str, Any]]:
    """``items`` with each one's ``extra`` entry (by name) merged in, as new dicts."""
    return [{**item, **extra.get(item["name"], {})} for item in items]


BLOB = base64.b64encode(bytes(range(16))).decode()
NAME_CANDIDATES = ["alice", "bob", "carol"]
ITEM_ID_CANDIDATES = ["1", "2", "3"]
CAPABILITY_FOR = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


def text_content(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def tool_error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def is_number(x: Any) -> TypeGuard[int | float]:
    return type(x) is int or type(x) is float


def encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode()


def decode_cursor(cursor: Any, length: int) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
        prefix, _, number = text.partition(":")
        offset = int(number)
        if prefix == "offset" and 0 <= offset <= length:
            return offset
    except (AttributeError, ValueError, UnicodeError):
        pass
    raise RpcError(INVALID_PARAMS, "Invalid cursor", {"cursor": cursor})


def derive_wrong_id(request_id: Any) -> Any:
    if type(request_id) is int:
        return -1_000_000_000 - request_id
    return f"{request_id}-wrong"


def describe_tools() -> list[tuple[str, str]]:
    """(name, description) of every built-in tool, for documentation."""
    return [(name, description) for name, description, _, _ in TOOL_SPECS]
