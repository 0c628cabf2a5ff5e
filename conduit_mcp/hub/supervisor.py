"""The hub supervisor: one client tree per server and the view actor, each restarted on exit.

OTP's vocabulary, with the hub's own rule for members: a member whose client gave up
(``on_give_up="stop"``, the hub's default for members) is started again after a backoff
(full jitter), counting restarts; more than ``max_restarts`` within ``max_seconds`` leaves
that member ``closed``/``max_restarts`` (the other members and the view go on). The view
actor is restarted at once; the old snapshot stays readable while it is down.

It never runs user code and never blocks on a server: starting a client tree takes
milliseconds (threads; connecting runs in the member's connection actor), and stopping one
(``remove_server``, ``reload``) is done by the caller's thread after the supervisor has let
the member go.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import pykka

from .. import tree
from ..backoff import full_jitter
from ..client import Client
from ..otp import timers
from ..otp.base import Link, SafeActor, safe_tell
from ..status import Status
from . import levels
from .board import Board, Member
from .view_actor import Attach, Detach, ViewActor

__all__ = ["AddMember", "HubSupervisor", "RemoveMember"]

log = logging.getLogger("conduit_mcp.hub")


@dataclass(frozen=True, slots=True)
class AddMember:
    """Ask: start ``member`` (a new server, or a replacement under the same name). The reply
    is the replaced member (None if new), for the caller to stop."""

    member: Member


@dataclass(frozen=True, slots=True)
class RemoveMember:
    """Ask: let the server ``name`` go; the reply is its member (None if unknown), for the
    caller to stop."""

    name: str


@dataclass(frozen=True, slots=True)
class _MemberExited:
    name: str
    gen: int
    reason: BaseException | None


@dataclass(frozen=True, slots=True)
class _Restart:
    name: str
    gen: int


@dataclass(frozen=True, slots=True)
class _ViewExited:
    urn: str
    reason: BaseException | None


class HubSupervisor(SafeActor):
    """See the module docstring."""

    def __init__(
        self,
        board: Board,
        members: list[Member],
        *,
        max_restarts: int,
        max_seconds: float,
        restart_base: float,
        restart_cap: float,
    ) -> None:
        super().__init__()
        self._board = board
        self._initial = members
        self._members: dict[str, Member] = {}
        self._order: list[str] = []
        self._restarts: dict[str, deque[float]] = {}
        self._timers: dict[str, timers.TimerHandle] = {}
        self._max_restarts = max_restarts
        self._max_seconds = max_seconds
        self._restart_base = restart_base
        self._restart_cap = restart_cap
        self._view: pykka.ActorRef[Any] | None = None
        self._view_urn: str | None = None
        self._gen = 0

    # -- lifecycle ----------------------------------------------------------------------------

    def init(self) -> None:
        try:
            self._start_view()
            # The whole order first (the view orders servers by it), then one publish of the
            # members at the end: one per member copied the whole table each time, N² for
            # a config of N servers.
            self._order.extend(member.name for member in self._initial)
            self._publish()
            for member in self._initial:
                self._start_member(member, publish=False)
            self._publish()
        except BaseException:
            # No terminate after a failed init: what started is published for Hub.start
            # to stop.
            self._publish()
            raise

    def terminate(self, reason: BaseException | None) -> None:
        for handle in self._timers.values():
            handle.cancel()
        self._timers.clear()
        view, self._view, self._view_urn = self._view, None, None
        if view is not None:
            try:
                view.stop(block=True, timeout=5.0)
            except (pykka.Timeout, pykka.ActorDeadError):
                pass
        # The member trees are stopped by Hub.stop, in the caller's thread (they wait for
        # their server processes to exit).

    def receive(self, message: Any) -> Any:
        if isinstance(message, _MemberExited):
            self._on_member_exited(message)
        elif isinstance(message, _Restart):
            self._timers.pop(message.name, None)
            member = self._members.get(message.name)
            if member is not None and member.gen == message.gen and member.client is None:
                self._start_member(replace(member, restarts=member.restarts + 1))
                self._publish()
        elif isinstance(message, _ViewExited):
            if message.urn == self._view_urn:
                log.warning(
                    "hub %s: the view actor exited (%r); starting a new one",
                    self._board.name,
                    message.reason,
                )
                self._start_view()
        elif isinstance(message, AddMember):
            return self._add(message.member)
        elif isinstance(message, RemoveMember):
            return self._remove(message.name)
        else:
            return super().receive(message)
        return None

    # -- the view -----------------------------------------------------------------------------

    def _start_view(self) -> None:
        me = self.actor_ref

        def exited(urn: str, reason: BaseException | None) -> None:
            safe_tell(me, _ViewExited(urn, reason))

        ref = ViewActor.start(self._board, link=Link(exited))
        self._view, self._view_urn = ref, ref.actor_urn

    # -- members ------------------------------------------------------------------------------

    def _next_gen(self) -> int:
        self._gen += 1
        return self._gen

    def _start_member(self, member: Member, *, publish: bool = True) -> None:
        """Start a fresh client tree for ``member`` (a new incarnation, a new gen);
        ``publish=False``: the caller publishes the members (``init``, once for all)."""
        name, gen = member.name, self._next_gen()
        client_name = self._board.client_name(name)
        level = self._board.log_level  # Hub.set_logging_level's, over the member's option
        config = member.config
        if level is not None and config.log_level != level:
            config = replace(config, log_level=level)
        runtime = tree.ClientTree(client_name, member.spec, config)
        me = self.actor_ref

        def exited(urn: str, reason: BaseException | None) -> None:
            safe_tell(me, _MemberExited(name, gen, reason))

        try:
            tree.register(runtime, replace=True)
            runtime.start(link=Link(exited))
        except Exception as exc:
            tree.unregister(runtime)
            log.warning("hub %s: server %r did not start: %r", self._board.name, name, exc)
            down = Status("reconnecting", reason=getattr(exc, "reason", "start_failed"))
            self._members[name] = replace(member, gen=gen, client=None, runtime=None, down=down)
            self._schedule_restart(name, gen)
            return
        # Not "supervised" in the tree's sense: a call through the member's client must not
        # wait through the hub's restart window, it fails at once (the Hub routes it).
        runtime.supervised = False
        client = Client(client_name, runtime)
        started = replace(member, gen=gen, client=client, runtime=runtime, down=None)
        self._members[name] = started
        for subscription in tuple(self._board.subscriptions.values()):
            subscription.attach(name, client)
        # Published before the view hears of it: the view orders servers by board.order.
        if publish:
            self._publish()
        if self._board.log_level != level:
            # Hub.set_logging_level ran while this member started and did not see it
            # published: the level is read again here, after it could see it (levels.py).
            levels.relevel(client, runtime, self._board.log_level)
        if self._view is not None:
            safe_tell(self._view, Attach(started))

    def _on_member_exited(self, msg: _MemberExited) -> None:
        member = self._members.get(msg.name)
        if member is None or member.gen != msg.gen:
            return  # one we stopped ourselves, or already replaced
        last = member.client.status() if member.client is not None else None
        tree.unregister(member.runtime) if member.runtime is not None else None
        reason = last.reason if last is not None and last.reason else "stopped"
        if self._view is not None:
            safe_tell(self._view, Detach(msg.name, msg.gen))
        if member.config is not None and member.config.on_give_up == "close":
            down = Status("closed", reason=reason)
            self._members[msg.name] = replace(member, client=None, down=down, given_up=True)
            self._publish()
            return
        if self._intensity_exceeded(msg.name):
            log.error(
                "hub %s: server %r gave up more than %d times within %s s; leaving it closed",
                self._board.name,
                msg.name,
                self._max_restarts,
                self._max_seconds,
            )
            down = Status("closed", reason="max_restarts")
            self._members[msg.name] = replace(member, client=None, down=down, given_up=True)
            self._publish()
            return
        down = Status("reconnecting", reason=reason)
        self._members[msg.name] = replace(member, client=None, down=down)
        self._schedule_restart(msg.name, member.gen)
        self._publish()

    def _intensity_exceeded(self, name: str) -> bool:
        now = time.monotonic()
        stamps = self._restarts.setdefault(name, deque())
        stamps.append(now)
        while stamps and stamps[0] < now - self._max_seconds:
            stamps.popleft()
        return len(stamps) > self._max_restarts

    def _schedule_restart(self, name: str, gen: int) -> None:
        attempt = len(self._restarts.get(name, ())) or 1
        delay = full_jitter(attempt, base=self._restart_base, cap=self._restart_cap)
        me = self.actor_ref
        old = self._timers.pop(name, None)
        if old is not None:
            old.cancel()
        self._timers[name] = timers.schedule(
            time.monotonic() + delay, partial(_tell, me, _Restart(name, gen))
        )

    def _add(self, member: Member) -> Member | None:
        old = self._members.get(member.name)
        self._let_go(member.name)
        if old is None:
            self._order.append(member.name)
        self._restarts.pop(member.name, None)
        self._start_member(member)
        self._publish()
        return old

    def _remove(self, name: str) -> Member | None:
        old = self._members.get(name)
        if old is None:
            return None
        self._let_go(name)
        del self._members[name]
        self._order.remove(name)
        self._restarts.pop(name, None)
        self._publish()
        return old

    def _let_go(self, name: str) -> None:
        """Forget the current incarnation (its exit is then ignored); the caller stops it."""
        member = self._members.get(name)
        handle = self._timers.pop(name, None)
        if handle is not None:
            handle.cancel()
        if member is None:
            return
        # A new gen makes the old incarnation's exit notice and watcher messages stale.
        self._members[name] = replace(member, gen=self._next_gen())
        if self._view is not None:
            safe_tell(self._view, Detach(name, member.gen))

    def _publish(self) -> None:
        self._board.publish_members(self._members, tuple(self._order))


def _tell(ref: pykka.ActorRef[Any], message: Any) -> None:
    safe_tell(ref, message)
