"""Typed, immutable results: what the client's methods return.

Each value is a frozen, slotted dataclass naming the fields most callers need, and keeps the
server's whole JSON object in ``raw`` for everything else (the ``ttlMs`` / ``cacheScope``
caching hints, fields of later spec revisions). Parsing lives in
``conduit_mcp.protocol.results``.

The metadata of the server and of its lists (``title``, ``icons``, ``annotations``,
``_meta``) is typed too (``Icon``, ``ToolAnnotations``, ``Annotations``), parsed by
``conduit_mcp.protocol.metadata`` on a different rule: it is decoration, so a malformed
piece of it is dropped (None or empty), never a failed list, and every piece is bounded.
The three metadata values compare by their typed fields only (not ``raw``). The metadata
fields of the other values come after ``raw``, so positional construction written for
earlier releases still means what it did.

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
from typing import Any, Generic, Literal, TypeVar

T = TypeVar("T")

JSON = dict[str, Any]

# ---- metadata: icons, annotations (parsed by ``conduit_mcp.protocol.metadata``) -------------


@dataclass(frozen=True, slots=True)
class Icon:
    """One icon a server offers for itself, a tool, a prompt, a resource or a template.

    Only icons that pass the spec's security rules are ever built from a server's answer
    (MCP spec 2026-07-28, Basic, "General fields", ``icons``): ``src`` is an ``https:`` URL
    (with a host, no user name or password in it) or a ``data:`` URI of an ``image/*``
    type, at most 128 KiB; ``mime_type``, when given, is an ``image/*`` type; each of
    ``sizes`` is ``WxH`` or ``any``; ``theme`` is ``light`` or ``dark``. A server's icon that
    breaks any of these is left out of ``icons`` (it stays in the item's ``raw``), so the
    URI of an icon you hold is never ``javascript:``, ``file:`` or ``http:``. Fetching one is
    still yours to do with care: without credentials, bounded in size, checking the bytes are
    the image type they claim (SVG can carry script).

    ``sizes`` is empty when the server gave none (usable at any size); ``theme`` is None for
    any theme. The repr shortens ``src`` (a ``data:`` URI can be kilobytes) and leaves out
    the query of a URL.

    >>> from conduit_mcp.protocol.metadata import parse_icons
    >>> icons = parse_icons([
    ...     {"src": "https://example.com/add.png", "mimeType": "image/png", "sizes": ["48x48"]},
    ...     {"src": "javascript:alert(1)"},
    ...     {"src": "data:image/svg+xml;base64,PHN2Zy8+", "theme": "dark"},
    ... ])
    >>> [(icon.src, icon.sizes, icon.theme) for icon in icons]
    [('https://example.com/add.png', ('48x48',), None), ('data:image/svg+xml;base64,PHN2Zy8+', (), 'dark')]
    >>> icons[0]
    Icon(src='https://example.com/add.png', mime_type='image/png', sizes=('48x48',), theme=None)
    """

    src: str
    mime_type: str | None = None
    sizes: tuple[str, ...] = ()
    theme: Literal["light", "dark"] | None = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_data(self) -> bool:
        """True for an inline ``data:`` URI (nothing to fetch), False for an ``https:`` URL.

        >>> from conduit_mcp import Icon
        >>> Icon("data:image/png;base64,iVBORw0KGgo=").is_data, Icon("https://x.test/i.png").is_data
        (True, False)
        """
        return self.src[:5].lower() == "data:"

    @property
    def origin(self) -> str | None:
        """The ``https://host[:port]`` an icon would be fetched from (host lowercased, the
        default port left out), or None for a ``data:`` URI: to compare with your server's
        origin, as the spec advises before fetching (MCP spec 2026-07-28, Basic, "General
        fields", ``icons``).

        >>> from conduit_mcp import Icon
        >>> Icon("https://Example.COM:443/a/i.png?v=1").origin
        'https://example.com'
        >>> Icon("https://example.com:8443/i.png").origin, Icon("data:image/png;base64,AA==").origin
        ('https://example.com:8443', None)
        """
        if self.is_data:
            return None
        authority = self.src[8:].split("/", 1)[0].split("?", 1)[0].split("#", 1)[0].lower()
        if authority.endswith(":443"):
            authority = authority[:-4]
        return "https://" + authority

    def __repr__(self) -> str:
        return (
            f"Icon(src={_short_src(self.src)!r}, mime_type={self.mime_type!r}, "
            f"sizes={self.sizes!r}, theme={self.theme!r})"
        )


def _short_src(src: str) -> str:
    # A data: URI can be 128 KiB and a URL's query can carry anything: show neither whole.
    if src[:5].lower() == "data:":
        head = src.partition(",")[0]
        return f"{head},…({len(src)} chars)"
    base, query, _ = src.partition("?")
    base = base.partition("#")[0]
    short = base if len(base) <= 200 else base[:200] + "…"
    return short + ("?…" if query else "")


@dataclass(frozen=True, slots=True)
class ToolAnnotations:
    """A tool's ``annotations``: hints about its behaviour, never guarantees.

    Each hint is None when the server did not send it (or sent something other than a
    boolean); the properties ``read_only``, ``destructive``, ``idempotent`` and
    ``open_world`` apply the spec's defaults (MCP spec 2026-07-28, schema, ``ToolAnnotations``:
    not read-only, destructive, not idempotent, open world) and its rule that the destructive
    and idempotent hints mean something only for a tool that is not read-only. The spec also
    says not to make tool-use decisions on the hints of a server you do not trust.

    >>> from conduit_mcp.protocol.metadata import parse_tool_annotations
    >>> hints = parse_tool_annotations({"title": "Delete", "destructiveHint": "yes"})
    >>> hints
    ToolAnnotations(title='Delete', read_only_hint=None, destructive_hint=None, idempotent_hint=None, open_world_hint=None)
    >>> hints.read_only, hints.destructive, hints.open_world
    (False, True, True)
    >>> parse_tool_annotations({"readOnlyHint": True, "destructiveHint": True}).destructive
    False
    """

    title: str | None = None
    read_only_hint: bool | None = None
    destructive_hint: bool | None = None
    idempotent_hint: bool | None = None
    open_world_hint: bool | None = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)

    @property
    def read_only(self) -> bool:
        """``readOnlyHint`` with its default (False): the tool says it changes nothing.

        >>> from conduit_mcp import ToolAnnotations
        >>> ToolAnnotations().read_only, ToolAnnotations(read_only_hint=True).read_only
        (False, True)
        """
        return self.read_only_hint is True

    @property
    def destructive(self) -> bool:
        """``destructiveHint`` with its default (True); always False for a read-only tool.

        >>> from conduit_mcp import ToolAnnotations
        >>> ToolAnnotations().destructive, ToolAnnotations(destructive_hint=False).destructive
        (True, False)
        """
        return not self.read_only and self.destructive_hint is not False

    @property
    def idempotent(self) -> bool:
        """``idempotentHint`` with its default (False); True for a read-only tool, which
        has no effect to repeat.

        >>> from conduit_mcp import ToolAnnotations
        >>> ToolAnnotations().idempotent, ToolAnnotations(read_only_hint=True).idempotent
        (False, True)
        """
        return self.read_only or self.idempotent_hint is True

    @property
    def open_world(self) -> bool:
        """``openWorldHint`` with its default (True): it may reach entities outside itself.

        >>> from conduit_mcp import ToolAnnotations
        >>> ToolAnnotations().open_world, ToolAnnotations(open_world_hint=False).open_world
        (True, False)
        """
        return self.open_world_hint is not False


Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class Annotations:
    """A resource's or a template's ``annotations``: its audience, priority and age.

    ``audience`` keeps the known roles (``user``, ``assistant``) once each, in the server's
    order; ``priority`` is a number from 0 (optional) to 1 (effectively required), None when
    absent or out of that range; ``last_modified`` is the server's ISO 8601 string (at most
    64 characters), unparsed.

    >>> from conduit_mcp.protocol.metadata import parse_annotations
    >>> parse_annotations({"audience": ["user", "robot", "user"], "priority": 1.5,
    ...                    "lastModified": "2025-01-12T15:00:58Z"})
    Annotations(audience=('user',), priority=None, last_modified='2025-01-12T15:00:58Z')
    """

    audience: tuple[Role, ...] = ()
    priority: float | None = None
    last_modified: str | None = None
    raw: JSON = field(default_factory=dict, repr=False, compare=False)


# ---- the server and its lists ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """The server's ``Implementation``: from ``initialize`` (legacy) or a result's ``_meta``.

    ``name`` and ``version`` are required by the schema, but identity is informational, so a
    server that omits them gets ``""`` rather than a failed connection. ``title``,
    ``description``, ``website_url`` (kept only when it is an ``http:`` or ``https:`` URL, so
    a link you show is never ``javascript:``) and ``icons`` are None or empty when absent or
    malformed, never an error.

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
    description: str | None = field(default=None, repr=False)
    website_url: str | None = field(default=None, repr=False)
    icons: tuple[Icon, ...] = field(default=(), repr=False)


@dataclass(frozen=True, slots=True)
class Tool:
    """One ``tools/list`` item. ``title`` is the top-level one, else ``annotations.title``.

    ``title``, ``icons``, ``annotations`` and ``meta`` (the item's ``_meta`` object) are
    metadata: a malformed one is None or empty, never a failed list (a ``tools/list`` is
    not lost to one bad icon). ``display_name`` follows the spec's precedence.

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
    annotations: ToolAnnotations | None = None
    raw: JSON = field(default_factory=dict, repr=False)
    icons: tuple[Icon, ...] = field(default=(), repr=False)
    meta: JSON | None = field(default=None, repr=False)

    @property
    def display_name(self) -> str:
        """What to show a person: ``title``, then ``annotations.title``, then ``name``
        (MCP spec 2026-07-28, schema, ``Tool.annotations``).

        >>> from conduit_mcp import Tool
        >>> Tool("add", None, {}).display_name, Tool("add", None, {}, title="Add").display_name
        ('add', 'Add')
        """
        hinted = self.annotations.title if self.annotations is not None else None
        return self.title or hinted or self.name


@dataclass(frozen=True, slots=True)
class Prompt:
    """One ``prompts/list`` item; ``arguments`` are the raw ``PromptArgument`` objects.

    ``title``, ``icons`` and ``meta`` (``_meta``) are None or empty when absent or malformed.

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
    title: str | None = field(default=None, repr=False)
    icons: tuple[Icon, ...] = field(default=(), repr=False)
    meta: JSON | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class Resource:
    """One ``resources/list`` item.

    ``title``, ``icons``, ``annotations``, ``size`` (the content's size in bytes, a
    non-negative integer) and ``meta`` (``_meta``) are None or empty when absent or malformed.

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
    title: str | None = field(default=None, repr=False)
    icons: tuple[Icon, ...] = field(default=(), repr=False)
    annotations: Annotations | None = field(default=None, repr=False)
    size: int | None = field(default=None, repr=False)
    meta: JSON | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class ResourceTemplate:
    """One ``resources/templates/list`` item (an RFC 6570 URI template).

    ``title``, ``icons``, ``annotations`` and ``meta`` (``_meta``) are None or empty when
    absent or malformed.

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
    title: str | None = field(default=None, repr=False)
    icons: tuple[Icon, ...] = field(default=(), repr=False)
    annotations: Annotations | None = field(default=None, repr=False)
    meta: JSON | None = field(default=None, repr=False)


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
