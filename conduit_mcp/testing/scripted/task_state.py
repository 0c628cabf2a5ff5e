"""The tasks the scripted server serves, as pure state driven by the wall clock.

A served task follows a plan (how long it works, which input rounds it asks, how it ends)
and its status is a function of that plan, the time and what the client sent: no asyncio
task runs it. :func:`advance` moves a task to where the clock says it is (``working`` for a
segment, then ``input_required`` for the next round, ..., then its outcome); :func:`answer`
applies ``inputResponses``; :func:`cancel` cancels it. Because the state is plain data with
wall-clock times, a :class:`TaskTable` with a ``durable`` path keeps it in a JSON file and a
restarted server (same path) finishes the tasks it knew by wall-clock time.

The wire views (:func:`modern_view`, :func:`legacy_view`) follow the ext-tasks
``specification/draft/tasks.md`` (``ttlMs``/``pollIntervalMs``, inlined ``result``/``error``/
``inputRequests``) and the 2025-11-25 experimental tasks (``ttl``/``pollInterval``). Nothing
here imports the server; the server's tasks mixin (:mod:`.tasks`) wires it to the protocol.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import secrets
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = [
    "MAX_TASKS",
    "OUTCOMES",
    "TERMINAL",
    "ServedTask",
    "TaskTable",
    "TaskTableError",
    "advance",
    "answer",
    "answer_text",
    "cancel",
    "expired",
    "iso",
    "legacy_view",
    "modern_view",
    "new_task",
    "next_change",
]

MAX_TASKS = 10_000  # live tasks one table holds (expired ones are purged first)
OUTCOMES = ("completed", "error_result", "failed", "cancelled")
TERMINAL = frozenset({"completed", "failed", "cancelled"})
FAILED_ERROR = {"code": -32603, "message": "task failed"}


class TaskTableError(Exception):
    """The durable file cannot be read or written, or the table is full."""


@dataclass(slots=True)
class ServedTask:
    """One task: its plan, its status and what the server received for it."""

    task_id: str
    era: str  # "modern" or "legacy": a task is only served in the era that created it
    tool: str
    created: float  # wall-clock seconds (time.time())
    ttl_ms: int | None
    poll_ms: int
    segment: float  # seconds of work before each round and before the end
    rounds: list[dict[str, dict[str, Any]]]  # per round: key -> the input request
    outcome: str  # one of OUTCOMES
    text: str  # the result text (the answers are appended)
    status: str = "working"
    phase: int = 0  # the working segment in progress (0..len(rounds))
    phase_start: float = 0.0
    updated: float = 0.0
    pending: dict[str, dict[str, Any]] = field(default_factory=dict)
    answers: dict[str, Any] = field(default_factory=dict)  # key -> the client's response
    message: str | None = None
    result: dict[str, Any] | None = None
    error: dict[str, Any] | None = None
    gets: int = 0
    updates: int = 0
    cancels: int = 0


def new_task(
    era: str,
    tool: str,
    now: float,
    *,
    seconds: float,
    poll_ms: int,
    ttl_ms: int | None,
    rounds: list[dict[str, dict[str, Any]]],
    outcome: str,
    text: str,
) -> ServedTask:
    """A fresh ``working`` task with a random id (``secrets.token_urlsafe(16)``)."""
    segment = seconds / (len(rounds) + 1)
    task = ServedTask(
        task_id=secrets.token_urlsafe(16),
        era=era,
        tool=tool,
        created=now,
        ttl_ms=ttl_ms,
        poll_ms=poll_ms,
        segment=segment,
        rounds=rounds,
        outcome=outcome,
        text=text,
        phase_start=now,
        updated=now,
    )
    advance(task, now)
    return task


def expired(task: ServedTask, now: float) -> bool:
    """Whether ``createdAt + ttlMs`` has passed (the server then forgets the task)."""
    return task.ttl_ms is not None and now >= task.created + task.ttl_ms / 1000


def next_change(task: ServedTask) -> float | None:
    """When the clock alone next changes the task's status (None: only the client can)."""
    if task.status != "working":
        return None
    return task.phase_start + task.segment


