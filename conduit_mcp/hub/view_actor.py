"""The view actor: the single writer of the Hub's merged snapshot (``Board.view``).

It hears three things about each member and nothing else: its status changed (a watcher on
the member's published status tells it), its client refreshed a list after a
``list_changed`` (a watcher on the member's published refreshes: a notification
subscription would start a notifier thread per member, 5,000 idle threads for a hub of
5,000 servers), and a fetch finished.
Fetching a member's lists runs in a short-lived worker thread, never here: the pages are
requests that wait, and the naming hooks (``qualify``/``unqualify``) are user code. One fetch
per member at a time; a change heard meanwhile is fetched again once it finishes.

If it crashes, the hub supervisor starts a new one, which attaches to every member again and
rebuilds the snapshot from their caches (the old snapshot stays readable meanwhile).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import Any

import pykka

from ..errors import Error
from ..otp import timers
from ..otp.base import Link, SafeActor, safe_tell
from ..status import Status
from .board import Board, Member
from .names import Naming
from .view import MemberLists, merge

__all__ = ["Attach", "Detach", "ViewActor"]

log = logging.getLogger("conduit_mcp.hub")


@dataclass(frozen=True, slots=True)
class Attach:
    """Supervisor -> view: ``member`` (a new incarnation) is running."""

    member: Member


@dataclass(frozen=True, slots=True)
class Detach:
    """Supervisor -> view: the server ``name`` is gone (removed, or down awaiting a restart)."""

    name: str
    gen: int


@dataclass(frozen=True, slots=True)
class _StatusChanged:
    name: str
    gen: int
    status: Status


@dataclass(frozen=True, slots=True)
class _ListRefreshed:
    name: str
    gen: int


@dataclass(frozen=True, slots=True)
class _Fetched:
    name: str
    gen: int
    lists: MemberLists | None
    error: Error | None


@dataclass(frozen=True, slots=True)
class _Refetch:
    name: str
    gen: int


#: Bounds on how long a change may wait for the snapshot while messages keep coming
#: (:meth:`ViewActor._publish`).
HOLD_MIN = 0.02
HOLD_MAX = 0.25

#: Fetches running at once (each in a thread of its own: it waits for the member's pages
#: and runs the naming hooks); the others wait their turn in order. A hub of 5,000 servers
#: that all became ready together started 5,000 threads at once (a load average of 100 on
#: 2 cores) where a few dozen keep the members' servers as busy. A fetch is bounded by
#: ``list_timeout``, so a hung server holds a turn for that long at most.
MAX_FETCHES = 64

#: A failed fetch of a ready member is tried again after 0.5, 1, 2, 4 and 8 s, then left
#: until the member's next status change or list_changed.
MAX_FETCH_RETRIES = 5


@dataclass(frozen=True, slots=True)
class Crash:
    """For the tests that kill the view actor: it raises on this."""


class _Watch:
    """One member's status watcher: tells whichever view actor is current."""

    __slots__ = ("board", "name", "gen")

    def __init__(self, board: Board, name: str, gen: int) -> None:
        self.board, self.name, self.gen = board, name, gen

    def __call__(self, status: Status) -> None:
        ref = self.board.view_ref
        if ref is not None:
            safe_tell(ref, _StatusChanged(self.name, self.gen, status))


class _RefreshWatch:
    """One member's refresh watcher: tells whichever view actor is current."""

    __slots__ = ("board", "name", "gen")

    def __init__(self, board: Board, name: str, gen: int) -> None:
        self.board, self.name, self.gen = board, name, gen

    def __call__(self, kind: str) -> None:
        ref = self.board.view_ref
        if ref is not None:
            safe_tell(ref, _ListRefreshed(self.name, self.gen))


