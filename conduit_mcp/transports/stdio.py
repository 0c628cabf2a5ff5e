"""The stdio transport: a server subprocess speaking newline-delimited JSON-RPC.

Everything here runs on the shared I/O loop except ``send``/``cancel``/``close``/``connect``,
which the connection calls from its own thread and which only hand work to the loop. Reads
are decoded on the loop (one ``tell`` per read, carrying every frame of that read) so the
connection never parses bytes. The server's stderr goes to a bounded buffer, never into
results. Exit is seen the moment the child dies, through a pidfd on the loop
(:mod:`.process`: no thread per child). The end of the server's stdout without an exit is a
lost connection too (``stdout_closed``): such a server can never answer again.

Listens go through the one pipe: :meth:`StdioTransport.open_stream` writes the listen
request, and the reader tells the messages about a listen's life (the answer to a
``"listen-<n>"`` id, its acknowledgement, the server's cancellation of one) to the listen
actor, not to the connection. A listen's notifications stay in the connection's batch, in
their order among the others.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import select
import signal
import threading
import time
from collections import deque
from typing import Any, cast

import pykka

from ..errors import Error
from ..otp.base import safe_tell
from ..otp.signals import hold_signals, in_main_thread, replay_signals, restore_signals
from ..protocol.jsonrpc import FrameError, Invalid, LineDecoder, decode, encode
from ..protocol.listen import is_listen_control
from ..protocol.messages import cancelled
from ..replies import WAKE_LOCK, SyncReply, gather_answers, release_answers, wake_fd
from . import loop as io_loop
from .base import (
    FrameProblem,
    Inbound,
    RequestFailed,
    StreamMessages,
    StreamSink,
    TransportDown,
    TransportUp,
)
from .loop_reads import loop_poll
from .process import ChildProcess
from .stdio_spec import Stdio

log = logging.getLogger("conduit_mcp.stdio")

__all__ = ["Stdio", "StdioTransport"]

# How long an exited server's stdout may take to close before the exit is reported anyway.
_EXIT_DRAIN = 0.2


class StdioTransport:
    """One incarnation of a stdio server process (a reconnect spawns a new one)."""

    kind = "stdio"

    def __init__(
        self,
        spec: Stdio,
        owner: pykka.ActorRef[Any],
        gen: int,
        *,
        max_frame: int,
        pending: Any = None,
        max_answer_backlog: int = 1024 * 1024,
    ) -> None:
        self._spec = spec
        self._owner = owner
        self._gen = gen
        self.gen = gen
        self._decoder = LineDecoder(max_frame)
        # The connection's PendingTable: answers to pending calls go straight to their
        # callers from here (actors/pending.py); the rest is told to the connection.
        self._pending = pending
        # Written on the I/O loop, read by any caller's thread: the lock keeps a reader from
        # joining the deque while the loop trims it (deque mutated during iteration).
        self._stderr: deque[bytes] = deque()
        self._stderr_size = 0
        self._stderr_lock = threading.Lock()
        self._proc: ChildProcess | None = None
        self._wlock = threading.Lock()
        # What the pipe could not take yet, as one buffer (under _wlock): a list of small
        # frames would cost far more than their bytes (orjson's minimum allocation). An
        # answer to a server request is dropped while it holds over max_answer_backlog
        # bytes (docs/connection.md, "Floods").
        self._backlog = bytearray()
        self._max_answers = max_answer_backlog
        # Frames held back while the connection sends a burst (cork/flush, under _wlock):
        # written with one syscall when it flushes.
        self._corked = False
        self._held = bytearray()
        self._drain_scheduled = False
        self._writer_added = False
        self._fd: int | None = None
        self._down = False
        self._closing = False
        self._exited = False
        self._stdout_closed = False
        # The server closed its stdout but kept running (see _check_silent).
        self._silent = False
        self._gone = threading.Event()
        self._spawning = False
        # Ending what is left of the process group once the server has exited (one task).
        self._ending: asyncio.Task[None] | None = None
        self.pid: int | None = None
        # The listen actor hearing the listens (None: none), and the listens it opened here.
        self._sink: StreamSink | None = None
        self._sink_key: object = None
        self._tags: set[str] = set()
        # (reader, call) while an asyncio caller's loop may hold the pipe (read_on); a hint
        # only, for send: the reader decides under its lock.
        self._held_for: tuple[Any, Any] | None = None
        # Set by the reader when a read carried anything for the connection or the listen
        # actor: a loop holding the pipe gives it back (_keeps).
        self._told = False
        #: ``(reply, thread ident)`` of the call its caller is telling the connection now,
        #: in its own thread (``request.call_blocking``, ``aio``): a hint for
        #: :meth:`send_call`, which takes the pipe only in that thread.
        self.here_for: tuple[Any, int] | None = None

    def __repr__(self) -> str:
        # Never the spec's env (it may hold tokens) nor any buffered frame.
        return f"<StdioTransport gen={self._gen} pid={self.pid} command={self._spec.command!r}>"

    # -- called from the connection's thread ------------------------------------------------

    def connect(self) -> None:
        io_loop.submit(self._spawn())

    def send(self, message: dict[str, Any]) -> None:
        # encode raises Error("argument", ...) on unserialisable input, before anything queues
        data = encode(message)
        held = self._held_for
        if held is not None and len(self._pending) > 1:
            # A second call in flight: the I/O loop reads for them all again (read_on).
            self._held_for = None
            held[0].give_back_for(held[1])
        self.send_bytes(data)

    def send_call(self, message: dict[str, Any], reply: Any) -> None:
        """:meth:`send` for a request (connection's turn, the call already in ``pending``).
        When it is the only call in flight and its caller is telling it now from its own
        thread (``here_for``), and will read the answer itself, the pipe is taken for it
        *before* the frame is written. Taken after, the answer of a fast server can reach
        the I/O loop first, which then wakes the caller as before (measured with the other
        core busy: 62% of a blocking caller's answers, 65% of an asyncio one's). Only the
        take comes first, so nothing else is added before the write. The caller gives it
        back whatever happens (``call_blocking``'s ``finally``; ``aio``'s :meth:`let_go`)."""
        here = self.here_for
        if (
            here is not None
            and here[0] is reply
            and len(self._pending) == 1
            and here[1] == threading.get_ident()
        ):
            self._take_before(reply)
        self.send(message)

    def _reader(self) -> Any:
        """The server's stdout reader (``SharedReader``), None before the spawn."""
        proc = self._proc
        return proc.stdout if proc is not None else None

    def _take_before(self, reply: Any) -> None:
        reader = self._reader()
        if reader is None or self._down:
            return
        loop = asyncio._get_running_loop()
        if isinstance(reply, SyncReply):
            if loop is None:  # as wait_here
                reader.take(reply)
            return
        if loop is not None and getattr(reply, "loop", None) is loop:
            self._read_on(cast(asyncio.AbstractEventLoop, loop), reply, False)  # watched later

    def release(self, reply: Any) -> None:
        """The pipe goes back to the I/O loop if a thread still holds it for ``reply`` (taken
        by :meth:`send_call`, and the caller did not get to :meth:`wait_here`)."""
        reader = self._reader()
        if reader is not None and reader.taken_for(reply):
            reader.give_back(reply)

    def send_answer(self, message: dict[str, Any]) -> None:
        """An answer to a server request: dropped (and counted) while the server has not
        read ``max_answer_backlog`` bytes, so a server that floods requests and never reads
        the answers cannot grow the client. Connection's thread."""
        data = encode(message)
        with self._wlock:
            if self._backlog and len(self._backlog) + len(data) > self._max_answers:
                drops = getattr(self._pending, "drops", None)
                if drops is not None:
                    drops.add("answer")
                return
        self.send_bytes(data)

    def send_bytes(self, data: bytes) -> None:
        # Measured: handing each frame to the loop (call_soon_threadsafe, a self-pipe wake,
        # one loop turn) cost ~25% of a sequential call. So the connection writes straight to
        # the non-blocking stdin pipe, and only what the pipe cannot take now (it is full)
        # goes to a backlog the loop drains when the pipe is writable. The lock keeps the
        # byte order: no direct write while a backlog exists. A write never blocks.
        with self._wlock:
            if self._corked:
                self._held += data
                return
            self._write_locked(data)

    def cork(self) -> None:
        """Hold the frames sent from now on until :meth:`flush` (the connection sends a
        burst: more requests wait in its mailbox). Connection's thread."""
        with self._wlock:
            self._corked = True

    def flush(self) -> None:
        """Write what :meth:`cork` held, with one syscall, and stop holding. Measured: with
        32 calls in flight one ``write`` for a burst of frames replaces one each, and the
        server reads and answers them in one batch. Connection's thread."""
        with self._wlock:
            self._corked = False
            if self._held:
                data = bytes(self._held)
                self._held.clear()
                self._write_locked(data)

    def _write_locked(self, data: bytes) -> None:
        # Called with _wlock held.
        if self._backlog or self._fd is None:
            self._backlog += data
            self._schedule_drain()
            return
        try:
            n = os.write(self._fd, data)
        except BlockingIOError:
            n = 0
        except OSError:
            return  # the pipe is broken: the exit is reported when the process dies
        if n < len(data):
            self._backlog += memoryview(data)[n:]
            self._schedule_drain()

    def _schedule_drain(self) -> None:
        # Called with _wlock held.
        if not self._drain_scheduled:
            self._drain_scheduled = True
            io_loop.call_soon(self._watch_writable)

    #: The connection hands a blocking caller this transport (``SyncReply.pipe``), whose
    #: :meth:`wait_here` may read the answer in the caller's thread.
    reads_here = True

    def wait_here(self, reply: Any, until: float) -> None:
        """Wait, until ``reply`` has something on its queue or until ``until`` (monotonic),
        reading the pipe in this thread (a caller's, blocked on ``reply``) instead of the
        I/O loop's reader: the answer wakes this thread, not the loop which then wakes it
        (docs/performance.md, "The latest runs"). Only for the one call in
        flight, from a thread that runs no asyncio loop; otherwise, or when the pipe is
        someone else's, it returns at once. It returns too at the end of the stream (the
        loop reports it), and when another thread puts on the queue (a deadline, a lost
        connection, a close: ``reply.wake``). What is read is handled here exactly as the
        loop's reader would (``_on_stdout``: no user code); then ``wait_blocking`` takes the
        queue's items as usual. In the main thread the Python signal handlers of
        ``otp.signals.DEFERRED`` are held for the wait (as for ``tell_here``): a signal
        ends it, and its handler runs once the pipe is given back, never in the middle of
        a read or with the pipe still taken."""
        reader = self._reader()
        if reader is None:
            return
        # Taken for this call already, before it was written (send_call): adopted here.
        adopted = reader.taken_for(reply)
        pending = self._pending
        wake = None
        if (
            pending is not None
            and len(pending) <= 1
            and not self._down
            and asyncio._get_running_loop() is None  # a loop's tasks must not wait on it
        ):
            wake = wake_fd()
        if wake is None:
            if adopted:
                reader.give_back(reply)
            return
        # In the main thread the signal handlers are held for the whole wait, so a Ctrl-C
        # can never leave the pipe taken; one that comes ends the wait (through the wake
        # fd) and is raised once the pipe is given back.
        held = None
        if in_main_thread():
            held = hold_signals(lambda: _poke(wake))
        try:
            if adopted or reader.take():
                try:
                    self._wait_taken(reader, reply, until, wake, held, pending)
                finally:
                    with WAKE_LOCK:
                        woken = reply.wake is None
                        reply.wake = None
                    if woken:
                        with contextlib.suppress(OSError):
                            os.eventfd_read(wake)  # the wake-up, if it was not read
                    reader.give_back()
        finally:
            if held is not None:
                restore_signals(held[0])
                if held[1]:
                    replay_signals(held[1], held[0])

    @staticmethod
    def _wait_taken(
        reader: Any, reply: Any, until: float, wake: int, held: Any, pending: Any
    ) -> None:
        caught = held[1] if held is not None else ()
        queue = reply.queue
        with WAKE_LOCK:
            reply.wake, reply.waiter = wake, threading.get_ident()
        poll = select.poll()
        fd = reader.fd
        poll.register(fd, select.POLLIN)
        poll.register(wake, select.POLLIN)
        # Other calls in flight (other threads'): the loop reads again, as for them all.
        while queue.empty() and not caught and len(pending) <= 1:
            left = until - time.monotonic()
            if left <= 0:
                return
            for which, _events in poll.poll(min(left, 3600.0) * 1000.0 + 1.0):
                if which == fd:
                    if not reader.read():
                        return  # the end of the stream: the loop's to report
                else:
                    with contextlib.suppress(OSError):
                        os.eventfd_read(wake)

    def read_on(self, loop: asyncio.AbstractEventLoop, reply: Any) -> bool:
        """Let ``loop`` (the running one, an asyncio caller's) read the pipe for ``reply``'s
        call, the only one in flight, instead of the I/O loop (loop_reads.py): the answer
        wakes the caller's loop, not the I/O loop which then wakes it. True if it does,
        until :meth:`let_go` (the wait's end) if nothing gave it back before; False when
        nothing changed (another call is in flight, the pipe is held or closed, or the loop
        cannot watch it)."""
        held = self._held_for
        if held is not None and held[1] is reply:
            # taken before its call was written (send_call): watched from now on
            if held[0].watch_for(loop_poll(loop), reply):
                return True
            self._held_for = None
            held[0].give_back_for(reply)
            return False
        return self._read_on(loop, reply, True)

    def _read_on(self, loop: asyncio.AbstractEventLoop, reply: Any, watch: bool) -> bool:
        reader = self._reader()
        pending = self._pending
        if reader is None or pending is None or len(pending) != 1 or self._down:
            return False
        lp = loop_poll(loop)
        if lp is None:
            return False
        self._told = False
        if reader.keep is None:
            reader.keep = self._keeps
        if not reader.take_for(lp, reply, watch):
            return False
        self._held_for = (reader, reply)
        return True

    def let_go(self, reply: Any) -> None:
        """The wait for ``reply`` ended: the I/O loop reads the pipe again, if its caller's
        loop still held it. The caller's loop."""
        held = self._held_for
        if held is not None and held[1] is reply:
            self._held_for = None  # the call's reply is not kept past its wait
            held[0].give_back_for(reply)

    def _keeps(self, reply: Any) -> bool:
        # Under the reader's lock, after each read of a loop holding the pipe for reply.
        return not reply.done and not self._told and len(self._pending) == 1 and not self._down

    def cancel(self, request_id: int | str, reason: str) -> None:
        self.send(cancelled(request_id, reason))

    def open_stream(
        self,
        tag: str,
        message: dict[str, Any] | None,
        sink: StreamSink,
        last_event_id: str | None = None,
    ) -> None:
        """See :meth:`~.base.Transport.open_stream`: the listen request goes down the pipe;
        the reader tells its messages to ``sink``. A new sink (a restarted listen actor)
        supersedes the old one, whose listens are closed. Listen actor's thread. (There is
        no GET stream over stdio: ``message`` None does nothing.)"""
        if message is None:
            return
        key = getattr(sink, "actor_urn", None) or id(sink)
        if self._sink_key is not None and key != self._sink_key:
            for old in self._tags:
                self.send(cancelled(old, "listen_closed"))
            self._tags.clear()
        self._sink, self._sink_key = sink, key
        self._tags.add(tag)
        self.send(message)

    def close_stream(self, tag: str) -> None:
        """Cancel the listen ``tag`` (a notification down the pipe)."""
        if tag in self._tags:
            self._tags.discard(tag)
            self.send(cancelled(tag, "listen_closed"))

    def close(self) -> None:
        self.flush()  # what a burst held goes first, as it would have unheld
        self._closing = True
        io_loop.submit(self._close())

    def stderr(self) -> bytes:
        with self._stderr_lock:
            return b"".join(self._stderr)

    def negotiated(self, era: str, version: str) -> None:
        """Nothing to do: over stdio the version travels only in the messages."""

    def wait_closed(self, timeout: float) -> bool:
        """Block (a caller's thread, never an actor's) until the process is gone."""
        return self._gone.wait(timeout)

    # -- I/O loop ---------------------------------------------------------------------------

    async def _spawn(self) -> None:
        spec = self._spec
        self._spawning = True
        try:
            proc = await ChildProcess.spawn(
                [spec.command, *spec.args],
                env=spec.environment(),
                cwd=spec.cwd,
                on_stdout=self._on_stdout,
                on_stdout_eof=self._on_stdout_closed,
                on_stderr=self._on_stderr,
                on_exit=self._on_exit,
            )
        except Exception as exc:  # OSError, or ValueError (e.g. a NUL byte in an argument)
            self._spawning = False
            self._report_down("spawn_failed", _spawn_detail(exc, spec.command))
            return
        self._spawning = False
        self._proc = proc
        self.pid = proc.pid
        with self._wlock:
            # Written directly by the connection; closed only by us, under the lock, so a
            # write can never land on a number the application has reused.
            self._fd = proc.stdin_fd
        if self._closing:
            await self._close()
            return
        if proc.returncode is None:
            safe_tell(self._owner, TransportUp(self._gen))
        if self._backlog:
            self._watch_writable()

    def _watch_writable(self) -> None:
        """Loop: drain the backlog when the pipe can take more."""
        fd = self._fd
        if fd is None:
            if self._proc is None and not self._closing:
                # not spawned yet: _spawn calls this again once the pipe exists
                with self._wlock:
                    self._drain_scheduled = False
            return
        loop = asyncio.get_running_loop()
        if not self._writer_added:
            self._writer_added = True
            loop.add_writer(fd, self._drain)
        self._drain()

    def _drain(self) -> None:
        with self._wlock:
            fd = self._fd
            backlog = self._backlog
            while backlog and fd is not None:
                try:
                    n = os.write(fd, backlog)
                except BlockingIOError:
                    return  # still full: the writer callback fires again
                except OSError:
                    backlog.clear()
                    break
                del backlog[:n]  # from the front: bytearray makes this cheap
                if backlog:
                    return  # the pipe took what it could: the writer callback fires again
            self._drain_scheduled = False
            if self._writer_added and fd is not None:
                self._writer_added = False
                asyncio.get_running_loop().remove_writer(fd)

    def _on_stdout(self, data: bytes) -> None:
        messages: list[Any] = []
        for frame in self._decoder.feed(data):
            if isinstance(frame, FrameError):
                self._told = True
                self._frame_error(frame)
                continue
            msg = decode(frame)
            if isinstance(msg, Invalid):
                self._told = True
                safe_tell(self._owner, FrameProblem(self._gen, "malformed", msg.reason))
                continue
            messages.append(msg)
        if not messages:
            return
        pending = self._pending
        if pending is not None:
            # The answers of this read go to their asyncio callers when it is handled, not
            # at the loop's next turn (replies.py): a sequential caller is woken sooner. (A
            # caller's thread reading the pipe itself, wait_here, runs no loop: each is
            # posted at once.)
            here = asyncio._get_running_loop()
            mine = here is not None and gather_answers(here)
            try:
                messages = pending.deliver(messages)
            finally:
                if mine:
                    assert here is not None
                    release_answers(here)
        if not messages:
            return
        self._told = True  # a loop holding the pipe gives it back (read_on)
        sink = self._sink
        if sink is not None:
            messages = self._to_sink(sink, messages)
        if messages and pending is not None:
            messages = pending.admit(messages)  # the flood bound (max_inbox)
        if messages:
            safe_tell(self._owner, Inbound(self._gen, messages))

    def _to_sink(self, sink: StreamSink, messages: list[Any]) -> list[Any]:
        """Tell the listen actor the messages about its listens; return the connection's."""
        listen = [m for m in messages if is_listen_control(m)]
        if not listen:
            return messages
        try:
            sink.tell(StreamMessages(self._gen, None, listen))
        except pykka.ActorDeadError:
            self._sink = None  # its successor opens its own listens (and closes these)
        return [m for m in messages if not is_listen_control(m)]

    def _frame_error(self, frame: FrameError) -> None:
        """A line the decoder refused. A response over ``max_frame`` fails the request it
        answers at once (its id is read from the line's start), instead of letting it run
        into its deadline; anything else is reported and dropped. The pipe stays usable."""
        if frame.id is None:
            safe_tell(self._owner, FrameProblem(self._gen, frame.reason, frame.detail))
            return
        limit = self._decoder.max_frame
        error = Error(
            "protocol",
            "response_too_large",
            f"the server's response is over max_frame ({limit} bytes); "
            "raise the client's max_frame option to accept larger responses",
            data={"limit": limit},
        )
        safe_tell(self._owner, RequestFailed(self._gen, frame.id, error))

    def _on_stderr(self, data: bytes) -> None:
        limit = self._spec.stderr_limit
        if limit <= 0:
            return
        if len(data) > limit:
            data = data[-limit:]
        with self._stderr_lock:
            self._stderr.append(data)
            self._stderr_size += len(data)
            while self._stderr_size > limit and self._stderr:
                head = self._stderr[0]
                excess = self._stderr_size - limit
                if len(head) <= excess:
                    self._stderr.popleft()
                    self._stderr_size -= len(head)
                else:
                    self._stderr[0] = head[excess:]
                    self._stderr_size -= excess

    def _on_stdout_closed(self) -> None:
        self._stdout_closed = True
        if self._exited:
            self._report_exit()
        elif not self._closing:
            # A server that exits closes its stdout first: give the exit a moment to follow.
            asyncio.get_running_loop().call_later(_EXIT_DRAIN, self._check_silent)

    def _check_silent(self) -> None:
        """stdout ended but the process runs on: it can never answer again, so this is a
        lost connection (what is pending fails with ``transport`` now, not at its deadline,
        and the connection reconnects). The process is ended by the connection's ``close``,
        which skips waiting for it to read EOF: it no longer talks."""
        if self._exited or self._closing or self._down:
            return
        self._silent = True
        self._report_down("stdout_closed", None)

    def _on_exit(self) -> None:
        # The exit can be seen before the last bytes of stdout are read: wait for stdout to
        # close so a response written just before exiting is delivered first, but not for
        # long — a grandchild holding stdout open must not hide the exit.
        self._exited = True
        if self._stdout_closed:
            self._report_exit()
        else:
            asyncio.get_running_loop().call_later(_EXIT_DRAIN, self._report_exit)

    def _report_exit(self) -> None:
        self._release_stdin()
        proc = self._proc
        code = proc.returncode if proc is not None else None
        self._report_down(
            "closed" if self._closing else "exit", None if code is None else str(code)
        )
        if not self._closing:
            # The server died by itself (a crash, a kill): what it forked is ended now, not
            # only when the connection closes this transport on its reconnect.
            self._end_group_soon()

    def _report_down(self, reason: str, detail: str | None) -> None:
        if reason == "spawn_failed":
            self._gone.set()  # else set once the process group is gone (_close, _end_group)
        if self._down:
            return
        self._down = True
        safe_tell(self._owner, TransportDown(self._gen, reason, detail))

    async def _close(self) -> None:
        """Close stdin, then SIGTERM, then SIGKILL, each after ``close_grace`` (MCP spec
        2025-11-25, Lifecycle, "Shutdown"); a server that closed its stdout gets SIGTERM at
        once. The signals go to the server's whole process group (it runs in a session of
        its own), so nothing it forked outlives it: a child left after the server exited
        gets SIGTERM, then SIGKILL after ``close_grace`` (docs/connection.md, "Requests")."""
        proc = self._proc
        if proc is None:
            if not self._spawning:  # never spawned; a spawn under way closes on completion
                self._gone.set()
            return
        grace = self._spec.close_grace
        try:
            if self._backlog:
                self._drain()
            self._release_stdin()  # the only write end: the server sees EOF
            if proc.exited.done() or (not self._silent and await self._exited_within(grace)):
                self._end_group_soon()  # what it forked, if anything outlived it
                assert self._ending is not None
                await self._ending
                return
            self._signal_group(signal.SIGTERM)
            if await self._all_gone_within(grace):
                return
            self._signal_group(signal.SIGKILL)
            await self._all_gone_within(grace)
        finally:
            proc.close_pipes()
            self._report_down("closed", None)
            self._gone.set()

    def _end_group_soon(self) -> None:
        """Start ending the process group of an exited server (once). Loop thread."""
        if self._ending is None:
            self._ending = asyncio.get_running_loop().create_task(self._end_group())

    async def _end_group(self) -> None:
        """The server has exited: SIGTERM whatever is left of its process group, then
        SIGKILL after ``close_grace``."""
        try:
            if not self._group_alive():
                return
            grace = self._spec.close_grace
            self._signal_group(signal.SIGTERM)
            if await self._all_gone_within(grace):
                return
            log.info("the server's children ignored SIGTERM for %ss; killing them", grace)
            self._signal_group(signal.SIGKILL)
            await self._all_gone_within(grace)
        finally:
            if not self._closing:
                self._gone.set()

    def _release_stdin(self) -> None:
        """Stop writing and close our stdin fd (the server sees EOF once asyncio's is closed
        too). Loop thread."""
        with self._wlock:
            fd, self._fd = self._fd, None
            self._backlog.clear()
            self._held.clear()
            if fd is None:
                return
            if self._writer_added:
                self._writer_added = False
                asyncio.get_running_loop().remove_writer(fd)
            os.close(fd)

    def _signal_group(self, sig: int) -> None:
        """Signal the server's process group (its pid: ``start_new_session``), or the server
        alone where process groups do not exist. A group no process is left in is not
        signalled (its number may be reused once it is empty)."""
        proc = self._proc
        if proc is None:
            return
        killpg = getattr(os, "killpg", None)
        if killpg is None:
            proc.send_signal(sig)
            return
        try:
            killpg(proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass  # nothing left of it, or nothing we may signal

    def _group_alive(self) -> bool:
        """Whether any process is left in the server's process group."""
        proc = self._proc
        if proc is None:
            return False
        killpg = getattr(os, "killpg", None)
        if killpg is None:
            return proc.returncode is None
        try:
            killpg(proc.pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True

    async def _all_gone_within(self, seconds: float) -> bool:
        """Wait (bounded) until the server has exited and its process group is empty. The
        group has no exit event to wait on, so it is polled, 10 ms apart at first, then
        up to 100 ms apart."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + seconds
        if not await self._exited_within(seconds):
            return False
        pause = 0.01
        while self._group_alive():
            left = deadline - loop.time()
            if left <= 0:
                return False
            await asyncio.sleep(min(pause, left))
            pause = min(pause * 2, 0.1)
        return True

    async def _exited_within(self, seconds: float) -> bool:
        proc = self._proc
        assert proc is not None
        if proc.exited.done():
            return True
        try:
            await asyncio.wait_for(asyncio.shield(proc.exited), max(0.0, seconds))
            return True
        except TimeoutError:
            return False


def _poke(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.eventfd_write(fd, 1)


def _spawn_detail(exc: Exception, command: str) -> str:
    """Why the server could not be started: the exception's class, its OS error text and the
    command (never its arguments or environment, which may carry credentials)."""
    name = type(exc).__name__
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else None
    return f"{name}: {text}: {command!r}" if text else f"{name} ({command!r})"
