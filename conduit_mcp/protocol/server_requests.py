"""What the server asks of the client: the rules, as pure functions.

Two shapes of the same thing (docs/connection.md, "Server-to-client requests"):

* **Legacy era**: the server sends JSON-RPC requests (``ping``, ``sampling/createMessage``,
  ``elicitation/create``, ``roots/list``). :func:`legacy_disposition` says what to do with one
  given the capabilities the client declared: answer ``ping`` at once, hand it to the
  handler, or refuse it with the error the 2025-11-25 spec names (``-32601`` for anything
  undeclared, ``-32602`` for an elicitation mode the client did not declare).
* **Modern era** (multi-round-trip): a ``tools/call``, ``prompts/get`` or ``resources/read``
  is answered ``resultType: "input_required"`` with ``inputRequests`` (the same three
  requests, without ids) and/or an opaque ``requestState``; the client answers each entry
  and sends the original request again, with a new id, ``inputResponses`` under the same
  keys and ``requestState`` echoed exactly. :func:`classify_result` reads such a result,
  :func:`retry_params` builds the retry, :func:`state_only_delay` paces a retry that has
  nothing to answer (the server shedding load).

>>> legacy_disposition("roots/list", None, {"roots": {}})
'serve'
>>> legacy_disposition("sampling/createMessage", {}, {"roots": {}})
(-32601, 'Method not found')
>>> classify_result("tools/call", {"content": []}) is None
True
>>> classify_result("tools/call", {"resultType": "input_required", "requestState": "s"})
InputRequired(requests={}, state='s')
>>> retry_params({"name": "t"}, {"k": {"action": "decline"}}, None)
{'name': 't', 'inputResponses': {'k': {'action': 'decline'}}}
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal, NamedTuple

from .jsonrpc import INVALID_PARAMS, METHOD_NOT_FOUND

#: The server requests a handler answers, and the client capability each needs.
SERVED: Final[Mapping[str, str]] = {
    "sampling/createMessage": "sampling",
    "elicitation/create": "elicitation",
    "roots/list": "roots",
}
#: The only requests a modern server may answer ``input_required``.
ROUND_METHODS: Final[frozenset[str]] = frozenset({"tools/call", "prompts/get", "resources/read"})
#: A task's input round ends in the ``tasks/update`` that carries its answers (the Tasks
#: extension, "Task Update Requests"; docs/tasks.md).
TASK_UPDATE: Final = "tasks/update"
#: The first wait before retrying a state-only ``input_required`` (doubling, capped).
STATE_ONLY_FIRST: Final = 0.05
STATE_ONLY_CAP: Final = 1.0


def elicitation_modes(capabilities: Mapping[str, Any]) -> frozenset[str]:
    """The elicitation modes the client declared: ``{}`` means form only (the spec keeps
    that reading for clients written before modes existed)."""
    caps = capabilities.get("elicitation")
    if not isinstance(caps, Mapping):
        return frozenset()
    modes = frozenset(m for m in ("form", "url") if m in caps)
    return modes or frozenset({"form"})


def legacy_disposition(
    method: str, params: Any, capabilities: Mapping[str, Any]
) -> Literal["ping", "serve"] | tuple[int, str]:
    """``"ping"`` (answer ``{}``), ``"serve"`` (run the handler), or the ``(code, message)``
    to refuse the request with."""
    if method == "ping":
        return "ping"
    capability = SERVED.get(method)
    if capability is None or capability not in capabilities:
        return (METHOD_NOT_FOUND, "Method not found")
    if capability == "elicitation":
        mode = params.get("mode", "form") if isinstance(params, Mapping) else "form"
        if mode not in elicitation_modes(capabilities):
            return (INVALID_PARAMS, f"Unsupported elicitation mode: {_short(mode)}")
    return "serve"


class InputRequired(NamedTuple):
    """A valid ``input_required`` result: the entries to answer (key -> (method, params)),
    empty for a state-only round, and the state to echo (None: send none)."""

    requests: dict[str, tuple[str, dict[str, Any] | None]]
    state: str | None


class BadResult(NamedTuple):
    """A result no client can act on: the call fails with ``protocol``/``reason``."""

    reason: str
    message: str


def classify_result(method: str, result: Any) -> InputRequired | BadResult | None:
    """None for a complete result (``resultType`` ``"complete"`` or absent: the spec says
    absent means complete), else the round to run or why the result is unusable."""
    if type(result) is not dict:
        return None
    kind = result.get("resultType")
    if kind is None or kind == "complete":
        return None
    if kind != "input_required":
        return BadResult(
            "unknown_result_type",
            f"{method}: the server answered resultType {_short(kind)}, which this client does "
            "not know (it knows 'complete' and 'input_required')",
        )
    if method not in ROUND_METHODS and method != TASK_UPDATE:
        return BadResult(
            "unexpected_input_required",
            f"{method}: the server answered input_required, which only tools/call, "
            "prompts/get and resources/read may",
        )
    requests = result.get("inputRequests")
    state = result.get("requestState")
    if state is not None and type(state) is not str:
        return BadResult(
            "bad_input_required", f"{method}: input_required with a requestState not a string"
        )
    if requests is None:
        if state is None:
            return BadResult(
                "bad_input_required",
                f"{method}: input_required with neither inputRequests nor requestState",
            )
        return InputRequired({}, state)
    if type(requests) is not dict or not requests:
        return BadResult(
            "bad_input_required", f"{method}: input_required whose inputRequests is not an object"
        )
    entries: dict[str, tuple[str, dict[str, Any] | None]] = {}
    for key, entry in requests.items():
        asked = entry.get("method") if type(entry) is dict else None
        params = entry.get("params") if type(entry) is dict else None
        if (
            type(asked) is not str
            or asked not in SERVED
            or (params is not None and type(params) is not dict)
        ):
            return BadResult(
                "bad_input_required",
                f"{method}: inputRequests entry {_short(key)} is not a sampling/createMessage, "
                "elicitation/create or roots/list request",
            )
        entries[key] = (asked, params)
    return InputRequired(entries, state)


def retry_params(
    base: dict[str, Any] | None, responses: dict[str, Any] | None, state: str | None
) -> dict[str, Any]:
    """The params of a retry: the original request's, with this round's ``inputResponses``
    (none for a state-only round) and ``requestState`` exactly as received (none if none
    came). Nothing of an earlier round is carried."""
    params = dict(base) if base else {}
    params.pop("inputResponses", None)
    params.pop("requestState", None)
    if responses:
        params["inputResponses"] = responses
    if state is not None:
        params["requestState"] = state
    return params


def state_only_delay(round_number: int) -> float:
    """The wait before retrying round ``round_number`` (1-based) that asked nothing: the
    server gave only a state, most likely shedding load, so the client backs off."""
    return float(min(STATE_ONLY_FIRST * 2.0 ** max(0, round_number - 1), STATE_ONLY_CAP))


def _short(value: Any) -> str:
    """A server-chosen value in a message: bounded, so a hostile server cannot fill logs."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."
