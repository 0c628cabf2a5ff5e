"""The library's I/O loop: one asyncio loop on one daemon thread, shared by every client.

Why one shared loop and not one per client: the target is a thousand connected clients in
one process, and a loop thread per client would double the thread count for nothing — the
loop only moves bytes. No user code ever runs here (docs/architecture.md), and actors
never block on it: they submit work with ``call_soon_threadsafe`` and hear back by ``tell``.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from collections.abc import Callable, Coroutine
from concurrent.futures import Future
from typing import Any, TypeVar

log = logging.getLogger("conduit_mcp.io")

T = TypeVar("T")

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def _run(loop: asyncio.AbstractEventLoop, started: threading.Event) -> None:
    asyncio.set_event_loop(loop)
    loop.set_exception_handler(_log_exception)
    loop.call_soon(started.set)
    loop.run_forever()


def _log_exception(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    # Only the exception's type and the context message: a raw context may hold frames
    # or buffers with tool arguments in them (docs/secrets.md).
    exc = context.get("exception")
    log.error("I/O loop error: %s (%s)", context.get("message"), type(exc).__name__)


def io_loop() -> asyncio.AbstractEventLoop:
    """The shared loop, started on first use."""
    global _loop, _thread
    loop = _loop
    if loop is not None and not loop.is_closed():
        return loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            started = threading.Event()
            thread = threading.Thread(
                target=_run, args=(loop, started), name="conduit-mcp-io", daemon=True
            )
            thread.start()
            started.wait()
            _loop, _thread = loop, thread
        return _loop


def call_soon(fn: Callable[..., Any], *args: Any) -> None:
    """Run ``fn(*args)`` on the I/O loop; thread-safe, never blocks."""
    io_loop().call_soon_threadsafe(fn, *args)


def submit(coro: Coroutine[Any, Any, T]) -> Future[T]:
    """Run a coroutine on the I/O loop; the returned future is safe to poll from any thread."""
    return asyncio.run_coroutine_threadsafe(coro, io_loop())


#: The tasks :func:`spawn` started and that have not finished: the loop keeps only weak
#: references to its tasks, and one nobody references could be collected while it waits.
_spawned: set[asyncio.Task[Any]] = set()


def spawn(coro: Coroutine[Any, Any, Any]) -> None:
    """Run a coroutine on the I/O loop when nobody waits for its outcome; thread-safe,
    never blocks. What :func:`submit` does without its ``concurrent.futures.Future`` (a
    ``Condition`` with its deque) chained to the task: a third of the CPU of stopping
    thousands of HTTP clients (``benchmarks/many_clients.py``). An exception the coroutine
    raises is dropped, as a future nobody reads drops it, and logged at DEBUG."""
    io_loop().call_soon_threadsafe(_start, coro)


def _start(coro: Coroutine[Any, Any, Any]) -> None:
    task = asyncio.get_running_loop().create_task(coro)
    _spawned.add(task)
    task.add_done_callback(_spawned_done)


def _spawned_done(task: asyncio.Task[Any]) -> None:
    _spawned.discard(task)
    if not task.cancelled():
        exc = task.exception()
        if exc is not None:
            log.debug("a task on the I/O loop failed: %s", type(exc).__name__)


def _forget_loop_in_child() -> None:
    # A forked child inherits the loop object but not its thread (fork copies only the
    # calling thread): without this, every transport of the child would wait on a loop that
    # nobody runs (gunicorn --preload, Celery's prefork pool, multiprocessing's fork).
    global _lock, _loop, _thread
    _lock = threading.Lock()
    _loop = None
    _thread = None
    _spawned.clear()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_loop_in_child)
