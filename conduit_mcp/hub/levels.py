"""``Hub.set_logging_level``: one server log level for every member, now and later.

Kept in three places so that no member misses it, without a lock: the board (read by the
supervisor when it starts a member: restarts, ``add_server``, ``reload``), each running
member's published ``log_level`` (read by its connection when it next becomes ready, and by
every modern request), and, for the members that are ready now, a ``set_logging_level``
call. A connection publishes "ready" before it reads the level, so a member that was not
ready when the level was written reads the new one; one that was is called.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import pykka

from ..errors import Error
from ..protocol.server_logs import LoggingLevel, check_level
from ..request import check_timeout
from . import routing
from .board import Board

if TYPE_CHECKING:
    from ..client import Client
    from ..tree import ClientTree

__all__ = ["asked", "collect", "keep", "outcomes", "relevel"]

Targets = dict[str, "Client | Error"]


def keep(board: Board, level: Any, timeout: float | None) -> Targets:
    """Keep ``level`` for every member; return, in config order, each ready member's client
    (to be asked now) or why it is not asked (``unavailable``/``server_not_ready``: it gets the
    level when it connects).

    Raises:
        Error: ``argument``/``level`` or ``timeout`` (nothing is kept); ``closed``/``stopped``
            for a stopped hub.
    """
    checked = check_level(level)
    check_timeout(timeout, 1.0)
    if board.stopped:
        raise Error("closed", "stopped", "the hub is stopped")
    board.log_level = checked
    members = board.members
    for found in members.values():
        if found.runtime is not None:
            found.runtime.shared.log_level = checked
    targets: Targets = {}
    for name in board.order:
        member = members.get(name)
        if member is None:
            continue
        try:
            targets[name] = routing.ready(member)
        except Error as exc:
            targets[name] = exc
    return targets


def asked(targets: Targets) -> list[tuple[str, Client]]:
    """The ready members, to be asked now."""
    return [(name, t) for name, t in targets.items() if not isinstance(t, Error)]


def collect(
    futures: Sequence[tuple[str, pykka.Future[None]]], timeout: float | None
) -> dict[str, BaseException | None]:
    """Each member's answer (``timeout``: the whole wait, as ``pykka.Future.get``'s; None:
    as long as the members' own deadlines, which bound every answer)."""
    deadline = None if timeout is None else time.monotonic() + timeout
    done: dict[str, BaseException | None] = {}
    for name, future in futures:
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            future.get(timeout=left)
            done[name] = None
        except Error as exc:
            done[name] = exc
    return done


def outcomes(
    targets: Targets, answers: Mapping[str, BaseException | None]
) -> dict[str, Error | None]:
    """The result in config order: None for a member that took the level, else its
    :class:`~conduit_mcp.Error` (a refusal for one not asked); anything else is a bug, and
    raised."""
    result: dict[str, Error | None] = {}
    for name, target in targets.items():
        got = target if isinstance(target, Error) else answers.get(name)
        if got is not None and not isinstance(got, Error):
            raise got
        result[name] = got
    return result


def relevel(client: Client, runtime: ClientTree, level: str | None) -> None:
    """Give a member the supervisor just started a level set while it started (the caller
    did not see it published): kept for its next ready, and sent now if it is ready already
    (its outcome is not waited for)."""
    if level is None:
        return
    runtime.shared.log_level = level
    if runtime.shared.status.state == "ready":
        client.futures.set_logging_level(cast("LoggingLevel", level))