def _fetch(member: Member, naming: Naming, timeout: float, refetch: bool) -> MemberLists:
    """One member's lists, named (runs in a worker thread: it waits, and calls hooks)."""
    client = member.client
    assert client is not None  # only attached members are fetched
    caps = client.server_capabilities() or {}
    kinds: list[tuple[str, Callable[..., tuple[Any, ...]], Callable[[], Any]]] = []
    if "tools" in caps:
        kinds.append(("tools", client.list_all_tools, client.cached_tools))
    if "prompts" in caps:
        kinds.append(("prompts", client.list_all_prompts, client.cached_prompts))
    if "resources" in caps:
        kinds.append(("resources", client.list_all_resources, client.cached_resources))
        kinds.append(
            (
                "resource_templates",
                client.list_all_resource_templates,
                client.cached_resource_templates,
            )
        )
    got: dict[str, tuple[Any, ...]] = {}
    for kind, fetch, cached in kinds:
        items = None
        if not refetch:
            try:
                items = cached()
            except Error:
                items = None
        if items is None:
            try:
                items = fetch(timeout=timeout)
            except Error as exc:
                if exc.kind != "server":
                    raise
                items = ()  # the server declared the list but refuses it: nothing to show
        got[kind] = items
    misnamed: list[tuple[str, str]] = []

    def named(items: tuple[Any, ...]) -> tuple[tuple[str, Any], ...]:
        out = []
        for item in items:
            try:
                qualified = naming.qualify(member.name, item.name)
                ok = (
                    isinstance(qualified, str)
                    and naming.unqualify(qualified) == (member.name, item.name)
                    and naming.acceptable(qualified)
                )
            except Exception as exc:  # a naming hook failed: the item is reachable by tuple
                log.warning("hub: qualify(%r, ...) raised %s", member.name, type(exc).__name__)
                ok = False
            if not ok:
                misnamed.append((member.name, item.name))
                continue
            out.append((qualified, item))
        return tuple(out)

    return MemberLists(
        member.name,
        tools=named(got.get("tools", ())),
        prompts=named(got.get("prompts", ())),
        resources=got.get("resources", ()),
        resource_templates=got.get("resource_templates", ()),
        misnamed=tuple(misnamed),
    )


