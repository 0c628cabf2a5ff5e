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
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any
from urllib.parse import urlsplit

from .actors.events import Call, WatchTask
from .errors import Error
from .protocol import tasks as rules
from .protocol.results import parse_call_tool
from .replies import AsyncReply
from .request import (
    GRACE,
    Handle,
    Request,
    abandon,
    check_timeout,
    fresh_items,
    walk_credential,
)
from .task_store import MemoryTaskStore, TaskStore
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
#: The ends after which a task's record is dropped from the store: the server's own end, or
#: the client gave it up (a client that stopped keeps it, to resume).
_FORGET_REASONS = frozenset(
    {"task_lost", "task_expired", "task_cancelled", "deadline", "bad_task", "handler_timeout"}
)


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
        "book",
        "store",
        "record",
        "_pushed",
        "pushes",
    )

    def __init__(
        self,
        handle: Handle,
        era: rules.Era,
        info: rules.TaskInfo,
        deadline: float | None,
        tool: str = "",
        store: TaskStore | None = None,
        record: dict[str, Any] | None = None,
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
        self.store = store
        self.record: dict[str, Any] = record or {}
        self.book = rules.InputBook(self.record.get("answered") or ())
        self._pushed: rules.TaskInfo | None = None
        self.pushes = 0

    def __repr__(self) -> str:
        # The task id is a bearer-like secret (ext-tasks, "Security Considerations").
        return f"<TaskRun {self.tool!r} {self.info.status}>"

    @property
    def status(self) -> str:
        return self.info.status

    @classmethod
    def begin(
        cls,
        handle: Handle,
        raw: dict[str, Any],
        deadline: float | None,
        tool: str = "",
        arguments: Any = None,
    ) -> TaskRun:
        """Start driving the task of a ``CreateTaskResult``; ``protocol``/``bad_task`` if it
        is not a usable one."""
        era = task_era(raw)
        if era is None:
            raise Error("protocol", "bad_task", "the answer is not a CreateTaskResult")
        info = rules.parse_created(raw, era)
        runtime = handle.find()
        store = runtime.config.task_store if runtime is not None else None
        record = new_record(handle, era, info, tool, arguments)
        run = cls(handle, era, info, deadline, tool, store, record)
        if store is not None:
            # Kept before the caller hears of the task: a process killed right after
            # start_task returned still finds it in a durable store.
            try:
                store.put(dict(record))
            except Exception as exc:
                log.warning("the task store failed: %s", type(exc).__name__)
        io.submit(run._drive())
        return run

    @classmethod
    def resume(cls, handle: Handle, record: dict[str, Any], store: TaskStore | None) -> TaskRun:
        """Drive a task again from its record (after a restart of the process)."""
        era = record.get("era")
        if era not in ("modern", "legacy"):
            raise Error("argument", "record", "the record's era is not 'modern' or 'legacy'")
        info = rules.TaskInfo(
            record["task_id"],
            "working",
            None,
            record.get("created"),
            record.get("ttl"),
            record.get("poll"),
        )
        run = cls(handle, era, info, None, str(record.get("tool") or ""), store, dict(record))
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
            raise _timed_out(self) from None
        except Error as exc:
            raise _fresh(exc) from None
        except BaseException:
            self.cancel()
            raise

    # -- the poll loop (on the I/O loop) -----------------------------------------------------

    async def _drive(self) -> None:
        self._wake = asyncio.Event()
        self._watch(True)
        try:
            result = await self._poll_to_end()
        except Error as exc:
            if exc.reason in _FORGET_REASONS or exc.kind == "server":
                await self._forget()  # the task is over for the server too
            self._finish_error(exc)
        except Exception as exc:  # never leave a caller waiting on a bug
            log.error("task poll failed: %s", type(exc).__name__)
            self._finish_error(Error("protocol", "bad_task", "the task's poll loop failed"))
        else:
            await self._forget()
            if not self.future.done():
                self.future.set_result(result)
        finally:
            self._watch(False)

    # -- the store (its writes may block: never on the loop itself) ---------------------------

    async def _save(self) -> None:
        store = self.store
        if store is None or not self.record.get("task_id"):
            return
        info = self.info
        self.record.update(
            status=info.status,
            ttl=info.ttl if info.ttl is not None else self.record.get("ttl"),
            poll=info.poll if info.poll is not None else self.record.get("poll"),
            answered=sorted(self.book.answered),
        )
        await self._in_worker(store.put, dict(self.record))

    async def _forget(self) -> None:
        store = self.store
        if store is not None and self.record.get("task_id"):
            await self._in_worker(store.delete, self.record["task_id"])

    @staticmethod
    async def _in_worker(fn: Callable[..., Any], *args: Any) -> None:
        try:
            if isinstance(getattr(fn, "__self__", None), MemoryTaskStore):
                fn(*args)  # a dict under a lock: no I/O, no worker thread
            else:
                await asyncio.get_running_loop().run_in_executor(None, fn, *args)
        except Exception as exc:  # a failing store never fails the task
            log.warning("the task store failed: %s", type(exc).__name__)

    # -- pushed status (modern: notifications/tasks on the listen stream) ---------------------

    def _watch(self, on: bool) -> None:
        """Ask the connection to listen for this task's pushed status (modern era), or stop.
        A connection that is not there now hears of it from the tree (published.py) when it
        comes back; the poll goes on either way."""
        if self.era != "modern":
            return
        push = self._push if on else None
        with contextlib.suppress(Exception):
            self._handle.try_tell(WatchTask(self.info.task_id, push))

    def _push(self, params: dict[str, Any]) -> None:
        """Called by the connection's thread: only a hand-off to the I/O loop."""
        io.call_soon(self._take_push, params)

    def _take_push(self, params: dict[str, Any]) -> None:
        try:
            info = rules.parse_status(params, "modern")
        except Error:
            return  # an unusable push: the next poll reads the task
        if info.task_id != self.info.task_id:
            return
        self.pushes += 1
        self._pushed = info
        if self._wake is not None:
            self._wake.set()

    def _finish_error(self, exc: Error) -> None:
        if not self.future.done():
            self.future.set_exception(exc)

    async def _poll_to_end(self) -> dict[str, Any]:
        info = self.info
        while True:
            out = None if rules.needs_details(info, self.era) else rules.outcome(info)
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
            # Ended already (its CreateTaskResult said so): read its result at once.
            delay = 0.0 if rules.needs_details(info, self.era) else rules.poll_delay(info.poll)
            if self.deadline is not None:
                delay = min(delay, max(0.0, self.deadline - now))
            wake = self._wake
            assert wake is not None
            if self._pushed is None:
                # asyncio.timeout, not wait_for, which on Python 3.11 can lose a cancel that
                # comes as the wake is set (aio.py, _list_all)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(delay):
                        await wake.wait()
            wake.clear()
            if self._cancel is not None or (
                self.deadline is not None and time.monotonic() >= self.deadline
            ):
                continue
            pushed, self._pushed = self._pushed, None
            if pushed is not None:
                # The server pushed the task's state (a whole DetailedTask): it replaces
                # this poll, and the next one waits a full interval again.
                changed = pushed.status != info.status
                info = pushed
                self.info = info
                if changed and info.status not in rules.TERMINAL:
                    await self._save()
                if info.status == "input_required":
                    await self._answer(info)
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
            before = info.status
            info = rules.parse_status(raw, self.era)
            self.info = info
            if info.status != before and info.status not in rules.TERMINAL:
                await self._save()
            if info.status == "input_required" and self.era == "modern":
                await self._answer(info)

    async def _answer(self, info: rules.TaskInfo) -> None:
        """Answer the input requests not answered yet (ext-tasks, "Task Update Requests"):
        the connection hands them to the client's handler, as it does an ``input_required``
        round, and sends ``tasks/update`` with the answers; each key is answered once."""
        fresh = self.book.fresh(info.input_requests)
        if not fresh:
            return
        try:
            await self._request("tasks/update", {"taskId": info.task_id}, long=True, inputs=fresh)
        except Error as exc:
            if exc.code == -32602:
                raise rules.lost_error("tasks/update") from None
            if exc.kind in ("handler", "timeout") or exc.reason in (
                "too_many_inputs",
                "bad_input_required",
            ):
                # Nothing can answer it: the task cannot go on.
                await self._send_cancel()
                raise
            if exc.kind in _RETRY_KINDS:
                return  # not sent, or its ack lost: asked again after the next poll
            raise
        self.book.mark(fresh)
        await self._save()

    async def _ended(self, out: rules.Completed | rules.Failed | rules.Cancelled) -> dict[str, Any]:
        if isinstance(out, rules.Completed):
            if self.era == "legacy" and not out.result:
                return await self._legacy_result()
            return out.result
        if isinstance(out, rules.Failed) and self.era == "legacy" and self.info.error is None:
            # 2025-11-25: tasks/result answers a failed task's JSON-RPC error itself.
            return await self._legacy_result()
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
        self,
        method: str,
        params: dict[str, Any],
        long: bool = False,
        cap: float | None = None,
        inputs: dict[str, Any] | None = None,
    ) -> Any:
        """One request through the client's handle, awaited on this loop."""
        handle = self._handle
        runtime = handle.find()
        seconds = runtime.config.request_timeout if runtime is not None else 30.0
        if long and self.deadline is not None:
            seconds = max(seconds, self.deadline - time.monotonic())
        elif long and runtime is not None:
            seconds += runtime.config.handler_timeout
        elif not long and self.deadline is not None:
            seconds = min(seconds, max(0.05, self.deadline - time.monotonic()))
        if cap is not None:
            seconds = min(seconds, cap)
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Any] = loop.create_future()
        reply = AsyncReply(loop, future)
        deadline = time.monotonic() + seconds
        call = Call(method, params, deadline, reply)
        call.inputs = inputs
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
    out: Request[CallToolResult | TaskAnswer] = Request(
        req.method, req.params, _ParseOrKeep(req.parse)
    )
    out.total = req.total
    out.reset = req.reset
    return out


