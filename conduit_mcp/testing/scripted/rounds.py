"""Modern multi-round-trip (``input_required``) conversations of the scripted server.

In the modern era a server never sends requests; a ``tools/call``, ``prompts/get`` or
``resources/read`` answers ``resultType: "input_required"`` with ``inputRequests`` and/or a
``requestState``, and the client retries the same request (a new id, the answers under the
same keys, the state echoed). The ``rounds`` tool, the ``rounds`` prompt and the
``test://rounds/<script>`` resource run a scripted list of such rounds and check every retry;
the final result reports each request of the conversation and each check, so a test asserts
what the client sent. Every modern request that carries ``inputResponses`` or
``requestState`` is recorded, so a test can also see that no other request carried them
(``rounds_log``). It is a mixin of ``ScriptedMcpServer``; the behaviour is documented in
``docs/testing.md`` ("Input rounds").
"""

from __future__ import annotations

import collections
import time
import urllib.parse
from dataclasses import dataclass, field
from typing import Any

import orjson

from .catalog import CAPABILITY_FOR, tool_error
from .protocol import (
    CAPS_KEY,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    MISSING_CLIENT_CAPABILITY,
    Ctx,
    RpcError,
)
from .state import ServerState

__all__ = ["ROUNDS_URI_PREFIX", "RoundsMixin", "rounds_prompt_arguments", "rounds_uri"]

ROUNDS_URI_PREFIX = "test://rounds/"
MAX_ROUNDS = 64  # rounds in one script
MAX_KEYS = 16  # inputRequests per round
ENDLESS_CAP = 1000  # input_required results one endless conversation sends at most
MAX_PENDING = 1000  # conversations waiting for a retry
MAX_KEPT = 200  # conversations remembered after they end
MAX_CARRIERS = 10_000  # requests carrying inputResponses/requestState remembered
_CARRIED = ("inputResponses", "requestState")
_SCRIPT_KEYS = frozenset(
    {"rounds", "final_result_type", "endless", "check_capabilities", "strict", "tag"}
)


def rounds_uri(script: dict[str, Any]) -> str:
    """The ``resources/read`` URI that runs ``script`` (the ``rounds`` tool's arguments)."""
    return ROUNDS_URI_PREFIX + urllib.parse.quote(orjson.dumps(script).decode(), safe="")


def rounds_prompt_arguments(script: dict[str, Any]) -> dict[str, str]:
    """The ``prompts/get`` arguments of the ``rounds`` prompt that run ``script``."""
    return {"script": orjson.dumps(script).decode()}


@dataclass(slots=True)
class Script:
    rounds: list[dict[str, Any]]
    final_result_type: str | None = "complete"
    endless: bool = False
    check_capabilities: bool = True
    strict: bool = False


def parse_script(args: Any) -> Script:
    """Validate a rounds script; raise ``ValueError`` saying what is wrong."""
    if not isinstance(args, dict):
        raise ValueError("the script must be an object")
    unknown = set(args) - _SCRIPT_KEYS
    if unknown:
        raise ValueError(f"unknown keys {sorted(unknown)}")
    rounds = args.get("rounds")
    if not isinstance(rounds, list) or not 1 <= len(rounds) <= MAX_ROUNDS:
        raise ValueError(f"rounds must be a list of 1..{MAX_ROUNDS} objects")
    for i, spec in enumerate(rounds, 1):
        if not isinstance(spec, dict) or not set(spec) <= set(("inputRequests", "requestState")):
            raise ValueError(f"round {i} must be an object with inputRequests and/or requestState")
        if not spec:
            raise ValueError(f"round {i} needs inputRequests or requestState")
        if "requestState" in spec and not isinstance(spec["requestState"], str):
            raise ValueError(f"round {i}: requestState must be a string")
        if "inputRequests" in spec:
            requests = spec["inputRequests"]
            if not isinstance(requests, dict) or not 1 <= len(requests) <= MAX_KEYS:
                raise ValueError(f"round {i}: inputRequests must map 1..{MAX_KEYS} keys")
            for key, request in requests.items():
                if not isinstance(request, dict) or not isinstance(request.get("method"), str):
                    raise ValueError(f"round {i}: inputRequests[{key!r}] needs a string method")
                if "params" in request and not isinstance(request["params"], dict):
                    raise ValueError(f"round {i}: inputRequests[{key!r}].params must be an object")
    final = args.get("final_result_type", "complete")
    if final is not None and not isinstance(final, str):
        raise ValueError("final_result_type must be a string or null")
    flags = {k: args.get(k, k == "check_capabilities") for k in ("endless", "check_capabilities")}
    flags["strict"] = args.get("strict", False)
    if not all(type(v) is bool for v in flags.values()):
        raise ValueError("endless, check_capabilities and strict must be booleans")
    return Script(rounds, final, **flags)