class ViewActor(SafeActor):
    """See the module docstring."""

    def __init__(self, board: Board, *, link: Link | None = None) -> None:
        super().__init__(link=link)
        self._board = board
        self._members: dict[str, Member] = {}
        self._status: dict[str, Status] = {}
        self._lists: dict[str, MemberLists] = {}
        # name -> (the gen being fetched, fetch again when it ends); a fetch of an older
        # incarnation does not hold up the new one's
        self._fetching: dict[str, tuple[int, bool]] = {}
        self._failures: dict[str, int] = {}  # name -> fetches failed in a row
        # Fetch threads running, and the fetches waiting for one (MAX_FETCHES).
        self._running = 0
        self._waiting: deque[tuple[str, Member, bool]] = deque()
        self._timers: list[timers.TimerHandle] = []
        self._version = board.view.version
        self._warned: set[tuple[Any, ...]] = set()  # collisions already logged
        # A change waiting for the next snapshot (see _publish), and when it is due.
        self._dirty = False
        self._publish_by = 0.0
        self._merge_seconds = 0.0  # what the last merge took

    def init(self) -> None:
        # A restarted view actor starts from the last snapshot's lists (the same members'
        # lists; each is fetched again from its cache below), so the view never empties.
        self._lists = {
            name: lists
            for name, lists in self._board.view.lists.items()
            if name in self._board.members
        }
        self._board.view_ref = self.actor_ref
        for member in self._board.members.values():
            if member.client is not None:
                self._attach(member, rebuild=True)
        self._publish_now()

    def terminate(self, reason: BaseException | None) -> None:
        for handle in self._timers:
            handle.cancel()
        if self._board.view_ref is self.actor_ref:
            self._board.view_ref = None

    def receive(self, message: Any) -> Any:
        try:
            return self._handle(message)
        finally:
            if self._dirty and (self.actor_inbox.empty() or time.monotonic() >= self._publish_by):
                self._publish_now()

    def _handle(self, message: Any) -> Any:
        if isinstance(message, _StatusChanged):
            self._on_status(message)
        elif isinstance(message, _ListRefreshed):
            member = self._members.get(message.name)
            if (
                member is not None
                and member.gen == message.gen
                and self._status_ready(message.name)
            ):
                self._start_fetch(message.name, refetch=False)
        elif isinstance(message, _Fetched):
            self._on_fetched(message)
        elif isinstance(message, Attach):
            self._attach(message.member, rebuild=False)
            self._publish()
        elif isinstance(message, Detach):
            member = self._members.get(message.name)
            if member is not None and member.gen <= message.gen:
                self._forget(message.name)
                self._publish()
        elif isinstance(message, _Refetch):
            member = self._members.get(message.name)
            if (
                member is not None
                and member.gen == message.gen
                and self._status_ready(message.name)
            ):
                self._start_fetch(message.name, refetch=True)
        elif isinstance(message, Crash):
            raise RuntimeError("view actor crash (asked for by a test)")
        else:
            return super().receive(message)
        return None

    # -- members ------------------------------------------------------------------------------

    def _attach(self, member: Member, *, rebuild: bool) -> None:
        name = member.name
        old = self._members.get(name)
        if old is not None and old.gen != member.gen:
            self._lists.pop(name, None)
            self._failures.pop(name, None)
        self._members[name] = member
        runtime, client = member.runtime, member.client
        assert runtime is not None and client is not None  # only running members attach
        watch = _Watch(self._board, name, member.gen)
        shared = runtime.shared
        # Replace any watcher of an earlier view actor (they all tell board.view_ref anyway).
        kept = tuple(w for w in shared.watchers if not isinstance(w, _Watch))
        shared.watchers = (*kept, watch)
        others = tuple(w for w in shared.refreshed if not isinstance(w, _RefreshWatch))
        shared.refreshed = (*others, _RefreshWatch(self._board, name, member.gen))
        status = client.status()
        self._status[name] = status
        if status.state == "ready":
            self._start_fetch(name, refetch=not rebuild)

    def _forget(self, name: str) -> None:
        member = self._members.pop(name, None)
        self._status.pop(name, None)
        self._lists.pop(name, None)
        self._fetching.pop(name, None)
        runtime = member.runtime if member is not None else None
        if runtime is not None:
            shared = runtime.shared
            shared.refreshed = tuple(
                w for w in shared.refreshed if not isinstance(w, _RefreshWatch)
            )

    def _status_ready(self, name: str) -> bool:
        status = self._status.get(name)
        return status is not None and status.state == "ready"

    def _on_status(self, msg: _StatusChanged) -> None:
        member = self._members.get(msg.name)
        if member is None or member.gen != msg.gen:
            return
        was_ready = self._status_ready(msg.name)
        self._status[msg.name] = msg.status
        now_ready = msg.status.state == "ready"
        if now_ready and not was_ready:
            self._failures.pop(msg.name, None)
            self._start_fetch(msg.name, refetch=True)
        elif was_ready and not now_ready:
            self._publish()

    # -- fetching -----------------------------------------------------------------------------

    def _start_fetch(self, name: str, *, refetch: bool) -> None:
        member = self._members[name]
        running = self._fetching.get(name)
        if running is not None and running[0] == member.gen:
            self._fetching[name] = (member.gen, True)
            return
        self._fetching[name] = (member.gen, False)
        if self._running >= MAX_FETCHES:
            self._waiting.append((name, member, refetch))
            return
        self._launch(name, member, refetch)

    def _launch(self, name: str, member: Member, refetch: bool) -> None:
        board, me = self._board, self.actor_ref
        self._running += 1

        def job() -> None:
            try:
                lists = _fetch(member, board.naming, board.list_timeout, refetch)
                msg = _Fetched(name, member.gen, lists, None)
            except Error as exc:
                msg = _Fetched(name, member.gen, None, exc)
            except Exception as exc:  # never lose the "fetch ended" message
                msg = _Fetched(name, member.gen, None, Error("protocol", "bad_result", repr(exc)))
            safe_tell(me, msg)

        threading.Thread(target=job, name=f"conduit-hub-fetch-{name}", daemon=True).start()

    def _next_fetches(self) -> None:
        while self._waiting and self._running < MAX_FETCHES:
            name, member, refetch = self._waiting.popleft()
            running = self._fetching.get(name)
            current = self._members.get(name)
            stale = current is None or current.gen != member.gen
            if running is None or stale or running[0] != member.gen:
                continue  # forgotten or replaced while it waited (the new one has its own)
            self._launch(name, member, refetch)

    def _on_fetched(self, msg: _Fetched) -> None:
        # Every _Fetched is one of this actor's jobs (an earlier view actor's went to its
        # own, dead, ref): one fewer running, and the next waiting one starts.
        self._running -= 1
        self._next_fetches()
        running = self._fetching.get(msg.name)
        if running is not None and running[0] == msg.gen:
            del self._fetching[msg.name]
        member = self._members.get(msg.name)
        if member is None or member.gen != msg.gen:
            return
        again = running is not None and running[0] == msg.gen and running[1]
        if msg.lists is not None:
            self._failures.pop(msg.name, None)
            self._lists[msg.name] = msg.lists
            self._publish()
        else:
            assert msg.error is not None
            failures = self._failures[msg.name] = self._failures.get(msg.name, 0) + 1
            log.info(
                "hub: server %r: listing failed (%d in a row): %s/%s",
                msg.name,
                failures,
                msg.error.kind,
                msg.error.reason,
            )
            if not again and failures <= MAX_FETCH_RETRIES:
                now = time.monotonic()
                self._timers = [t for t in self._timers if not t.cancelled and t.when > now]
                delay = 0.5 * 2 ** (failures - 1)
                self._timers.append(
                    timers.schedule(
                        time.monotonic() + delay,
                        partial(_tell, self.actor_ref, _Refetch(msg.name, msg.gen)),
                    )
                )
        if again and self._status_ready(msg.name):
            self._start_fetch(msg.name, refetch=False)

    # -- the snapshot -------------------------------------------------------------------------

    def _publish(self) -> None:
        """A change for the snapshot: merged when this burst of messages ends (the mailbox
        is empty), or at most :data:`HOLD_MIN` (or four merges' time, up to
        :data:`HOLD_MAX`) after the first change held. A merge walks every member's lists, so
        one per message made a hub of N servers starting (N attaches, N fetches) cost N²:
        2,500 HTTP servers took 24 s to ready. A lone change is still published at once."""
        if not self._dirty:
            self._dirty = True
            hold = min(HOLD_MAX, max(HOLD_MIN, 4 * self._merge_seconds))
            self._publish_by = time.monotonic() + hold

    def _publish_now(self) -> None:
        self._dirty = False
        started = time.monotonic()
        board = self._board
        ready = {n for n in self._lists if self._status_ready(n)}
        shown = ready if board.on_server_down == "hide" else set(self._lists)
        self._version += 1
        view = merge(board.order, self._lists, shown, self._version, ready)
        for collision in view.collisions:
            key = (collision.kind, collision.name, collision.servers)
            if key not in self._warned:
                self._warned.add(key)
                log.warning(
                    "hub %s: name collision: %s %r is listed by %s; %r keeps it, reach the "
                    "others as (server, name)",
                    board.name,
                    collision.kind,
                    collision.name,
                    ", ".join(s for s, _ in collision.servers),
                    collision.servers[0][0],
                )
        board.publish_view(view)
        self._merge_seconds = time.monotonic() - started


def _tell(ref: pykka.ActorRef[Any], message: Any) -> None:
    safe_tell(ref, message)
