"""The in-process front of the scripted MCP server: its protocol core fed frames by
``conduit_mcp.InProcess``, as the stdio front (:mod:`.stdio`) feeds it lines.

A session is one connection's worth of server, as a process is over stdio: it bumps the
start counter and writes the same log, so ``ScriptedServer.log()``, ``wait_for`` and
``starts()`` read an in-process server as they read a spawned one. It runs on the
transport's server thread, inside its event loop.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import orjson

from ...transports.inprocess_servers import Down, Exited, Out

__all__ = ["ScriptedSession"]


class ScriptedSession:
    """The scripted server's protocol core, fed lines as its stdio front feeds it.

    The server's files are the spawned process's (script, start counter, log), so
    ``server.log()``, ``wait_for`` and ``starts()`` read an in-process session the same way.
    Its ``exit``/``crash`` end the session (``exit`` with the code), ``close_stdout`` is a
    lost output (``output_closed``), the flood tool's never-read mode stops its input.
    """

    def __init__(self, spec: Any) -> None:
        self._spec = spec
        self._server: Any = None
        self._log: Any = None
        self._reading = True
        self._ended = False
        self._exited = False
        self._out: Out = _drop
        self._down: Down = _drop_down

    async def start(self, out: Out, down: Down) -> None:
        from ..common.event_log import EventLog, bump_start_counter
        from .options import config_from_args
        from .server import ScriptedMcpServer

        args = self._spec.args()[2:]  # after "-m conduit_mcp.testing"
        config = config_from_args(args)
        log = EventLog(config.log_path) if config.log_path else None
        start = bump_start_counter(config.script_path + ".starts") if config.script_path else 1
        self._log, self._config = log, config
        self._out, self._down = out, down
        self._event("started", start=start, era=config.era, inprocess=True, argv=args)
        self._server = ScriptedMcpServer(
            config,
            self._emit,
            emit_raw=self._emit_raw,
            close_output=self._close_output,
            stop_input=self._stop_input,
            exit=self._exit,
            log=log.write if log is not None else None,
            log_raw=log.write_raw if log is not None else None,
            start_number=start,
        )
        if config.startup_delay > 0:
            await asyncio.sleep(config.startup_delay)

    def _event(self, name: str, **fields: Any) -> None:
        if self._log is not None:
            self._log.write({"t": time.monotonic(), "pid": os.getpid(), "event": name, **fields})

    def _emit(self, msg: dict[str, Any]) -> None:
        if not self._ended:
            self._out(orjson.dumps(msg))

    def _emit_raw(self, line: bytes) -> None:
        if not self._ended:
            self._out(line.rstrip(b"\n"))

    def _close_output(self) -> None:
        self._ended = True
        self._down("output_closed", None)

    def _stop_input(self) -> None:
        self._reading = False

    def _exit(self, code: int) -> None:
        self._exited = True
        self._ended = True
        self._reading = False
        self._down("exit", str(code))
        raise Exited

    def receive(self, frame: bytes) -> bool:
        if not self._reading:
            return False
        try:
            self._server.receive_line(frame)
        except Exited:
            pass
        return True

    async def close(self, grace: float) -> None:
        server, self._ended, self._reading = self._server, True, False
        if server is not None:
            if not self._exited:  # an exit logged its own end
                self._event("eof", ignored=False)
            server.cancel_all()
            if not self._exited:
                self._event("exit", code=0, reason="eof")
        log, self._log = self._log, None
        if log is not None:
            log.close()


def _drop(frame: bytes) -> None:
    pass


def _drop_down(reason: str, detail: str | None) -> None:
    pass