def advance(task: ServedTask, now: float) -> bool:
    """Move ``task`` to where the clock says it is; whether its status changed."""
    changed = False
    while task.status == "working" and now >= task.phase_start + task.segment:
        at = task.phase_start + task.segment
        if task.phase < len(task.rounds):
            task.pending = dict(task.rounds[task.phase])
            task.status = "input_required"
            task.message = "waiting for input"
        else:
            _finish(task)
        task.updated = at
        changed = True
    return changed


def _finish(task: ServedTask) -> None:
    task.pending = {}
    if task.outcome == "failed":
        task.status, task.error, task.message = "failed", dict(FAILED_ERROR), "task failed"
        return
    if task.outcome == "cancelled":
        task.status, task.message = "cancelled", "cancelled by the server"
        return
    text = task.text
    if task.answers:
        text += " (answers: " + ", ".join(answer_text(r) for r in task.answers.values()) + ")"
    result: dict[str, Any] = {"content": [{"type": "text", "text": text}]}
    result["isError"] = task.outcome == "error_result"
    task.status, task.result = "completed", result
    task.message = "the tool reported an error" if result["isError"] else "done"


def answer_text(response: Any) -> str:
    """What an input response says, for the result text: the first string of an accepted
    elicitation's content (``answer`` first), else ``<decline>``/``<cancel>``/its JSON."""
    if isinstance(response, dict):
        action = response.get("action")
        content = response.get("content")
        if action == "accept" and isinstance(content, dict):
            first = content.get("answer", content.get("name"))
            if isinstance(first, str):
                return first
            for value in content.values():
                if isinstance(value, str):
                    return value
            return orjson.dumps(content).decode()
        if isinstance(action, str):
            return f"<{action}>"
    return orjson.dumps(response).decode()


def answer(task: ServedTask, responses: dict[str, Any], now: float) -> list[str]:
    """Apply ``inputResponses``: keys not outstanding are ignored (the spec's SHOULD).

    Once every outstanding key is answered the task works on; returns the keys taken.
    """
    taken = [key for key in responses if key in task.pending]
    for key in taken:
        task.answers[key] = responses[key]
        del task.pending[key]
    if taken:
        task.updated = now
    if task.status == "input_required" and not task.pending:
        task.phase += 1
        task.phase_start = now
        task.status = "working"
        task.message = None
        advance(task, now)
    return taken


def cancel(task: ServedTask, now: float) -> bool:
    """Cancel a task that has not ended; whether it was cancelled (a terminal one is not)."""
    advance(task, now)
    if task.status in TERMINAL:
        return False
    task.status, task.pending, task.message, task.updated = "cancelled", {}, "cancelled", now
    return True


def iso(t: float) -> str:
    """ISO 8601 UTC with milliseconds: ``2026-07-28T10:30:00.000Z``."""
    stamp = datetime.datetime.fromtimestamp(t, datetime.UTC).isoformat(timespec="milliseconds")
    return stamp.replace("+00:00", "Z")


def modern_view(task: ServedTask, *, detailed: bool) -> dict[str, Any]:
    """The ext-tasks ``Task``: detailed (``tasks/get``, ``notifications/tasks``) inlines
    ``inputRequests``, ``result`` or ``error``; not detailed is the ``CreateTaskResult`` body."""
    view: dict[str, Any] = {
        "taskId": task.task_id,
        "status": task.status,
        "createdAt": iso(task.created),
        "lastUpdatedAt": iso(task.updated),
        "ttlMs": task.ttl_ms,
        "pollIntervalMs": task.poll_ms,
    }
    if task.message is not None:
        view["statusMessage"] = task.message
    if detailed:
        if task.status == "input_required":
            view["inputRequests"] = dict(task.pending)
        elif task.status == "completed" and task.result is not None:
            view["result"] = task.result
        elif task.status == "failed" and task.error is not None:
            view["error"] = task.error
    return view