@dataclass(slots=True, eq=False)
class Conversation:
    """One scripted conversation: the rounds sent so far and every request received."""

    method: str
    name: str
    script: Script
    sent: list[dict[str, Any]] = field(default_factory=list)  # the rounds sent, in order
    requests: list[dict[str, Any]] = field(default_factory=list)
    status: str = "pending"

    def report(self) -> dict[str, Any]:
        ok = all(r["new_id"] and r["state_ok"] and r["keys_ok"] for r in self.requests)
        return {"rounds": len(self.sent), "requests": self.requests, "ok": ok}


class RoundsMixin(ServerState):
    """The ``rounds`` and ``rounds_log`` tools, the ``rounds`` prompt and resource.

    Uses the core's ``_event``; keeps the pending conversations (by method, name and
    arguments), the ended ones and the record of carriers.
    """

    _conversations: dict[tuple[str, str, bytes], Conversation]
    _ended: collections.deque[Conversation]
    _carriers: collections.deque[dict[str, Any]]

    def _note_carrier(self, ctx: Ctx) -> None:
        """Record a modern request carrying inputResponses or requestState (any method)."""
        params = ctx.params
        carried = [k for k in _CARRIED if k in params]
        if not carried:
            return
        name = params.get("uri") if ctx.method == "resources/read" else params.get("name")
        legit = (
            (ctx.method == "tools/call" and name in ("rounds", "client_request"))
            or (ctx.method == "prompts/get" and name == "rounds")
            or (
                ctx.method == "resources/read"
                and isinstance(name, str)
                and name.startswith(ROUNDS_URI_PREFIX)
            )
        )
        self._carriers.append(
            {"id": ctx.id, "method": ctx.method, "name": name, "carried": carried, "legit": legit}
        )

    # ---- the three entry points -----------------------------------------------------------

    def _t_rounds(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        if ctx.era != "modern":
            return tool_error("rounds: input_required rounds belong to the modern era; use ask")
        try:
            script = parse_script(args)
        except ValueError as e:
            return tool_error(f"rounds: {e}")
        out = self._round(ctx, "rounds", args, script)
        if out.get("resultType") == "input_required":
            return out
        return {
            "content": [{"type": "text", "text": orjson.dumps(out["report"]).decode()}],
            "structuredContent": out["report"],
            "resultType": out["resultType"],
        }

    def _rounds_prompt(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        text = args.get("script")
        script = self._script_or_error(ctx, text, "the rounds prompt needs arguments.script")
        out = self._round(ctx, "rounds", args, script)
        if out.get("resultType") == "input_required":
            return out
        message = {"type": "text", "text": orjson.dumps(out["report"]).decode()}
        return {
            "description": "rounds report",
            "messages": [{"role": "user", "content": message}],
            "resultType": out["resultType"],
        }

    def _rounds_resource(self, ctx: Ctx, uri: str) -> dict[str, Any]:
        text = urllib.parse.unquote(uri[len(ROUNDS_URI_PREFIX) :])
        script = self._script_or_error(ctx, text, "test://rounds/ needs a percent-encoded script")
        out = self._round(ctx, uri, {}, script)
        if out.get("resultType") == "input_required":
            return out
        content = {"uri": uri, "mimeType": "application/json"}
        content["text"] = orjson.dumps(out["report"]).decode()
        return {"contents": [content], "resultType": out["resultType"]}

    def _script_or_error(self, ctx: Ctx, text: Any, missing: str) -> Script:
        if ctx.era != "modern":
            raise RpcError(INVALID_PARAMS, "Invalid params: rounds belong to the modern era")
        if not isinstance(text, str):
            raise RpcError(INVALID_PARAMS, f"Invalid params: {missing}")
        try:
            return parse_script(orjson.loads(text))
        except (orjson.JSONDecodeError, ValueError) as e:
            raise RpcError(INVALID_PARAMS, f"Invalid params: bad rounds script: {e}") from None

    # ---- one request of a conversation ----------------------------------------------------

    def _round(self, ctx: Ctx, name: str, args: dict[str, Any], script: Script) -> dict[str, Any]:
        """Check this request against the conversation; the next round, or the report."""
        params = ctx.params
        carried = [k for k in _CARRIED if k in params]
        key = (ctx.method, name, orjson.dumps(args, option=orjson.OPT_SORT_KEYS))
        conv = self._conversations.get(key)
        if conv is not None and not carried:  # a fresh request: the old conversation is over
            self._end(key, conv, "abandoned")
            conv = None
        if conv is None:
            conv = Conversation(ctx.method, name, script)
            self._conversations[key] = conv
            while len(self._conversations) > MAX_PENDING:
                oldest = next(iter(self._conversations))
                self._end(oldest, self._conversations[oldest], "abandoned")
        entry = self._check(ctx, conv, carried)
        conv.requests.append(entry)
        if script.strict and not (entry["new_id"] and entry["state_ok"] and entry["keys_ok"]):
            self._end(key, conv, "failed")
            failed = [k for k in ("new_id", "state_ok", "keys_ok") if not entry[k]]
            raise RpcError(
                INVALID_PARAMS, f"Invalid params: retry failed {', '.join(failed)}", entry
            )
        k = len(conv.sent)
        if k < len(script.rounds) or script.endless:
            if k >= ENDLESS_CAP:
                self._end(key, conv, "failed")
                raise RpcError(INTERNAL_ERROR, f"rounds: gave up after {ENDLESS_CAP} rounds")
            spec = script.rounds[min(k, len(script.rounds) - 1)]
            if script.check_capabilities:
                missing = _missing_capability(spec, ctx.meta)
                if missing is not None:
                    self._end(key, conv, "refused")
                    capability = next(iter(missing))
                    raise RpcError(
                        MISSING_CLIENT_CAPABILITY,
                        f"Server requires the {capability} capability for this request",
                        {"requiredCapabilities": missing},
                    )
            conv.sent.append(spec)
            self._event("input_required", id=ctx.id, round=len(conv.sent))
            return {"resultType": "input_required", **spec}
        self._end(key, conv, "complete")
        return {"report": conv.report(), "resultType": script.final_result_type}

    def _check(self, ctx: Ctx, conv: Conversation, carried: list[str]) -> dict[str, Any]:
        params = ctx.params
        previous = conv.sent[-1] if conv.sent else {}
        if "requestState" in previous:
            state_ok = params.get("requestState") == previous["requestState"]
        else:
            state_ok = "requestState" not in params
        if "inputRequests" in previous:
            responses = params.get("inputResponses")
            keys_ok = isinstance(responses, dict) and set(responses) == set(
                previous["inputRequests"]
            )
        else:
            keys_ok = "inputResponses" not in params
        now = time.monotonic()
        after = None if not conv.requests else round(now - conv.requests[-1]["t"], 6)
        return {
            "id": ctx.id,
            "round": len(conv.requests) + 1,
            "t": now,
            "after": after,
            "carried": carried,
            "inputResponses": params.get("inputResponses"),
            "requestState": params.get("requestState"),
            "new_id": all(r["id"] != ctx.id for r in conv.requests),
            "state_ok": state_ok,
            "keys_ok": keys_ok,
        }

    def _end(self, key: tuple[str, str, bytes], conv: Conversation, status: str) -> None:
        self._conversations.pop(key, None)
        conv.status = status
        self._ended.append(conv)

    # ---- the log --------------------------------------------------------------------------

    def _t_rounds_log(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        conversations = [
            {"method": c.method, "name": c.name, "status": c.status, **c.report()}
            for c in (*self._ended, *self._conversations.values())
        ]
        carriers = list(self._carriers)
        report = {
            "conversations": conversations,
            "carriers": carriers,
            "stray": [c for c in carriers if not c["legit"]],
        }
        return {
            "content": [{"type": "text", "text": orjson.dumps(report).decode()}],
            "structuredContent": report,
        }


def _missing_capability(spec: dict[str, Any], meta: dict[str, Any] | None) -> dict[str, Any] | None:
    """The capabilities a round needs that this request's clientCapabilities lack (or None)."""
    declared = (meta or {}).get(CAPS_KEY)
    declared = declared if isinstance(declared, dict) else {}
    for request in (spec.get("inputRequests") or {}).values():
        capability = CAPABILITY_FOR.get(request["method"])
        if capability is None:
            continue
        if capability not in declared:
            return {capability: {}}
        mode = (request.get("params") or {}).get("mode")
        if capability == "elicitation" and mode == "url":
            modes = declared["elicitation"]
            if not isinstance(modes, dict) or "url" not in modes:
                return {"elicitation": {"url": {}}}
    return None
