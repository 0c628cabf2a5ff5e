"""Typed, immutable results: what the client's methods return.

Each value is a frozen, slotted dataclass naming the fields most callers need, and keeps the
server's whole JSON object in ``raw`` for everything else (icons, ``_meta``, the ``ttlMs`` /
``cacheScope`` caching hints, fields of later spec revisions). Parsing lives in
``conduit_mcp.protocol.results``.

``raw`` and the other dict/list fields are the parsed server JSON itself, shared with the
client's cache and with every other reader of the same result: **treat them as read-only**.
They are not wrapped in ``types.MappingProxyType`` on purpose: such a wrapper protects only
the top level (nested dicts stay mutable), and orjson cannot serialise it, while callers
commonly re-serialise results (``orjson.dumps(tool.raw)``). Copy before changing anything.

``raw`` is left out of ``repr`` (a ``tools/list`` item can be kilobytes of JSON schema) and,
because it holds dicts, the values are not hashable; compare them with ``==``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")

JSON = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """The server's ``Implementation``: from ``initialize`` (legacy) or a result's ``_meta``.

    ``name`` and ``version`` are required by the schema, but identity is informational, so a
    server that omits them gets ``""`` rather than a failed connection.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> with mcp.Client.start(server) as client:
    ...     _ = client.await_ready(timeout=10)
    ...     client.server_info()
    ServerInfo(name='scripted', version='1.0.0', title=None)
    """

    name: str
    version: str
    title: str | None = None
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class Tool:
    """One ``tools/list`` item. ``title`` is the top-level one, else ``annotations.title``.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> with mcp.Client.start(server) as client:
    ...     tool = next(t for t in client.list_all_tools() if t.name == "add")
    >>> tool.description, tool.input_schema["required"]
    ('Add two numbers.', ['a', 'b'])
    """

    name: str
    description: str | None
    input_schema: JSON
    output_schema: JSON | None = None
    title: str | None = None
    annotations: JSON | None = None
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class Prompt:
    """One ``prompts/list`` item; ``arguments`` are the raw ``PromptArgument`` objects.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> with mcp.Client.start(server) as client:
    ...     prompt = next(p for p in client.list_all_prompts() if p.name == "greet")
    >>> prompt.description, [a["name"] for a in prompt.arguments]
    ('Greet someone by name.', ['name'])
    """

    name: str
    description: str | None = None
    arguments: tuple[JSON, ...] = ()
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class Resource:
    """One ``resources/list`` item.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> with mcp.Client.start(server) as client:
    ...     client.list_all_resources()[0]
    Resource(uri='test://static/hello', name='hello', description=None, mime_type='text/plain')
    """

    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class ResourceTemplate:
    """One ``resources/templates/list`` item (an RFC 6570 URI template).

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> with mcp.Client.start(server) as client:
    ...     client.list_all_resource_templates()[0].uri_template
    'test://item/{id}'
    """

    uri_template: str
    name: str
    description: str | None = None
    mime_type: str | None = None
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class CallToolResult:
    """A ``tools/call`` result. ``is_error=True`` is a result, not an exception (MCP spec,
    Server Features, Tools, "Error Handling": tool errors are reported in the result).

    ``content`` holds the raw content blocks (``{"type": "text", "text": ...}``, images,
    resource links, embedded resources); ``structured_content`` is the tool's JSON output
    when it declares an ``outputSchema``.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> with mcp.Client.start(server) as client:
    ...     result = client.call_tool("add", {"a": 1, "b": 2})
    ...     failed = client.call_tool("fail", {})
    >>> result.text, result.structured_content, result.is_error
    ('3', {'sum': 3}, False)
    >>> failed.is_error
    True
    """

    content: tuple[JSON, ...]
    structured_content: Any = None
    is_error: bool = False
    meta: JSON | None = None
    raw: JSON = field(default_factory=dict, repr=False)

    @property
    def text(self) -> str:
        """The text of every ``text`` content block, joined with newlines (``""`` if none).

        >>> from conduit_mcp import CallToolResult
        >>> print(CallToolResult(content=({"type": "text", "text": "a"}, {"type": "image"},
        ...                               {"type": "text", "text": "b"})).text)
        a
        b
        """
        return "\n".join(
            block["text"]
            for block in self.content
            if block.get("type") == "text" and type(block.get("text")) is str
        )


@dataclass(frozen=True, slots=True)
class GetPromptResult:
    """A ``prompts/get`` result; ``messages`` are the raw ``PromptMessage`` objects.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> with mcp.Client.start(server) as client:
    ...     result = client.get_prompt("greet", {"name": "ada"})
    >>> result.messages[0]["content"]["text"]
    'Hello, ada!'
    """

    description: str | None
    messages: tuple[JSON, ...]
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class ReadResourceResult:
    """A ``resources/read`` result; ``contents`` are the raw text/blob content objects.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> with mcp.Client.start(server) as client:
    ...     client.read_resource("test://static/hello").contents[0]["text"]
    'Hello, world!'
    """

    contents: tuple[JSON, ...]
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class CompleteResult:
    """A ``completion/complete`` result: suggested ``values``, ``total`` and ``has_more``.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> with mcp.Client.start(server) as client:
    ...     client.complete({"type": "ref/prompt", "name": "greet"}, {"name": "name", "value": "a"})
    CompleteResult(values=('alice',), total=1, has_more=False)
    """

    values: tuple[str, ...]
    total: int | None = None
    has_more: bool = False
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list. ``next_cursor`` is None only at the end of the list.

    An empty-string ``next_cursor`` is a real cursor, not the end (MCP spec, Utilities,
    "Pagination": only a missing ``nextCursor`` ends the results).

    >>> import tempfile
    >>> import conduit_mcp as mcp
    >>> from conduit_mcp.testing import ScriptedServer
    >>> paged = ScriptedServer(tempfile.mkdtemp(), page_size=10)
    >>> with mcp.Client.start(paged.stdio()) as client:
    ...     first = client.list_tools()
    ...     second = client.list_tools(first.next_cursor)
    >>> len(first.items), first.is_last, second.items[0].name
    (10, False, 'error')
    """

    items: tuple[T, ...]
    next_cursor: str | None = None
    raw: JSON = field(default_factory=dict, repr=False)

    @property
    def is_last(self) -> bool:
        """True when the server sent no ``nextCursor`` (the only end-of-list signal).

        >>> from conduit_mcp import Page
        >>> Page(items=(), next_cursor="").is_last, Page(items=()).is_last
        (False, True)
        """
        return self.next_cursor is None


@dataclass(frozen=True, slots=True)
class Progress:
    """One ``notifications/progress`` update. ``progress`` increases and may be fractional.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> seen = []
    >>> with mcp.Client.start(server) as client:
    ...     _ = client.call_tool("progress", {"steps": 3}, on_progress=seen.append)
    >>> [(p.progress, p.total) for p in seen]
    [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]
    """

    progress: float
    total: float | None = None
    message: str | None = None
