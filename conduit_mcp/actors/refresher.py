"""The refresher: fetches every page of a cached list off the connection and reports back.

The connection never fetches lists itself: a refresh runs elsewhere and reports back
(docs/connection.md, "Cache"). Here that is this actor (a lazy child of the client's
supervisor: a client whose lists never change never starts its thread). It sends each page request to
the connection like any caller, but never waits: each answer comes back as a message
(:class:`_PageAnswer`, through a :class:`TellReply`), and the next page is requested from
there. At the end it tells the connection :class:`Refreshed` (the items and the raw pages,
for the cache's ``ttlMs``/``cacheScope`` rules) or :class:`RefreshFailed`.

The connection decides when (its :class:`~conduit_mcp.protocol.coalesce.RefreshGate` keeps it
to two per burst and one per second per list); this actor only walks cursors, one list at a
time per kind, bounded by the client's request timeout per page, ``MAX_PAGES`` and the
client's ``max_list_bytes`` (the bounds of ``list_all_*``: docs/connection.md, "Requests"). If it
crashes mid-walk, it reports each running walk as :class:`RefreshFailed` on its way out.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import pykka

from ..config import DEFAULT_MAX_LIST_BYTES
from ..errors import Error
from ..otp.base import Link
from ..otp.pooled import PooledActor
from ..otp.registry import Registry
from ..otp.supervisor import ChildSpec, child_spec_for
from ..protocol.results import json_size, parse_page
from ..replies import Reply
from .events import Call

log = logging.getLogger("conduit_mcp.refresher")

#: A server whose cursors never end is cut here (the same bound as ``list_all_*``).
MAX_PAGES = 1000

_METHODS = {
    "tools": "tools/list",
    "prompts": "prompts/list",
    "resources": "resources/list",
    "resource_templates": "resources/templates/list",
    "skills": "skills/list",
}


@dataclass(slots=True, frozen=True)
class Refresh:
    """Connection -> refresher: fetch every page of ``kind``. ``credential`` is the identity
    the connection sent when it asked (the cache stores private lists under it)."""

    kind: str
    credential: str | None
    timeout: float
    max_bytes: int = DEFAULT_MAX_LIST_BYTES  # the client's max_list_bytes


@dataclass(slots=True, frozen=True)
class Refreshed:
    """Refresher -> connection: the whole list, fetched starting at ``fetched_at``."""

    kind: str
    items: tuple[Any, ...]
    pages: list[Any]
    fetched_at: float
    credential: str | None

    def __repr__(self) -> str:
        return f"<Refreshed {self.kind} items={len(self.items)}>"


@dataclass(slots=True, frozen=True)
class RefreshFailed:
    """Refresher -> connection: the refresh of ``kind`` failed with ``error``."""

    kind: str
    error: Error

    def __repr__(self) -> str:
        return f"<RefreshFailed {self.kind} {self.error.kind}/{self.error.reason}>"


@dataclass(slots=True, frozen=True)
class _PageAnswer:
    kind: str
    ok: bool
    value: Any


class TellReply(Reply):
    """A reply channel that tells an actor the answer, so the asker never blocks."""

    __slots__ = ("_ref", "_kind")

    def __init__(self, ref: pykka.ActorRef[Any], kind: str) -> None:
        super().__init__()
        self._ref = ref
        self._kind = kind

    def ok(self, result: Any) -> None:
        self._tell(True, result)

    def fail(self, error: Error) -> None:
        self._tell(False, error)

    def _tell(self, ok: bool, value: Any) -> None:
        if self.done:
            return
        self.done = True
        try:
            self._ref.tell(_PageAnswer(self._kind, ok, value))
        except pykka.ActorDeadError:
            pass  # the refresher is gone; its connection hears nothing and times nothing out


class _Walk:
    __slots__ = (
        "kind",
        "credential",
        "timeout",
        "started",
        "items",
        "pages",
        "cursor",
        "size",
        "max_bytes",
    )

    def __init__(self, req: Refresh) -> None:
        self.kind = req.kind
        self.credential = req.credential
        self.timeout = req.timeout
        self.size = 0
        self.max_bytes = req.max_bytes
        self.started = time.monotonic()
        self.items: list[Any] = []
        self.pages: list[Any] = []
        self.cursor: str | None = None


class Refresher(PooledActor):
    """See the module docstring. ``registry`` finds the connection at every send (a restarted
    connection is a new actor)."""

    def __init__(self, registry: Registry, *, link: Link | None = None) -> None:
        super().__init__(link=link)
        self._registry = registry
        self._walks: dict[str, _Walk] = {}

    def __repr__(self) -> str:
        return f"<Refresher walking={sorted(self._walks)}>"

    def receive(self, message: Any) -> Any:
        if type(message) is _PageAnswer:
            self._on_page(message)
            return None
        if type(message) is Refresh:
            if message.kind not in _METHODS:
                return None
            if message.kind in self._walks:
                return None  # one walk per kind; the connection's gate asks again later
            walk = _Walk(message)
            self._walks[message.kind] = walk
            self._request(walk)
            return None
        return super().receive(message)

    def terminate(self, reason: BaseException | None) -> None:
        # A crash mid-walk: report every running refresh failed, so the connection stops
        # waiting for it; the list stays stale and the next read fetches it.
        if reason is None:
            return
        for walk in list(self._walks.values()):
            error = Error("unavailable", "refresher_crashed", "the cache refresher crashed")
            self._done(walk, RefreshFailed(walk.kind, error))

    def _request(self, walk: _Walk) -> None:
        params = {"cursor": walk.cursor} if walk.cursor is not None else None
        call = Call(
            _METHODS[walk.kind],
            params,
            time.monotonic() + walk.timeout,
            TellReply(self.actor_ref, walk.kind),
        )
        if self._registry.tell("connection", call) is None:
            self._walks.pop(walk.kind, None)

    def _on_page(self, answer: _PageAnswer) -> None:
        walk = self._walks.get(answer.kind)
        if walk is None:
            return
        if not answer.ok:
            self._done(walk, RefreshFailed(walk.kind, answer.value))
            return
        try:
            page = parse_page(walk.kind, answer.value)  # type: ignore[arg-type]
        except Error as exc:
            self._done(walk, RefreshFailed(walk.kind, exc))
            return
        walk.size += json_size(page.raw)
        if walk.size > walk.max_bytes:
            error = Error(
                "protocol",
                "list_too_large",
                f"the {walk.kind} list is over max_list_bytes ({walk.max_bytes} bytes)",
            )
            self._done(walk, RefreshFailed(walk.kind, error))
            return
        walk.items.extend(page.items)
        walk.pages.append(page.raw)
        if page.next_cursor is None:
            self._done(
                walk,
                Refreshed(walk.kind, tuple(walk.items), walk.pages, walk.started, walk.credential),
            )
            return
        if len(walk.pages) >= MAX_PAGES:
            self._done(
                walk,
                RefreshFailed(
                    walk.kind,
                    Error(
                        "protocol",
                        "too_many_pages",
                        f"{walk.kind} list has more than {MAX_PAGES} pages",
                    ),
                ),
            )
            return
        walk.cursor = page.next_cursor
        self._request(walk)

    def _done(self, walk: _Walk, report: Any) -> None:
        self._walks.pop(walk.kind, None)
        self._registry.tell("connection", report)


def child_spec(registry: Registry) -> ChildSpec:
    """The lazy, permanent supervisor child ``refresher``."""
    return child_spec_for(
        Refresher, registry, id="refresher", restart="permanent", shutdown=2.0, lazy=True
    )
