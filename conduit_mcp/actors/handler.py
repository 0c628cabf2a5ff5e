"""The handler actor: runs the user's :class:`~conduit_mcp.Handler` methods, so the connection
never does (docs/connection.md, "Server-to-client requests").

A permanent supervisor child (id ``"handler"``, :func:`child_spec`), started with the client
when it has a handler. The connection tells it:

* :class:`~.events.Serve` -- run the method serving one server request (legacy) or one
  ``inputRequests`` entry (modern), and tell the registry's ``"connection"``
  :class:`~.events.Served` with the JSON result or a :class:`~.events.ServeError`;
* :class:`~.events.Unserve` -- the server cancelled that request: ``ctx.cancelled`` is set,
  a coroutine is cancelled, and nothing is answered for that key;
* :class:`~.events.HandlerNotification` -- call ``handle_log`` (``notifications/message``) or
  ``handle_notification``, one at a time, in arrival order.

Where user code runs (never on this actor's thread, which only routes):

=====================  ==================================================================
method                 runs on
=====================  ==================================================================
plain ``def``          a pool of daemon threads, started as needed, at most
                       ``max_server_requests``
``async def``          one asyncio loop in a daemon thread this actor owns (started on
                       the first coroutine)
notifications          one daemon thread of their own, in arrival order (a coroutine is
                       run on the loop and waited for there), so a slow or raising
                       ``handle_log`` never holds back a Serve
=====================  ==================================================================

Threads are daemons: a method that never returns cannot be killed (no Python thread can),
and must not keep the host's interpreter alive at exit either.

Limits. At most ``max_server_requests`` methods run at once; one more is refused at once
(reason ``busy``), never queued. A plain method still running after its timeout or an
``Unserve`` keeps its slot until it returns: its thread is still busy (and so does a
coroutine that swallows its cancellation). Each Serve is bounded by ``handler_timeout``:
past it the server is answered ``timeout``, ``ctx.cancelled`` is set and a coroutine is
cancelled; a coroutine notification method is bounded by it too. Notifications wait in a backlog of at most
``max_subscriber_backlog``; past it one is dropped, counted (``on_dropped("notification",
1)``, the ``mcp.client.dropped`` counter) and warned about.

Refusals (codes in :mod:`conduit_mcp.protocol.serving`): ``no_method`` (the handler lacks
the method), ``bad_mode`` (an elicitation mode not in ``elicitation_modes``), ``bad_params``,
``busy``, ``timeout``, ``raised`` (logged on ``conduit_mcp.handler`` with the exception's type
and the method, never its text or the params), ``declined`` (``Declined`` raised; from
``elicit`` it is the answer ``{"action": "decline"}`` instead), ``bad_result``, and
``stopped``: when this actor stops or crashes, every request it has not answered is answered
so, and the restarted incarnation serves the next ones.

Secrets: no repr, log record or exception text here carries params, answers or sampled text
(docs/connection.md, "Crash reports"): the messages' reprs show the method and key, the
actor's its counts.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import itertools
import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..config import Config
from ..handler import SERVING_METHODS, Declined, Handler, HandlerContext
from ..otp.base import Link, SafeActor, safe_tell
from ..otp.flag import Flag
from ..otp.registry import Registry
from ..otp.supervisor import ChildSpec, child_spec_for
from ..otp.timers import TimerHandle, schedule
from ..protocol import serving
from ..protocol.client_caps import check_elicitation_modes
from ..protocol.results import parse_server_info
from ..protocol.serving import Refusal
from ..published import Published
from .events import HandlerNotification, Serve, Served, ServeError, Unserve

__all__ = ["HandlerActor", "HandlerStats", "Stats", "child_spec"]

log = logging.getLogger("conduit_mcp.handler")

#: The reason of the answer to a request the actor stops (or crashes) before answering.
STOPPED = "stopped"
_STOPPED_TEXT = "the client's handler stopped before answering"
#: Seconds between two warnings about dropped notifications.
_WARN_EVERY = 10
#: How long the loop's thread lets cancelled coroutines unwind before closing the loop.
_UNWIND = 1.0
_LOG = "notifications/message"

_tokens = itertools.count(1)


@dataclass(slots=True, frozen=True)
class Stats:
    """Ask: the answer is a :class:`HandlerStats`."""


class HandlerStats(NamedTuple):
    """Counters of one handler actor incarnation."""

    running: int
    """Serve requests not answered yet."""
    occupied: int
    """Slots in use: running requests, and plain methods still running after their
    request was answered (timeout) or cancelled (a thread cannot be stopped)."""
    served: int
    """Results answered."""
    refused: int
    """Errors answered (every reason)."""
    notifications: int
    """Notifications handed to the notification thread (each calls one method)."""
    dropped: int
    """Notifications dropped because the backlog was full."""


@dataclass(slots=True, frozen=True)
class _Done:
    """A worker -> the actor: the method of ``token`` returned (or raised); ``result`` or
    ``refusal`` is the answer, already checked and converted on the worker."""

    key: Any
    token: int
    result: dict[str, Any] | None
    refusal: Refusal | None

    def __repr__(self) -> str:
        return f"<_Done key={self.key!r} ok={self.refusal is None}>"


@dataclass(slots=True, frozen=True)
class _Expired:
    """The timer -> the actor: the ``handler_timeout`` of ``token`` passed."""

    key: Any
    token: int


class _Job:
    __slots__ = ("key", "token", "method", "ctx", "task", "timer")

    def __init__(self, key: Any, token: int, method: str, ctx: HandlerContext) -> None:
        self.key = key
        self.token = token
        self.method = method
        self.ctx = ctx
        self.task: _Task | None = None  # a coroutine's task
        self.timer: TimerHandle | None = None

    def cancel(self) -> None:
        self.ctx.cancelled.set()
        if self.task is not None:
            self.task.cancel()
        self.stop_timer()

    def stop_timer(self) -> None:
        timer, self.timer = self.timer, None
        if timer is not None:
            timer.cancel()


# -- where user code runs --------------------------------------------------------------------


class _Workers:
    """Daemon threads taking jobs from one queue, started as needed up to ``size``.

    The actor never submits more jobs at once than ``size`` (its slots), so a job never
    waits for a thread. ``concurrent.futures.ThreadPoolExecutor`` is not used: its threads
    are joined at interpreter exit, so a handler method that never returns would hang the
    host's exit.
    """

    def __init__(self, size: int, name: str) -> None:
        self._size = size
        self._name = name
        self._queue: queue.SimpleQueue[Callable[[], None] | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads = 0
        self._busy = 0

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            self._busy += 1
            start = self._busy > self._threads and self._threads < self._size
            if start:
                self._threads += 1
        if start:
            threading.Thread(
                target=self._work, name=f"{self._name}-{self._threads}", daemon=True
            ).start()
        self._queue.put(job)

    def _work(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            try:
                job()
            finally:
                with self._lock:
                    self._busy -= 1

    def shutdown(self) -> None:
        """Ask every thread to exit after its current job; never waits."""
        with self._lock:
            n, self._threads = self._threads, 0
        for _ in range(n):
            self._queue.put(None)


class _Loop:
    """An asyncio loop running in a daemon thread of its own."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        loop = self.loop
        asyncio.set_event_loop(loop)
        try:
            loop.run_forever()
            tasks = asyncio.all_tasks(loop)
            for task in tasks:
                task.cancel()
            if tasks:
                # A coroutine that swallows its cancellation is left behind after this.
                loop.run_until_complete(asyncio.wait(tasks, timeout=_UNWIND))
            loop.run_until_complete(loop.shutdown_asyncgens())
        except BaseException:
            log.warning("the handler's event loop failed while stopping")
        finally:
            loop.close()

    def stop(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except RuntimeError:
            pass  # already closed


class _Task:
    """A coroutine run as a task on the handler's loop, started and cancelled from the actor's
    thread. ``report(result, refusal)`` runs when the task has really finished (even if it
    was cancelled before it began), so its slot is freed only then: a coroutine that
    swallows its cancellation keeps its slot, as a thread that cannot be stopped does."""

    __slots__ = ("_loop", "_make", "_report", "_task", "_cancelled")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        make: Callable[[], Any],
        report: Callable[[Any, Refusal | None], None],
    ) -> None:
        self._loop = loop
        self._make = make
        self._report = report
        self._task: asyncio.Task[Any] | None = None
        self._cancelled = False
        loop.call_soon_threadsafe(self._start)

    def _start(self) -> None:  # the loop's thread
        task = self._task = self._loop.create_task(self._make())
        task.add_done_callback(self._done)
        if self._cancelled:
            task.cancel()

    def _done(self, task: asyncio.Task[Any]) -> None:  # the loop's thread
        if task.cancelled():
            self._report(None, None)
        else:
            result, refusal = task.result()
            self._report(result, refusal)

    def cancel(self) -> None:
        """Cancel the task (thread-safe; callbacks run in FIFO order, so after ``_start``)."""
        self._cancelled = True
        try:
            self._loop.call_soon_threadsafe(self._cancel)
        except RuntimeError:
            pass  # the loop is closed: its tasks were cancelled when it stopped

    def _cancel(self) -> None:  # the loop's thread
        if self._task is not None:
            self._task.cancel()


