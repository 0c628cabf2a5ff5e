"""The merged view: one immutable snapshot of every server's lists, built by a pure function.

The view actor is its only writer: it calls :func:`merge` and stores the result in one
attribute (atomic under the GIL), so a reader on any thread loads one whole snapshot, with
its point indexes of that same snapshot, and never takes a lock or sends a message.

Collisions are never a silent overwrite: when two servers' items get the same qualified name
(a ``qualify`` hook that maps two names to one, or two servers listing one resource URI),
the first server in config order keeps the name, the collision is recorded, and every item
stays reachable by the tuple form ``(server, name)``.

>>> from conduit_mcp.types import Tool
>>> t = lambda n: Tool(n, None, {})
>>> a = MemberLists("a", tools=(("x.read", t("read")),))
>>> b = MemberLists("b", tools=(("x.read", t("read")), ("b.write", t("write"))))
>>> v = merge(["a", "b"], {"a": a, "b": b}, {"a", "b"}, 1)
>>> [tool.name for tool in v.tools], v.tool_routes["x.read"]
(['x.read', 'b.write'], ('a', 'read'))
>>> v.collisions[0]
Collision(kind='tools', name='x.read', servers=(('a', 'read'), ('b', 'read')))
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Final, Literal

from ..types import Prompt, Resource, ResourceTemplate, Tool

__all__ = ["EMPTY", "Collision", "MemberLists", "View", "merge"]

ViewKind = Literal["tools", "prompts", "resources", "resource_templates"]

_NONE: Final[Mapping[str, Any]] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class MemberLists:
    """One server's lists as the view holds them: tools and prompts with their qualified
    names (computed off the view actor: a naming hook is user code), resources and
    templates as the server listed them. ``misnamed``: names whose qualified form was
    refused (the name pattern, or ``unqualify`` not undoing ``qualify``)."""

    server: str
    tools: tuple[tuple[str, Tool], ...] = ()
    prompts: tuple[tuple[str, Prompt], ...] = ()
    resources: tuple[Resource, ...] = ()
    resource_templates: tuple[ResourceTemplate, ...] = ()
    misnamed: tuple[tuple[str, str], ...] = ()
    # The items under their qualified names, made once here (in the fetch's worker thread)
    # and not in every merge: a merge walks every member's lists, and renaming each item
    # again there made starting a hub of N servers cost N merges of N renames each
    # (2,500 HTTP servers: 24 s to ready, most of it dataclasses.replace in the view actor).
    renamed_tools: tuple[Tool, ...] = field(init=False, repr=False, compare=False)
    renamed_prompts: tuple[Prompt, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for pick in ("tools", "prompts"):
            renamed = tuple(replace(item, name=q) for q, item in getattr(self, pick))
            object.__setattr__(self, f"renamed_{pick}", renamed)


@dataclass(frozen=True, slots=True)
class Collision:
    """Two or more servers' items under one qualified name (or URI): ``servers`` lists each
    ``(server, name)``, the first of which keeps the name in the view (``hub.collisions()``;
    the tuple form ``hub.call_tool((server, name), ...)`` reaches each of them).

    >>> c = Collision("tool", "a_add", (("a", "add"), ("a_", "add")))
    >>> c.name, c.servers[0]
    ('a_add', ('a', 'add'))
    """

    kind: ViewKind
    name: str
    servers: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True, repr=False)
class View:
    """One snapshot. Every mapping is read-only and every sequence a tuple."""

    version: int
    tools: tuple[Tool, ...]
    tool_index: Mapping[str, Tool]
    tool_routes: Mapping[str, tuple[str, str]]
    prompts: tuple[Prompt, ...]
    prompt_index: Mapping[str, Prompt]
    prompt_routes: Mapping[str, tuple[str, str]]
    resources: tuple[Resource, ...]
    resource_routes: Mapping[str, str]
    resource_templates: tuple[ResourceTemplate, ...]
    template_routes: Mapping[str, str]
    listed: frozenset[str]
    """The servers whose lists are in this snapshot."""
    ready: frozenset[str]
    """The servers that are ready with their lists in this snapshot (``await_ready``)."""
    collisions: tuple[Collision, ...]
    misnamed: tuple[tuple[str, str], ...]
    lists: Mapping[str, MemberLists] = field(default_factory=lambda: _NONE)
    """Every member's lists the view actor held (shown or not): a restarted view actor
    starts from them, so the view never empties while it rebuilds."""

    def __repr__(self) -> str:
        return (
            f"<View v{self.version} servers={sorted(self.listed)} tools={len(self.tools)} "
            f"prompts={len(self.prompts)} resources={len(self.resources)}>"
        )


EMPTY: Final = View(
    0, (), _NONE, _NONE, (), _NONE, _NONE, (), _NONE, (), _NONE, frozenset(), frozenset(), (), ()
)


def _named(
    kind: ViewKind,
    order: Sequence[str],
    lists: Mapping[str, MemberLists],
    pick: str,
    collisions: list[Collision],
) -> tuple[tuple[Any, ...], Mapping[str, Any], Mapping[str, tuple[str, str]]]:
    items: list[Any] = []
    index: dict[str, Any] = {}
    routes: dict[str, tuple[str, str]] = {}
    clashes: dict[str, list[tuple[str, str]]] = {}
    for server in order:
        member = lists[server]
        for (qualified, item), renamed in zip(
            getattr(member, pick), getattr(member, f"renamed_{pick}"), strict=True
        ):
            if qualified in routes:
                clashes.setdefault(qualified, [routes[qualified]]).append((server, item.name))
                continue
            items.append(renamed)
            index[qualified] = renamed
            routes[qualified] = (server, item.name)
    collisions.extend(Collision(kind, q, tuple(s)) for q, s in clashes.items())
    return tuple(items), MappingProxyType(index), MappingProxyType(routes)


def _by_uri(
    kind: ViewKind,
    order: Sequence[str],
    lists: Mapping[str, MemberLists],
    pick: str,
    key: str,
    collisions: list[Collision],
) -> tuple[tuple[Any, ...], Mapping[str, str]]:
    items: list[Any] = []
    routes: dict[str, str] = {}
    clashes: dict[str, list[tuple[str, str]]] = {}
    for server in order:
        for item in getattr(lists[server], pick):
            uri = getattr(item, key)
            if uri in routes:
                clashes.setdefault(uri, [(routes[uri], uri)]).append((server, uri))
                continue
            items.append(item)
            routes[uri] = server
    collisions.extend(Collision(kind, u, tuple(s)) for u, s in clashes.items())
    return tuple(items), MappingProxyType(routes)


def merge(
    order: Iterable[str],
    lists: Mapping[str, MemberLists],
    shown: Collection[str],
    version: int,
    ready: Collection[str] = (),
) -> View:
    """The snapshot of the servers in ``shown`` (those with lists), in config ``order``;
    ``ready``: the servers among them that are ready."""
    servers = [s for s in order if s in shown and s in lists]
    collisions: list[Collision] = []
    tools, tool_index, tool_routes = _named("tools", servers, lists, "tools", collisions)
    prompts, prompt_index, prompt_routes = _named("prompts", servers, lists, "prompts", collisions)
    resources, resource_routes = _by_uri(
        "resources", servers, lists, "resources", "uri", collisions
    )
    templates, template_routes = _by_uri(
        "resource_templates", servers, lists, "resource_templates", "uri_template", collisions
    )
    misnamed = tuple(m for s in servers for m in lists[s].misnamed)
    return View(
        version,
        tools,
        tool_index,
        tool_routes,
        prompts,
        prompt_index,
        prompt_routes,
        resources,
        resource_routes,
        templates,
        template_routes,
        frozenset(servers),
        frozenset(s for s in servers if s in ready),
        tuple(collisions),
        misnamed,
        MappingProxyType(dict(lists)),
    )
