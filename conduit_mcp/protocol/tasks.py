"""Tasks: the client's rules for a tool call answered with a task, as pure functions.

Two forms of the same thing (docs/tasks.md):

* **Modern era** (the ``io.modelcontextprotocol/tasks`` extension, ext-tasks
  ``specification/draft/tasks.md``): a client that declares the extension in a request's
  client capabilities may get a ``CreateTaskResult`` (``resultType: "task"``, the task's
  fields inline) to ``tools/call``, and only to it ("Supported Methods"; any other request
  answered so is an invalid response). It polls ``tasks/get`` (a ``DetailedTask`` whose
  ``result`` / ``error`` / ``inputRequests`` come with the status), answers input with
  ``tasks/update`` and cancels with ``tasks/cancel``.
* **Legacy era** (the 2025-11-25 schema's experimental tasks): a call with the ``task``
  request parameter is answered ``{"task": {...}}`` (``ttl`` and ``pollInterval`` in ms);
  ``tasks/get`` answers the task flat, and the final ``CallToolResult`` is fetched with
  ``tasks/result``.

Every time is a parameter (``now`` is wall-clock seconds since the epoch, the clock the
server's ``createdAt`` is written in). Nothing here ever puts a task id into an error text: a
task id may be a bearer token (ext-tasks, "Security Considerations").

>>> info = parse_created({"resultType": "task", "taskId": "t", "status": "working",
...                       "createdAt": "2025-11-25T10:30:00Z", "ttlMs": 60000,
...                       "pollIntervalMs": 5000}, "modern")
>>> info.status, info.ttl, info.poll
('working', 60.0, 5.0)
>>> poll_delay(0.001), poll_delay(None), poll_delay(3600.0)
(0.05, 1.0, 30.0)
>>> outcome(parse_status({"taskId": "t", "status": "completed",
...                       "result": {"content": [], "isError": True}}, "modern"))
Completed(result={'content': [], 'isError': True})
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any, Final, Literal, NamedTuple

from ..errors import Error
from .jsonrpc import ErrorResponse, server_error

__all__ = [
    "DEFAULT_POLL",
    "EXTENSION",
    "POLL_CAP",
    "POLL_FLOOR",
    "STATUSES",
    "TERMINAL",
    "Cancelled",
    "Completed",
    "Failed",
    "InputBook",
    "TaskInfo",
    "argument_digest",
    "declares",
    "expired",
    "expired_error",
    "is_task_answer",
    "lost_error",
    "needs_details",
    "outcome",
    "parse_created",
    "parse_status",
    "poll_delay",
    "request_capabilities",
    "server_offers",
    "task_refusal",
    "with_extension",
]

#: The extension's identifier, declared in ``clientCapabilities.extensions``.
EXTENSION: Final = "io.modelcontextprotocol/tasks"
#: The statuses a task may have, and those that end it.
STATUSES: Final = frozenset({"working", "input_required", "completed", "failed", "cancelled"})
TERMINAL: Final = frozenset({"completed", "failed", "cancelled"})
#: The shortest wait between two polls of one task (seconds), whatever ``pollIntervalMs``
#: says: a server advertising 0 must not be polled in a busy loop.
POLL_FLOOR: Final = 0.05
#: The longest wait between two polls (seconds): a server advertising an hour would leave a
#: finished task unnoticed for that long, and a cancelled caller waiting on it.
POLL_CAP: Final = 30.0
#: The wait when the server gives no ``pollIntervalMs`` / ``pollInterval``.
DEFAULT_POLL: Final = 1.0

Era = Literal["modern", "legacy"]


class TaskInfo(NamedTuple):
    """One observed state of a task. ``created`` is seconds since the epoch (None: the
    server's ``createdAt`` was missing or unreadable), ``ttl`` and ``poll`` are seconds
    (None: unlimited / not given). ``result``, ``error`` and ``input_requests`` are the
    status's payload, when the answer carried one."""

    task_id: str
    status: str
    message: str | None = None
    created: float | None = None
    ttl: float | None = None
    poll: float | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    input_requests: dict[str, Any] | None = None

    def __repr__(self) -> str:
        # The id is a bearer-like secret: never shown.
        return f"TaskInfo(status={self.status!r}, ttl={self.ttl!r}, poll={self.poll!r})"


def _bad(message: str) -> Error:
    return Error("protocol", "bad_task", message)


def parse_iso(value: Any) -> float | None:
    """An ISO 8601 timestamp as seconds since the epoch; None when absent or unreadable
    (``Z`` and offsets accepted; a naive time is read as UTC).

    >>> parse_iso("1970-01-01T00:01:00Z"), parse_iso("soon")
    (60.0, None)
    """
    if type(value) is not str or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.timestamp()


def _millis(value: Any, what: str) -> float | None:
    if value is None:
        return None
    if type(value) not in (int, float) or not math.isfinite(value) or value < 0:
        raise _bad(f"the task's {what} is not a non-negative number of milliseconds")
    return float(value) / 1000.0


def _task(fields: Any, era: Era, detailed: bool = True) -> TaskInfo:
    if type(fields) is not dict:
        raise _bad("the task is not a JSON object")
    task_id = fields.get("taskId")
    if type(task_id) is not str or not task_id:
        raise _bad("the task has no taskId string")
    status = fields.get("status")
    if status not in STATUSES:
        raise _bad(
            "the task's status is not one of working, input_required, completed, failed, cancelled"
        )
    message = fields.get("statusMessage")
    ttl_key, poll_key = ("ttlMs", "pollIntervalMs") if era == "modern" else ("ttl", "pollInterval")
    result = fields.get("result")
    error = fields.get("error")
    requests = fields.get("inputRequests")
    if era == "modern" and detailed:
        if status == "completed" and type(result) is not dict:
            raise _bad("a completed task came without its result object")
        if status == "failed" and type(error) is not dict:
            raise _bad("a failed task came without its JSON-RPC error object")
        if status == "input_required" and type(requests) is not dict:
            raise _bad("an input_required task came without its inputRequests object")
    return TaskInfo(
        task_id,
        status,
        message if type(message) is str else None,
        parse_iso(fields.get("createdAt")),
        _millis(fields.get(ttl_key), ttl_key),
        _millis(fields.get(poll_key), poll_key),
        result if type(result) is dict else None,
        error if type(error) is dict else None,
        requests if type(requests) is dict else None,
    )


def is_task_answer(result: Any, era: Era) -> bool:
    """Whether a ``tools/call`` answer is a task to poll rather than the tool's result.

    >>> is_task_answer({"resultType": "task"}, "modern"), is_task_answer({"content": []}, "legacy")
    (True, False)
    >>> is_task_answer({"task": {"taskId": "t", "status": "working"}}, "legacy")
    True
    """
    if type(result) is not dict:
        return False
    if era == "modern":
        return result.get("resultType") == "task"
    return type(result.get("task")) is dict and "content" not in result


def parse_created(result: Any, era: Era) -> TaskInfo:
    """The task of a ``CreateTaskResult`` (modern: the fields inline, ``resultType:
    "task"``; legacy: under ``task``); ``protocol``/``bad_task`` when it is not one."""
    if era == "modern":
        if type(result) is not dict or result.get("resultType") != "task":
            raise _bad("the answer is not a CreateTaskResult")
        # A CreateTaskResult is a Task, not a DetailedTask: no result, error or inputs.
        return _task(result, era, detailed=False)
    if type(result) is not dict:
        raise _bad("the answer is not a CreateTaskResult")
    return _task(result.get("task"), era)


def parse_status(result: Any, era: Era) -> TaskInfo:
    """The task of a ``tasks/get`` answer (both eras answer it flat), checked: a modern
    ``completed`` carries its ``result``, ``failed`` its ``error``, ``input_required`` its
    ``inputRequests``."""
    return _task(result, era)


def poll_delay(poll: float | None) -> float:
    """Seconds to wait before the next ``tasks/get``: the server's interval (it may change
    from one answer to the next) within :data:`POLL_FLOOR` and :data:`POLL_CAP`,
    :data:`DEFAULT_POLL` when it gave none."""
    if poll is None:
        return DEFAULT_POLL
    return min(POLL_CAP, max(POLL_FLOOR, poll))


def expired(created: float | None, ttl: float | None, now: float) -> bool:
    """The TTL backstop (ext-tasks, "Task Polling"): past ``createdAt + ttlMs`` with no
    terminal status, the task may be treated as no longer usable. Never true for an
    unlimited TTL or an unknown creation time.

    >>> expired(100.0, 60.0, 161.0), expired(100.0, None, 1e12), expired(None, 1.0, 1e12)
    (True, False, False)
    """
    return created is not None and ttl is not None and now > created + ttl


def lost_error(method: str = "tasks/get") -> Error:
    """The error for a task the server no longer knows (``-32602`` for an id it gave): its
    process restarted, its session ended, or it purged the task."""
    return Error(
        "unavailable",
        "task_lost",
        f"{method}: the server no longer knows the task (it restarted, its session ended, or "
        "it discarded the task); call the tool again",
        code=-32602,
    )


def expired_error() -> Error:
    """The error for a task whose TTL ran out before it ended (the client's backstop)."""
    return Error(
        "timeout",
        "task_expired",
        "the task did not end before its time-to-live (createdAt + ttlMs) ran out; the "
        "server may already have discarded it",
    )


class Completed(NamedTuple):
    """The task ended with the request's result (a tool result with ``isError`` too)."""

    result: dict[str, Any]


class Failed(NamedTuple):
    """The task ended with a JSON-RPC error: the call raises it."""

    error: Error


class Cancelled(NamedTuple):
    """The task was cancelled (by the client or the server): the call raises it."""

    error: Error


def needs_details(info: TaskInfo, era: Era) -> bool:
    """Whether a modern task seen ended (in its ``CreateTaskResult``, which carries no
    payload) must be read with ``tasks/get`` for its result or error.

    >>> needs_details(TaskInfo("t", "completed"), "modern"), needs_details(TaskInfo("t", "completed"), "legacy")
    (True, False)
    """
    if era != "modern":
        return False
    return (info.status == "completed" and info.result is None) or (
        info.status == "failed" and info.error is None
    )


def outcome(info: TaskInfo) -> Completed | Failed | Cancelled | None:
    """What a terminal task means for the caller; None while it has not ended. In the
    legacy era a ``completed`` task carries no result (it is fetched with ``tasks/result``):
    :class:`Completed` then holds an empty dict."""
    if info.status == "completed":
        return Completed(info.result if info.result is not None else {})
    if info.status == "failed":
        err = info.error or {}
        code = err.get("code")
        message = err.get("message")
        return Failed(
            server_error(
                ErrorResponse(
                    None,
                    code if type(code) is int else -32603,
                    message if type(message) is str else "the task failed",
                    err.get("data"),
                ),
                "tools/call",
            )
        )
    if info.status == "cancelled":
        return Cancelled(Error("cancelled", "task_cancelled", "the task was cancelled"))
    return None


class InputBook:
    """The ``inputRequests`` keys of one task already answered, so that nothing is answered
    twice across polls (keys are unique over a task's life: ext-tasks, "Task Update
    Requests").

    >>> book = InputBook(["a"])
    >>> sorted(book.fresh({"a": {}, "b": {}}))
    ['b']
    >>> book.mark(["b"]); sorted(book.answered)
    ['a', 'b']
    """

    __slots__ = ("answered",)

    def __init__(self, answered: Iterable[str] = ()) -> None:
        self.answered: set[str] = set(answered)

    def fresh(self, requests: Mapping[str, Any] | None) -> dict[str, Any]:
        """The entries of ``requests`` not answered yet."""
        if not requests:
            return {}
        return {k: v for k, v in requests.items() if k not in self.answered}

    def mark(self, keys: Iterable[str]) -> None:
        self.answered.update(keys)


def argument_digest(arguments: Mapping[str, Any] | None) -> str:
    """A SHA-256 of the call's arguments in canonical JSON: what a task store keeps to tell
    calls apart, never the values themselves.

    >>> argument_digest({"b": 1, "a": 2}) == argument_digest({"a": 2, "b": 1})
    True
    """
    text = json.dumps(arguments or {}, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def with_extension(capabilities: Mapping[str, Any]) -> dict[str, Any]:
    """The client capabilities with the tasks extension declared (the others kept).

    >>> with_extension({"sampling": {}})
    {'sampling': {}, 'extensions': {'io.modelcontextprotocol/tasks': {}}}
    """
    out = dict(capabilities)
    extensions = out.get("extensions")
    merged = dict(extensions) if isinstance(extensions, Mapping) else {}
    merged[EXTENSION] = {}
    out["extensions"] = merged
    return out


def server_offers(capabilities: Any) -> bool:
    """Whether a modern server's ``server/discover`` capabilities advertise the extension.

    >>> server_offers({"extensions": {EXTENSION: {}}}), server_offers({})
    (True, False)
    """
    if not isinstance(capabilities, Mapping):
        return False
    extensions = capabilities.get("extensions")
    return isinstance(extensions, Mapping) and EXTENSION in extensions


def request_capabilities(
    capabilities: dict[str, Any], option: bool | None, server_capabilities: Any
) -> dict[str, Any]:
    """What each modern request declares: the client's capabilities, with the extension
    when the ``tasks`` option is True, or None (the default) and the server offers it.

    >>> request_capabilities({}, None, {"extensions": {EXTENSION: {}}})
    {'extensions': {'io.modelcontextprotocol/tasks': {}}}
    >>> request_capabilities({}, None, {}), request_capabilities({}, False, {"extensions": {EXTENSION: {}}})
    ({}, {})
    """
    if option is False or (option is None and not server_offers(server_capabilities)):
        return capabilities
    return with_extension(capabilities)


def declares(capabilities: Mapping[str, Any]) -> bool:
    """Whether declared client capabilities include the extension."""
    extensions = capabilities.get("extensions")
    return isinstance(extensions, Mapping) and EXTENSION in extensions


def task_refusal(method: str, capabilities: Mapping[str, Any]) -> Error | None:
    """None when a ``CreateTaskResult`` answers a request that may get one (a ``tools/call``
    that declared the extension), else the ``protocol`` error the call fails with: "a client
    that receives CreateTaskResult in response to an unsupported request type MUST interpret
    this as an invalid response" (ext-tasks, "Capability Negotiation").

    >>> task_refusal("tools/call", {"extensions": {EXTENSION: {}}}) is None
    True
    >>> task_refusal("prompts/get", {"extensions": {EXTENSION: {}}}).reason
    'unexpected_task'
    """
    if method == "tools/call" and declares(capabilities):
        return None
    why = (
        "only tools/call may be answered with a task"
        if method != "tools/call"
        else "the request did not declare the tasks extension"
    )
    return Error("protocol", "unexpected_task", f"{method}: the server answered a task, but {why}")
