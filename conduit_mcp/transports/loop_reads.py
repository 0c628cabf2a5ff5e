"""An asyncio caller's own loop reading the answer to its call from a stdio pipe.

Measured (docs/performance.md, "The latest runs"): a sequential
``await aio.call_tool`` over stdio waited on two wake-ups, the I/O loop's (woken by the
server's answer) and then the caller loop's (woken by the I/O loop's post), and in the
VM's idle regime the second cost more than all the Python of the call. While a call is the
only one in flight, the caller's loop can read the pipe itself: each loop that does has one
epoll of its own (:class:`LoopPoll`), registered on it once with ``add_reader``; taking the
pipe disables it in the I/O loop's epoll and adds it to the caller's (four ``epoll_ctl`` a
call, about a microsecond each). Adding and removing a reader on the loop per call cost
what the wake-up it saves did, so the registration is the loop's for its life.

What is read is handled exactly as the I/O loop's reader handles it
(``StdioTransport._on_stdout``, under the reader's lock: no user code, the order kept). The
pipe goes back to the I/O loop at once when the read carried the call's answer, anything
for the connection (a server request, a notification), or the end of the stream; when a
second call goes in flight; and when the awaiting task leaves its wait for any reason.

An application's loop can be busy (a task that blocks it) or stop running while it holds
the pipe, and then nothing would read what the server sends. So a watchdog on the I/O loop
(:class:`_Watch`, every :data:`WATCH_EVERY` seconds, running only while some pipe is held by
a loop) takes the pipe back from a loop that has left it readable and unread for a whole
tick, or whose loop is closed: what the server sends is read within two ticks, whatever
the application's loop does.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import threading
import weakref
from typing import Any

from ..otp.signals import hold_signals, in_main_thread, replay_signals, restore_signals
from . import loop as io_loop

#: The watchdog's tick (seconds): a pipe held by a loop that has left it readable and unread
#: for a whole tick is taken back by the I/O loop.
WATCH_EVERY = 0.05

#: Empty ticks (no pipe held by a loop) before the watchdog stops until the next take.
_IDLE_TICKS = 20

log = logging.getLogger("conduit_mcp.stdio")


class LoopPoll:
    """One asyncio loop's epoll of the pipes its callers hold (fd -> reader)."""

    __slots__ = ("ep", "fd", "readers", "_loop", "__weakref__")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.ep = select.epoll()
        self.fd = self.ep.fileno()
        self.readers: dict[int, Any] = {}
        self._loop = weakref.ref(loop)  # never a strong one: the loop owns this, not we it

    def __repr__(self) -> str:
        return f"<LoopPoll fd={self.fd} pipes={len(self.readers)}>"

    def alive(self) -> bool:
        """Whether the loop can still read (it exists and is not closed)."""
        loop = self._loop()
        return loop is not None and not loop.is_closed()

    def add(self, fd: int, reader: Any) -> None:
        """Watch ``fd`` for ``reader`` (called under the reader's lock)."""
        self.readers[fd] = reader
        self.ep.register(fd, select.EPOLLIN)

    def remove(self, fd: int) -> None:
        """Stop watching ``fd`` (under the reader's lock; any thread: epoll_ctl is safe)."""
        self.readers.pop(fd, None)
        with contextlib.suppress(OSError, ValueError):
            self.ep.unregister(fd)

    def retire(self, loop: asyncio.AbstractEventLoop) -> None:
        """Stop watching, on ``loop``'s own thread, unless a pipe was taken again since the
        watchdog asked (then the next idle watchdog asks again)."""
        if self.readers:
            return
        with _polls_lock:
            if _polls.get(loop) is self:
                del _polls[loop]
        with contextlib.suppress(RuntimeError, ValueError, OSError):
            loop.remove_reader(self.fd)
        self.ep.close()

    def _ready(self) -> None:
        # The loop's reader callback: a held pipe is readable. In the main thread the Python
        # signal handlers are held while a read is handled (as for the connection's turn in
        # otp.pooled.tell_here): a Ctrl-C never lands inside the handling of a read.
        held = hold_signals() if in_main_thread() else None
        try:
            for fd, _events in self.ep.poll(0):
                reader = self.readers.get(fd)
                if reader is None:
                    continue
                try:
                    reader.read_for(self)
                except Exception:
                    # A bug of ours, on the application's loop: reported on our logger,
                    # not to its exception handler, and the I/O loop reads from now on.
                    log.exception("reading a stdio pipe on the caller's loop failed")
                    reader.give_back_from(self)
        finally:
            if held is not None:
                restore_signals(held[0])
                if held[1]:
                    replay_signals(held[1], held[0])


