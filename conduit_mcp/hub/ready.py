"""What ``await_ready`` waits for, and each server's status: shared by the three front ends.

A server counts as ready once it is ``ready`` *and* its lists are in the view
(``View.ready``), so a caller that awaited it finds its tools at once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Literal

from .. import request as rq
from ..errors import Error
from ..status import Status
from . import routing
from .board import Board

__all__ = ["Servers", "await_ready", "status", "check_servers"]

Servers = Literal["any", "all"] | Sequence[str]


def status(board: Board) -> dict[str, Status]:
    members = board.members
    return {name: members[name].status() for name in board.order if name in members}


def check_servers(board: Board, servers: Servers) -> Callable[[], bool]:
    """The condition ``await_ready(servers=...)`` waits for (checked in the caller)."""
    if servers == "any":
        return lambda: bool(board.view.ready) or not board.order
    if servers == "all":
        return lambda: all(name in board.view.ready for name in board.order)
    if isinstance(servers, str) or not all(isinstance(s, str) for s in servers):
        raise Error("argument", "servers", "servers is 'any', 'all' or a list of names")
    wanted = list(servers)
    for name in wanted:
        if name not in board.members:
            raise routing.unknown("unknown_server", "server", name, board.order)
    return lambda: all(name in board.view.ready for name in wanted)


def await_ready(board: Board, timeout: float, servers: Servers) -> dict[str, Status]:
    """Block (the caller's thread) until ``servers`` are ready; :func:`status` then."""
    seconds = rq.check_timeout(timeout, timeout)
    done = check_servers(board, servers)
    if board.stopped:
        raise routing.stopped()
    if not board.wait(done, seconds):
        now = status(board)
        late = ", ".join(
            f"{n} ({s.state}: {s.reason or 'lists not in the view yet'})"
            for n, s in now.items()
            if n not in board.view.ready
        )
        raise Error("timeout", "deadline", f"not ready within {seconds} s: {late}")
    return status(board)
