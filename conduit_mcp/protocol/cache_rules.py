"""The rules of the per-connection list cache (``docs/cache.md``), as pure functions.

No threads, no I/O, no clock reads: every time is a parameter, in **monotonic seconds**
(``time.monotonic()``), and the server's hints are read from the raw page results
(``Page.raw``, where ``parse_page`` keeps ``ttlMs`` and ``cacheScope``). The store that
applies them is ``conduit_mcp.cache``.

Freshness (``docs/cache.md``, "Freshness"; MCP spec 2026-07-28, Server utilities, "Caching")
    A list's ttl is the minimum ``ttlMs`` over its pages; a missing, negative or
    non-integer value on any page makes it 0, and a ttl of 0 is never fresh. "Integer"
    means a JSON integer, i.e. a Python ``int`` that is not a ``bool``: a float is refused
    even when integral (``5.0``); ``docs/porting.md`` says why that costs nothing.

Private results (``docs/cache.md``, "Private results")
    A list is public only when every page said ``cacheScope: "public"``; anything else
    (absent on every legacy result, a typo, mixed pages) is private. A private list is
    stored with the identity of the credentials it was fetched with (``Private(credential)``,
    where ``None`` means "no credentials") and is visible only while the connection still
    sends those. Under ``UNIDENTIFIED`` (an auth callable without a ``credential_id``, which
    may return anyone's token) a private list is never stored.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Final, Literal

from ..errors import Error

__all__ = [
    "KINDS",
    "PUBLIC",
    "UNIDENTIFIED",
    "Kind",
    "Owner",
    "Private",
    "Scope",
    "changed_definitions",
    "check_kind",
    "expires_at",
    "index",
    "key_of",
    "owner",
    "scope",
    "servable",
    "ttl_ms",
    "visible",
]

# The identity of an auth callable that declared none: private results are never stored.
# (The HTTP transport's spec names it for such a callable; the rule lives here.)
UNIDENTIFIED: Final = "unidentified"

Kind = Literal["tools", "prompts", "resources", "resource_templates", "skills"]
Scope = Literal["public", "private"]

#: The cached list kinds, in the order the cache reports them.
KINDS: Final[tuple[Kind, ...]] = (
    "tools",
    "prompts",
    "resources",
    "resource_templates",
    "skills",
)

#: The owner of a public list: served whatever credentials the connection sends.
PUBLIC: Final = "public"


@dataclass(frozen=True, slots=True)
class Private:
    """The owner of a private list: the identity of the credentials it was fetched with.

    ``credential`` is ``Http.credential()``'s value (a SHA-256 hex digest, or ``None``
    without credentials), never a secret.
    """

    credential: str | None


#: ``PUBLIC`` or ``Private(credential)``.
Owner = str | Private

# The item field each kind is keyed by: a tool or prompt by name, a resource by URI, a
# template by URI template (``docs/cache.md``, "From rows to a snapshot").
_KEYS: Final[dict[str, Callable[[Any], str]]] = {
    "tools": attrgetter("name"),
    "prompts": attrgetter("name"),
    "resources": attrgetter("uri"),
    "resource_templates": attrgetter("uri_template"),
    "skills": attrgetter("uri"),  # a skill's identity is its uri, never its name
}


def check_kind(kind: Any) -> Kind:
    """``kind`` itself if it is one of :data:`KINDS`, else ``Error("argument", "kind")``.

    >>> check_kind("tools")
    'tools'
    >>> check_kind("tool")
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: argument (kind): kind must be one of tools, prompts, resources, resource_templates, skills
    """
    if type(kind) is str and kind in _KEYS:
        return kind  # type: ignore[return-value]
    raise Error("argument", "kind", f"kind must be one of {', '.join(KINDS)}")


def key_of(kind: Kind) -> Callable[[Any], str]:
    """The function giving an item's key: tools and prompts by ``name``, resources and
    skills by ``uri``, resource templates by ``uri_template``."""
    return _KEYS[check_kind(kind)]


def index(kind: Kind, items: Sequence[Any]) -> dict[str, Any]:
    """The point index of one list: key -> item.

    If a server lists one key twice, the first item wins (the one a reader of the list sees
    first), so a lookup and a scan of the list agree.
    """
    key = key_of(kind)
    by_key: dict[str, Any] = {}
    for item in items:
        by_key.setdefault(key(item), item)
    return by_key


def _ttl(page: Mapping[str, Any]) -> int:
    value = page.get("ttlMs")
    # type() rather than isinstance(): bool is an int subclass, and True is not 1 ms.
    if type(value) is int and value > 0:
        return value
    return 0


def ttl_ms(pages: Sequence[Mapping[str, Any]]) -> int:
    """The ttl of a list in ms: the minimum ``ttlMs`` over its raw page results.

    A missing, negative or non-integer value (a float, even ``5.0``; a bool; a string) on
    any page counts as 0, and so does a list of no pages.

    >>> ttl_ms([{"ttlMs": 3000}, {"ttlMs": 1000}])
    1000
    >>> ttl_ms([{"ttlMs": 3000}, {}])
    0
    >>> ttl_ms([{"ttlMs": 5.0}])
    0
    """
    if not pages:
        return 0
    return min(_ttl(page) for page in pages)


def scope(pages: Sequence[Mapping[str, Any]]) -> Scope:
    """``"public"`` only when every page said ``cacheScope: "public"``, else ``"private"``.

    >>> scope([{"cacheScope": "public"}, {"cacheScope": "public"}])
    'public'
    >>> scope([{"cacheScope": "public"}, {}])
    'private'
    """
    if pages and all(page.get("cacheScope") == "public" for page in pages):
        return "public"
    return "private"


def expires_at(fetched_at: float, ttl_ms: int, max_ttl: float | None) -> float:
    """When a list fetched at ``fetched_at`` (monotonic seconds) stops being fresh.

    ``fetched_at + ttl``, the ttl clamped to ``max_ttl`` seconds (the client's
    ``max_cache_ttl``) when given. A ttl of 0 (or clamped to 0) gives ``-inf`` rather than
    ``fetched_at``: such a list is never fresh, even for a reader whose ``now`` was read
    just before the list was written (so is earlier than ``fetched_at``).

    >>> expires_at(100.0, 1500, None)
    101.5
    >>> expires_at(100.0, 60_000, 10.0)
    110.0
    >>> expires_at(100.0, 0, None)
    -inf
    """
    ttl = ttl_ms / 1000 if type(ttl_ms) is int and ttl_ms > 0 else 0.0
    if max_ttl is not None:
        ttl = min(ttl, max(max_ttl, 0.0))
    if ttl <= 0:
        return -math.inf
    return fetched_at + ttl


def owner(scope: Scope, credential: str | None) -> Owner | None:
    """Who a list fetched with ``credential`` belongs to; None: it must not be stored.

    >>> owner("public", "abc")
    'public'
    >>> owner("private", "abc")
    Private(credential='abc')
    >>> owner("private", UNIDENTIFIED) is None
    True
    """
    if scope == "public":
        return PUBLIC
    if credential == UNIDENTIFIED:
        return None
    return Private(credential)


def visible(entry_owner: Owner, current_credential: str | None) -> bool:
    """Whether a list may be served while the connection sends ``current_credential``.

    Public lists always; a private one only under the identity it was fetched with (and
    never under ``UNIDENTIFIED``, which identifies nobody).
    """
    if entry_owner == PUBLIC:
        return True
    return (
        type(entry_owner) is Private
        and current_credential != UNIDENTIFIED
        and entry_owner.credential == current_credential
    )


def servable(
    entry_owner: Owner,
    entry_expires_at: float,
    entry_stale: bool,
    current_credential: str | None,
    now: float,
) -> bool:
    """Whether a cached list may answer a listing instead of the server: visible, not
    marked stale, and ``now`` (monotonic seconds) before it expires."""
    return not entry_stale and now < entry_expires_at and visible(entry_owner, current_credential)


def changed_definitions(old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
    """The keys present in both indexes whose item's raw JSON differs, in ``new``'s order.

    Added and removed items are not "changed"; the whole raw object is compared (a changed
    description, schema, annotation or ``_meta`` counts).
    """
    changed = []
    for key, item in new.items():
        before = old.get(key)
        if before is not None and before.raw != item.raw:
            changed.append(key)
    return changed