class _ParseOrKeep:
    """:func:`keep_task`'s parse: a task answer as a :class:`TaskAnswer`, else ``parse(raw)``.
    A slotted object, not a closure (a function and a cell), made per tool call and kept
    while it is in flight."""

    __slots__ = ("parse",)

    def __init__(self, parse: Callable[[Any], CallToolResult]) -> None:
        self.parse = parse

    def __call__(self, raw: Any) -> CallToolResult | TaskAnswer:
        # A task answer has "task" (legacy) or resultType "task" (modern): two C lookups
        # let a tool's result by without the rules' calls.
        if (
            type(raw) is dict
            and ("task" in raw or raw.get("resultType") == "task")
            and is_task(raw)
        ):
            return TaskAnswer(raw)
        return self.parse(raw)


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
    req: Request[Any],
) -> CallToolResult:
    """Drive a task to its end from a blocked thread (the blocking front end, and a
    ``client.futures`` future's ``get``)."""
    run = TaskRun.begin(handle, answer.raw, deadline, tool_name(req), tool_arguments(req))
    left = max(0.0, deadline - time.monotonic()) + GRACE + _CANCEL_WAIT
    return parse(run.wait_result(left))


async def drive_async(
    handle: Handle,
    answer: TaskAnswer,
    deadline: float,
    parse: Callable[[Any], CallToolResult],
    req: Request[Any],
) -> CallToolResult:
    """Drive a task to its end from a coroutine, without blocking its loop; a cancelled
    coroutine cancels the task."""
    run = TaskRun.begin(handle, answer.raw, deadline, tool_name(req), tool_arguments(req))
    left = max(0.0, deadline - time.monotonic()) + GRACE + _CANCEL_WAIT
    try:
        raw = await asyncio.wait_for(asyncio.wrap_future(run.future), left)
    except TimeoutError:
        raise _timed_out(run) from None
    except Error as exc:
        raise _fresh(exc) from None
    except BaseException:
        run.cancel()
        raise
    return parse(raw)


