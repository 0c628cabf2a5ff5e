"""The in-flight requests of one connection, and the fast path that answers them.

Measured on this 2-core machine: a thread wake-up costs ~37 µs, and a sequential call paid
four of them (caller -> connection -> [server] -> I/O loop -> connection -> caller). The
hop through the connection on the way back bought nothing: it only looked the id up. So the
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
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from ..protocol.jsonrpc import (
    UNSUPPORTED_PROTOCOL_VERSION,
    ErrorResponse,
    Notification,
    Response,
    server_error,
)
from ..protocol.listen import STALE_KINDS


class PendingTable:
    """``calls``: request id -> ``Call``, shared by the connection and its transport's reader."""

    __slots__ = ("calls", "answered", "changed_at")

    def __init__(self) -> None:
        self.calls: dict[Any, Any] = {}
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
                call = _pop(calls, m.id)
                if call is None:
                    forward.append(m)
                    continue
                call.reply.ok(m.result)
                answered.append(call)
            elif t is ErrorResponse and m.code != UNSUPPORTED_PROTOCOL_VERSION:
                # -32022 goes to the connection: it re-negotiates and retries
                # (docs/connection.md, "Era discovery").
                call = _pop(calls, m.id)
                if call is None:
                    forward.append(m)
                    continue
                call.reply.fail(server_error(m, call.method))
                answered.append(call)
            elif t is Notification and m.method == "notifications/progress":
                params = m.params
                token = params.get("progressToken") if type(params) is dict else None
                call = _get(calls, token)
                if call is not None:
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
