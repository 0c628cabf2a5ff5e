"""Serving a server's request with the handler, as pure functions: params -> the value a
handler method receives, its return value -> the JSON answer, and the refusals with their
JSON-RPC codes (docs/connection.md, "Server-to-client requests").

The same functions serve both eras: a legacy JSON-RPC request's ``params`` and a modern
``inputRequests`` entry's ``params`` have one shape, and so do the answers. A refusal is a
:class:`Refusal`: the ``code`` and ``message`` answer a legacy server, the ``reason`` is what
a modern call fails with. No message quotes the params or the handler's answer (they are the
user's data); each says what was wrong, so the user can fix the handler.

=============  =======  ===================================================================
reason         code     when
=============  =======  ===================================================================
no_method      -32601   the handler lacks the method (or the client has no handler)
bad_mode       -32602   an elicitation mode the handler's ``elicitation_modes`` lacks
bad_params     -32602   the server's params do not have the protocol's shape
declined       -1       the method raised ``Declined`` (the protocol's "user rejected")
busy           -32603   ``max_server_requests`` methods are already running
timeout        -32603   the method ran past ``handler_timeout``
raised         -32603   the method raised (logged by type, never its text)
bad_result     -32603   the method's answer does not have the protocol's shape
=============  =======  ===================================================================
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from typing import Any

from ..handler_types import ElicitRequest, ElicitResult, Root, SamplingRequest, SamplingResult
from .elicit_defaults import fill_defaults

__all__ = [
    "INTERNAL_ERROR",
    "INVALID_PARAMS",
    "METHOD_NOT_FOUND",
    "USER_REJECTED",
    "Refusal",
    "bad_mode",
    "busy",
    "declined",
    "elicit_request",
    "elicit_result",
    "encode_result",
    "no_method",
    "raised",
    "roots_result",
    "sampling_request",
    "sampling_result",
    "timed_out",
]

METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
#: The legacy answer to a sampling request the user declined (2025-11-25 client features,
#: "Sampling", "Error Handling").
USER_REJECTED = -1


class Refusal(Exception):
    """Why a server request gets no result: a JSON-RPC ``code`` and safe ``message`` for a
    legacy server, and the ``reason`` a modern call fails with (the module's table).

    >>> r = no_method("sampling/createMessage")
    >>> r.code, r.reason, str(r)
    (-32601, 'no_method', 'Method not found')
    """

    def __init__(self, code: int, message: str, reason: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason

    def __repr__(self) -> str:
        return f"<Refusal {self.reason} {self.code}>"


def no_method(method: str) -> Refusal:
    """The handler has no method for ``method`` (or the method is not served at all)."""
    return Refusal(METHOD_NOT_FOUND, "Method not found", "no_method")


def bad_mode(mode: Any) -> Refusal:
    """An elicitation mode the client did not declare.

    >>> bad_mode("url").message
    "this client does not accept elicitation mode 'url'"
    """
    shown = repr(mode) if mode in ("form", "url") else "of this request"
    return Refusal(
        INVALID_PARAMS, f"this client does not accept elicitation mode {shown}", "bad_mode"
    )


def declined(method: str) -> Refusal:
    """The user declined (the method raised ``Declined``).

    >>> declined("sampling/createMessage").message
    'User rejected sampling request'
    """
    what = "roots" if method == "roots/list" else "sampling"
    return Refusal(USER_REJECTED, f"User rejected {what} request", "declined")


def busy(limit: int) -> Refusal:
    """``limit`` (``max_server_requests``) handler methods are already running."""
    return Refusal(
        INTERNAL_ERROR,
        f"the client is already serving {limit} requests (max_server_requests); try later",
        "busy",
    )


def timed_out(method: str, timeout: float) -> Refusal:
    """The handler method for ``method`` ran past ``handler_timeout``."""
    return Refusal(
        INTERNAL_ERROR,
        f"the client's handler did not answer {method} within {timeout:g} s (handler_timeout)",
        "timeout",
    )


def raised(method: str, exc: BaseException) -> Refusal:
    """The handler method raised ``exc``: its type is named, never its text (which may
    quote the params or the user's data)."""
    return Refusal(
        INTERNAL_ERROR,
        f"the client's handler raised {type(exc).__name__} on {method}",
        "raised",
    )


def _bad_params(method: str, why: str) -> Refusal:
    return Refusal(INVALID_PARAMS, f"invalid {method} params: {why}", "bad_params")


def _bad_result(handler_method: str, why: str) -> Refusal:
    return Refusal(
        INTERNAL_ERROR, f"the client's handler {handler_method} returned {why}", "bad_result"
    )


# -- params -> request values --------------------------------------------------------------


def _optional(
    params: Mapping[str, Any], key: str, kind: type | tuple[type, ...], method: str
) -> Any:
    value = params.get(key)
    if value is None:
        return None
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in _tuple(kind)):
        raise _bad_params(method, f"{key} has the wrong type")
    return value


def _tuple(kind: type | tuple[type, ...]) -> tuple[type, ...]:
    return kind if isinstance(kind, tuple) else (kind,)


def sampling_request(params: Any) -> SamplingRequest:
    """The :class:`SamplingRequest` for ``sampling/createMessage`` params.

    >>> sampling_request({"messages": [], "maxTokens": 10, "systemPrompt": "be brief"})
    <SamplingRequest messages=0 max_tokens=10>
    >>> sampling_request({"messages": "hi", "maxTokens": 10})
    Traceback (most recent call last):
    ...
    conduit_mcp.protocol.serving.Refusal: invalid sampling/createMessage params: messages must be a list of objects
    """
    method = "sampling/createMessage"
    if not isinstance(params, dict):
        raise _bad_params(method, "params must be an object")
    messages = params.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise _bad_params(method, "messages must be a list of objects")
    max_tokens = params.get("maxTokens")
    if not isinstance(max_tokens, int) or isinstance(max_tokens, bool):
        raise _bad_params(method, "maxTokens must be an integer")
    stop = _optional(params, "stopSequences", list, method)
    if stop is not None and not all(isinstance(s, str) for s in stop):
        raise _bad_params(method, "stopSequences must be a list of strings")
    tools = _optional(params, "tools", list, method)
    if tools is not None and not all(isinstance(t, dict) for t in tools):
        raise _bad_params(method, "tools must be a list of objects")
    temperature = _optional(params, "temperature", (int, float), method)
    return SamplingRequest(
        messages=messages,
        max_tokens=max_tokens,
        system_prompt=_optional(params, "systemPrompt", str, method),
        temperature=float(temperature) if temperature is not None else None,
        stop_sequences=stop,
        model_preferences=_optional(params, "modelPreferences", dict, method),
        include_context=_optional(params, "includeContext", str, method),
        metadata=_optional(params, "metadata", dict, method),
        tools=tools,
        tool_choice=_optional(params, "toolChoice", dict, method),
        raw=params,
    )


def elicit_request(params: Any, modes: Iterable[str] = ("form",)) -> ElicitRequest:
    """The :class:`ElicitRequest` for ``elicitation/create`` params, if its mode (``form``
    when absent) is one of ``modes``: else a ``bad_mode`` refusal, before anything else.

    >>> elicit_request({"message": "Name?", "requestedSchema": {"type": "object"}})
    <ElicitRequest form>
    >>> elicit_request({"mode": "url", "message": "Sign in", "url": "https://x"})
    Traceback (most recent call last):
    ...
    conduit_mcp.protocol.serving.Refusal: this client does not accept elicitation mode 'url'
    """
    method = "elicitation/create"
    if not isinstance(params, dict):
        raise _bad_params(method, "params must be an object")
    mode = params.get("mode", "form")
    if mode not in tuple(modes):
        raise bad_mode(mode)
    message = params.get("message")
    if not isinstance(message, str):
        raise _bad_params(method, "message must be a string")
    if mode == "form":
        schema = params.get("requestedSchema")
        if not isinstance(schema, dict):
            raise _bad_params(method, "requestedSchema must be an object")
        return ElicitRequest("form", message, requested_schema=schema, raw=params)
    url = params.get("url")
    if not isinstance(url, str) or not url:
        raise _bad_params(method, "url must be a non-empty string")
    elicitation_id = _optional(params, "elicitationId", str, method)
    return ElicitRequest("url", message, url=url, elicitation_id=elicitation_id, raw=params)


# -- handler answers -> JSON results -------------------------------------------------------

_ROLES = ("user", "assistant")


def _content_block(value: Any) -> bool:
    return isinstance(value, Mapping) and isinstance(value.get("type"), str)


def sampling_result(value: Any) -> dict[str, Any]:
    """The ``CreateMessageResult`` for what ``create_message`` returned (a
    :class:`SamplingResult` or that dict).

    >>> sampling_result(SamplingResult("Paris", model="m"))
    {'role': 'assistant', 'content': {'type': 'text', 'text': 'Paris'}, 'model': 'm', 'stopReason': 'endTurn'}
    >>> sampling_result({"role": "assistant", "content": "Paris", "model": "m"})
    Traceback (most recent call last):
    ...
    conduit_mcp.protocol.serving.Refusal: the client's handler create_message returned a content that is not a content block (an object with a 'type') or a list of them
    """
    who = "create_message"
    if isinstance(value, SamplingResult):
        out: dict[str, Any] = {"role": value.role, "content": value.content, "model": value.model}
        if value.stop_reason is not None:
            out["stopReason"] = value.stop_reason
    elif isinstance(value, Mapping):
        out = dict(value)
    else:
        raise _bad_result(
            who, f"a {type(value).__name__}, not a SamplingResult or CreateMessageResult dict"
        )
    if out.get("role") not in _ROLES:
        raise _bad_result(who, "a role that is not 'user' or 'assistant'")
    content = out.get("content")
    if not (
        _content_block(content)
        or (isinstance(content, list) and content and all(_content_block(c) for c in content))
    ):
        raise _bad_result(
            who,
            "a content that is not a content block (an object with a 'type') or a list of them",
        )
    if not isinstance(out.get("model"), str) or not out["model"]:
        raise _bad_result(who, "no model (a non-empty string)")
    if out.get("stopReason") is None:
        out.pop("stopReason", None)
    elif not isinstance(out["stopReason"], str):
        raise _bad_result(who, "a stopReason that is not a string")
    return _json(who, out)


def _flat_value(value: Any) -> bool:
    if isinstance(value, (str, bool, int)):
        return True
    if isinstance(value, float):
        return math.isfinite(value)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def elicit_result(value: Any) -> dict[str, Any]:
    """The protocol's ``ElicitResult`` for what ``elicit`` returned (an
    :class:`ElicitResult` or that dict): ``content`` only with ``accept``, a flat object of
    strings, numbers, booleans and lists of strings.

    >>> elicit_result(ElicitResult.accept({"name": "octocat"}))
    {'action': 'accept', 'content': {'name': 'octocat'}}
    >>> elicit_result({"action": "decline", "content": {"name": "x"}})
    Traceback (most recent call last):
    ...
    conduit_mcp.protocol.serving.Refusal: the client's handler elicit returned content with action 'decline' (only 'accept' carries content)
    """
    who = "elicit"
    if isinstance(value, ElicitResult):
        action: Any = value.action
        content: Any = value.content
    elif isinstance(value, Mapping):
        action, content = value.get("action"), value.get("content")
        extra = set(value) - {"action", "content", "_meta"}
        if extra:
            raise _bad_result(who, f"unknown fields {sorted(map(str, extra))!r}")
    else:
        raise _bad_result(who, f"a {type(value).__name__}, not an ElicitResult or its dict")
    if action not in ("accept", "decline", "cancel"):
        raise _bad_result(who, "an action that is not 'accept', 'decline' or 'cancel'")
    out: dict[str, Any] = {"action": action}
    if content is not None:
        if action != "accept":
            raise _bad_result(
                who, f"content with action {action!r} (only 'accept' carries content)"
            )
        if not isinstance(content, Mapping) or not all(isinstance(k, str) for k in content):
            raise _bad_result(who, "a content that is not an object")
        bad = sorted(k for k, v in content.items() if not _flat_value(v))
        if bad:
            # The field names are the server's schema, not the user's answers.
            raise _bad_result(
                who,
                f"content whose field(s) {bad!r} are not a string, number, boolean or "
                "list of strings",
            )
        out["content"] = dict(content)
    if isinstance(value, Mapping) and isinstance(value.get("_meta"), Mapping):
        out["_meta"] = dict(value["_meta"])
    return _json(who, out)


def _root(item: Any) -> dict[str, Any]:
    who = "list_roots"
    uri: Any
    name: Any
    if isinstance(item, Root):
        uri, name = item.uri, item.name
    elif isinstance(item, str):
        uri, name = item, None
    elif isinstance(item, Mapping):
        uri, name = item.get("uri"), item.get("name")
    else:
        raise _bad_result(who, f"a root that is a {type(item).__name__}, not a Root, str or dict")
    if not isinstance(uri, str) or not uri.startswith("file://"):
        raise _bad_result(who, "a root whose uri is not a file:// URI string")
    out = {"uri": uri}
    if name is not None:
        if not isinstance(name, str):
            raise _bad_result(who, "a root whose name is not a string")
        out["name"] = name
    return out


def roots_result(value: Any) -> dict[str, Any]:
    """The ``ListRootsResult`` for what ``list_roots`` returned: an iterable of
    :class:`Root`, ``file://`` URI strings or ``{"uri", "name"}`` dicts (or the result dict).

    >>> roots_result([Root("file:///srv", "srv"), "file:///tmp"])
    {'roots': [{'uri': 'file:///srv', 'name': 'srv'}, {'uri': 'file:///tmp'}]}
    >>> roots_result("file:///srv")
    Traceback (most recent call last):
    ...
    conduit_mcp.protocol.serving.Refusal: the client's handler list_roots returned a str, not an iterable of roots
    """
    who = "list_roots"
    if isinstance(value, Mapping):
        if "roots" not in value:
            raise _bad_result(who, "a dict without 'roots'")
        value = value["roots"]
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Iterable):
        raise _bad_result(who, f"a {type(value).__name__}, not an iterable of roots")
    return _json(who, {"roots": [_root(item) for item in value]})


