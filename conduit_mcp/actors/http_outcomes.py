"""What the connection does with the HTTP outcomes a transport reports (docs/connection.md,
"HTTP outcomes"): a request refused with an HTTP status, and a response stream
that broke before its answer. A mixin of :class:`~conduit_mcp.actors.connection.Connection`.
(A session the server lost is handled in ``ready`` itself: it changes state.)
"""

from __future__ import annotations

from typing import Any

from ..errors import Error
from ..otp.statem import NextEvent, Step
from ..protocol.jsonrpc import Response
from ..transports.base import RequestFailed, StreamBroken
from .core import ConnectionCore

# Requests that cannot have acted: re-issued once when their HTTP stream breaks.
_READS = frozenset(
    {
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "prompts/get",
        "server/discover",
        "completion/complete",
        "skills/list",  # the skills extension's two reads
        "skills/get",
    }
)


class HttpOutcomes(ConnectionCore):
    """See the module docstring."""

    def _request_failed(self, ev: RequestFailed) -> None:
        """An HTTP answer that is not a JSON-RPC one (401/403, 429, 5xx, too large)."""
        if ev.rid is not None and ev.rid == self._health_id:
            self._unmatched(Response(ev.rid, None))  # the server is there: that is health
            return
        call = self._pending.pop(ev.rid, None)
        if call is None:
            self._tel.dropped()
            return
        self.set_timeout(call, None, None)
        call.reply.fail(ev.error)

    def _stream_broken(self, ev: StreamBroken) -> Any:
        """A response stream broke before its answer: a read is re-issued once with a new id
        (MCP spec 2026-07-28, basic/transports/streamable-http); anything that may have acted
        fails with ``transport``, as a request that may have run is never retried
        (docs/connection.md, "HTTP outcomes")."""
        call = self._pending.pop(ev.rid, None)
        if call is None:
            return None  # (a listen's stream is the listen actor's: see actors/listen.py)
        self.set_timeout(call, None, None)
        if call.method in _READS and not call.retried:
            retry = call.again()
            call.reply.request_id = None
            return Step(None, [NextEvent(retry, kind="cast")])
        call.reply.fail(
            Error(
                "transport",
                "stream_broken",
                f"{call.method}: the response stream broke before the answer; "
                "the request may have run",
            )
        )
        return None
