"""Reply channels: how the connection answers a caller without ever running caller code.

The connection holds one of these per request and calls only ``progress``/``ok``/``fail``,
each of which just hands a value over (a queue put, a ``call_soon_threadsafe``, a future
``set``): progress callbacks and result parsing run in the caller's thread or loop, because
the connection never runs user code (docs/connection.md, "Requests"). ``request_id`` is written by the connection once it numbers the
request, so a caller that gives up can name it in an ``Abandon``.

Progress is bounded per call (docs/connection.md, "Floods"): a channel keeps the latest
:data:`PROGRESS_KEPT` progress notifications the caller has not run yet, and counts the older
ones it dropped in ``progress_dropped``. A flood of progress to a slow ``on_progress``
therefore costs a bounded list, and the answer (or the deadline's ``timeout``) waits behind
at most that many callbacks, which the caller stops running once the deadline has passed.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import threading
from queue import SimpleQueue
from typing import Any

import pykka

from .errors import Error

# Items put on a SyncReply's queue: (tag, value).
PROGRESS = 0
OK = 1
FAIL = 2


class Reply:
    """Base: the connection-facing side of one request's answer."""

    __slots__ = ("request_id", "done", "rounds", "pipe")

    def __init__(self) -> None:
        self.request_id: int | None = None
        self.done = False
        # modern input_required rounds the call went through (for its span)
        self.rounds = 0
        # The stdio transport whose pipe the caller may read its answer from itself (set by
        # the connection when it sends the call): a blocked thread's ``wait_here``, an
        # asyncio loop's ``read_on``. Other callers never look at it.
        self.pipe: Any = None

    def progress(self, params: dict[str, Any]) -> None:
        """A ``notifications/progress`` for this request (params as received)."""

    def ok(self, result: Any) -> None:
        raise NotImplementedError

    def fail(self, error: Error) -> None:
        raise NotImplementedError

    def ok_soon(self, result: Any) -> None:
        """:meth:`ok`, from the transport's reader (pending.py), which answers many calls per
        read: a channel that can gather them (:class:`AsyncReply`) settles them together."""
        self.ok(result)

    def fail_soon(self, error: Error) -> None:
        """:meth:`fail` from the transport's reader; see :meth:`ok_soon`."""
        self.fail(error)


#: Progress notifications kept per call for a caller that has not run them yet; past it the
#: oldest is dropped (the latest are kept) and counted.
PROGRESS_KEPT = 100


class _LatestProgress:
    """The latest progress not yet run (at most :data:`PROGRESS_KEPT`), shared by the
    reader's thread (which adds) and the caller's (which takes them all); ``dropped`` counts
    the oldest ones pushed out."""

    __slots__ = ("_lock", "_items", "dropped")

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._items: list[dict[str, Any]] = []
        self.dropped = 0

    def put(self, params: dict[str, Any]) -> bool:
        """Keep ``params``; True if nothing was waiting (the caller must be woken)."""
        with self._lock:
            items = self._items
            items.append(params)
            if len(items) > PROGRESS_KEPT:
                del items[0]
                self.dropped += 1
            return len(items) == 1

    def take(self) -> list[dict[str, Any]]:
        with self._lock:
            items, self._items = self._items, []
            return items


class SyncReply(Reply):
    """For a thread blocked in a call: a C-level ``SimpleQueue`` it waits on with a deadline.
    Progress puts a ``PROGRESS`` wake-up only when none was waiting; the caller takes what
    is kept with :meth:`take_progress`.

    ``pipe`` is the transport whose pipe the waiting thread may read the answer from itself
    (set by the connection when it sends the call: ``StdioTransport.wait_here``); while it
    does, ``wake`` is that thread's :func:`wake_fd`, written (under :data:`WAKE_LOCK`) when
    another thread puts on the queue, so that thread's wait on the pipe ends at once."""

    __slots__ = ("queue", "wants_progress", "_slot", "wake", "waiter")

    def __init__(self, wants_progress: bool = False) -> None:
        super().__init__()
        self.queue: SimpleQueue[tuple[int, Any]] = SimpleQueue()
        self.wants_progress = wants_progress
        self._slot = _LatestProgress() if wants_progress else None
        self.wake: int | None = None
        self.waiter = 0

    def progress(self, params: dict[str, Any]) -> None:
        slot = self._slot
        if slot is not None and not self.done and slot.put(params):
            self.queue.put((PROGRESS, None))
            if self.wake is not None and self.waiter != _get_ident():
                self._wake()

    def take_progress(self) -> list[dict[str, Any]]:
        """The progress not yet run, oldest first."""
        slot = self._slot
        return [] if slot is None else slot.take()

    @property
    def progress_dropped(self) -> int:
        """Progress notifications dropped (the oldest) before the caller ran them."""
        slot = self._slot
        return 0 if slot is None else slot.dropped

    def ok(self, result: Any) -> None:
        if not self.done:
            self.done = True
            self.queue.put((OK, result))
            if self.wake is not None and self.waiter != _get_ident():
                self._wake()

    def fail(self, error: Error) -> None:
        if not self.done:
            self.done = True
            self.queue.put((FAIL, error))
            if self.wake is not None and self.waiter != _get_ident():
                self._wake()

    def _wake(self) -> None:
        # The waiting thread reads the pipe (it put this itself: not called, as ``waiter``
        # is only ever changed by that thread; or it is woken, once: the wake is cleared,
        # which tells it to drain its eventfd when it stops waiting).
        with WAKE_LOCK:
            wake = self.wake
            if wake is not None and self.waiter != threading.get_ident():
                self.wake = None
                with contextlib.suppress(OSError):
                    os.eventfd_write(wake, 1)