def tool_name(req: Request[Any]) -> str:
    params = req.params or {}
    name = params.get("name")
    return name if type(name) is str else ""


# -- records and handles ---------------------------------------------------------------------


def endpoint_of(spec: Any) -> str:
    """Which server a record belongs to, without a secret: an HTTP endpoint's URL without
    its query, a stdio server's command and a digest of its arguments (which may carry a
    token)."""
    url = getattr(spec, "url", None)
    if isinstance(url, str):
        parts = urlsplit(url)
        return f"http:{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
    command = getattr(spec, "command", None)
    if isinstance(command, str):
        args = list(getattr(spec, "args", ()))
        return f"stdio:{command}:{rules.argument_digest({'args': args})[:16]}"
    return f"other:{type(spec).__name__}"


def new_record(
    handle: Handle, era: rules.Era, info: rules.TaskInfo, tool: str, arguments: Any
) -> dict[str, Any]:
    runtime = handle.find()
    return {
        "task_id": info.task_id,
        "endpoint": endpoint_of(runtime.spec) if runtime is not None else "",
        "era": era,
        "credential": walk_credential(runtime) if runtime is not None else None,
        "tool": tool,
        "arguments_digest": rules.argument_digest(arguments if isinstance(arguments, dict) else {}),
        "created": info.created,
        "ttl": info.ttl,
        "poll": info.poll,
        "status": info.status,
        "answered": [],
    }


