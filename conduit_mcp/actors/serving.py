"""What the server asks of the client, as the connection tracks it (it never runs the
handler: the handler actor does, see actors/handler.py).

Held by the connection like ``ChangeTracker``; it talks to the connection only through
:class:`ServingPort`. docs/connection.md, "Server-to-client requests", has the rules; in
short:

* **Legacy**: a server request is answered ``{}`` (``ping``), refused (``-32601`` undeclared,
  ``-32602`` an undeclared elicitation mode) or handed to the handler actor as a ``Serve``.
  Its ``Served`` becomes the JSON-RPC answer, sent on the same session; a server
  ``notifications/cancelled`` stops it and nothing is answered. The call it belongs to (the
  POST whose stream carried it over HTTP; over stdio, where the wire names no relation, every
  ``tools/call``, ``prompts/get`` and ``resources/read`` in flight) has its deadline paused
  meanwhile, bounded by ``max_total_timeout``.
* **Modern**: an ``input_required`` result of a call starts a *round*: its ``inputRequests``
  entries (at most ``max_round_inputs``) go to the handler, at most ``max_server_requests``
  at once over every round: the rest wait in one queue, first come first served, and go as
  earlier entries are answered. When all are answered the call is sent again (a new id,
  ``inputResponses`` under the same keys, ``requestState`` echoed) by the connection's
  normal request path. A state-only round is retried after a backoff. ``max_input_rounds``
  bounds the rounds; the caller sees one call under one deadline, paused while the handler
  works (and while its entries wait for a slot).

Every handler work also has the connection's own timer (``handler_timeout`` and a margin), so
a handler actor that crashed mid-work still gets the server an answer and the call an end.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Hashable
from typing import Any, NamedTuple, Protocol

from ..errors import Error
from ..protocol import server_requests as sr
from ..protocol.jsonrpc import INTERNAL_ERROR, INVALID_REQUEST
from .events import (
    Call,
    Deadline,
    HandlerNotification,
    RoundRetry,
    Serve,
    ServeContext,
    Served,
    ServeError,
    ServeExpired,
    Unserve,
)

log = logging.getLogger("conduit_mcp.connection")

_monotonic = time.monotonic

#: How long past ``handler_timeout`` the connection waits for a ``Served`` before it answers
#: for a handler that is gone.
SERVE_MARGIN = 1.0
#: Notifications the handler never sees: ours to route (progress, our cancellations).
_NOT_FOR_HANDLER = frozenset({"notifications/progress", "notifications/cancelled"})


class ServingPort(Protocol):
    """What the tracker asks of the connection that holds it."""

    @property
    def gen(self) -> int:
        """The transport's generation (a server request belongs to one session)."""
        ...

    def send_answer(self, message: dict[str, Any]) -> None:
        """Send an answer to a server request (bounded by ``max_answer_backlog``)."""
        ...

    def set_timeout(self, name: Hashable, seconds: float | None, event: Any) -> None:
        """Arm (``None``: cancel) the connection's named timer ``name``."""
        ...

    def in_flight(self, rid: Any) -> Call | None:
        """The caller's call in flight under request id ``rid``, if any."""
        ...

    def calls_in_flight(self) -> list[Call]:
        """Every caller's call in flight."""
        ...

    def tell_handler(self, message: Any) -> bool:
        """Tell the handler actor; False if there is none now."""
        ...


class _Legacy(NamedTuple):
    """One legacy server request the handler works on. ``stream``: the id of the call whose
    HTTP response stream carried it (None: stdio, or the GET stream)."""

    server_id: Any
    gen: int
    related: list[Call]
    stream: Any = None


class _Round:
    """One modern ``input_required`` round of ``call``, keyed by the id it answered.
    ``waiting``: the entries not answered yet; ``told``: those of them the handler has (the
    others wait in the queue for a slot)."""

    __slots__ = ("call", "rid", "asked", "waiting", "told", "responses", "state")

    def __init__(
        self, call: Call, rid: Any, asked: dict[str, tuple[str, Any]], state: str | None
    ) -> None:
        self.call = call
        self.rid = rid
        self.asked = asked
        self.waiting = set(asked)
        self.told: set[str] = set()
        self.responses: dict[str, Any] = {}
        self.state = state