#: Held while a :class:`SyncReply`'s ``wake`` is written or cleared: once its waiting
#: thread has cleared it, no other thread can still write to that descriptor.
WAKE_LOCK = threading.Lock()

_get_ident = threading.get_ident


class _WakeFd(threading.local):
    fd: int | None = None
    closer: Any = None


class _Closer:
    __slots__ = ("fd",)

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self) -> None:  # the thread's locals go when it ends
        with contextlib.suppress(OSError):
            os.close(self.fd)


_wake_fds = _WakeFd()


def wake_fd() -> int | None:
    """This thread's eventfd (non-blocking; made once, closed when the thread ends), or
    None where there are none."""
    local = _wake_fds
    fd = local.fd
    if fd is None:
        make = getattr(os, "eventfd", None)
        if make is None:
            return None
        try:
            fd = make(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        except OSError:
            return None
        local.fd, local.closer = fd, _Closer(fd)
    return fd


class AsyncReply(Reply):
    """For an asyncio caller: resolves an ``asyncio.Future`` on the caller's own loop."""

    __slots__ = ("loop", "future", "on_progress", "_slot")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        future: asyncio.Future[Any],
        on_progress: Any = None,
    ) -> None:
        super().__init__()
        self.loop = loop
        self.future = future
        self.on_progress = on_progress
        self._slot = _LatestProgress() if on_progress is not None else None

    def progress(self, params: dict[str, Any]) -> None:
        # One callback scheduled on the caller's loop at a time; it runs what is kept.
        slot = self._slot
        if slot is not None and not self.done and slot.put(params):
            self._call(self._run_progress)

    def _run_progress(self) -> None:
        slot = self._slot
        if slot is None:
            return
        for params in slot.take():
            if self.future.done():
                return  # answered (or timed out): later progress is of no use
            try:
                self.on_progress(params)
            except Exception as exc:
                # As when each report was its own loop callback: reported, the rest still run.
                self.loop.call_exception_handler(
                    {"message": "Exception in on_progress callback", "exception": exc}
                )

    @property
    def progress_dropped(self) -> int:
        """Progress notifications dropped (the oldest) before the caller's loop ran them."""
        slot = self._slot
        return 0 if slot is None else slot.dropped

    def ok(self, result: Any) -> None:
        if not self.done:
            self.done = True
            self._call(_set_result, self.future, result)

    def fail(self, error: Error) -> None:
        if not self.done:
            self.done = True
            self._call(_set_exception, self.future, error)

    def ok_soon(self, result: Any) -> None:
        if not self.done:
            self.done = True
            _settle_soon(self.loop, self.future, True, result, self._slot is not None)

    def fail_soon(self, error: Error) -> None:
        if not self.done:
            self.done = True
            _settle_soon(self.loop, self.future, False, error, self._slot is not None)

    def _call(self, fn: Any, *args: Any) -> None:
        # A closed loop means the caller is gone: nothing to answer.
        with contextlib.suppress(RuntimeError):
            self.loop.call_soon_threadsafe(fn, *args)


