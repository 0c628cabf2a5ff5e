"""The stdio front of the scripted MCP server: newline-delimited JSON-RPC on stdin/stdout.

stdout carries nothing but JSON-RPC (and the deliberate garbage lines of ``garbage``);
diagnostics go to stderr. Writes are synchronous ``os.write`` calls, so everything sent before
an ``exit``/``crash`` has reached the pipe when the process ends.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import stat
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson

from ..common.event_log import EventLog, bump_start_counter
from .options import Config
from .server import ScriptedMcpServer

__all__ = ["serve"]

_DUMPS = orjson.dumps
_NL = orjson.OPT_APPEND_NEWLINE


class _Stdout:
    """Synchronous writes to fd 1; survives a closed pipe (the data is dropped)."""

    def __init__(self, on_broken: Callable[[], None]) -> None:
        self._dead = False
        self._on_broken = on_broken

    def send(self, msg: dict[str, Any]) -> None:
        self.raw(_DUMPS(msg, option=_NL))

    def raw(self, data: bytes) -> None:
        if self._dead:
            return
        try:
            n = os.write(1, data)
            if n == len(data):
                return
        except BlockingIOError:
            n = 0
        except OSError:
            self._dead = True
            self._on_broken()
            return
        view = memoryview(data)[n:]  # a partial write (big message, full pipe): finish it
        while view:
            try:
                n = os.write(1, view)
            except BlockingIOError:  # stdout shares a non-blocking file description with stdin
                select.select([], [1], [])
                continue
            except OSError:
                self._dead = True
                self._on_broken()
                return
            view = view[n:]

    def close(self) -> None:
        """Close the stdout pipe (the reader sees EOF) while the process keeps running."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)
        self._dead = True


class _LineProtocol(asyncio.Protocol):
    def __init__(self, on_line: Callable[[bytes], None], on_eof: Callable[[], None]) -> None:
        self._on_line = on_line
        self._on_eof: Callable[[], None] | None = on_eof
        self._buf = b""

    def data_received(self, data: bytes) -> None:
        if self._buf:
            data = self._buf + data
            self._buf = b""
        start = 0
        on_line = self._on_line
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                break
            if nl > start:
                on_line(data[start:nl])
            start = nl + 1
        if start < len(data):
            self._buf = data[start:]

    def eof_received(self) -> bool:
        self._finish()
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self._finish()

    def _finish(self) -> None:
        if self._buf:
            line, self._buf = self._buf, b""
            self._on_line(line)
        on_eof, self._on_eof = self._on_eof, None
        if on_eof is not None:
            on_eof()


async def _read_stdin(protocol: _LineProtocol) -> None:
    loop = asyncio.get_running_loop()
    try:
        mode = os.fstat(0).st_mode
    except OSError:
        mode = 0
    if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
        # add_reader + os.read: fewer layers per wake-up than a pipe transport.
        os.set_blocking(0, False)
        data_received = protocol.data_received

        def ready() -> None:
            try:
                chunk = os.read(0, 1 << 16)
            except (BlockingIOError, InterruptedError):
                return
            except OSError:
                chunk = b""
            if chunk:
                data_received(chunk)
            else:
                loop.remove_reader(0)
                protocol.eof_received()

        try:
            loop.add_reader(0, ready)
            return
        except (ValueError, OSError):
            os.set_blocking(0, True)
    # A regular file, a tty, /dev/null (which epoll refuses): read in a thread.

    def pump() -> None:
        while True:
            try:
                chunk = os.read(0, 1 << 16)
            except OSError:
                chunk = b""
            if not chunk:
                loop.call_soon_threadsafe(protocol.eof_received)
                return
            loop.call_soon_threadsafe(protocol.data_received, chunk)

    threading.Thread(target=pump, name="stdin-reader", daemon=True).start()


async def serve(config: Config) -> int:
    """Serve one stdio connection until stdin closes; return the exit code."""
    loop = asyncio.get_running_loop()
    pid = os.getpid()
    log = EventLog(config.log_path) if config.log_path else None
    start = bump_start_counter(config.script_path + ".starts") if config.script_path else 1

    def event(name: str, **fields: Any) -> None:
        if log is not None:
            log.write({"t": time.monotonic(), "pid": pid, "event": name, **fields})

    event(
        "started",
        start=start,
        era=config.era,
        modern_versions=list(config.modern_versions),
        legacy_versions=list(config.legacy_versions),
        argv=sys.argv[1:],
        cwd=os.getcwd(),
    )
    if config.stderr_noise:
        noise = b"".join(
            b"conduit_mcp.testing noise line %d: lorem ipsum dolor sit amet\n" % i
            for i in range(config.stderr_noise)
        )
        try:
            os.write(2, noise)
        except OSError:
            pass

    if config.fork_child:
        child = _fork_stubborn_child()
        event("child", child=child)

    def on_sigterm(signum: int, frame: Any) -> None:
        if config.ignore_sigterm:
            event("sigterm", ignored=True)
            return
        event("sigterm", ignored=False)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(pid, signal.SIGTERM)

    signal.signal(signal.SIGTERM, on_sigterm)

    def exit_now(code: int) -> None:
        os._exit(code)

    stdout = _Stdout(lambda: event("stdout_broken"))

    def stop_input() -> None:
        # The flood tool's never-reads mode: the client's writes fill the pipe for good.
        event("stop_reading")
        with contextlib.suppress(ValueError, OSError):
            loop.remove_reader(0)

    server = ScriptedMcpServer(
        config,
        stdout.send,
        emit_raw=stdout.raw,
        close_output=stdout.close,
        stop_input=stop_input,
        exit=exit_now,
        log=log.write if log is not None else None,
        log_raw=log.write_raw if log is not None else None,
        start_number=start,
    )
    if config.startup_delay > 0:
        await asyncio.sleep(config.startup_delay)
    done: asyncio.Future[None] = loop.create_future()

    def on_eof() -> None:
        event("eof", ignored=config.ignore_eof)
        if not config.ignore_eof and not done.done():
            done.set_result(None)

    await _read_stdin(_LineProtocol(server.receive_line, on_eof))
    await done
    server.cancel_all()
    event("exit", code=0, reason="eof")
    return 0


# How long a --fork-child child lives unless it is killed: bounded, so that a client that
# fails to end it cannot leave it running for ever.
_CHILD_LIFETIME = 120.0


def _fork_stubborn_child() -> int:
    """Fork a child that stays in this process group, keeps the inherited stdio pipes and
    ignores SIGTERM (``--fork-child``); return its pid. Only SIGKILL (or its lifetime) ends
    it."""
    pid = os.fork()
    if pid == 0:  # the child: no asyncio, no Python-level cleanup, just wait
        try:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            deadline = time.monotonic() + _CHILD_LIFETIME
            while time.monotonic() < deadline:
                time.sleep(0.5)
        finally:
            os._exit(0)
    return pid
