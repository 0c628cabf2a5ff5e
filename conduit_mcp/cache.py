"""The per-connection list cache: one writer, lock-free readers on any thread.

Only the connection writes it; any thread reads it directly, without a message or a lock
(docs/cache.md). Its shape:

* Each cached list is an immutable :class:`CachedList` (kind, version, items, fetch and expiry
  times, stale flag, owner), one per kind, carrying its point index ``by_key`` (key -> item),
  built once with the list and never changed.
* The lists, the version counter and the current credential identity live together in one
  immutable snapshot that the writer **replaces** (copy-on-write, then one attribute store,
  atomic under the GIL). A reader loads the snapshot once per call, so it sees one whole list
  and the point index of that same list, never a mix of versions, and never a private list of
  other credentials: every snapshot holds only lists visible under its own credential (``put``
  stores under the current one; ``set_credential`` drops every private list in the same swap
  that changes the identity).
* The connection's status and server info are not here: they are
  ``conduit_mcp.published.Published``'s ``status`` and ``server_info``, which readers read the
  same way.

No lock is taken and no actor is messaged on the read path, and the cache never calls user
code (no callbacks, no signals): the connection reads what ``put`` returns and emits the
telemetry itself. The rules (ttl, scope, owner, freshness) are pure functions in
``conduit_mcp.protocol.cache_rules``; times are monotonic seconds.

Writers: ``put``, ``mark_stale``, ``set_credential`` and ``close`` must be called from one
thread only, the connection actor's (they read-modify-write the snapshot; two writers could
lose an update). Readers: every other method and property, from any thread.

After ``close()`` (the connection is gone: docs/cache.md, "Dead tables") every read raises
``Error("unavailable", "cache_gone")``, never an AttributeError; writes are ignored.

>>> from conduit_mcp.types import Tool
>>> cache = Cache()
>>> put = cache.put("tools", [Tool("add", None, {}, raw={"name": "add"})],
...                 fetched_at=10.0, ttl_ms=5000, scope="public", max_ttl=None)
>>> put.stored, put.entry.version, cache.lookup("tools", "add").name
(True, 1, 'add')
>>> cache.fresh("tools", now=12.0) is put.entry, cache.fresh("tools", now=15.0)
(True, None)
>>> cache.close()
>>> cache.lookup("tools", "add")
Traceback (most recent call last):
...
conduit_mcp.errors.Error: unavailable (cache_gone): the connection's cache is gone (the client stopped)
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType
from typing import Any, Final, NoReturn

from .errors import Error
from .protocol import cache_rules as rules
from .protocol.cache_rules import KINDS, PUBLIC, UNIDENTIFIED, Kind, Owner, Private, Scope

# PUBLIC, Private and UNIDENTIFIED are re-exported for callers that build or compare owners.
__all__ = ["CURRENT", "PUBLIC", "UNIDENTIFIED", "Cache", "CachedList", "Private", "PutResult"]


@dataclass(frozen=True, slots=True)
class CachedList:
    """One cached list with its point index, never changed once published: marking it stale
    publishes a copy.

    ``version``: from the cache's counter; a later write has a larger one.
    ``items``: the typed items, in the server's order, every page concatenated.
    ``by_key``: the point index (key -> item of ``items``; read-only).
    ``fetched_at`` / ``expires_at``: monotonic seconds (``-inf``: never fresh).
    ``stale``: marked by a ``list_changed`` notification or a lost connection.
    ``owner``: ``PUBLIC`` or ``Private(credential)``.
    """

    kind: Kind
    version: int
    items: tuple[Any, ...]
    by_key: Mapping[str, Any]
    fetched_at: float
    expires_at: float
    stale: bool
    owner: Owner

    def fresh(self, credential: str | None, now: float) -> bool:
        """Whether this list may answer a listing at ``now`` under ``credential``."""
        return rules.servable(self.owner, self.expires_at, self.stale, credential, now)


@dataclass(frozen=True, slots=True)
class PutResult:
    """What :meth:`Cache.put` did.

    ``entry``: the list now cached, or None when it was not stored.
    ``changed``: the keys (tool names for ``"tools"``) whose definition differs from the
    previous list of the same owner: what the ``TOOL_DEFINITION_CHANGED`` notification and
    telemetry report.
    ``reason``: why nothing was stored, else None: ``"unidentified"`` (a private result
    under an auth callable without a ``credential_id``), ``"credential_changed"`` (a private
    result fetched with credentials the connection no longer sends) or ``"closed"``.
    """

    entry: CachedList | None
    changed: tuple[str, ...] = ()
    reason: str | None = None

    @property
    def stored(self) -> bool:
        return self.entry is not None


class _Current:
    __slots__ = ()

    def __repr__(self) -> str:
        return "CURRENT"


#: ``put``'s default ``credential``: the list was fetched with the current credentials.
CURRENT: Final = _Current()


class _Snapshot:
    """Everything a reader needs, published as one value (never changed once published).

    ``index`` maps every kind to the point index of its list (an empty dict when there is
    none), so the hot path is two dict lookups with no branch. Its dicts are the ones behind
    the lists' ``by_key`` views.
    """

    __slots__ = ("lists", "index", "credential", "version")

    def __init__(
        self,
        lists: dict[str, CachedList],
        index: dict[str, dict[str, Any]],
        credential: str | None,
        version: int,
    ) -> None:
        self.lists = lists
        self.index = index
        self.credential = credential
        self.version = version


_EMPTY: Final[dict[str, Any]] = {}
_NO_INDEX: Final[dict[str, dict[str, Any]]] = {kind: _EMPTY for kind in KINDS}


def _gone() -> Error:
    return Error("unavailable", "cache_gone", "the connection's cache is gone (the client stopped)")


def _raise_gone(_self: Any) -> NoReturn:
    raise _gone()


class _Gone:
    """The snapshot of a closed cache: reading any of a snapshot's fields raises
    ``cache_gone``, which keeps the live read path free of any "closed?" check. (Other
    attributes fail as usual, so introspection such as doctest's is not fooled.)
    """

    __slots__ = ()

    lists = index = credential = version = property(_raise_gone)


_GONE: Final = _Gone()


class Cache:
    """The list cache of one connection (see the module docstring for who calls what)."""

    # Slots: the hot path is one attribute load of _snapshot; slots make it a fixed offset.
    __slots__ = ("_snapshot", "_heard")

    def __init__(
        self, credential: str | None = None, heard: dict[str, float] | None = None
    ) -> None:
        # kind -> when the transport's reader last saw a list_changed for it (monotonic).
        # The reader answers a response straight to its caller, while the list_changed just
        # before it on the wire is still on its way to the connection (the writer): without
        # this, add_tool then list_all_tools could be served the old list.
        self._heard: dict[str, float] = heard if heard is not None else {}
        """An empty cache for a connection that sends ``credential`` (``Http.credential()``;
        None without credentials)."""
        self._snapshot: _Snapshot | _Gone = _Snapshot({}, _NO_INDEX, credential, 0)

    def __repr__(self) -> str:
        snap = self._snapshot
        if isinstance(snap, _Gone):
            return "<Cache closed>"
        return f"<Cache version={snap.version} lists={sorted(snap.lists)}>"

    # -- readers: any thread, no lock, no message ---------------------------------------

    def lookup(self, kind: Kind, key: str) -> Any:
        """The item ``key`` (a tool or prompt name, a resource URI, a template's
        ``uri_template``) of the cached ``kind`` list, or None; only visible lists, whatever
        their freshness.

        The hottest read: one snapshot load and two dict lookups, no lock.
        """
        try:
            return self._snapshot.index[kind].get(key)
        except (KeyError, TypeError):
            raise _bad_lookup(kind) from None

    def entry(self, kind: Kind) -> CachedList | None:
        """The cached ``kind`` list, fresh or not, if visible under the current credential."""
        snap = self._snapshot
        entry = _get(snap.lists, kind)
        # Every published list is visible under its snapshot's credential (put and
        # set_credential keep it so); checked anyway, the public case first as it is cheap.
        if entry is None or (entry.owner is not PUBLIC and not _visible(entry, snap)):
            return None
        return entry

    def fresh(self, kind: Kind, now: float) -> CachedList | None:
        """The cached ``kind`` list if it may answer a listing at ``now`` (monotonic
        seconds): visible, not stale, not expired. None means: ask the server."""
        snap = self._snapshot
        entry = _get(snap.lists, kind)
        if (
            entry is None
            or entry.stale
            or not now < entry.expires_at
            or (entry.owner is not PUBLIC and not _visible(entry, snap))
            or self._heard.get(kind, -math.inf) >= entry.fetched_at
        ):
            return None
        return entry

    def changed(self, kind: Kind) -> bool:
        """Whether the cached ``kind`` list may be missing a new item: there is none, it is
        marked stale, or a ``list_changed`` for it was heard (by the transport's reader,
        which may be ahead of the connection) since it was fetched. Expiry alone does not
        count: a list past its ``ttlMs`` was still the whole list when fetched."""
        entry = self.entry(kind)
        return entry is None or entry.stale or self._heard.get(kind, -math.inf) >= entry.fetched_at

    def items(self, kind: Kind) -> tuple[Any, ...] | None:
        """The cached ``kind`` items whatever their freshness, if visible; None if there is
        no such list. Never fetches (``cached_tools``)."""
        entry = self.entry(kind)
        return None if entry is None else entry.items

    @property
    def credential(self) -> str | None:
        """The identity of the credentials the connection sends now (never a secret)."""
        return self._snapshot.credential

    @property
    def version(self) -> int:
        """The version counter: the version of the latest stored list (0: none yet)."""
        return self._snapshot.version

    @property
    def closed(self) -> bool:
        """True once :meth:`close` ran (the only reader that does not raise then)."""
        return isinstance(self._snapshot, _Gone)

    # -- writers: the connection's thread only ------------------------------------------

    def put(
        self,
        kind: Kind,
        items: Iterable[Any],
        *,
        fetched_at: float,
        ttl_ms: int,
        scope: Scope,
        max_ttl: float | None,
        credential: str | _Current | None = CURRENT,
    ) -> PutResult:
        """Store a complete list (every page) fetched at ``fetched_at``, replacing the
        previous ``kind`` list in one swap. Writer thread only.

        ``ttl_ms`` and ``scope`` are ``cache_rules.ttl_ms(raws)`` / ``cache_rules.scope(raws)``
        of the pages' raw results; ``max_ttl`` is the client's ``max_cache_ttl`` (seconds,
        None: no clamp). ``credential`` is the identity the list was fetched with, if it may
        differ from the current one (a refresh that raced ``set_credential``): a private
        list fetched with other credentials is not stored.

        When a private list may not be stored, the previous ``kind`` list is dropped too: the
        server's newest answer supersedes it, and the client must ask again.
        """
        rules.check_kind(kind)
        snap = self._snapshot
        if isinstance(snap, _Gone):
            return PutResult(None, (), "closed")
        current = snap.credential
        owner = rules.owner(scope, current)
        reason = None
        if owner is None:
            reason = "unidentified"
        elif (
            type(owner) is Private
            and not isinstance(credential, _Current)
            and credential != current
        ):
            owner, reason = None, "credential_changed"
        previous = snap.lists.get(kind)
        if owner is None:
            if previous is None:
                return PutResult(None, (), reason)
            lists = dict(snap.lists)
            del lists[kind]
            index = dict(snap.index)
            index[kind] = _EMPTY
            self._snapshot = _Snapshot(lists, index, current, snap.version)
            return PutResult(None, (), reason)

        items = tuple(items)
        by_key = rules.index(kind, items)
        version = snap.version + 1
        entry = CachedList(
            kind,
            version,
            items,
            MappingProxyType(by_key),
            fetched_at,
            rules.expires_at(fetched_at, ttl_ms, max_ttl),
            False,
            owner,
        )
        changed: tuple[str, ...] = ()
        if previous is not None and previous.owner == owner:
            changed = tuple(rules.changed_definitions(previous.by_key, by_key))
        lists = dict(snap.lists)
        lists[kind] = entry
        index = dict(snap.index)
        index[kind] = by_key
        self._snapshot = _Snapshot(lists, index, current, version)
        return PutResult(entry, changed, None)

    def mark_stale(self, kind: Kind | None = None) -> tuple[Kind, ...]:
        """Mark the ``kind`` list stale (None: every list), in one swap; the items stay
        readable (``items``, ``lookup``) but ``fresh`` misses. For a ``list_changed``
        notification and a lost connection. Writer thread only.

        Returns the kinds that had a list (what a refresh could be wanted for).
        """
        snap = self._snapshot
        kinds = KINDS if kind is None else (rules.check_kind(kind),)
        if isinstance(snap, _Gone):
            return ()
        marked = tuple(k for k in kinds if k in snap.lists)
        if any(not snap.lists[k].stale for k in marked):
            lists = dict(snap.lists)
            for k in marked:
                if not lists[k].stale:
                    lists[k] = replace(lists[k], stale=True)
            # Same items, same point indexes: the index is shared with the old snapshot.
            self._snapshot = _Snapshot(lists, snap.index, snap.credential, snap.version)
        return marked

    def set_credential(self, identity: str | None) -> bool:
        """The connection now sends credentials of ``identity``; True if that changed it.

        On a change every private list is deleted at once, in the same swap that publishes
        the new identity (a reader never sees a private list under the wrong identity);
        public lists survive. Writer thread only.
        """
        snap = self._snapshot
        if isinstance(snap, _Gone) or identity == snap.credential:
            return False
        lists = {k: e for k, e in snap.lists.items() if e.owner == PUBLIC}
        index: dict[str, dict[str, Any]] = {
            k: snap.index[k] if k in lists else _EMPTY for k in KINDS
        }
        self._snapshot = _Snapshot(lists, index, identity, snap.version)
        return True

    def close(self) -> None:
        """The connection is gone: drop everything; every later read raises
        ``Error("unavailable", "cache_gone")``. Idempotent. Writer thread only."""
        self._snapshot = _GONE


def _get(lists: dict[str, CachedList], kind: Any) -> CachedList | None:
    try:
        entry = lists.get(kind)
    except TypeError:  # an unhashable kind
        entry = None
    if entry is None:
        rules.check_kind(kind)  # only a miss can be a bad kind
    return entry


def _visible(entry: CachedList, snap: _Snapshot | _Gone) -> bool:
    return rules.visible(entry.owner, snap.credential)


def _bad_lookup(kind: Any) -> Error:
    rules.check_kind(kind)  # raises the argument error for a bad kind
    return Error("argument", "key", "key must be a string")