class TaskHandle:
    """A tool call running as a task, held without blocking (``client.start_task``).

    ``status()`` is the last status seen (``"working"``, ``"input_required"``,
    ``"completed"``, ``"failed"``, ``"cancelled"``); the task is polled in the background
    meanwhile. ``record`` is the JSON-ready dict ``client.tasks.resume`` re-attaches from
    after a restart. The task id is in the record only: never in the handle's repr.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing", "--era", "modern"])
    >>> with mcp.Client.start(server) as client:
    ...     handle = client.start_task("task_job", {"seconds": 0.2, "poll_ms": 50})
    ...     first = repr(handle)
    ...     print(first, handle.wait(timeout=10), handle.result().text, handle)
    <TaskHandle 'task_job' working> True done <TaskHandle 'task_job' completed>
    """

    __slots__ = ("_run", "_done", "_parse", "_tool")

    def __init__(
        self,
        run: TaskRun | None,
        done: CallToolResult | None = None,
        parse: Callable[[Any], CallToolResult] = parse_call_tool,
        tool: str = "",
    ) -> None:
        self._run = run
        self._done = done
        self._parse = parse
        self._tool = tool

    def __repr__(self) -> str:
        return f"<TaskHandle {self._tool!r} {self.status()}>"

    def status(self) -> str:
        """The last status seen (a server that answered at once: ``"completed"``)."""
        run = self._run
        if run is None:
            return "completed"
        if run.future.done():
            exc = run.future.exception()
            if exc is None:
                return "completed"
            if isinstance(exc, Error) and exc.kind == "cancelled":
                return "cancelled"
            return run.status if run.status in rules.TERMINAL else "failed"
        return run.status

    def done(self) -> bool:
        """Whether the task has ended (its result or error is known)."""
        return self._run is None or self._run.future.done()

    def wait(self, timeout: float | None = None) -> bool:
        """Block until the task ends, at most ``timeout`` seconds (None: no bound); whether
        it ended. Never raises the task's error (``result`` does)."""
        run = self._run
        if run is None:
            return True
        with contextlib.suppress(FutureTimeout):
            run.future.exception(timeout=timeout)
        return run.future.done()

    def result(self, timeout: float | None = None) -> CallToolResult:
        """The tool's result once the task ends (waiting at most ``timeout`` seconds; None:
        until it ends). Raises ``cancelled`` for a cancelled task, the JSON-RPC error of a
        failed one, ``unavailable``/``task_lost``, ``timeout``/``task_expired``, or
        ``timeout``/``deadline`` when ``timeout`` passes (the task goes on)."""
        run = self._run
        if run is None:
            assert self._done is not None
            return self._done
        try:
            raw = run.future.result(timeout=timeout)
        except FutureTimeout:
            raise Error(
                "timeout", "deadline", "the task had not ended when result()'s timeout passed"
            ) from None
        except Error as exc:
            raise Error(exc.kind, exc.reason, exc.message, code=exc.code, data=exc.data) from None
        return self._parse(raw)

    async def result_async(self, timeout: float | None = None) -> CallToolResult:
        """:meth:`result` for a coroutine: it awaits without blocking its loop."""
        run = self._run
        if run is None:
            assert self._done is not None
            return self._done
        try:
            raw = await asyncio.wait_for(asyncio.wrap_future(run.future), timeout)
        except TimeoutError:
            raise Error(
                "timeout", "deadline", "the task had not ended when result()'s timeout passed"
            ) from None
        except Error as exc:
            raise Error(exc.kind, exc.reason, exc.message, code=exc.code, data=exc.data) from None
        return self._parse(raw)

    def cancel(self) -> None:
        """Ask the server to cancel the task (``tasks/cancel``); ``result`` then raises
        ``cancelled``. A task that already ended is left as it is."""
        if self._run is not None:
            self._run.cancel()

    @property
    def record(self) -> dict[str, Any]:
        """What resuming needs, JSON-ready (docs/tasks.md, "Records"); empty for a call the
        server answered at once."""
        run = self._run
        if run is None:
            return {}
        record = dict(run.record)
        record["status"] = self.status()
        record["answered"] = sorted(run.book.answered)
        return record