class _Entry(NamedTuple):
    """One ``inputRequests`` entry waiting for a handler slot."""

    rnd: _Round
    key: str
    method: str
    params: Any


class ServerWork:
    """See the module docstring."""

    def __init__(
        self,
        port: ServingPort,
        *,
        capabilities: dict[str, Any],
        has_handler: bool,
        handler_notes: bool,
        handler_timeout: float,
        max_total_timeout: float,
        max_input_rounds: int,
        max_server_requests: int = 8,
        max_round_inputs: int = 64,
    ) -> None:
        self._port = port
        self._caps = capabilities
        self._has_handler = has_handler
        self._notes = handler_notes
        self._serve_bound = handler_timeout + SERVE_MARGIN
        self._max_total = max_total_timeout
        self._max_rounds = max_input_rounds
        self._max_serving = max_server_requests
        self._max_inputs = max_round_inputs
        self._legacy: dict[Hashable, _Legacy] = {}
        self._rounds: dict[Any, _Round] = {}
        # Round entries the handler has and has not answered, and those waiting for a slot
        # (in arrival order; an entry of a round that ended is skipped when reached).
        self._serving = 0
        self._queue: deque[_Entry] = deque()

    def __repr__(self) -> str:
        return (
            f"<ServerWork legacy={len(self._legacy)} rounds={len(self._rounds)} "
            f"serving={self._serving} queued={len(self._queue)}>"
        )

    # -- pausing a call's deadline -----------------------------------------------------------

    # The rules are the call's clock's (protocol/clock.py); here, only its timer.

    def _pause(self, call: Call, now: float) -> None:
        seconds = call.clock.pause(now, self._max_total)
        if seconds is not None:
            self._port.set_timeout(call, seconds, Deadline(call))

    def _resume(self, call: Call, now: float, *, rearm: bool) -> None:
        seconds = call.clock.resume(now)
        if seconds is not None and rearm and self._port.in_flight(call.reply.request_id) is call:
            self._port.set_timeout(call, seconds, Deadline(call))

    # -- legacy: server requests ---------------------------------------------------------------

    def server_request(self, m: Any, related_id: Any = None) -> None:
        """A JSON-RPC request from the server (legacy era). ``related_id``: the request id of
        the POST whose stream carried it (HTTP), if any."""
        disposition = sr.legacy_disposition(m.method, m.params, self._caps)
        if disposition == "ping":
            self._port.send_answer({"jsonrpc": "2.0", "id": m.id, "result": {}})
            return
        if disposition != "serve":
            code, message = disposition
            self._answer_error(m.id, code, message)
            return
        key: Hashable
        try:
            key = ("s", self._port.gen, m.id)
            hash(key)
        except TypeError:  # an unhashable id from a broken server: nothing can answer it
            return
        if key in self._legacy:
            self._answer_error(m.id, INVALID_REQUEST, "Duplicate request id")
            return
        related = self._related(related_id)
        # Named to the handler only when the wire said so (HTTP): over stdio the paused calls
        # are a guess.
        first = related[0] if related_id is not None and related else None
        context = ServeContext(
            "legacy",
            m.id,
            first.method if first is not None else None,
            first.reply.request_id if first is not None else None,
        )
        params = m.params if type(m.params) is dict else None
        if not self._port.tell_handler(Serve(key, m.method, params, context)):
            self._answer_error(m.id, INTERNAL_ERROR, "The client's handler is not running")
            return
        now = _monotonic()
        for call in related:
            self._pause(call, now)
        self._legacy[key] = _Legacy(m.id, self._port.gen, related, related_id)
        self._port.set_timeout(("serve", key), self._serve_bound, ServeExpired(key))

    def _related(self, related_id: Any) -> list[Call]:
        if related_id is not None:
            call = self._port.in_flight(related_id)
            return [call] if call is not None and call.method in sr.ROUND_METHODS else []
        return [c for c in self._port.calls_in_flight() if c.method in sr.ROUND_METHODS]

    def _answer_error(self, server_id: Any, code: int, message: str) -> None:
        self._port.send_answer(
            {"jsonrpc": "2.0", "id": server_id, "error": {"code": code, "message": message}}
        )

    def server_cancelled(self, params: Any) -> bool:
        """A server ``notifications/cancelled``: True if it named a request of the server's
        the handler is working on (stopped; nothing will be answered)."""
        rid = params.get("requestId") if type(params) is dict else None
        try:
            key: Hashable = ("s", self._port.gen, rid)
            entry = self._legacy.pop(key, None)
        except TypeError:
            return False
        if entry is None:
            return False
        self._port.tell_handler(Unserve(key))
        self._port.set_timeout(("serve", key), None, None)
        now = _monotonic()
        for call in entry.related:
            self._resume(call, now, rearm=True)
        return True

    def call_ended(self, rid: Any) -> None:
        """The client ended call ``rid`` itself (its deadline, or the caller gave up) and
        closed its HTTP response stream: the server cancels what it asked on that stream, but
        says so on the stream just closed, which nobody reads any more. So that work stops
        here, and nothing is answered for it."""
        if not self._legacy:
            return
        for key, entry in list(self._legacy.items()):
            if entry.stream is not None and entry.stream == rid:
                del self._legacy[key]
                self._port.tell_handler(Unserve(key))
                self._port.set_timeout(("serve", key), None, None)
                now = _monotonic()
                for call in entry.related:
                    self._resume(call, now, rearm=True)

    # -- the handler's answers -----------------------------------------------------------------

    def served(self, ev: Served) -> Call | None:
        """The handler's answer: sent to the server (legacy), or kept for the round; returns
        a call to send again when its round is complete."""
        key = ev.key
        if type(key) is tuple and key and key[0] == "r":
            return self._round_served(key, ev.result, ev.error)
        entry = self._legacy.pop(key, None)
        if entry is None:
            return None  # cancelled, expired, or of a session gone
        self._port.set_timeout(("serve", key), None, None)
        now = _monotonic()
        for call in entry.related:
            self._resume(call, now, rearm=True)
        if entry.gen != self._port.gen:
            return None
        if ev.error is None:
            self._port.send_answer({"jsonrpc": "2.0", "id": entry.server_id, "result": ev.result})
        else:
            self._answer_error(entry.server_id, ev.error.code, ev.error.message)
        return None

    def expired(self, ev: ServeExpired) -> None:
        """No ``Served`` within ``handler_timeout`` and the margin: the handler actor is gone
        or lost it. Answer for it (legacy) or fail the call (modern)."""
        key = ev.key
        lost = ServeError(INTERNAL_ERROR, "The client's handler did not answer in time", "timeout")
        if type(key) is tuple and key and key[0] == "r":
            self._round_served(key, None, lost)
            return
        entry = self._legacy.get(key)
        if entry is not None:
            self.served(Served(key, None, lost))

    # -- modern: input_required rounds ---------------------------------------------------------

    def on_result(self, call: Call, rid: Any, result: Any) -> bool:
        """A call's result: False if it is complete (answer the caller), True if this
        tracker took it over (a round started, or the call failed here)."""
        verdict = sr.classify_result(call.method, result)
        if verdict is None:
            return False
        reply = call.reply
        if isinstance(verdict, sr.BadResult):
            reply.fail(Error("protocol", verdict.reason, verdict.message))
            return True
        call.rounds += 1
        reply.rounds = call.rounds
        if call.rounds > self._max_rounds:
            reply.fail(
                Error(
                    "protocol",
                    "too_many_rounds",
                    f"{call.method}: the server asked for input more than max_input_rounds="
                    f"{self._max_rounds} times; raise the client's max_input_rounds option if "
                    "this server needs more",
                    data={"limit": self._max_rounds},
                )
            )
            return True
        asked = len(verdict.requests)
        if asked > self._max_inputs:
            reply.fail(
                Error(
                    "protocol",
                    "too_many_inputs",
                    f"{call.method}: the server asked for {asked} inputs in one round, more "
                    f"than max_round_inputs={self._max_inputs}; raise the client's "
                    "max_round_inputs option if this server needs more",
                    data={"limit": self._max_inputs, "asked": asked},
                )
            )
            return True
        rnd = _Round(call, rid, verdict.requests, verdict.state)
        now = _monotonic()
        if not verdict.requests:
            # Nothing to answer: retried after a backoff, under the call's own deadline.
            self._rounds[rid] = rnd
            left = call.clock.left(now)
            self._port.set_timeout(call, left, Deadline(call))
            delay = min(sr.state_only_delay(call.rounds), left)
            self._port.set_timeout(("round", rid), delay, RoundRetry(rid))
            return True
        for key, (method, params) in verdict.requests.items():
            refusal = self._undeclared(method, params)
            if refusal == "decline":
                rnd.waiting.discard(key)
                rnd.responses[key] = {"action": "decline"}
            elif isinstance(refusal, Error):
                reply.fail(refusal)
                return True
        if not rnd.waiting:  # every entry answered here (declines)
            call.params = sr.retry_params(call.base, rnd.responses, rnd.state)
            self._rounds[rid] = rnd
            self._port.set_timeout(("round", rid), 0, RoundRetry(rid))
            return True
        self._rounds[rid] = rnd
        self._pause(call, now)
        for key, (method, params) in verdict.requests.items():
            if key in rnd.waiting:
                self._queue.append(_Entry(rnd, key, method, params))
        self._release()
        return True

    def _release(self) -> None:
        """Hand the queued entries to the handler while it has a free slot (the legacy
        requests it serves count too): ``max_server_requests`` bounds what runs at once,
        not what a round may ask."""
        queue = self._queue
        while queue and self._serving + len(self._legacy) < self._max_serving:
            rnd, key, method, params = queue.popleft()
            if self._rounds.get(rnd.rid) is not rnd or key not in rnd.waiting or key in rnd.told:
                continue  # its round ended (failed, abandoned, past its deadline)
            skey = ("r", rnd.rid, key)
            context = ServeContext("modern", key, rnd.call.method, rnd.rid)
            if not self._port.tell_handler(Serve(skey, method, params, context)):
                self._rounds.pop(rnd.rid, None)
                self._drop_round(rnd)
                rnd.call.reply.fail(
                    Error("handler", "not_running", "the client's handler is not running")
                )
                continue
            rnd.told.add(key)
            self._serving += 1
            self._port.set_timeout(("serve", skey), self._serve_bound, ServeExpired(skey))

    def _forget(self, rnd: _Round, key: str) -> bool:
        """The handler no longer works on ``key`` of ``rnd``: its slot is free."""
        if key not in rnd.told:
            return False
        rnd.told.discard(key)
        self._serving -= 1
        return True

    def _undeclared(self, method: str, params: Any) -> Error | str | None:
        """None if the handler can answer ``method``; ``"decline"`` for an elicitation it
        cannot (a decline is an answer); else why the call fails."""
        capability = sr.SERVED[method]
        if capability == "elicitation":
            mode = params.get("mode", "form") if type(params) is dict else "form"
            if capability not in self._caps or mode not in sr.elicitation_modes(self._caps):
                return "decline"
            return None
        if capability in self._caps and self._has_handler:
            return None
        what = "create_message" if capability == "sampling" else "list_roots"
        return Error(
            "handler",
            "no_method",
            f"the server asked for {method}, which this client did not declare; give the "
            f"client a Handler with a {what} method to serve it",
        )

    def _round_served(
        self, key: tuple[Any, ...], result: Any, error: ServeError | None
    ) -> Call | None:
        _, rid, input_key = key
        self._port.set_timeout(("serve", key), None, None)
        rnd = self._rounds.get(rid)
        if rnd is None or input_key not in rnd.waiting or not self._forget(rnd, input_key):
            return None
        if error is not None and error.reason == "busy" and self._serving:
            # Every slot is taken by methods still running past their time (their threads
            # cannot be stopped): the entry waits again, for the next answer to free one.
            method, params = rnd.asked[input_key]
            self._queue.appendleft(_Entry(rnd, input_key, method, params))
            return None
        try:
            return self._entry_answered(rnd, input_key, result, error)
        finally:
            self._release()  # its slot is free

    def _entry_answered(
        self, rnd: _Round, input_key: str, result: Any, error: ServeError | None
    ) -> Call | None:
        if error is not None:
            text = (
                f"{rnd.call.method}: the handler could not answer the server's "
                f"{_what(input_key)}: {error.message}"
            )
            if error.reason == "timeout":
                failure = Error("timeout", "handler_timeout", text)
            else:
                failure = Error("handler", error.reason, text)
            self._fail_round(rnd, failure)
            return None
        rnd.waiting.discard(input_key)
        rnd.responses[input_key] = result
        if rnd.waiting:
            return None
        del self._rounds[rnd.rid]
        call = rnd.call
        self._resume(call, _monotonic(), rearm=False)
        call.params = sr.retry_params(call.base, rnd.responses, rnd.state)
        call.reply.request_id = None
        return call

    def retry_due(self, ev: RoundRetry) -> Call | None:
        """A state-only round's backoff (or a round answered without the handler) ended."""
        rnd = self._rounds.pop(ev.rid, None)
        if rnd is None:
            return None
        call = rnd.call
        if call.clock.pauses == 0 and not rnd.responses:
            call.params = sr.retry_params(call.base, None, rnd.state)
        call.reply.request_id = None
        return call

    def _fail_round(self, rnd: _Round, error: Error) -> None:
        self._rounds.pop(rnd.rid, None)
        self._drop_round(rnd)
        rnd.call.reply.fail(error)

    def _drop_round(self, rnd: _Round) -> None:
        """Stop the handler's work on ``rnd`` (its queued entries are skipped when
        reached); the caller releases the freed slots."""
        for input_key in list(rnd.told):
            skey = ("r", rnd.rid, input_key)
            self._forget(rnd, input_key)
            self._port.tell_handler(Unserve(skey))
            self._port.set_timeout(("serve", skey), None, None)
        rnd.waiting.clear()
        self._port.set_timeout(("round", rnd.rid), None, None)
        self._port.set_timeout(rnd.call, None, None)

    def round_of(self, call: Call) -> bool:
        """Whether ``call`` is between rounds (not in flight: waiting for the handler or a
        backoff)."""
        rnd = self._rounds.get(call.reply.request_id)
        return rnd is not None and rnd.call is call

    def abandon(self, rid: Any) -> bool:
        """The caller gave up on the call whose round answered ``rid``: stop its work."""
        rnd = self._rounds.pop(rid, None)
        if rnd is None:
            return False
        self._drop_round(rnd)
        self._release()
        rnd.call.reply.done = True
        return True

    def deadline(self, call: Call) -> bool:
        """The deadline timer of ``call`` fired while it is between rounds: it fails."""
        rnd = self._rounds.pop(call.reply.request_id, None)
        if rnd is None or rnd.call is not call:
            if rnd is not None:
                self._rounds[call.reply.request_id] = rnd
            return False
        self._drop_round(rnd)
        self._release()
        cut = call.clock.cut_by_total()
        call.reply.fail(total_timeout_error(call) if cut else _deadline_error(call))
        return True

    # -- losing the session ---------------------------------------------------------------------

    def fail_all(self, error: Error) -> None:
        """The transport is gone: stop every work; the calls between rounds fail with the
        error the calls in flight get."""
        for key in list(self._legacy):
            self._port.tell_handler(Unserve(key))
            self._port.set_timeout(("serve", key), None, None)
        self._legacy.clear()
        rounds = list(self._rounds.values())
        self._rounds.clear()
        self._queue.clear()
        for rnd in rounds:
            self._drop_round(rnd)
            rnd.call.reply.fail(error)

    # -- notifications -------------------------------------------------------------------------

    def notify(self, method: str, params: Any) -> None:
        """A server notification for the handler's ``handle_notification``/``handle_log``."""
        if self._notes and method not in _NOT_FOR_HANDLER:
            self._port.tell_handler(
                HandlerNotification(method, params if type(params) is dict else None)
            )


def wants_notifications(handler: Any) -> bool:
    """Whether ``handler`` takes notifications (``handle_notification`` or ``handle_log``):
    then it is a listen consumer, and every notification is told to it."""
    implemented = getattr(handler, "implemented_methods", None)
    names = implemented() if callable(implemented) else ()
    return "handle_notification" in names or "handle_log" in names


def _what(key: Any) -> str:
    text = repr(key)
    return "input request " + (text if len(text) <= 40 else text[:37] + "...")


def total_timeout_error(call: Call) -> Error:
    return Error(
        "timeout",
        "max_total_timeout",
        f"{call.method} took longer than its max_total_timeout in all (the bound on a call's "
        "whole life, however its deadline was paused while the handler worked or restarted "
        "by progress); raise max_total_timeout (an option, and a keyword of the call) if the "
        "work or the people answering need longer",
    )


def _deadline_error(call: Call) -> Error:
    return Error(
        "timeout",
        "deadline",
        f"{call.method} got no answer before its deadline (the call's timeout, or "
        "request_timeout by default)",
    )