def _json(who: str, out: dict[str, Any]) -> dict[str, Any]:
    # The connection encodes the answer later, on its own thread: a value JSON cannot carry
    # (bytes, a set, NaN) must fail here, as this handler's bad result, not crash it there.
    try:
        json.dumps(out, allow_nan=False)
    except (TypeError, ValueError) as exc:
        raise _bad_result(who, f"a value JSON cannot encode ({type(exc).__name__})") from None
    return out


_ENCODERS = {
    "sampling/createMessage": sampling_result,
    "elicitation/create": elicit_result,
    "roots/list": roots_result,
}


def encode_result(method: str, value: Any, params: Any = None) -> dict[str, Any]:
    """The JSON result for what the handler method serving ``method`` returned; ``params``
    are the server's request's, whose ``requestedSchema`` gives an accepted form
    elicitation its defaults (:func:`~.elicit_defaults.fill_defaults`).

    >>> encode_result("roots/list", [])
    {'roots': []}
    >>> schema = {"properties": {"n": {"type": "integer", "default": 3}}}
    >>> encode_result("elicitation/create", ElicitResult.accept(), {"requestedSchema": schema})
    {'action': 'accept', 'content': {'n': 3}}
    """
    encoder = _ENCODERS.get(method)
    if encoder is None:
        raise no_method(method)
    result = encoder(value)
    if method == "elicitation/create" and isinstance(params, Mapping):
        result = fill_defaults(result, params.get("requestedSchema"))
    return result
