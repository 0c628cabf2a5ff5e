"""Legacy server-to-client requests of the scripted server: the ``ask`` tool and what it learned.

A legacy (initialize era) server may ask the client things: ``sampling/createMessage``,
``elicitation/create`` (form or URL mode), ``roots/list``, ``ping``, or any method at all. The
``ask`` tool sends a scripted list of such requests, one after another or all at once, on the
call's own stream or (HTTP) on the session's GET stream, optionally cancels some of them after
a delay, and answers with every reply in order. ``--ask-roots`` and ``--on-initialized`` send
requests that belong to no call, as real servers do right after the handshake. Every request
the server sends is recorded with its answer (and any answer that came too late or twice), so
``learned`` and ``last_roots`` can show a test what the client answered. It is a mixin of
``ScriptedMcpServer``; the behaviour is documented in ``docs/testing.md`` ("Asking the
client").
"""

from __future__ import annotations

import asyncio
import collections
import contextvars
from typing import Any

import orjson

from .catalog import is_number, tool_error
from .protocol import Ctx
from .state import ServerState

__all__ = ["AskMixin"]

MAX_ASKED = 10_000  # requests remembered per core (the oldest are forgotten)
MAX_REQUESTS = 64  # requests per ask call


class AskMixin(ServerState):
    """The ``ask``, ``learned`` and ``last_roots`` tools and the record of server requests.

    Uses the core's sending (``_emit``, ``_notify``), its pending requests
    (``_client_requests``, ``_next_client_request``), the legacy capabilities and
    ``_open_stream`` (over HTTP: answer the current POST with SSE, so requests can ride on it).
    """

    _roots_changed: int
    _detached: set[asyncio.Task[Any]]  # ask calls with detach: true, still running
    _unexpected: collections.deque[Any]

    # ---- sending and recording ------------------------------------------------------------

    def _send_request(
        self, method: str, params: Any, origin: str, *, via: str = "post", wait: bool = True
    ) -> tuple[str, asyncio.Future[Any] | None]:
        """Send one server request; record it; return its id and (``wait``) a future answer."""
        self._next_client_request += 1
        request_id = f"s-{self._next_client_request}"
        future: asyncio.Future[Any] | None = None
        if wait:
            future = asyncio.get_running_loop().create_future()
            self._client_requests[request_id] = future
        record: dict[str, Any] = {
            "id": request_id,
            "method": method,
            "params": params,
            "origin": origin,
            "outcome": "pending",
            "late": [],
            "duplicates": [],
        }
        self._asked[request_id] = record
        while len(self._asked) > MAX_ASKED:
            self._asked.popitem(last=False)
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            msg["params"] = params
        self._send_via(via, msg)
        return request_id, future

    def _send_via(self, via: str, msg: dict[str, Any]) -> None:
        if via == "get":
            # Outside any request's context: over HTTP it goes to the session's GET stream.
            contextvars.Context().run(self._emit, msg)
        else:
            self._emit(msg)

    def _learn(self, msg: dict[str, Any]) -> bool:
        """Record a client's answer to a server request; whether that request was ever sent."""
        request_id = msg.get("id")
        record = self._asked.get(request_id) if type(request_id) in (int, str) else None
        if record is None:
            self._unexpected.append(request_id)
            return False
        answer = {"error": msg["error"]} if "error" in msg else {"result": msg.get("result")}
        if record["outcome"] == "pending":
            record.update(answer)
            record["outcome"] = "error" if "error" in answer else "result"
        elif record["outcome"] in ("cancelled", "timeout"):
            record["late"].append(answer)
            self._event("late_response", id=request_id, outcome=record["outcome"])
        else:
            record["duplicates"].append(answer)
            self._event("duplicate_response", id=request_id)
        return True

    # ---- ask ------------------------------------------------------------------------------

    def _t_ask(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        if ctx.era != "legacy" and args.get("force") is not True:
            return tool_error(
                "ask: server requests belong to the legacy era; use the rounds tool (modern)"
            )
        specs = args.get("requests")
        via = args.get("via", "post")
        timeout = args.get("timeout", 60)
        grace = args.get("cancel_grace", 0.2)
        if not isinstance(specs, list) or not 1 <= len(specs) <= MAX_REQUESTS:
            return tool_error(f"ask: requests must be a list of 1..{MAX_REQUESTS} objects")
        for spec in specs:
            problem = _check_spec(spec)
            if problem is not None:
                return tool_error(f"ask: {problem}")
        if via not in ("post", "get"):
            return tool_error("ask: via must be post or get")
        if not is_number(timeout) or not 0 < timeout <= 600:
            return tool_error("ask: timeout must be a number in (0, 600]")
        if not is_number(grace) or not 0 <= grace <= 10:
            return tool_error("ask: cancel_grace must be a number in [0, 10]")
        concurrent = args.get("concurrent") is True
        if args.get("detach") is True:
            # Outside this call: the requests go on (GET stream over HTTP) after it answered.
            work = self._ask(specs, concurrent, "get", timeout, grace)
            task = asyncio.get_running_loop().create_task(work, context=contextvars.Context())
            self._detached.add(task)
            task.add_done_callback(self._detached.discard)
            report = {"detached": len(specs)}
            return {
                "content": [{"type": "text", "text": orjson.dumps(report).decode()}],
                "structuredContent": report,
            }
        if via == "post":
            self._open_stream()
        return self._ask(specs, concurrent, via, timeout, grace)

    async def _ask(
        self, specs: list[dict[str, Any]], concurrent: bool, via: str, timeout: float, grace: float
    ) -> dict[str, Any]:
        sent: list[tuple[dict[str, Any], str, asyncio.Future[Any]]] = []
        try:
            if concurrent:
                for spec in specs:
                    sent.append(self._ask_send(spec, via))
                entries = await asyncio.gather(
                    *(self._ask_wait(s, rid, f, via, timeout, grace) for s, rid, f in sent)
                )
            else:
                entries = []
                for spec in specs:
                    sent.append(self._ask_send(spec, via))
                    entries.append(await self._ask_wait(*sent[-1], via, timeout, grace))
        except asyncio.CancelledError:
            for _, request_id, future in sent:  # the call was cancelled: so are its requests
                self._client_requests.pop(request_id, None)
                future.cancel()
                record = self._asked.get(request_id)
                if record is not None and record["outcome"] == "pending":
                    record["outcome"] = "cancelled"
                    self._cancel_request(request_id, via, "the call was cancelled")
            raise
        report = {"answers": list(entries)}
        return {
            "content": [{"type": "text", "text": orjson.dumps(report).decode()}],
            "structuredContent": report,
        }

    def _ask_send(self, spec: dict[str, Any], via: str) -> tuple[dict[str, Any], str, Any]:
        request_id, future = self._send_request(spec["method"], spec.get("params"), "ask", via=via)
        if spec.get("complete") == "before":
            self._complete_elicitation(spec, via)
        return spec, request_id, future

    async def _ask_wait(
        self,
        spec: dict[str, Any],
        request_id: str,
        future: asyncio.Future[Any],
        via: str,
        timeout: float,
        grace: float,
    ) -> dict[str, Any]:
        record = self._asked[request_id]
        cancel_after = spec.get("cancel_after")
        entry: dict[str, Any] = {"id": request_id, "method": spec["method"]}
        limit = timeout if cancel_after is None else min(cancel_after, timeout)
        try:
            await asyncio.wait_for(asyncio.shield(future), limit)
        except TimeoutError:
            if cancel_after is not None and cancel_after <= timeout:
                record["outcome"] = "cancelled"
                self._cancel_request(request_id, via, "cancelled by the scripted server")
                try:
                    await asyncio.wait_for(asyncio.shield(future), grace)
                except TimeoutError:
                    pass
                entry["answered_after_cancel"] = bool(record["late"])
            else:
                record["outcome"] = "timeout"
            self._client_requests.pop(request_id, None)
            entry["outcome"] = record["outcome"]
            return entry
        entry["outcome"] = record["outcome"]
        entry.update({k: record[k] for k in ("result", "error") if k in record})
        if spec.get("complete") is True:
            self._complete_elicitation(spec, via)
            entry["completed"] = True
        return entry

    def _cancel_request(self, request_id: str, via: str, reason: str) -> None:
        msg = {
            "jsonrpc": "2.0",
            "method": "notifications/cancelled",
            "params": {"requestId": request_id, "reason": reason},
        }
        self._send_via(via, msg)

    def _complete_elicitation(self, spec: dict[str, Any], via: str) -> None:
        elicitation_id = (spec.get("params") or {}).get("elicitationId")
        msg = {
            "jsonrpc": "2.0",
            "method": "notifications/elicitation/complete",
            "params": {"elicitationId": elicitation_id},
        }
        self._send_via(via, msg)

    # ---- requests outside any call --------------------------------------------------------

    def _after_initialized(self) -> None:
        for spec in self.config.on_initialized:
            self._send_request(spec["method"], spec.get("params"), "initialized", wait=False)
        if self.config.ask_roots:
            self._ask_roots("initialized")

    def _roots_list_changed(self) -> None:
        self._roots_changed += 1
        if self.config.ask_roots:
            self._ask_roots("roots_changed")

    def _ask_roots(self, origin: str) -> None:
        if "roots" not in self._legacy_caps:  # as server-filesystem: only when declared
            self._event("roots_not_declared", origin=origin)
            return
        self._send_request("roots/list", None, origin, via="get", wait=False)

    # ---- what the server learned ----------------------------------------------------------

    def _t_learned(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        report = {"requests": list(self._asked.values()), "unexpected": list(self._unexpected)}
        return {
            "content": [{"type": "text", "text": orjson.dumps(report).decode()}],
            "structuredContent": report,
        }

    def _t_last_roots(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        answered = [
            r
            for r in self._asked.values()
            if r["method"] == "roots/list" and r["outcome"] in ("result", "error")
        ]
        last = answered[-1] if answered else None
        roots = None
        if last is not None and isinstance(last.get("result"), dict):
            roots = last["result"].get("roots")
        report = {
            "roots": roots,
            "error": None if last is None else last.get("error"),
            "id": None if last is None else last["id"],
            "answered": len(answered),
            "list_changed": self._roots_changed,
        }
        return {
            "content": [{"type": "text", "text": orjson.dumps(report).decode()}],
            "structuredContent": report,
        }


def _check_spec(spec: Any) -> str | None:
    if not isinstance(spec, dict) or not isinstance(spec.get("method"), str):
        return "each request needs a string method"
    if "params" in spec and not isinstance(spec["params"], dict):
        return "params must be an object"
    cancel_after = spec.get("cancel_after")
    if cancel_after is not None and (not is_number(cancel_after) or cancel_after < 0):
        return "cancel_after must be a number >= 0"
    complete = spec.get("complete", False)
    if not (complete is True or complete is False or complete == "before"):
        return 'complete must be true, false or "before"'
    unknown = set(spec) - {"method", "params", "cancel_after", "complete"}
    if unknown:
        return f"unknown request keys {sorted(unknown)}"
    return None