def _is_async(fn: Any) -> bool:
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004 (an object with an async __call__)
    )


def _answer(
    method: str, name: str, call: Callable[[], Any], cancelled: threading.Event, params: Any
) -> tuple[Any, Refusal | None]:
    """Run a plain handler method and convert its answer (on a worker thread); not at all if
    its request was cancelled before a thread took it."""
    if cancelled.is_set():
        return None, None
    try:
        value = call()
    except Declined:
        return _declined(method)
    except BaseException as exc:
        return None, _raised(method, name, exc)
    if inspect.isawaitable(value):
        if inspect.iscoroutine(value):
            value.close()
        return None, serving.Refusal(
            serving.INTERNAL_ERROR,
            f"the client's handler {name} returned an awaitable from a plain def: "
            f"declare it async def",
            "bad_result",
        )
    return _encode(method, value, params)


async def _answer_async(method: str, name: str, call: Callable[[], Any], params: Any) -> Any:
    """Run a handler coroutine and convert its answer (on the handler's loop)."""
    try:
        value = await call()
    except Declined:
        return _declined(method)
    except asyncio.CancelledError:
        return None, None  # the request was cancelled or timed out: nobody reads this
    except BaseException as exc:
        return None, _raised(method, name, exc)
    return _encode(method, value, params)


