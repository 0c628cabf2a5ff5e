"""A fork server for the test servers: one process that has imported a server's modules
once, and forks a ready interpreter for each start.

Measured (``-X importtime``): a test HTTP server spent ~240 ms of its ~250 ms start
importing (aiohttp alone ~130 ms, ~50 of them loading the system's CA bundle into the
client SSL context aiohttp makes at import), and the suite starts hundreds of them. A fork
of a process that has imported them already starts in a few milliseconds.

What runs is the same: the child is a real process (its own pid, signals, exit status,
stdin ``/dev/null``, stdout the pipe the caller reads, stderr the caller's file), its
environment and working directory are the caller's, and it runs the module the command
line names as ``__main__``, as ``python -m`` does. Each start names the modules to import
first (``imports``: the caller knows what its server needs; the fork server imports each
once, before it forks). Only command lines of the form ``python -m <module> ...`` are
forked, and only when no ``PYTHON*`` or ``SSL_*`` variable of the caller differs from the
fork server's (those are read once, at an interpreter's start or an import); anything
else, or a fork server that cannot start or whose imports started a thread, is a plain
``subprocess.Popen``, as is a process's first start (made while the fork server imports:
a process that starts one server pays nothing for it). ``CONDUIT_TESTING_FORK=0`` turns it
off.

The fork server is a child of the first process that uses it and ends with that process
(the end of its socket), killing the servers it started that still run. No stdlib piece
fits: ``multiprocessing``'s forkserver runs a pickled function, imports the parent's
``__main__`` in every child, and hands no descriptors over for stdio.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import runpy
import select
import selectors
import signal
import socket
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

__all__ = ["ForkedProcess", "launch", "plain_reason"]

#: How long a start waits for the fork server to be ready, and for a fork's pid (seconds).
READY_TIMEOUT = 30.0
#: The largest request (its command line and environment, bytes): a larger one is a plain
#: start (one message of the fork server's socket must hold it).
MAX_REQUEST = 64 * 1024


class ForkedProcess:
    """A process the fork server started, with the part of ``subprocess.Popen`` the test
    servers' handles use (``pid``, ``stdout``, ``returncode``, ``poll``, ``wait``,
    ``send_signal``, ``terminate``, ``kill``). Its exit status comes over a socket of its
    own from the fork server, its parent."""

    def __init__(
        self, pid: int, status: socket.socket, stdout: int, args: Sequence[str], read: bytes = b""
    ) -> None:
        self.pid = pid
        self.args = list(args)
        self.returncode: int | None = None
        self.stdout: Any = open(stdout, "rb", buffering=0)  # noqa: SIM115 - closed by its owner
        self._status = status
        self._buf = read  # what came with the pid line
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<ForkedProcess pid={self.pid} returncode={self.returncode}>"

    def poll(self) -> int | None:
        """The exit status if the process has ended, else None (never blocks)."""
        self._read(0.0)
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        """Wait for the end; ``subprocess.TimeoutExpired`` after ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if self._read(left) is not None:
                return self.returncode  # type: ignore[return-value]
            if deadline is not None and time.monotonic() >= deadline:
                raise subprocess.TimeoutExpired(self.args, timeout or 0.0)

    def send_signal(self, sig: int) -> None:
        """Signal the process, unless it has been seen to end (its pid may be reused)."""
        if self.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _read(self, timeout: float | None) -> int | None:
        # The wait is outside the lock, as Popen's: a thread's wait never holds up another
        # thread's poll, or a wait with a shorter timeout.
        if self.returncode is not None:
            return self.returncode
        try:
            ready, _, _ = select.select([self._status], [], [], timeout)
        except (OSError, ValueError):  # closed meanwhile: another thread read the status
            return self.returncode
        if not ready:
            return None
        with self._lock:
            if self.returncode is not None:
                return self.returncode
            try:
                chunk = self._status.recv(64, socket.MSG_DONTWAIT)
            except BlockingIOError:
                return None
            except OSError:
                chunk = b""
            self._buf += chunk
            if b"\n" in self._buf or not chunk:
                line = self._buf.split(b"\n", 1)[0]
                # No status (the fork server itself died): the process is killed, as the
                # fork server would have done at its end.
                if line.startswith(b"exit "):
                    self.returncode = int(line[5:])
                else:
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(self.pid, signal.SIGKILL)
                    self.returncode = -signal.SIGKILL
                self._status.close()
            return self.returncode


