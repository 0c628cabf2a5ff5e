"""Driving a task to its end: the poll loop, on the library's shared I/O loop.

A ``tools/call`` answered with a task (docs/tasks.md) is polled with ``tasks/get`` until it
ends. Where the poll lives, and why:

* **Not a thread per task.** Each task is one coroutine on the shared I/O loop
  (``transports/loop.py``): it sleeps its poll interval with ``asyncio`` and sends each
  ``tasks/get`` as an ordinary request through the client's :class:`~.request.Handle`, so
  a thousand tasks are a thousand sleeping coroutines, not a thousand threads. It runs only
  library code (parsing and message passing); no user code ever runs on the loop.
* **Not in the connection.** The ``tools/call`` that created the task keeps its rule (lost
  before its answer: ``transport``, never re-sent); every poll after it is an idempotent
  read, so a lost connection, a reconnect or a crashed connection actor costs one failed
  poll, and the next one goes to the new connection (the handle finds it by name, waiting
  through a restart window). A server that lost the task answers ``-32602``:
  ``unavailable``/``task_lost``.
* **Giving up** (the caller's deadline, its cancellation, :meth:`TaskRun.cancel`) sends
  ``tasks/cancel``, never ``notifications/cancelled`` (ext-tasks, "Task Cancellation"); the
  TTL backstop ends the wait with ``timeout``/``task_expired``.

The rules themselves (parsing, the poll interval's floor and cap, the backstop, outcomes) are
``protocol/tasks.py``'s pure functions.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from .actors.events import Call
from .errors import Error
from .protocol import tasks as rules
from .protocol.results import parse_call_tool
from .replies import AsyncReply
from .request import GRACE, Handle, Request, abandon, check_timeout
from .transports import loop as io
from .types import CallToolResult, Tool

log = logging.getLogger("conduit_mcp.tasks")

__all__ = ["TaskRun", "is_task", "task_era"]

#: The longest one ``tasks/get`` (or ``tasks/cancel``) may take when the caller set no
#: deadline: the client's ``request_timeout`` applies, capped by the time left.
_CANCEL_WAIT = 5.0
#: Errors of one poll that the next poll may not have: the connection broke or is being
#: replaced, the client had no room for the request, the server was slow to answer.
_RETRY_KINDS = frozenset({"transport", "overloaded", "timeout", "unavailable"})


def task_era(raw: Any) -> rules.Era | None:
    """The era of a ``tools/call`` answer that is a task, None for a tool result."""
    if rules.is_task_answer(raw, "modern"):
        return "modern"
    if rules.is_task_answer(raw, "legacy"):
        return "legacy"
    return None


def is_task(raw: Any) -> bool:
    return task_era(raw) is not None


class TaskRun:
    """One task being driven to its end by a coroutine on the I/O loop.

    ``future`` resolves to the final ``CallToolResult`` JSON, or fails with the task's error.
    ``status`` is the last status seen (read from any thread). ``deadline`` is absolute
    (``time.monotonic()``), None: no deadline but the TTL backstop."""

    __slots__ = (
        "_handle",
        "era",
        "info",
        "deadline",
        "future",
        "tool",
        "_cancel",
        "_wake",
        "polls",
    )

    def __init__(
        self,
        handle: Handle,
        era: rules.Era,
        info: rules.TaskInfo,
        deadline: float | None,
        tool: str = "",
    ) -> None:
        self._handle = handle
        self.era = era
        self.info = info
        self.deadline = deadline
        self.tool = tool
        self.future: Future[dict[str, Any]] = Future()
        self._cancel: Error | None = None
        self._wake: asyncio.Event | None = None
        self.polls = 0

    def __repr__(self) -> str:
        # The task id is a bearer-like secret (ext-tasks, "Security Considerations").
        return f"<TaskRun {self.tool!r} {self.info.status}>"

    @property
    def status(self) -> str:
        return self.info.status

    @classmethod
    def begin(
        cls, handle: Handle, raw: dict[str, Any], deadline: float | None, tool: str = ""
    ) -> TaskRun:
        """Start driving the task of a ``CreateTaskResult``; ``protocol``/``bad_task`` if it
        is not a usable one."""
        era = task_era(raw)
        if era is None:
            raise Error("protocol", "bad_task", "the answer is not a CreateTaskResult")
        run = cls(handle, era, rules.parse_created(raw, era), deadline, tool)
        io.submit(run._drive())
        return run

    def cancel(self, error: Error | None = None) -> None:
        """Ask the server to cancel (``tasks/cancel``) and end the wait with ``error``
        (default ``cancelled``/``task_cancelled``). Thread-safe; a no-op once ended."""
        if self.future.done() or self._cancel is not None:
            return
        self._cancel = error or Error(
            "cancelled", "task_cancelled", "the task was cancelled by the caller"
        )
        io.call_soon(self._poke)

    def _poke(self) -> None:
        if self._wake is not None:
            self._wake.set()

    # -- waiting, for the blocking front end ---------------------------------------------------

    def wait_result(self, timeout: float | None) -> dict[str, Any]:
        """Block this thread until the task ends (at most ``timeout`` seconds, None: no
        bound but the run's own deadline and backstop); its result JSON, or its error. A
        caller that stops waiting (Ctrl-C, its own bound) cancels the task."""
        try:
            return self.future.result(timeout=timeout)
        except FutureTimeout:
            self.cancel(Error("timeout", "deadline", "the task did not end in time"))
            raise Error(
                "timeout", "deadline", "the task did not end in time; it was asked to cancel"
            ) from None
        except Error as exc:
            raise Error(exc.kind, exc.reason, exc.message, code=exc.code, data=exc.data) from None
        except BaseException:
            self.cancel()
            raise

    # -- the poll loop (on the I/O loop) -----------------------------------------------------

    async def _drive(self) -> None:
        self._wake = asyncio.Event()
        try:
            result = await self._poll_to_end()
        except Error as exc:
            self._finish_error(exc)
        except Exception as exc:  # never leave a caller waiting on a bug
            log.error("task poll failed: %s", type(exc).__name__)
            self._finish_error(Error("protocol", "bad_task", "the task's poll loop failed"))
        else:
            if not self.future.done():
                self.future.set_result(result)

    def _finish_error(self, exc: Error) -> None:
        if not self.future.done():
            self.future.set_exception(exc)

    async def _poll_to_end(self) -> dict[str, Any]:
        info = self.info
        while True:
            out = rules.outcome(info)
            if out is not None:
                return await self._ended(out)
            if info.status == "input_required" and self.era == "legacy":
                # The 2025-11-25 flow: tasks/result blocks while the server asks its
                # questions as ordinary server requests (answered by the client's handler).
                return await self._legacy_result()
            if self._cancel is not None:
                await self._send_cancel()
                raise self._cancel
            now = time.monotonic()
            if self.deadline is not None and now >= self.deadline:
                await self._send_cancel()
                raise Error(
                    "timeout",
                    "deadline",
                    "the task did not end before the call's deadline; it was asked to "
                    "cancel (tasks/cancel)",
                )
            if rules.expired(info.created, info.ttl, time.time()):
                raise rules.expired_error()
            delay = rules.poll_delay(info.poll)
            if self.deadline is not None:
                delay = min(delay, max(0.0, self.deadline - now))
            wake = self._wake
            assert wake is not None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(wake.wait(), delay)
            if self._cancel is not None or (
                self.deadline is not None and time.monotonic() >= self.deadline
            ):
                continue
            try:
                raw = await self._request("tasks/get", {"taskId": info.task_id})
            except Error as exc:
                if exc.code == -32602:
                    raise rules.lost_error() from None
                if exc.kind in _RETRY_KINDS:
                    continue  # an idempotent read: the next poll tries again
                raise
            self.polls += 1
            info = rules.parse_status(raw, self.era)
            self.info = info

    async def _ended(self, out: rules.Completed | rules.Failed | rules.Cancelled) -> dict[str, Any]:
        if isinstance(out, rules.Completed):
            if self.era == "legacy" and not out.result:
                return await self._legacy_result()
            return out.result
        raise out.error

    async def _legacy_result(self) -> dict[str, Any]:
        try:
            raw = await self._request("tasks/result", {"taskId": self.info.task_id}, long=True)
        except Error as exc:
            if exc.code == -32602:
                raise rules.lost_error("tasks/result") from None
            raise
        if type(raw) is not dict:
            raise Error("protocol", "bad_task", "tasks/result answered no result object")
        self.info = self.info._replace(status="completed")
        return raw

    async def _send_cancel(self) -> None:
        """``tasks/cancel``, best effort: cancellation is cooperative and its ack changes
        nothing for the caller, who has given up already."""
        with contextlib.suppress(Error):
            await self._request("tasks/cancel", {"taskId": self.info.task_id}, cap=_CANCEL_WAIT)
        self.info = self.info._replace(status="cancelled")

    async def _request(
        self, method: str, params: dict[str, Any], long: bool = False, cap: float | None = None
    ) -> Any:
        """One request through the client's handle, awaited on this loop."""
        handle = self._handle
        runtime = handle.find()
        seconds = runtime.config.request_timeout if runtime is not None else 30.0
        if long and self.deadline is not None:
            seconds = max(seconds, self.deadline - time.monotonic())
        elif not long and self.deadline is not None:
            seconds = min(seconds, max(0.05, self.deadline - time.monotonic()))
        if cap is not None:
            seconds = min(seconds, cap)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        reply = AsyncReply(loop, future)
        deadline = time.monotonic() + seconds
        call = Call(method, params, deadline, reply)
        conn = handle.try_tell(call) or await handle.tell_async(call, deadline)
        try:
            return await asyncio.wait_for(future, seconds + GRACE)
        except TimeoutError:
            if not reply.done:
                reply.done = True
                abandon(conn, reply)
            raise Error("timeout", "deadline", f"{method} got no answer in time") from None


def final_result(raw: dict[str, Any]) -> CallToolResult:
    """The ``CallToolResult`` of a task's result JSON (no output check: see the caller)."""
    return parse_call_tool(raw)


# -- the front ends' hand-off -----------------------------------------------------------------


class TaskAnswer:
    """A ``tools/call`` answered with a task: what a front end's ``_call`` hands back in place
    of the ``CallToolResult``, for ``_call_tool`` to drive (never seen by a user)."""

    __slots__ = ("raw",)

    def __init__(self, raw: dict[str, Any]) -> None:
        self.raw = raw

    def __repr__(self) -> str:
        return "<TaskAnswer>"


def keep_task(req: Request[CallToolResult]) -> Request[CallToolResult | TaskAnswer]:
    """``req`` whose parse leaves a task answer as a :class:`TaskAnswer` (the tool's result
    is parsed and checked as before)."""
    parse = req.parse

    def parse_or_keep(raw: Any) -> CallToolResult | TaskAnswer:
        if type(raw) is dict and is_task(raw):
            return TaskAnswer(raw)
        return parse(raw)

    out: Request[CallToolResult | TaskAnswer] = Request(req.method, req.params, parse_or_keep)
    out.total = req.total
    out.reset = req.reset
    return out


def task_support(tool: Tool | None) -> str:
    """A listed tool's ``execution.taskSupport`` (2025-11-25): ``"forbidden"`` when absent."""
    if tool is None:
        return "forbidden"
    execution = tool.raw.get("execution") if type(tool.raw) is dict else None
    value = execution.get("taskSupport") if type(execution) is dict else None
    return value if value in ("required", "optional") else "forbidden"


def with_task_param(
    handle: Handle, req: Request[CallToolResult], tool: Tool | None, explicit: bool = False
) -> Request[CallToolResult]:
    """``req`` with the 2025-11-25 ``task`` request parameter when the legacy server's tool
    asks for one: ``taskSupport`` ``"required"``, or ``"optional"`` for an ``explicit``
    task (``start_task``). The modern era has no such parameter (the server decides)."""
    runtime = handle.find()
    if runtime is None or runtime.shared.status.era != "legacy" or req.params is None:
        return req
    support = task_support(tool)
    if support == "required" or (explicit and support == "optional"):
        req.params = {**req.params, "task": {}}
    return req


def deadline_of(handle: Handle, timeout: float | None) -> float:
    """The absolute deadline of a call that may become a task: its timeout (else the
    client's ``request_timeout``) from now."""
    runtime = handle.find()
    default = runtime.config.request_timeout if runtime is not None else 30.0
    return time.monotonic() + check_timeout(timeout, default)


def drive_blocking(
    handle: Handle,
    answer: TaskAnswer,
    deadline: float,
    parse: Callable[[Any], CallToolResult],
    tool: str = "",
) -> CallToolResult:
    """Drive a task to its end from a blocked thread (the blocking front end, and a
    ``client.futures`` future's ``get``)."""
    run = TaskRun.begin(handle, answer.raw, deadline, tool)
    left = max(0.0, deadline - time.monotonic()) + GRACE + _CANCEL_WAIT
    return parse(run.wait_result(left))


async def drive_async(
    handle: Handle,
    answer: TaskAnswer,
    deadline: float,
    parse: Callable[[Any], CallToolResult],
    tool: str = "",
) -> CallToolResult:
    """Drive a task to its end from a coroutine, without blocking its loop; a cancelled
    coroutine cancels the task."""
    run = TaskRun.begin(handle, answer.raw, deadline, tool)
    left = max(0.0, deadline - time.monotonic()) + GRACE + _CANCEL_WAIT
    try:
        raw = await asyncio.wait_for(asyncio.wrap_future(run.future), left)
    except TimeoutError:
        run.cancel(Error("timeout", "deadline", "the task did not end in time"))
        raise Error(
            "timeout", "deadline", "the task did not end in time; it was asked to cancel"
        ) from None
    except Error as exc:
        raise Error(exc.kind, exc.reason, exc.message, code=exc.code, data=exc.data) from None
    except BaseException:
        run.cancel()
        raise
    return parse(raw)


def tool_name(req: Request[Any]) -> str:
    params = req.params or {}
    name = params.get("name")
    return name if type(name) is str else ""