def _encode(method: str, value: Any, params: Any) -> tuple[Any, Refusal | None]:
    try:
        return serving.encode_result(method, value, params), None
    except Refusal as refusal:
        return None, refusal


def _declined(method: str) -> tuple[Any, Refusal | None]:
    if method == "elicitation/create":
        return {"action": "decline"}, None  # a declined elicitation is an answer
    return None, serving.declined(method)


def _raised(method: str, name: str, exc: BaseException) -> Refusal:
    # The type only: an exception's text may quote the params or the user's answers.
    log.warning("handler %s raised %s on %s", name, type(exc).__name__, method)
    return serving.raised(method, exc)


# -- the actor --------------------------------------------------------------------------------


class HandlerActor(SafeActor):
    """See the module docstring. ``registry`` finds the connection at every answer (a
    restarted connection is a new actor); ``shared`` gives the context its server info."""

    def __init__(
        self,
        client_name: str,
        registry: Registry,
        shared: Published,
        config: Config,
        *,
        link: Link | None = None,
        halt: threading.Event | Flag | None = None,
        on_dropped: Callable[[str, int], None] | None = None,
    ) -> None:
        super().__init__(link=link)
        self._client_name = client_name
        self._registry = registry
        self._shared = shared
        self._handler: Handler = config.handler
        self._timeout = config.handler_timeout
        self._max = config.max_server_requests
        self._max_backlog = config.max_subscriber_backlog
        self._halt: threading.Event | Flag = halt if halt is not None else threading.Event()
        self._on_dropped = on_dropped
        self._implemented: frozenset[str] = frozenset()
        self._modes: tuple[str, ...] = ()
        self._jobs: dict[Any, _Job] = {}  # requests not answered yet, by key
        self._occupied: set[int] = set()  # tokens whose method has not returned yet
        self._workers: _Workers | None = None
        self._loop: _Loop | None = None
        self._notes: _Workers | None = None  # one thread: arrival order
        self._note_lock = threading.Lock()
        # Set when this incarnation ends: what its notification thread still holds is
        # skipped, so it never runs beside a restarted incarnation's (arrival order).
        self._ended = threading.Event()
        self._note_backlog = 0  # notifications queued or running on the notes thread
        self._served = 0
        self._refused = 0
        self._notified = 0
        self._dropped = 0
        self._warned = -float(_WARN_EVERY)

    def __repr__(self) -> str:
        return (
            f"<HandlerActor {self._client_name} running={len(self._jobs)} "
            f"occupied={len(self._occupied)}>"
        )

    # -- life cycle -----------------------------------------------------------------------------

    def init(self) -> None:
        handler = self._handler
        if not isinstance(handler, Handler):
            raise TypeError("the handler option must be a conduit_mcp.Handler instance")
        self._implemented = type(handler).implemented_methods()
        self._modes = check_elicitation_modes(handler.elicitation_modes)

    def terminate(self, reason: BaseException | None) -> None:
        self._ended.set()
        jobs, self._jobs = self._jobs, {}
        for job in jobs.values():
            job.cancel()
            self._tell_connection(
                Served(
                    job.key,
                    None,
                    ServeError(serving.INTERNAL_ERROR, _STOPPED_TEXT, STOPPED),
                )
            )
        for pool in (self._workers, self._notes):
            if pool is not None:
                pool.shutdown()
        if self._loop is not None:
            self._loop.stop()

    # -- messages -------------------------------------------------------------------------------

    def receive(self, message: Any) -> Any:
        t = type(message)
        if t is Serve:
            self._on_serve(message)
        elif t is _Done:
            self._on_done(message)
        elif t is _Expired:
            self._on_expired(message)
        elif t is Unserve:
            job = self._jobs.pop(message.key, None)
            if job is not None:
                job.cancel()
        elif t is HandlerNotification:
            self._on_notification(message)
        elif t is Stats:
            return HandlerStats(
                len(self._jobs),
                len(self._occupied),
                self._served,
                self._refused,
                self._notified,
                self._dropped,
            )
        else:
            return super().receive(message)
        return None

    def _on_serve(self, m: Serve) -> None:
        if self._halt.is_set():
            return  # the client is stopping: no user code runs any more
        name = SERVING_METHODS.get(m.method)
        if name is None or name not in self._implemented:
            self._refuse(m.key, serving.no_method(m.method))
            return
        try:
            if name == "create_message":
                args: tuple[Any, ...] = (serving.sampling_request(m.params),)
            elif name == "elicit":
                args = (serving.elicit_request(m.params, self._modes),)
            else:
                args = ()
        except Refusal as refusal:
            self._refuse(m.key, refusal)
            return
        if len(self._occupied) >= self._max:
            self._refuse(m.key, serving.busy(self._max))
            return
        old = self._jobs.pop(m.key, None)
        if old is not None:
            old.cancel()  # a key served again: the newer request wins
        c = m.context
        ctx = HandlerContext(
            self._client_name,
            c.era,
            parse_server_info(self._shared.server_info),
            c.request_id,
            c.related_method,
            c.related_id,
        )
        token = next(_tokens)
        job = self._jobs[m.key] = _Job(m.key, token, m.method, ctx)
        self._occupied.add(token)
        fn = getattr(self._handler, name)
        call = (lambda: fn(*args, ctx)) if args else (lambda: fn(ctx))
        ref = self.actor_ref
        key, method, params = m.key, m.method, m.params

        if _is_async(fn):

            def report(result: Any, refusal: Refusal | None) -> None:
                safe_tell(ref, _Done(key, token, result, refusal))

            job.task = _Task(
                self._ensure_loop(), lambda: _answer_async(method, name, call, params), report
            )
        else:

            def work() -> None:
                result, refusal = _answer(method, name, call, ctx.cancelled, params)
                safe_tell(ref, _Done(key, token, result, refusal))

            self._ensure_workers().submit(work)

        def expire() -> None:  # the timer thread: only a tell
            safe_tell(ref, _Expired(key, token))

        job.timer = schedule(time.monotonic() + self._timeout, expire)

    def _on_done(self, d: _Done) -> None:
        self._occupied.discard(d.token)
        job = self._jobs.get(d.key)
        if job is None or job.token != d.token:
            return  # answered already (timeout) or cancelled: nothing more is said
        del self._jobs[d.key]
        job.stop_timer()
        if d.result is None and d.refusal is None:  # its task was cancelled by the loop
            self._refuse(d.key, Refusal(serving.INTERNAL_ERROR, _STOPPED_TEXT, STOPPED))
        elif d.refusal is not None:
            self._refuse(d.key, d.refusal)
        else:
            self._served += 1
            self._tell_connection(Served(d.key, d.result, None))

    def _on_expired(self, e: _Expired) -> None:
        job = self._jobs.get(e.key)
        if job is None or job.token != e.token:
            return
        del self._jobs[e.key]
        job.timer = None
        job.cancel()
        self._refuse(e.key, serving.timed_out(job.method, self._timeout))

    def _refuse(self, key: Any, refusal: Refusal) -> None:
        self._refused += 1
        self._tell_connection(
            Served(key, None, ServeError(refusal.code, refusal.message, refusal.reason))
        )

    def _tell_connection(self, message: Any) -> None:
        # Restarting: the server requests it had died with it.
        self._registry.tell("connection", message)

    def _ensure_loop(self) -> asyncio.AbstractEventLoop:
        if self._loop is None:
            self._loop = _Loop(f"conduit-handler-loop-{self._client_name}")
        return self._loop.loop

    def _ensure_workers(self) -> _Workers:
        if self._workers is None:
            self._workers = _Workers(self._max, f"conduit-handler-{self._client_name}")
        return self._workers

    # -- notifications --------------------------------------------------------------------------

    def _on_notification(self, n: HandlerNotification) -> None:
        if self._halt.is_set():
            return
        if n.method == _LOG:
            if "handle_log" not in self._implemented:
                return
            params = n.params if isinstance(n.params, dict) else {}
            level = params.get("level")
            logger = params.get("logger")
            fn: Callable[..., Any] = self._handler.handle_log
            args: tuple[Any, ...] = (
                level if isinstance(level, str) else "info",
                params.get("data"),
                logger if isinstance(logger, str) else None,
            )
            name = "handle_log"
        else:
            if "handle_notification" not in self._implemented:
                return
            fn = self._handler.handle_notification
            args = (n.method, n.params if isinstance(n.params, dict) else None)
            name = "handle_notification"
        with self._note_lock:
            full = self._note_backlog >= self._max_backlog
            if not full:
                self._note_backlog += 1
        if full:
            self._drop_notification()
            return
        status = self._shared.status
        ctx = HandlerContext(
            self._client_name, status.era or "legacy", parse_server_info(self._shared.server_info)
        )
        method, halt, ended, timeout = n.method, self._halt, self._ended, self._timeout
        loop = self._ensure_loop() if _is_async(fn) else None

        def work() -> None:
            try:
                if halt.is_set() or ended.is_set():
                    return
                if loop is None:
                    fn(*args, ctx)
                else:
                    future: Any = asyncio.run_coroutine_threadsafe(fn(*args, ctx), loop)
                    try:
                        future.result(timeout)
                    except concurrent.futures.CancelledError:
                        pass  # the handler actor stopped
                    except TimeoutError:
                        ctx.cancelled.set()
                        future.cancel()
                        log.warning("handler %s timed out on %s", name, method)
            except BaseException as exc:
                log.warning("handler %s raised %s on %s", name, type(exc).__name__, method)
            finally:
                with self._note_lock:
                    self._note_backlog -= 1

        if self._notes is None:
            self._notes = _Workers(1, f"conduit-handler-notes-{self._client_name}")
        self._notified += 1
        self._notes.submit(work)

    def _drop_notification(self) -> None:
        self._dropped += 1
        if self._on_dropped is not None:
            self._on_dropped("notification", 1)
        now = time.monotonic()
        if now - self._warned >= _WARN_EVERY:
            self._warned = now
            log.warning(
                "client %s: the handler's notification backlog is full "
                "(max_subscriber_backlog): dropped a notification (warned at most every %ds; "
                "every drop is counted in mcp.client.dropped)",
                self._client_name,
                _WARN_EVERY,
            )


def child_spec(
    client_name: str,
    registry: Registry,
    shared: Published,
    config: Config,
    *,
    id: str = "handler",
    shutdown: float = 5.0,
    halt: threading.Event | Flag | None = None,
    on_dropped: Callable[[str, int], None] | None = None,
) -> ChildSpec:
    """The permanent supervisor child for one client's handler actor, started with the
    client (not lazy): give it only when ``config.handler`` is set."""
    return child_spec_for(
        HandlerActor,
        client_name,
        registry,
        shared,
        config,
        id=id,
        restart="permanent",
        shutdown=shutdown,
        lazy=False,
        halt=halt,
        on_dropped=on_dropped,
    )
