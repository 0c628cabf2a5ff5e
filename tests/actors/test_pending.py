"""The pending table's fast path: what the transport's reader answers itself, and what it
leaves to the connection (no threads: a reply channel is just a queue)."""

from __future__ import annotations

import pytest

from conduit_mcp.actors.events import Call
from conduit_mcp.actors.pending import PendingTable
from conduit_mcp.protocol.jsonrpc import ErrorResponse, Notification, Request, Response
from conduit_mcp.replies import FAIL, OK, PROGRESS, SyncReply

pytestmark = pytest.mark.timeout(10)


def _table(*ids: int) -> tuple[PendingTable, dict[int, SyncReply]]:
    table = PendingTable()
    replies = {}
    for rid in ids:
        reply = SyncReply(wants_progress=True)
        reply.request_id = rid
        table.calls[rid] = Call("tools/call", {"name": "x"}, 1e18, reply, progress=True)
        replies[rid] = reply
    return table, replies


def test_results_errors_and_progress_are_answered_in_order():
    table, replies = _table(1, 2)
    progress = Notification("notifications/progress", {"progressToken": 1, "progress": 1})
    forward = table.deliver(
        [progress, Response(1, {"ok": True}), ErrorResponse(2, -32602, "bad", None)]
    )
    assert forward == []
    assert [replies[1].queue.get_nowait()[0] for _ in range(2)] == [PROGRESS, OK]
    tag, err = replies[2].queue.get_nowait()
    assert tag == FAIL and (err.kind, err.code) == ("server", -32602)
    assert table.calls == {}
    assert [c.reply for c in table.answered] == [replies[1], replies[2]]


def test_everything_else_goes_to_the_connection():
    table, replies = _table(1)
    messages = [
        ErrorResponse(1, -32022, "unsupported", {"supported": ["2026-07-28"]}),  # re-negotiate
        Response(99, {}),  # unknown (a handshake answer, or late)
        Notification("notifications/tools/list_changed", None),
        Request("s-1", "ping", None),
        Response([1], {}),  # an unhashable id from a broken server
    ]
    assert table.deliver(messages) == messages
    assert 1 in table.calls and replies[1].queue.empty()
    assert not table.answered


def test_an_id_popped_elsewhere_is_not_answered_twice():
    table, replies = _table(1)
    table.calls.pop(1)  # a deadline or an abandon won the race
    assert table.deliver([Response(1, {})]) == [Response(1, {})]
    assert replies[1].queue.empty()