# The loops' LoopPolls. Made on a loop's thread, retired by the watchdog once no pipe has been
# held for a second (its epoll is closed on the loop's thread, or at once if the loop is
# closed): no descriptor outlives the loop's use of it, whoever keeps the loop object.
_polls: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopPoll] = weakref.WeakKeyDictionary()
_polls_lock = threading.Lock()


def loop_poll(loop: asyncio.AbstractEventLoop) -> LoopPoll | None:
    """``loop``'s :class:`LoopPoll`, made and registered on first use. None where the loop
    cannot watch a descriptor (no ``add_reader``: Windows' proactor) or epoll is missing.
    The loop's own thread (``add_reader`` is not thread-safe)."""
    lp = _polls.get(loop)
    if lp is not None:
        return lp
    if not hasattr(select, "epoll") or loop is io_loop.io_loop():
        return None
    lp = LoopPoll(loop)
    try:
        loop.add_reader(lp.fd, lp._ready)
    except (NotImplementedError, RuntimeError, ValueError):
        lp.ep.close()
        return None
    with _polls_lock:
        _polls[loop] = lp
    return lp


def _retire_all() -> None:
    """The watchdog went idle: each loop's epoll is closed (on its own thread; at once for a
    closed loop). I/O loop."""
    with _polls_lock:
        polls = list(_polls.items())
    for loop, lp in polls:
        try:
            loop.call_soon_threadsafe(lp.retire, loop)
        except RuntimeError:  # the loop is closed: nothing runs on it any more
            with _polls_lock:
                if _polls.get(loop) is lp:
                    del _polls[loop]
            lp.ep.close()


class _Watch:
    """The I/O loop's watchdog of the pipes held by loops (see the module's docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.held: set[Any] = set()
        self.running = False
        self.idle = 0

    def add(self, reader: Any) -> None:
        """``reader`` is held by a loop from now on (under its lock)."""
        with self.lock:
            self.held.add(reader)
            if self.running:
                return
            self.running = True
            self.idle = 0
        try:
            io_loop.call_soon(self._tick)
        except RuntimeError:  # the I/O loop is closed (the interpreter is ending)
            with self.lock:
                self.running = False

    def discard(self, reader: Any) -> None:
        with self.lock:
            self.held.discard(reader)

    def _tick(self) -> None:
        retire = False
        with self.lock:
            readers = list(self.held)
            if readers:
                self.idle = 0
            else:
                self.idle += 1
                if self.idle >= _IDLE_TICKS:
                    self.running = False
                    retire = True
        if retire:
            _retire_all()
            return
        for reader in readers:
            reader.watch()
        asyncio.get_running_loop().call_later(WATCH_EVERY, self._tick)

    def forget(self) -> None:
        # A forked child has no I/O loop thread yet: the next take starts a watchdog. Its
        # loops' epolls are the parent's (shared across the fork): forgotten, never changed.
        self.lock = threading.Lock()
        self.held = set()
        self.running = False
        self.idle = 0
        _polls.clear()


WATCH = _Watch()


def readable(fd: int) -> bool:
    """Whether ``fd`` has something to read now (or has ended)."""
    poll = select.poll()
    poll.register(fd, select.POLLIN)
    return bool(poll.poll(0))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=WATCH.forget)
