"""Tasks served by the scripted server, in both eras, as a mixin of ``ScriptedMcpServer``.

Modern era (2026-07-28): the server advertises the extension ``io.modelcontextprotocol/tasks``
in ``server/discover``; a ``tools/call`` of a task tool whose request declares the extension
answers a ``CreateTaskResult`` (``resultType: "task"``) and the task is served by
``tasks/get`` (the ``DetailedTask``), ``tasks/update`` (``inputResponses``) and
``tasks/cancel``; ``subscriptions/listen`` with ``notifications.taskIds`` pushes
``notifications/tasks``. Legacy era (2025-11-25): task tools carry ``execution.taskSupport``,
a call with the ``task`` parameter creates a task, served by ``tasks/get``, ``tasks/result``
(which asks the input rounds as server requests), ``tasks/list`` and ``tasks/cancel``.

The state is pure and clock-driven (:mod:`.task_state`); this module parses the tools'
arguments, gates on capabilities, counts what each task received (``task_stats``) and wires
the views to the protocol. The behaviour is documented in ``docs/testing-guide.md``
("Tasks").
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

import orjson

from .catalog import STRING, is_number, object_schema, text_content, tool_error
from .protocol import (
    CAPS_KEY,
    INTERNAL_ERROR,
    INVALID_PARAMS,
    METHOD_NOT_FOUND,
    MISSING_CLIENT_CAPABILITY,
    SUBSCRIPTION_KEY,
    Ctx,
    RpcError,
    dict_at,
)
from .state import ServerState
from .task_state import (
    OUTCOMES,
    TERMINAL,
    ServedTask,
    TaskTable,
    TaskTableError,
    answer,
    answer_text,
    cancel,
    legacy_view,
    modern_view,
    new_task,
    next_change,
)

__all__ = [
    "CONFORMANCE_TASK_TOOL_SPECS",
    "LEGACY_TASKS_CAPABILITY",
    "RELATED_TASK_KEY",
    "TASKS_EXTENSION",
    "TASK_TOOL_SPECS",
    "TasksMixin",
]

TASKS_EXTENSION = "io.modelcontextprotocol/tasks"
RELATED_TASK_KEY = "io.modelcontextprotocol/related-task"
MAX_SECONDS = 3600.0
MAX_ROUNDS = 16
MAX_TTL_MS = 86_400_000
MAX_POLL_MS = 60_000
WATCH_TICK = 1.0  # a listen's watcher re-checks at least this often (seconds)
LEGACY_TASKS_CAPABILITY: dict[str, Any] = {
    "list": {},
    "cancel": {},
    "requests": {"tools": {"call": {}}},
}
REQUIRED_CAPABILITY: dict[str, Any] = {
    "requiredCapabilities": {"extensions": {TASKS_EXTENSION: {}}}
}

_JOB_SCHEMA = object_schema(
    {
        "seconds": {"type": "number", "minimum": 0, "default": 0.2},
        "poll_ms": {"type": "integer", "minimum": 1, "default": 50},
        "ttl_ms": {"type": "integer", "minimum": 1, "default": 60000},
        "rounds": {"type": "integer", "minimum": 0, "default": 0},
        "outcome": {"type": "string", "enum": list(OUTCOMES), "default": "completed"},
        "text": {"type": "string", "default": "done"},
    }
)
_JOB_HELP = (
    "seconds of work, poll_ms (the pollIntervalMs advertised), ttl_ms, rounds of "
    "input_required (each one elicitation asking {answer: string}), outcome (completed, "
    "error_result, failed, cancelled) and the result text"
)

# (name, description, inputSchema, outputSchema, taskSupport)
TASK_TOOL_SPECS: list[tuple[str, str, dict[str, Any], dict[str, Any] | None, str | None]] = [
    (
        "task_job",
        "A task when the client asks for one (modern: declares the tasks extension; legacy: "
        "the task parameter), else run inline: " + _JOB_HELP + ".",
        _JOB_SCHEMA,
        None,
        "optional",
    ),
    (
        "task_required",
        "Like task_job, but only as a task (called plainly: -32021 modern, -32601 legacy).",
        _JOB_SCHEMA,
        None,
        "required",
    ),
    (
        "task_stats",
        'JSON {"<taskId>": {"gets", "updates", "cancels", "status"}}: what the server received '
        "per task.",
        object_schema({}),
        None,
        None,
    ),
]

# The fixtures the official conformance harness calls (--tasks-conformance).
CONFORMANCE_TASK_TOOL_SPECS: list[
    tuple[str, str, dict[str, Any], dict[str, Any] | None, str | None]
] = [
    ("greet", "Sync only: Hello, {name}!", object_schema({"name": STRING}), None, None),
    (
        "slow_compute",
        "A task: sleep `seconds`, then answer (cancel: cancelled).",
        object_schema({"seconds": {"type": "number"}, "label": STRING}),
        None,
        "optional",
    ),
    (
        "failing_job",
        "A task (required) that completes with a tool error after about 1 s.",
        object_schema({}),
        None,
        "required",
    ),
    ("protocol_error_job", "A task that fails (-32603).", object_schema({}), None, "optional"),
    (
        "confirm_delete",
        "A task asking one elicitation (confirm), then completing.",
        object_schema({"filename": STRING}),
        None,
        "optional",
    ),
    (
        "multi_input",
        "A task asking two elicitations at once, then completing.",
        object_schema({}),
        None,
        "optional",
    ),
    (
        "test_tool_with_task",
        "Round 1: input_required (user_name); round 2: a task greeting that name.",
        object_schema({}),
        None,
        "required",
    ),
]


def _elicit(message: str, properties: dict[str, Any]) -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "mode": "form",
            "message": message,
            "requestedSchema": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }


def _answer_round(i: int) -> dict[str, dict[str, Any]]:
    return {f"answer-{i}": _elicit(f"Round {i}: your answer?", {"answer": STRING})}


def parse_job(args: dict[str, Any]) -> dict[str, Any] | str:
    """The plan of a ``task_job``/``task_required`` call, or what is wrong with it."""
    seconds = args.get("seconds", 0.2)
    poll_ms = args.get("poll_ms", 50)
    ttl_ms = args.get("ttl_ms", 60_000)
    rounds = args.get("rounds", 0)
    outcome = args.get("outcome", "completed")
    text = args.get("text", "done")
    if not is_number(seconds) or not 0 <= seconds <= MAX_SECONDS:
        return f"seconds must be a number in [0, {MAX_SECONDS:g}]"
    if type(poll_ms) is not int or not 1 <= poll_ms <= MAX_POLL_MS:
        return f"poll_ms must be an integer in [1, {MAX_POLL_MS}]"
    if type(ttl_ms) is not int or not 1 <= ttl_ms <= MAX_TTL_MS:
        return f"ttl_ms must be an integer in [1, {MAX_TTL_MS}]"
    if type(rounds) is not int or not 0 <= rounds <= MAX_ROUNDS:
        return f"rounds must be an integer in [0, {MAX_ROUNDS}]"
    if outcome not in OUTCOMES:
        return f"outcome must be one of {', '.join(OUTCOMES)}"
    if not isinstance(text, str):
        return "text must be a string"
    return {
        "seconds": float(seconds),
        "poll_ms": poll_ms,
        "ttl_ms": ttl_ms,
        "rounds": [_answer_round(i) for i in range(1, rounds + 1)],
        "outcome": outcome,
        "text": text,
    }


def declares_tasks(ctx: Ctx) -> bool:
    """Whether a modern request declares the tasks extension in its client capabilities."""
    caps = dict_at(ctx.meta, CAPS_KEY)
    return isinstance(dict_at(caps, "extensions").get(TASKS_EXTENSION), dict)


class TasksMixin(ServerState):
    """The task tools and the ``tasks/*`` handlers of both eras."""

    _task_table: TaskTable
    _task_watchers: dict[Any, asyncio.Task[Any]]  # listen id -> its notifications/tasks pusher
    _task_poke: asyncio.Event | None

    # ---- the tools ------------------------------------------------------------------------

    def _t_task_job(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        return self._job(ctx, args, "task_job", required=False)

    def _t_task_required(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        return self._job(ctx, args, "task_required", required=True)

    def _job(self, ctx: Ctx, args: dict[str, Any], tool: str, *, required: bool) -> Any:
        plan = parse_job(args)
        if isinstance(plan, str):
            return tool_error(f"{tool}: {plan}")
        if self._wants_task(ctx):
            return self._create_task(ctx, tool, **plan)
        self._refuse_plain(ctx, tool, required)
        if plan["rounds"]:
            return tool_error(f"{tool}: input rounds need a task (call it as a task)")
        return self._inline(plan)

    async def _inline(self, plan: dict[str, Any]) -> dict[str, Any]:
        await asyncio.sleep(plan["seconds"])
        if plan["outcome"] == "failed":
            raise RpcError(INTERNAL_ERROR, "task failed")
        if plan["outcome"] == "cancelled":
            return tool_error("cancelled by the server")
        result = text_content(plan["text"])
        if plan["outcome"] == "error_result":
            result["isError"] = True
        return result

    def _wants_task(self, ctx: Ctx) -> bool:
        if not self.config.tasks:
            return False
        if ctx.era == "modern":
            return declares_tasks(ctx)
        params = ctx.params if isinstance(ctx.params, dict) else {}
        return isinstance(params.get("task"), dict)

    def _refuse_plain(self, ctx: Ctx, tool: str, required: bool) -> None:
        if not required:
            return
        if ctx.era == "modern":
            raise RpcError(
                MISSING_CLIENT_CAPABILITY,
                f"Missing required client capability: {tool} runs only as a task; declare "
                f"the {TASKS_EXTENSION} extension in the request's client capabilities",
                REQUIRED_CAPABILITY,
            )
        raise RpcError(
            METHOD_NOT_FOUND,
            f"Method not found: {tool} has execution.taskSupport 'required'; call it with "
            "the task parameter",
        )

    def _create_task(
        self,
        ctx: Ctx,
        tool: str,
        *,
        seconds: float,
        poll_ms: int,
        ttl_ms: int | None,
        rounds: list[dict[str, dict[str, Any]]],
        outcome: str,
        text: str,
    ) -> dict[str, Any]:
        if ctx.era == "legacy":
            asked = dict_at(ctx.params, "task").get("ttl")
            if type(asked) is int and 1 <= asked <= MAX_TTL_MS:
                ttl_ms = asked
        now = time.time()
        task = new_task(
            ctx.era,
            tool,
            now,
            seconds=seconds,
            poll_ms=poll_ms,
            ttl_ms=ttl_ms,
            rounds=rounds,
            outcome=outcome,
            text=text,
        )
        try:
            self._task_table.add(task, now)
        except TaskTableError as e:
            raise RpcError(INTERNAL_ERROR, f"Internal error: {e}") from None
        self._event("task_created", tool=tool, era=ctx.era)
        self._task_changed()
        if ctx.era == "legacy":
            return {"task": legacy_view(task)}
        return {"resultType": "task", **modern_view(task, detailed=False)}

    def _t_task_stats(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        now = time.time()
        stats = {
            t.task_id: {
                "gets": t.gets,
                "updates": t.updates,
                "cancels": t.cancels,
                "status": t.status,
            }
            for t in self._task_table.live(ctx.era, now)
        }
        return text_content(orjson.dumps(stats).decode())

    # -- the conformance harness's fixtures (--tasks-conformance) --

    def _t_greet(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        name = args.get("name", "World")
        return text_content(f"Hello, {name}!")

    def _fixture(self, ctx: Ctx, tool: str, required: bool, **plan: Any) -> Any:
        plan.setdefault("poll_ms", 100)
        plan.setdefault("ttl_ms", 300_000)
        plan.setdefault("rounds", [])
        plan.setdefault("outcome", "completed")
        if self._wants_task(ctx):
            return self._create_task(ctx, tool, **plan)
        self._refuse_plain(ctx, tool, required)
        return self._inline(plan)

    def _t_slow_compute(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        seconds = args.get("seconds", 1)
        if not is_number(seconds) or not 0 <= seconds <= MAX_SECONDS:
            return tool_error(f"slow_compute: seconds must be a number in [0, {MAX_SECONDS:g}]")
        label = args.get("label")
        text = f"computed {label}" if isinstance(label, str) else "computed"
        return self._fixture(ctx, "slow_compute", False, seconds=float(seconds), text=text)

    def _t_failing_job(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        return self._fixture(
            ctx, "failing_job", True, seconds=1.0, outcome="error_result", text="job failed"
        )

    def _t_protocol_error_job(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        return self._fixture(
            ctx, "protocol_error_job", False, seconds=0.2, outcome="failed", text=""
        )

    def _t_confirm_delete(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        name = args.get("filename", "file")
        ask = _elicit(f"Delete {name}?", {"confirm": {"type": "boolean"}})
        return self._fixture(
            ctx, "confirm_delete", False, seconds=0.0, rounds=[{"confirm": ask}], text="deleted"
        )

    def _t_multi_input(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        first = _elicit("First name?", {"name": STRING})
        second = _elicit("Second name?", {"name": STRING})
        rounds = [{"first": first, "second": second}]
        return self._fixture(ctx, "multi_input", False, seconds=0.0, rounds=rounds, text="both")

    def _t_test_tool_with_task(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        if ctx.era != "modern":
            return tool_error("test_tool_with_task: modern era only (input_required rounds)")
        responses = dict_at(ctx.params, "inputResponses")
        response = responses.get("user_name")
        if not isinstance(response, dict):
            return {
                "resultType": "input_required",
                "inputRequests": {"user_name": _elicit("Your name?", {"name": STRING})},
            }
        self._refuse_plain(ctx, "test_tool_with_task", not self._wants_task(ctx))
        name = answer_text(response)
        return self._create_task(
            ctx,
            "test_tool_with_task",
            seconds=0.2,
            poll_ms=100,
            ttl_ms=300_000,
            rounds=[],
            outcome="completed",
            text=f"Hello, {name}!",
        )

    # ---- modern handlers ------------------------------------------------------------------

    def _modern_task(self, ctx: Ctx) -> ServedTask:
        if not declares_tasks(ctx):
            raise RpcError(
                MISSING_CLIENT_CAPABILITY,
                f"Missing required client capability: {ctx.method} needs the "
                f"{TASKS_EXTENSION} extension in the request's client capabilities",
                REQUIRED_CAPABILITY,
            )
        return self._find_task(ctx, "modern")

    def _find_task(self, ctx: Ctx, era: str) -> ServedTask:
        params = ctx.params if isinstance(ctx.params, dict) else {}
        task_id = params.get("taskId")
        if type(task_id) is not str:
            raise RpcError(INVALID_PARAMS, f"Invalid params: {ctx.method} needs a string taskId")
        found = self._task_table.find(task_id, era, time.time())
        if found == "expired":
            raise RpcError(INVALID_PARAMS, "Failed to retrieve task: Task has expired")
        if not isinstance(found, ServedTask):
            raise RpcError(INVALID_PARAMS, "Failed to retrieve task: Task not found")
        return found

    def _h_tasks_get(self, ctx: Ctx) -> dict[str, Any]:
        task = self._modern_task(ctx)
        task.gets += 1
        self._task_table.save()
        return {"resultType": "complete", **modern_view(task, detailed=True)}

    def _h_tasks_update(self, ctx: Ctx) -> dict[str, Any]:
        task = self._modern_task(ctx)
        responses = ctx.params.get("inputResponses")
        if not isinstance(responses, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: inputResponses must be an object")
        task.updates += 1
        if answer(task, responses, time.time()):
            self._task_changed()
        self._task_table.save()
        return {"resultType": "complete"}

    def _h_tasks_cancel(self, ctx: Ctx) -> dict[str, Any]:
        task = self._modern_task(ctx)
        task.cancels += 1
        if cancel(task, time.time()):
            self._task_changed()
        self._task_table.save()
        return {"resultType": "complete"}

    # -- notifications/tasks on subscriptions/listen --

    def _listen_task_ids(self, ctx: Ctx, wanted: dict[str, Any]) -> list[str] | None:
        """The ``taskIds`` a listen asks for that the server agrees to (known modern tasks)."""
        ids = wanted.get("taskIds")
        if ids is None:
            return None
        if not declares_tasks(ctx):
            raise RpcError(
                MISSING_CLIENT_CAPABILITY,
                "Missing required client capability: notifications for taskIds need the "
                f"{TASKS_EXTENSION} extension in the request's client capabilities",
                REQUIRED_CAPABILITY,
            )
        if not isinstance(ids, list) or not all(type(i) is str for i in ids):
            raise RpcError(INVALID_PARAMS, "Invalid params: taskIds must be a list of strings")
        now = time.time()
        return [i for i in ids if isinstance(self._task_table.find(i, "modern", now), ServedTask)]

    def _watch_tasks(self, listen_id: Any, task_ids: list[str]) -> None:
        if not task_ids:
            return
        loop = asyncio.get_running_loop()
        self._task_watchers[listen_id] = loop.create_task(self._push_tasks(listen_id, task_ids))

    async def _push_tasks(self, listen_id: Any, task_ids: list[str]) -> None:
        """Push ``notifications/tasks`` on a listen whenever one of its tasks changes; end
        when all have ended or expired, or the listen is gone."""
        seen: dict[str, tuple[str, int]] = {}
        try:
            while listen_id in self._listens:
                now = time.time()
                wake = now + WATCH_TICK
                active = 0
                for task_id in task_ids:
                    task = self._task_table.find(task_id, "modern", now)
                    if not isinstance(task, ServedTask):
                        continue
                    mark = (task.status, len(task.pending) + len(task.answers))
                    if seen.get(task_id) != mark:
                        seen[task_id] = mark
                        params = {
                            "_meta": {SUBSCRIPTION_KEY: listen_id},
                            **modern_view(task, detailed=True),
                        }
                        self._notify("notifications/tasks", params)
                    if task.status not in TERMINAL:
                        active += 1
                        change = next_change(task)
                        if change is not None:
                            wake = min(wake, change)
                if not active:
                    return
                if self._task_poke is None:
                    self._task_poke = asyncio.Event()
                try:
                    await asyncio.wait_for(self._task_poke.wait(), max(0.0, wake - time.time()))
                except TimeoutError:
                    pass
        finally:
            self._task_watchers.pop(listen_id, None)

    def _task_changed(self) -> None:
        """Wake the listen watchers (a client's update or cancel changed a task)."""
        poke = self._task_poke
        if poke is not None:
            self._task_poke = None
            poke.set()

    # ---- legacy handlers ------------------------------------------------------------------

    def _legacy_task(self, ctx: Ctx) -> ServedTask:
        if not self.config.tasks:
            raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": ctx.method})
        return self._find_task(ctx, "legacy")

    def _h_legacy_tasks_get(self, ctx: Ctx) -> dict[str, Any]:
        task = self._legacy_task(ctx)
        task.gets += 1
        self._task_table.save()
        return legacy_view(task)

    def _h_legacy_tasks_cancel(self, ctx: Ctx) -> dict[str, Any]:
        task = self._legacy_task(ctx)
        task.cancels += 1
        cancelled = cancel(task, time.time())
        self._task_table.save()
        if not cancelled:
            raise RpcError(
                INVALID_PARAMS, f"Cannot cancel task: it is already {task.status} (terminal)"
            )
        return legacy_view(task)

    def _h_legacy_tasks_list(self, ctx: Ctx) -> dict[str, Any]:
        if not self.config.tasks:
            raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": ctx.method})
        return {"tasks": [legacy_view(t) for t in self._task_table.live("legacy", time.time())]}

    def _h_legacy_tasks_result(self, ctx: Ctx) -> Any:
        task = self._legacy_task(ctx)
        task.gets += 1
        self._task_table.save()
        if task.status in TERMINAL:
            return self._legacy_outcome(task)
        self._open_stream()  # over HTTP: the input requests ride on this POST's stream
        return self._legacy_result_later(task.task_id)

    async def _legacy_result_later(self, task_id: str) -> Any:
        """``tasks/result`` blocks until the task ends, asking its input rounds on the way."""
        while True:
            now = time.time()
            found = self._task_table.find(task_id, "legacy", now)
            if not isinstance(found, ServedTask):
                raise RpcError(INVALID_PARAMS, "Failed to retrieve task: Task not found")
            task = found
            if task.status in TERMINAL:
                return self._legacy_outcome(task)
            if task.status == "input_required":
                await self._legacy_ask(task)
                continue
            change = next_change(task)
            assert change is not None  # working
            await asyncio.sleep(max(0.0, min(change, task.created + 86_400) - now))

    async def _legacy_ask(self, task: ServedTask) -> None:
        caps = self._legacy_caps if isinstance(self._legacy_caps, dict) else {}
        waits: list[tuple[str, asyncio.Future[Any]]] = []
        for key, request in list(task.pending.items()):
            if request["method"] == "elicitation/create" and "elicitation" not in caps:
                answer(task, {key: {"action": "cancel"}}, time.time())
                continue
            params = {**request["params"], "_meta": {RELATED_TASK_KEY: {"taskId": task.task_id}}}
            _, future = self._send_request(request["method"], params, "task")
            assert future is not None
            waits.append((key, future))
        for key, future in waits:
            msg = await asyncio.wait_for(future, 600)
            reply = msg.get("result") if "result" in msg else {"action": "cancel"}
            answer(task, {key: reply}, time.time())
        self._task_table.save()

    def _legacy_outcome(self, task: ServedTask) -> dict[str, Any]:
        related = {RELATED_TASK_KEY: {"taskId": task.task_id}}
        if task.status == "failed":
            error = task.error or {"code": INTERNAL_ERROR, "message": "task failed"}
            raise RpcError(error["code"], error["message"])
        if task.status == "cancelled":
            raise RpcError(INTERNAL_ERROR, "Task was cancelled")
        assert task.result is not None
        return {**task.result, "_meta": related}