def start_handle(
    handle: Handle,
    out: CallToolResult | TaskAnswer,
    parse: Callable[[Any], CallToolResult],
    tool: str,
    arguments: Any,
) -> TaskHandle:
    """The :class:`TaskHandle` of ``start_task``'s answer: a task to poll, or a result the
    server gave at once."""
    if isinstance(out, TaskAnswer):
        run = TaskRun.begin(handle, out.raw, None, tool, arguments)
        return TaskHandle(run, parse=parse, tool=tool)
    return TaskHandle(None, out, parse, tool)


def tool_arguments(req: Request[Any]) -> Any:
    return (req.params or {}).get("arguments")


def needs_listing(handle: Handle) -> bool:
    """Whether ``start_task`` must list the tools first: a legacy server whose tools were
    never listed (their ``execution.taskSupport`` says whether to ask for a task)."""
    runtime = handle.find()
    if runtime is None or runtime.shared.status.era != "legacy":
        return False
    return fresh_items(runtime, "tools") is None


def cached_tool(handle: Handle, req: Request[Any]) -> Tool | None:
    """The cached definition of the called tool, if listed."""
    runtime = handle.find()
    items = fresh_items(runtime, "tools") if runtime is not None else None
    return listed(items or (), req)


def listed(tools: Iterable[Any], req: Request[Any]) -> Tool | None:
    name = tool_name(req)
    return next((t for t in tools if isinstance(t, Tool) and t.name == name), None)


class Tasks:
    """``client.tasks``: the client's tasks kept in its ``task_store`` (docs/tasks.md,
    "Surviving a restart").

    ``unfinished()`` lists the records of this server's tasks not ended yet (for a
    ``SqliteTaskStore``, those of every process that used the same file); ``resume(record)``
    re-attaches to one and returns its :class:`TaskHandle`, polled as before.

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing", "--era", "modern"])
    >>> with mcp.Client.start(server) as client:
    ...     handle = client.start_task("task_job", {"seconds": 5, "poll_ms": 50})
    ...     [record] = client.tasks.unfinished()
    ...     print(record["tool"], record["status"], sorted(record) == sorted(handle.record))
    ...     handle.cancel(); print(handle.wait(timeout=10), client.tasks.unfinished())
    task_job working True
    True []
    """

    __slots__ = ("_handle",)

    def __init__(self, handle: Handle) -> None:
        self._handle = handle

    def __repr__(self) -> str:
        return f"<Tasks of {self._handle.name!r}>"

    def _store(self) -> tuple[Any, TaskStore]:
        runtime = self._handle.tree()
        return runtime, runtime.config.task_store

    def unfinished(self) -> list[dict[str, Any]]:
        """The records of the store's tasks of this server that have not ended, oldest
        first (each a JSON-ready dict, as :attr:`TaskHandle.record`)."""
        runtime, store = self._store()
        endpoint = endpoint_of(runtime.spec)
        return [r for r in store.records(endpoint) if r.get("status") not in rules.TERMINAL]

    def resume(self, record: Mapping[str, Any]) -> TaskHandle:
        """Poll the task of ``record`` (from :meth:`unfinished` or a saved
        :attr:`TaskHandle.record`) again. ``argument``/``record`` for a record that is not
        one, or belongs to another server or era."""
        if not isinstance(record, Mapping) or type(record.get("task_id")) is not str:
            raise Error("argument", "record", "record must be a task record (a dict with task_id)")
        runtime, store = self._store()
        if record.get("endpoint") != endpoint_of(runtime.spec):
            raise Error(
                "argument", "record", "the record is of a task of another server than this client's"
            )
        era = runtime.shared.status.era
        if era is not None and record.get("era") != era:
            raise Error(
                "argument",
                "record",
                f"the record is of a {record.get('era')} task; this client speaks the {era} era",
            )
        tool = str(record.get("tool") or "")
        run = TaskRun.resume(self._handle, dict(record), store)
        return TaskHandle(run, tool=tool)


def _timed_out(run: TaskRun) -> Error:
    """A waiter's bound ran out: the task is asked to cancel, and the waiter gets this."""
    run.cancel(Error("timeout", "deadline", "the task did not end in time"))
    return Error("timeout", "deadline", "the task did not end in time; it was asked to cancel")


def _fresh(exc: Error) -> Error:
    """The run's error raised anew in the waiter (its traceback the waiter's, not the loop's)."""
    return Error(exc.kind, exc.reason, exc.message, code=exc.code, data=exc.data)
