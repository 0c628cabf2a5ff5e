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
    """

    name: str
    version: str
    title: str | None = None
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class Tool:
    """One ``tools/list`` item. ``title`` is the top-level one, else ``annotations.title``."""

    name: str
    description: str | None
    input_schema: JSON
    output_schema: JSON | None = None
    title: str | None = None
    annotations: JSON | None = None
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class Prompt:
    """One ``prompts/list`` item; ``arguments`` are the raw ``PromptArgument`` objects."""

    name: str
    description: str | None = None
    arguments: tuple[JSON, ...] = ()
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class Resource:
    """One ``resources/list`` item."""

    uri: str
    name: str
    description: str | None = None
    mime_type: str | None = None
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class ResourceTemplate:
    """One ``resources/templates/list`` item (an RFC 6570 URI template)."""

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
    """

    content: tuple[JSON, ...]
    structured_content: Any = None
    is_error: bool = False
    meta: JSON | None = None
    raw: JSON = field(default_factory=dict, repr=False)

    @property
    def text(self) -> str:
        """The text of every ``text`` content block, joined with newlines (``""`` if none)."""
        return "\n".join(
            block["text"]
            for block in self.content
            if block.get("type") == "text" and type(block.get("text")) is str
        )


@dataclass(frozen=True, slots=True)
class GetPromptResult:
    """A ``prompts/get`` result; ``messages`` are the raw ``PromptMessage`` objects."""

    description: str | None
    messages: tuple[JSON, ...]
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class ReadResourceResult:
    """A ``resources/read`` result; ``contents`` are the raw text/blob content objects."""

    contents: tuple[JSON, ...]
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class CompleteResult:
    """A ``completion/complete`` result: suggested ``values``, ``total`` and ``has_more``."""

    values: tuple[str, ...]
    total: int | None = None
    has_more: bool = False
    raw: JSON = field(default_factory=dict, repr=False)


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a list. ``next_cursor`` is None only at the end of the list.

    An empty-string ``next_cursor`` is a real cursor, not the end (MCP spec, Utilities,
    "Pagination": only a missing ``nextCursor`` ends the results).
    """

    items: tuple[T, ...]
    next_cursor: str | None = None
    raw: JSON = field(default_factory=dict, repr=False)

    @property
    def is_last(self) -> bool:
        """True when the server sent no ``nextCursor`` (the only end-of-list signal)."""
        return self.next_cursor is None


@dataclass(frozen=True, slots=True)
class Progress:
    """One ``notifications/progress`` update. ``progress`` increases and may be fractional."""

    progress: float
    total: float | None = None
    message: str | None = None
