"""A child process on the shared I/O loop, without a thread per child.

asyncio's ``subprocess_exec`` on Python 3.11 waits for each child on a thread of its own
(``ThreadedChildWatcher``): a thousand clients would mean a thousand extra threads. Here the
exit is watched through a pidfd (Linux >= 5.3: a file descriptor that becomes readable when
the process exits) registered on the loop, so a child costs file descriptors, not a thread.
Where ``os.pidfd_open`` is missing, one waiter thread per child is the fallback.

The process is started with ``subprocess.Popen`` on the loop thread, as asyncio itself does
(fork/exec takes about a millisecond). stdout and stderr are read by the loop; stdin is left
to the owner, which writes to it directly (``stdin_fd``, non-blocking, closed only by its
owner so its number can never be reused under a concurrent write).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import subprocess
import threading
from collections.abc import Callable, Sequence
from typing import Any

from .loop_reads import WATCH, readable

#: Bytes asked of one read of the child's stdout and stderr. asyncio's pipe transport asks
#: 256 KiB, and ``os.read`` allocates that much before every read: over glibc's mmap
#: threshold (128 KiB), so each read mapped and unmapped its buffer. Measured on a pipe
#: holding one 120-byte answer: 35 us a read at 256 KiB, 4 us at 64 KiB; a sequential stdio
#: call does at least one read. A larger answer takes more reads, each one cheap.
READ_SIZE = 64 * 1024


class _Reader(asyncio.Protocol):
    def __init__(self, on_data: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        self._on_data = on_data
        self._on_eof = on_eof

    def data_received(self, data: bytes) -> None:
        self._on_data(data)

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost follows

    def connection_lost(self, exc: Exception | None) -> None:
        self._on_eof()


class ChildProcess:
    """A spawned process: ``pid``, ``returncode``, ``stdin_fd``, ``exited`` (a future)."""

    def __init__(self, popen: subprocess.Popen[bytes], loop: asyncio.AbstractEventLoop) -> None:
        self._popen = popen
        self._loop = loop
        self.pid = popen.pid
        self.exited: asyncio.Future[int] = loop.create_future()
        self.stdin_fd: int | None = None
        self._pidfd: int | None = None
        self._pipes: list[Any] = []
        self.stdout: SharedReader | None = None

    @property
    def returncode(self) -> int | None:
        return self._popen.returncode

    @classmethod
    async def spawn(
        cls,
        argv: Sequence[str],
        *,
        env: dict[str, str],
        cwd: Any,
        on_stdout: Callable[[bytes], None],
        on_stdout_eof: Callable[[], None],
        on_stderr: Callable[[bytes], None],
        on_exit: Callable[[], None],
    ) -> ChildProcess:
        """Start the process; raises what ``Popen`` raises (OSError, ValueError)."""
        loop = asyncio.get_running_loop()
        popen = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
            start_new_session=True,  # a Ctrl-C in the application is not the server's
            bufsize=0,
        )
        child = cls(popen, loop)
        try:
            assert popen.stdin and popen.stdout and popen.stderr
            # The owner's own fd for stdin (os.dup is non-inheritable, so no later child
            # holds the server's stdin open); the file object's fd is closed at once.
            child.stdin_fd = os.dup(popen.stdin.fileno())
            popen.stdin.close()
            os.set_blocking(child.stdin_fd, False)
            out = SharedReader(popen.stdout, loop, on_stdout, on_stdout_eof)
            child.stdout = out
            err, _ = await loop.connect_read_pipe(
                lambda: _Reader(on_stderr, _nothing), popen.stderr
            )
            # asyncio's transports read max_size bytes at a time (see READ_SIZE)
            if hasattr(err, "max_size"):
                err.max_size = READ_SIZE
            child._pipes = [out, err]
            child.exited.add_done_callback(lambda _f: on_exit())
            child._watch_exit()
        except BaseException:
            # Never leak a process we could not wire up.
            popen.kill()
            popen.wait()
            if child.stdin_fd is not None:
                os.close(child.stdin_fd)
            raise
        return child

    def _watch_exit(self) -> None:
        try:
            pidfd = os.pidfd_open(self.pid)
        except (AttributeError, OSError):
            threading.Thread(
                target=self._wait_in_thread, name=f"conduit-mcp-wait-{self.pid}", daemon=True
            ).start()
            return
        self._pidfd = pidfd
        self._loop.add_reader(pidfd, self._reap)

    def _reap(self) -> None:
        if self._popen.poll() is None:
            return  # spurious wake-up
        pidfd, self._pidfd = self._pidfd, None
        if pidfd is not None:
            self._loop.remove_reader(pidfd)
            os.close(pidfd)
        if not self.exited.done():
            self.exited.set_result(self._popen.returncode)

    def _wait_in_thread(self) -> None:
        self._popen.wait()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody listens
            self._loop.call_soon_threadsafe(self._reap)

    def send_signal(self, sig: int) -> None:
        if self._popen.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                self._popen.send_signal(sig)

    def close_pipes(self) -> None:
        """Stop reading stdout/stderr (after the exit, or when giving up on the process)."""
        for pipe in self._pipes:
            pipe.close()


def _nothing() -> None:
    return None


#: SharedReader._taken while a blocked caller's thread reads the pipe.
_THREAD: Any = object()


class SharedReader:
    """The child's stdout, read by the loop, or for a while by one caller's thread.

    Measured: a sequential call waited on three wake-ups (the server, the loop's reader,
    then the caller) where a bare loop waits on two. A caller blocked on the only call in
    flight can read its answer itself (:meth:`take`, then :meth:`read` when the pipe is
    readable), and the loop's epoll must not wake meanwhile: so the pipe is registered in an
    epoll of its own, which the loop watches, and taking the pipe disables it there
    (``epoll_ctl`` is safe from any thread; the loop's own registration never changes).
    Every read, and the handling of what it read (``on_data``), is done under ``lock``, by
    whichever thread: the bytes are handled in the order they were read, and never two
    reads at once. The end of the stream (or a read error) is left to the loop, which
    reports it as asyncio's pipe transport did (``on_eof``, at its next turn). Without
    ``select.epoll`` the loop watches the pipe itself and :meth:`take` always refuses."""

    __slots__ = (
        "_file",
        "fd",
        "_loop",
        "_on_data",
        "_on_eof",
        "lock",
        "_ep",
        "_taken",
        "_token",
        "_reads",
        "_mark",
        "_closed",
        "_unwatched",
        "keep",
    )

    def __init__(
        self,
        file: Any,
        loop: asyncio.AbstractEventLoop,
        on_data: Callable[[bytes], None],
        on_eof: Callable[[], None],
    ) -> None:
        self._file = file
        self.fd: int = file.fileno()
        self._loop = loop
        self._on_data = on_data
        self._on_eof = on_eof
        self.lock = threading.Lock()
        # Who reads the pipe instead of the loop: None, _THREAD (a blocked caller's thread,
        # take), or a caller loop's LoopPoll (take_for); _token is the call it is held for
        # (None for a thread's take made as it waits, wait_here).
        self._taken: Any = None
        self._token: Any = None
        # Reads done by a holding loop, and their count when the watchdog last found the
        # pipe readable (-1: it was not), for watch().
        self._reads = 0
        self._mark = -1
        self._closed = False
        # Taken by a loop (take_for with watch=False) that does not watch it yet.
        self._unwatched = False
        #: Whether a loop holding the pipe for ``token`` keeps it after a read (set by the
        #: owner; None: it gives it back after each read).
        self.keep: Callable[[Any], bool] | None = None
        os.set_blocking(self.fd, False)
        epoll = getattr(select, "epoll", None)
        self._ep: Any = None
        if epoll is not None:
            self._ep = epoll()
            self._ep.register(self.fd, select.EPOLLIN)
            loop.add_reader(self._ep.fileno(), self._ready)
        else:
            loop.add_reader(self.fd, self._ready)

    def take(self, token: Any = None) -> bool:
        """Read the pipe in this thread from now on, until :meth:`give_back`: the loop is no
        longer woken by it. False (nothing changed) if another thread holds it, or the
        pipe is closed. Any thread. ``token``: the call it is taken for, before its caller
        waits (the caller's thread adopts it: :meth:`taken_for`)."""
        with self.lock:
            if self._taken is not None or self._closed or self._ep is None:
                return False
            self._ep.modify(self.fd, 0)
            self._taken, self._token = _THREAD, token
            return True

    def taken_for(self, token: Any) -> bool:
        """Whether the pipe is taken, for a thread, for the call ``token``."""
        return self._taken is _THREAD and self._token is token

    def give_back(self, token: Any = None) -> None:
        """The loop reads the pipe again (what is waiting in it wakes it now). ``token``:
        only if the pipe is taken for that call (None: whatever a thread took it for)."""
        with self.lock:
            if self._taken is _THREAD and (token is None or self._token is token):
                self._taken = self._token = None
                if not self._closed:
                    self._ep.modify(self.fd, select.EPOLLIN)

    def read(self) -> bool:
        """One read and its handling, in the calling thread (which has :meth:`take`-n the
        pipe). False when the stream has ended or failed: that is the loop's to report,
        once the pipe is given back."""
        with self.lock:
            if self._closed:
                return False
            data = self._read_locked()
            if data is None:
                return True
            if not data:
                return False
            self._on_data(data)
            return True

    def _read_locked(self) -> bytes | None:
        # One read (the lock held): None when nothing is there now, b"" at the end of the
        # stream or on a read error.
        try:
            return os.read(self.fd, READ_SIZE)
        except (BlockingIOError, InterruptedError):
            return None
        except OSError:
            return b""

    # -- held by a caller's asyncio loop (loop_reads.py) -------------------------------------

    def take_for(self, lp: Any, token: Any, watch: bool = True) -> bool:
        """The loop of ``lp`` reads the pipe from now on, for the call ``token``, until it
        gives it back (:meth:`give_back_for`, or after a read :attr:`keep` refuses) or the
        watchdog takes it back. False (nothing changed) if someone holds it already, the
        pipe is closed, or :attr:`keep` refuses now (the call was answered meanwhile). The
        loop's own thread."""
        keep = self.keep
        with self.lock:
            if self._taken is not None or self._closed or self._ep is None or keep is None:
                return False
            if not keep(token):
                return False
            self._ep.modify(self.fd, 0)
            self._taken, self._token, self._mark = lp, token, -1
            if watch:
                return self._watch_locked(lp)
            self._unwatched = True
        return True

    def watch_for(self, lp: Any, token: Any) -> bool:
        """Finish a :meth:`take_for` made with ``watch=False``: ``lp``'s loop is woken by the
        pipe from now on. True if ``lp`` holds the pipe for ``token``."""
        with self.lock:
            if self._taken is not lp or self._token is not token:
                return False
            if not self._unwatched:
                return True
            self._unwatched = False
            return self._watch_locked(lp)

    def _watch_locked(self, lp: Any) -> bool:
        try:
            lp.add(self.fd, self)
        except OSError:
            self._taken = self._token = None
            if not self._closed:
                self._ep.modify(self.fd, select.EPOLLIN)
            return False
        # Under the lock: a give-back from another thread cannot come between the take
        # and this, which would leave the watchdog watching a pipe nobody holds.
        WATCH.add(self)
        return True

    def give_back_for(self, token: Any) -> None:
        """The loop reads the pipe again, if a loop still holds it for ``token``. Any
        thread (the connection's gives it back as soon as a second call is in flight)."""
        with self.lock:
            if self._token is token and self.held_by_loop():
                self._give_back_locked()

    def give_back_from(self, lp: Any) -> None:
        """The loop reads the pipe again, if ``lp`` still holds it (after a failed read)."""
        with self.lock:
            if self._taken is lp and self.held_by_loop():
                self._give_back_locked()

    def held_by_loop(self) -> bool:
        """Whether a caller's loop holds the pipe (not the I/O loop, nor a thread)."""
        return self._taken is not None and self._taken is not _THREAD

    def read_for(self, lp: Any) -> None:
        """One read and its handling, on the loop of ``lp`` (its reader callback). The
        pipe goes back to the I/O loop at the end of the stream (it reports it, as always)
        and when :attr:`keep` refuses after the read."""
        with self.lock:
            if self._taken is not lp or self._closed:
                return
            data = self._read_locked()
            if data is None:
                return
            self._reads += 1
            if data:
                self._on_data(data)
                keep = self.keep
                if keep is not None and self._taken is lp and keep(self._token):
                    return
            if self._taken is lp:
                self._give_back_locked()

    def watch(self) -> None:
        """The watchdog's tick (I/O loop): take the pipe back from a loop that is closed, or
        that has left it readable, with no read, since the last tick."""
        with self.lock:
            lp = self._taken
            if lp is None or lp is _THREAD:
                WATCH.discard(self)
                return
            if not lp.alive():
                self._give_back_locked()
            elif readable(self.fd):
                if self._mark == self._reads:
                    self._give_back_locked()
                else:
                    self._mark = self._reads
            else:
                self._mark = -1

    def _give_back_locked(self) -> None:
        lp = self._taken
        self._taken = self._token = None
        if self._unwatched:
            self._unwatched = False
        else:
            lp.remove(self.fd)
            WATCH.discard(self)
        if not self._closed:
            self._ep.modify(self.fd, select.EPOLLIN)

    def _ready(self) -> None:
        # The loop: the pipe is readable (or the caller that took it is reading it now).
        with self.lock:
            if self._closed:
                return
            data = self._read_locked()
            if data is None:
                return
            if data:
                self._on_data(data)
                return
        self.close()  # the end of the stream, or a read error: as asyncio's pipe transport

    def close(self) -> None:
        """Stop reading; ``on_eof`` runs at the loop's next turn (once). Loop thread."""
        with self.lock:
            if self._closed:
                return
            self._closed = True
            if self.held_by_loop():
                self._give_back_locked()
            ep = self._ep
            if ep is not None:
                self._loop.remove_reader(ep.fileno())
                ep.close()
            else:
                self._loop.remove_reader(self.fd)
        self._loop.call_soon(self._lost)

    def _lost(self) -> None:
        self._file.close()
        self._on_eof()