# Answers the readers gave asyncio callers during one turn of the loop they run on (the I/O
# loop): reading loop -> caller loop -> [(future, ok, value)]. Measured: with 32 calls in
# flight a read carries many answers, and a ``call_soon_threadsafe`` each cost a write to the
# caller loop's self-pipe and, often, a wake-up each; gathered, a caller loop is woken once per
# turn and settles them all. Each reading loop's entry is touched only by its own thread.
_held: dict[asyncio.AbstractEventLoop, dict[asyncio.AbstractEventLoop, list[Any]]] = {}


def _settle_soon(
    loop: asyncio.AbstractEventLoop,
    future: asyncio.Future[Any],
    ok: bool,
    value: Any,
    progress: bool,
) -> None:
    """Settle ``future`` (on ``loop``) with what this turn's reads answered; ``progress``:
    its caller takes progress, which must run before the future is done."""
    item = (future, ok, value, progress)
    try:
        here = asyncio.get_running_loop()
    except RuntimeError:  # not on a loop (an in-process server's thread): settle it now
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle_all, [item])
        return
    batch = _held.get(here)
    if batch is None:
        batch = _held[here] = {}
        here.call_soon(_release, here)  # after this turn's other callbacks: no wake-up
    items = batch.get(loop)
    if items is None:
        batch[loop] = [item]
    else:
        items.append(item)


def gather_answers(here: asyncio.AbstractEventLoop) -> bool:
    """A reader on loop ``here`` is about to answer the calls of one read: their answers
    are gathered until it calls :func:`release_answers` (True), instead of until the loop's
    next turn, so a caller is woken as soon as its answer is read (with a sequential call,
    one loop turn sooner). False when answers are being gathered already (for the turn):
    nothing to release then."""
    if here in _held:
        return False
    _held[here] = {}
    return True


def release_answers(here: asyncio.AbstractEventLoop) -> None:
    """Post what was gathered since :func:`gather_answers` returned True."""
    _release(here)


def _release(here: asyncio.AbstractEventLoop) -> None:
    for loop, items in _held.pop(here, {}).items():
        if loop is here:
            # Read on the callers' own loop (loop_reads.py): no post to itself, and the
            # futures are settled now, so their tasks run at the loop's next turn (a
            # sequential call: two turns an answer, not three). Those whose callers take
            # progress are settled at the next turn instead: progress read before the
            # answer was scheduled first, and must run before the future is done
            # (AsyncReply._run_progress).
            if len(items) == 1 and not items[0][3]:  # a sequential call's answer
                _settle_all(items)
                continue
            later = [item for item in items if item[3]]
            if len(later) < len(items):
                _settle_all([item for item in items if not item[3]] if later else items)
            if later:
                loop.call_soon(_settle_all, later)
            continue
        # A closed loop means the callers are gone: nothing to answer.
        with contextlib.suppress(RuntimeError):
            loop.call_soon_threadsafe(_settle_all, items)


def _settle_all(items: list[Any]) -> None:
    for future, ok, value, _progress in items:
        if not future.done():
            if ok:
                future.set_result(value)
            else:
                future.set_exception(value)


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], error: Error) -> None:
    if not future.done():
        future.set_exception(error)


class FutureReply(Reply):
    """For a Pykka actor caller: a ``pykka.ThreadingFuture`` it can ``get`` when it likes, and
    progress told to an ``ActorRef`` as :class:`ProgressMessage` messages.

    Progress is not told to an actor that already has :data:`PROGRESS_KEPT` messages waiting
    in its mailbox: it is dropped and counted in ``progress_dropped``, so a flood of progress
    to a busy actor cannot grow its mailbox without end."""

    __slots__ = ("future", "progress_to", "transform", "progress_dropped")

    def __init__(
        self,
        future: pykka.ThreadingFuture[Any],
        progress_to: pykka.ActorRef[Any] | None = None,
    ) -> None:
        super().__init__()
        self.future = future
        self.progress_to = progress_to
        self.progress_dropped = 0

    def progress(self, params: dict[str, Any]) -> None:
        target = self.progress_to
        if target is not None and not self.done:
            # Pykka's inbox is a queue (ours a SimpleQueue): both have qsize().
            waiting = getattr(target.actor_inbox, "qsize", None)
            if waiting is not None and waiting() >= PROGRESS_KEPT:
                self.progress_dropped += 1
                return
            with contextlib.suppress(pykka.ActorDeadError):
                target.tell(("conduit_mcp.progress", self.request_id, params))

    def ok(self, result: Any) -> None:
        if not self.done:
            self.done = True
            self.future.set(result)

    def fail(self, error: Error) -> None:
        if not self.done:
            self.done = True
            self.future.set_exception((type(error), error, None))