class _Client:
    """The requesting side, one per process (forgotten in a forked child)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sock: socket.socket | None = None
        self.pending: socket.socket | None = None  # started, its "ready" not read yet
        self.proc: subprocess.Popen[bytes] | None = None
        self.start_env: dict[str, str] = {}  # the fork server's, as _start_env reads them
        self.failed = False

    def ready(self, env: Mapping[str, str], imports: Sequence[str]) -> bool:
        """Whether the fork server can take a start now (the lock held). The first use
        starts it and says no: that start is a plain one, made while the fork server
        imports, so a process that starts one server pays nothing for it."""
        if self.sock is not None:
            return True
        if self.failed:
            return False
        if self.pending is None:
            self._spawn(env, imports)
            return False
        mine, self.pending = self.pending, None
        ready, _, _ = select.select([mine], [], [], READY_TIMEOUT)
        answer = mine.recv(256) if ready else b""
        if answer != b"ready":
            self.failed = True
            mine.close()
            if self.proc is not None:
                with contextlib.suppress(OSError):
                    self.proc.kill()
                self.proc.wait()
            return False
        self.sock = mine
        return True

    def _spawn(self, env: Mapping[str, str], imports: Sequence[str]) -> None:
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _ENTRY, str(theirs.fileno()), *imports],
                # None of the caller's descriptors (a pipe of its stderr would stay open as
                # long as the fork server lives): its failures come back on the socket.
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=dict(env),
                pass_fds=(theirs.fileno(),),
            )
        except OSError:
            self.failed = True
            mine.close()
            return
        finally:
            theirs.close()
        self.pending, self.start_env = mine, _start_env(env)

    def forget(self) -> None:
        # A forked child of the requesting process: the socket is its parent's.
        self.lock = threading.Lock()
        self.sock = self.pending = self.proc = None
        self.failed = False


_CLIENT = _Client()

#: The fork server's command (``-c``: this module is imported by its package, so ``-m``
#: would run a second copy of it).
_ENTRY = (
    "import sys; from conduit_mcp.testing.common.zygote import main; sys.exit(main(sys.argv[1:]))"
)


#: Variables read once, when an interpreter starts or a module is imported (aiohttp makes
#: its client SSL context at import: SSL_CERT_FILE; the locale picks the encodings): a start
#: whose values differ from the fork server's is not forked. The others (PYTHONBREAKPOINT,
#: which Ray sets in its driver, or anything a server reads) are read when used, from the
#: child's own environment.
_READ_AT_START = frozenset(
    {
        "PYTHONPATH",
        "PYTHONHOME",
        "PYTHONSAFEPATH",
        "PYTHONNOUSERSITE",
        "PYTHONUSERBASE",
        "PYTHONPLATLIBDIR",
        "PYTHONHASHSEED",
        "PYTHONOPTIMIZE",
        "PYTHONDEBUG",
        "PYTHONINSPECT",
        "PYTHONVERBOSE",
        "PYTHONDONTWRITEBYTECODE",
        "PYTHONPYCACHEPREFIX",
        "PYTHONWARNINGS",
        "PYTHONDEVMODE",
        "PYTHONUTF8",
        "PYTHONIOENCODING",
        "PYTHONUNBUFFERED",
        "PYTHONFAULTHANDLER",
        "PYTHONTRACEMALLOC",
        "PYTHONMALLOC",
        "PYTHONNODEBUGRANGES",
        "PYTHONINTMAXSTRDIGITS",
        "PYTHONCOERCECLOCALE",
        "PYTHONPROFILEIMPORTTIME",
        "LANG",
        "LC_ALL",
        "LC_CTYPE",
    }
)
_READ_AT_START_PREFIXES = ("SSL_", "OPENSSL_", "LD_", "MALLOC_")


def _start_env(env: Mapping[str, str]) -> dict[str, str]:
    return {
        k: v for k, v in env.items() if k in _READ_AT_START or k.startswith(_READ_AT_START_PREFIXES)
    }


#: Why the last start that was not forked was a plain one (:func:`plain_reason`).
_why = [""]


def _plain(why: str) -> ForkedProcess | None:
    _why[0] = why
    return None  # the caller starts it plainly


def plain_reason() -> str:
    """Why the last start that was not forked was a plain ``subprocess.Popen`` ("" if none
    was): for a suite that wonders why its servers start slowly."""
    return _why[0]


def launch(
    command: Sequence[str], *, env: Mapping[str, str], stderr: int, imports: Sequence[str] = ()
) -> ForkedProcess | None:
    """Start ``command`` forked from the fork server (stderr to the descriptor ``stderr``,
    stdout a new pipe: ``.stdout``), the modules ``imports`` imported there first (once),
    or None when it cannot be (see the module's docstring): the caller starts it with
    ``subprocess.Popen`` then."""
    if os.environ.get("CONDUIT_TESTING_FORK", "1") == "0" or not hasattr(os, "pidfd_open"):
        return _plain("CONDUIT_TESTING_FORK=0, or no pidfd_open here")
    if len(command) < 3 or command[0] != sys.executable or command[1] != "-m":
        return _plain("not a `python -m` command line of this interpreter")
    client = _CLIENT
    with client.lock:
        if not client.ready(env, imports):
            return _plain(
                "the fork server failed or refused to start"
                if client.failed
                else "a process's first start (the fork server starts meanwhile)"
            )
        start_env = _start_env(env)
        if start_env != client.start_env:
            differ = set(start_env.items()) ^ set(client.start_env.items())
            return _plain(
                f"{', '.join(sorted({k for k, _ in differ}))} differ from the fork server's"
            )
        assert client.sock is not None
        read_end, write_end = os.pipe()
        mine, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        request = orjson.dumps(
            {
                "module": command[2],
                "args": list(command[3:]),
                "env": dict(env),
                "cwd": os.getcwd(),
                "imports": list(imports),
            }
        )
        try:
            if len(request) > MAX_REQUEST:
                raise ValueError("too large for one message")
            socket.send_fds(client.sock, [request], [write_end, stderr, theirs.fileno()])
        except (OSError, ValueError):
            if client.proc is not None and client.proc.poll() is not None:
                client.failed, client.sock = True, None  # gone: plain starts from now on
            os.close(read_end)
            mine.close()
            return _plain("the request could not be sent")
        finally:
            os.close(write_end)  # the child's now, or nobody's
            theirs.close()
    first = _first_line(mine, time.monotonic() + READY_TIMEOUT)
    if not first.startswith(b"pid "):  # refused, or the fork server died meanwhile
        mine.close()
        os.close(read_end)
        return _plain(f"the fork server answered {first[:80]!r}")
    pid_line, _, rest = first.partition(b"\n")
    return ForkedProcess(int(pid_line[4:]), mine, read_end, command, rest)


def _first_line(sock: socket.socket, deadline: float) -> bytes:
    """What the fork server sent on ``sock`` up to and past its first newline; what came
    before the end or the deadline otherwise."""
    buf = b""
    while b"\n" not in buf:
        left = deadline - time.monotonic()
        ready, _, _ = select.select([sock], [], [], max(0.0, left))
        if not ready:
            break
        chunk = sock.recv(256)
        if not chunk:
            break
        buf += chunk
    return buf


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_CLIENT.forget)


# --------------------------------------------------------------------------- the fork server


def _serve(sock: socket.socket) -> tuple[Any, ...] | None:
    """The fork server's loop: None when its requester has gone (every child it started
    and that still runs is killed); in a forked child, what it runs."""
    sel = selectors.DefaultSelector()
    sel.register(sock, selectors.EVENT_READ)
    children: dict[int, tuple[int, socket.socket]] = {}  # pidfd -> (pid, status socket)
    try:
        while True:
            for key, _ in sel.select():
                if key.fileobj is sock:
                    try:
                        message, fds, _flags, _addr = socket.recv_fds(sock, 1 << 20, 3)
                    except OSError:
                        message, fds = b"", []
                    if not message:
                        return None
                    job = _fork(message, fds, sel, sock, children)
                    if job is not None:
                        return job
                else:
                    _reaped(int(key.fd), sel, children)
    finally:
        if not _IN_CHILD:
            for pidfd, (pid, status) in children.items():
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
                with contextlib.suppress(ChildProcessError):
                    os.waitpid(pid, 0)
                os.close(pidfd)
                status.close()


_IN_CHILD = False


def _reaped(pidfd: int, sel: selectors.BaseSelector, children: dict[int, Any]) -> None:
    """A child ended: its status to its caller."""
    pid, status = children.pop(pidfd)
    sel.unregister(pidfd)
    os.close(pidfd)
    try:
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    except ChildProcessError:  # reaped by someone else: its status is lost
        code = -signal.SIGKILL
    with contextlib.suppress(OSError):
        status.sendall(b"exit %d\n" % code)
    status.close()


def _imported(names: Sequence[str]) -> bool:
    """Import ``names`` here, once; False if a thread now runs beside this one (a fork
    would copy its locks but not it: no fork is safe from then on)."""
    for name in names:
        if name not in sys.modules:
            with contextlib.suppress(Exception):  # the child meets the same error, and says it
                __import__(name)
    return threading.active_count() == 1


def _fork(
    message: bytes,
    fds: list[int],
    sel: selectors.BaseSelector,
    sock: socket.socket,
    children: dict[int, tuple[int, socket.socket]],
) -> tuple[Any, ...] | None:
    global _IN_CHILD
    if len(fds) != 3:
        for fd in fds:
            os.close(fd)
        return None
    stdout, stderr, status_fd = fds
    status = socket.socket(fileno=status_fd)
    try:
        job = orjson.loads(message)
        imports = [str(name) for name in job["imports"]]
    except (ValueError, KeyError, TypeError):
        _refuse(stdout, stderr, status, b"a malformed request")
        return None
    if not _imported(imports):
        _refuse(stdout, stderr, status, b"an import started a thread")
        return None
    try:
        pid = os.fork()
    except OSError:  # no process to be had now: this start is refused, not the others
        _refuse(stdout, stderr, status, b"fork failed")
        return None
    if pid == 0:
        _IN_CHILD = True
        for pidfd, (_, other) in children.items():
            os.close(pidfd)
            other.close()
        children.clear()
        sel.close()
        sock.close()
        status.close()
        return (job, stdout, stderr)
    os.close(stdout)
    os.close(stderr)
    pidfd = os.pidfd_open(pid)
    children[pidfd] = (pid, status)
    sel.register(pidfd, selectors.EVENT_READ)
    with contextlib.suppress(OSError):
        status.sendall(b"pid %d\n" % pid)
    return None


def _refuse(stdout: int, stderr: int, status: socket.socket, why: bytes) -> None:
    """A start not forked: its caller makes a plain one (it reads no ``pid`` line)."""
    os.close(stdout)
    os.close(stderr)
    with contextlib.suppress(OSError):
        status.sendall(b"refused: " + why + b"\n")
    status.close()


def _run(job: dict[str, Any], stdout: int, stderr: int) -> int:
    """In the forked child: stdio, environment and directory as asked, then the module as
    ``__main__``; its exit code."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.dup2(stdout, 1)
    os.dup2(stderr, 2)
    for fd in {devnull, stdout, stderr} - {0, 1, 2}:
        os.close(fd)
    os.chdir(job["cwd"])
    os.environ.clear()
    os.environ.update(job["env"])
    sys.argv = [job["module"], *job["args"]]
    # Run afresh as __main__, as ``-m`` does (and without runpy's warning that the module
    # was imported already): what the fork server imported stays only as what it imports.
    sys.modules.pop(job["module"] + ".__main__", None)
    if not hasattr(sys.modules.get(job["module"]), "__path__"):
        sys.modules.pop(job["module"], None)
    try:
        runpy.run_module(job["module"], run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = exc.code
        if code is None:
            return 0
        if isinstance(code, int):
            return code
        print(code, file=sys.stderr)
        return 1
    except BaseException:
        traceback.print_exc()
        return 1
    return 0


def main(argv: Sequence[str]) -> int:
    """The fork server: import the modules named after the descriptor it was given, say
    ``ready`` on it, then serve forks until that socket ends."""
    sock = socket.socket(fileno=int(argv[0]))
    # Its children are its to reap, whatever it inherited (an ignored SIGCHLD would reap
    # them unseen); each child gets back what a plain start would have inherited.
    inherited = signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    if not _imported(argv[1:]):
        with contextlib.suppress(OSError):
            sock.send(b"refused: an import started a thread")
        return 1
    sock.send(b"ready")
    job = _serve(sock)
    if job is None:
        return 0
    signal.signal(signal.SIGCHLD, inherited)
    code = _run(*job)
    # The end of a process that ran the module, less the teardown of the modules the fork
    # server imported for every kind of server (measured: it doubled a stop's time): its
    # threads are joined and its exit functions run, as at an interpreter's end.
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    atexit._run_exitfuncs()
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(code)
