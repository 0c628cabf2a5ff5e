"""The in-flight requests of one connection, and the fast path that answers them.

Measured on this 2-core machine: a thread wake-up costs ~37 µs, and a sequential call paid
four of them (caller -> connection -> [server] -> I/O loop -> connection -> caller). The
hop through the connection on the way back bought nothing: it only looked the id up. (The
hop on the way out is gone too when the connection is idle: the caller's thread runs its
turn, ``otp.pooled.tell_here``; and over stdio the reader posts the asyncio callers'
answers when its read is handled, ``replies.gather_answers``.) So the
transport's reader, on the I/O loop, answers the calls it can itself — a result, a JSON-RPC
error, a progress notification for a pending id — straight to the caller's reply channel,
and hands everything else (handshake answers, ``-32022``, server requests, notifications,
unknown ids) to the connection as before. It runs no user code: a reply channel only puts on
a queue, schedules on the caller's loop or sets a future.

Ownership of an answer is decided by ``dict.pop`` (atomic under the GIL): the reader, a
deadline, an ``Abandon`` and a lost transport all *pop* the id, and only the one that got the
call answers it. The connection still adds every entry (it numbers requests and enforces
``max_in_flight``). It is not woken to hear which calls were answered — a wake-up is what
this module exists to save: the reader appends them to ``answered``, and the connection
cancels their deadline timers the next time it runs anyway (the next request, or the first
deadline, whichever comes first).

The table also bounds what a flooding server can make the client hold
(docs/connection.md, "Floods"): :meth:`PendingTable.admit` counts what the reader tells the
connection against what the connection has handled, and past ``max_inbox`` drops the
notifications and server requests (never an answer to a call) and counts them in
:class:`Drops`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable
from typing import Any

from ..protocol.jsonrpc import (
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorResponse,
    Invalid,
    Notification,
    Response,
    server_error,
)
from ..protocol.listen import STALE_KINDS

#: Default of the ``max_inbox`` option: messages told to the connection and not yet handled.
MAX_INBOX = 10_000


class Drops:
    """What flood bounds dropped, by kind (``inbound``, ``answer``, ``notification``), and
    the hook that counts it in telemetry (``mcp.client.dropped``). Each kind has one writing
    thread (inbound: the I/O loop; answer: the connection or the loop, under the transport's
    lock; notification: the notifier), so a plain ``+=`` per kind is safe enough for a
    counter."""

    __slots__ = ("inbound", "answer", "notification", "_hook")

    def __init__(self, hook: Callable[[str, int], None] | None = None) -> None:
        self.inbound = 0
        self.answer = 0
        self.notification = 0
        self._hook = hook

    def add(self, kind: str, count: int = 1) -> None:
        setattr(self, kind, getattr(self, kind) + count)
        hook = self._hook
        if hook is not None:
            hook(kind, count)

    def __repr__(self) -> str:
        return (
            f"<Drops inbound={self.inbound} answer={self.answer} notification={self.notification}>"
        )


class PendingTable:
    """``calls``: request id -> ``Call``, shared by the connection and its transport's reader."""

    __slots__ = ("calls", "answered", "changed_at", "told", "handled", "max_inbox", "drops")

    def __init__(self, max_inbox: int = MAX_INBOX, drops: Drops | None = None) -> None:
        self.calls: dict[Any, Any] = {}
        # Messages told to the connection (written by the reader only) and handled by it
        # (written by the connection only): their difference is the connection's backlog.
        self.told = 0
        self.handled = 0
        self.max_inbox = max_inbox
        self.drops = drops if drops is not None else Drops()
        # list kind -> when a list_changed for it was read (monotonic): the cache treats a
        # list fetched before that as stale at once, before the connection hears of it.
        self.changed_at: dict[str, float] = {}
        # Calls the reader answered, for the connection to cancel their timers (deque
        # append/popleft are atomic: no lock between the two threads).
        self.answered: deque[Any] = deque()

    def __len__(self) -> int:
        return len(self.calls)

    def deliver(self, messages: list[Any]) -> list[Any]:
        """Answer what can be answered here; return the messages for the connection."""
        calls = self.calls
        forward: list[Any] = []
        answered = self.answered
        for m in messages:
            t = type(m)
            if t is Response:
                result = m.result
                if type(result) is dict and result.get("resultType", "complete") != "complete":
                    # input_required (or unknown): the connection runs the round
                    # (docs/connection.md, "Server-to-client requests").
                    forward.append(m)
                    continue
                call = _pop(calls, m.id)
                if call is None:
                    forward.append(m)
                    continue
                call.reply.ok_soon(m.result)
                answered.append(call)
            elif t is ErrorResponse and m.code != UNSUPPORTED_PROTOCOL_VERSION:
                # -32022 goes to the connection: it re-negotiates and retries
                # (docs/connection.md, "Era discovery").
                call = _pop(calls, m.id)
                if call is None:
                    forward.append(m)
                    continue
                call.reply.fail_soon(server_error(m, call.method))
                answered.append(call)
            elif t is Notification and m.method == "notifications/progress":
                params = m.params
                token = params.get("progressToken") if type(params) is dict else None
                call = _get(calls, token)
                if call is not None:
                    clock = call.clock
                    if clock.reset is not None:
                        # reset_timeout_on_progress: only noted; the connection's timer
                        # reads it when it fires (protocol/clock.py), no wake-up per report
                        clock.progressed(time.monotonic())
                    call.reply.progress(params)
            else:
                if t is Notification:
                    kinds = STALE_KINDS.get(m.method)
                    if kinds is not None:
                        now = time.monotonic()
                        for kind in kinds:
                            self.changed_at[kind] = now
                forward.append(m)
        return forward

    def resync(self) -> None:
        """Forget the backlog (a new transport): counts ``handled`` up to ``told``. The
        connection's thread; a message still in its mailbox is then counted twice, which
        only loosens the bound for a moment."""
        self.handled = self.told

    def admit(self, messages: list[Any]) -> list[Any]:
        """What of ``messages`` (left by :meth:`deliver`) the reader may tell the connection.

        While the connection is ``max_inbox`` messages behind, notifications and server
        requests are dropped and counted: a flood costs at most ``max_inbox`` messages plus
        one read, never memory without end. Answers are always let through (a handshake or a
        health check waits for them). A dropped ``list_changed`` still marks the cache stale
        (:meth:`deliver` recorded it). I/O loop."""
        if self.told - self.handled >= self.max_inbox:
            kept = [m for m in messages if type(m) is Response or type(m) is ErrorResponse]
            lost = len(messages) - len(kept)
            if lost:
                self.drops.add("inbound", lost)
            messages = kept
        # Invalid messages are never told on (the listen actor drops them): not counted.
        self.told += sum(1 for m in messages if type(m) is not Invalid)
        return messages


def _pop(calls: dict[Any, Any], key: Any) -> Any:
    try:
        return calls.pop(key, None)
    except TypeError:  # an unhashable id from a broken server
        return None


def _get(calls: dict[Any, Any], key: Any) -> Any:
    if key is None:
        return None
    try:
        return calls.get(key)
    except TypeError:
        return None