def legacy_view(task: ServedTask) -> dict[str, Any]:
    """The 2025-11-25 experimental ``Task`` (``ttl``, ``pollInterval``)."""
    view: dict[str, Any] = {
        "taskId": task.task_id,
        "status": task.status,
        "createdAt": iso(task.created),
        "lastUpdatedAt": iso(task.updated),
        "ttl": task.ttl_ms,
        "pollInterval": task.poll_ms,
    }
    if task.message is not None:
        view["statusMessage"] = task.message
    return view


class TaskTable:
    """The tasks of one server (or, with ``durable``, of every server using that file).

    ``durable`` names a JSON file written (owner-only, replaced atomically) after every
    change and read at start, so that a restarted server still knows its tasks. Expired
    tasks are dropped when met; at most ``max_tasks`` live tasks are held.
    """

    def __init__(self, durable: str | None = None, *, max_tasks: int = MAX_TASKS) -> None:
        self.durable = durable
        self.max_tasks = max_tasks
        self.tasks: dict[str, ServedTask] = {}
        if durable is not None and os.path.exists(durable):
            self._load(durable)

    def __repr__(self) -> str:  # task ids are bearer-like: never in a repr
        return f"<TaskTable {len(self.tasks)} tasks durable={self.durable is not None}>"

    def _load(self, path: str) -> None:
        try:
            with open(path, "rb") as f:
                raw = orjson.loads(f.read())
            self.tasks = {t["task_id"]: ServedTask(**t) for t in raw["tasks"]}
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise TaskTableError(
                f"cannot read the durable task file {path}: {type(e).__name__}; delete it or "
                "name another file"
            ) from None

    def save(self) -> None:
        """Write the durable file (nothing without ``durable``)."""
        if self.durable is None:
            return
        data = orjson.dumps({"tasks": [dataclasses.asdict(t) for t in self.tasks.values()]})
        tmp = f"{self.durable}.{os.getpid()}.tmp"
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, self.durable)

    def add(self, task: ServedTask, now: float) -> None:
        """Hold a new task; :class:`TaskTableError` when ``max_tasks`` live tasks are held."""
        self.purge(now)
        if len(self.tasks) >= self.max_tasks:
            raise TaskTableError(f"the server holds {self.max_tasks} tasks already")
        self.tasks[task.task_id] = task
        self.save()

    def find(self, task_id: Any, era: str, now: float) -> ServedTask | str | None:
        """The task (advanced to ``now``), ``"expired"`` if its TTL passed, None if unknown."""
        task = self.tasks.get(task_id) if type(task_id) is str else None
        if task is None or task.era != era:
            return None
        if expired(task, now):
            del self.tasks[task_id]
            self.save()
            return "expired"
        if advance(task, now):
            self.save()
        return task

    def purge(self, now: float) -> None:
        gone = [k for k, t in self.tasks.items() if expired(t, now)]
        for key in gone:
            del self.tasks[key]
        if gone:
            self.save()

    def live(self, era: str, now: float) -> list[ServedTask]:
        """The era's tasks not expired, advanced to ``now``, oldest first."""
        self.purge(now)
        changed = False
        out = []
        for task in self.tasks.values():
            if task.era == era:
                changed |= advance(task, now)
                out.append(task)
        if changed:
            self.save()
        return out


_SHARED: dict[str, TaskTable] = {}


def shared_table(durable: str | None) -> TaskTable:
    """A new table, or with ``durable`` the one table of that file in this process (the
    HTTP front's cores, modern and each legacy session, then see the same tasks)."""
    if durable is None:
        return TaskTable()
    key = os.path.abspath(durable)
    table = _SHARED.get(key)
    if table is None:
        table = _SHARED[key] = TaskTable(key)
    return table
