"""The server objects ``InProcess`` accepts, and one session of each, driven by bytes.

Every session speaks the same narrow interface to the transport (:mod:`.inprocess`): it gets
one JSON-RPC frame at a time (``receive``), gives the transport each frame it sends
(``out``), and says when it ended by itself (``down``). So the transport knows no server
kind, and a server sees exactly what a pipe would have carried: bytes, decoded by the
server's own reader. Nothing here is shared with the client (no dict crosses over).

Kinds are recognised by their classes' module and name (:func:`server_kind`), not by
importing the libraries: ``mcp`` and ``fastmcp`` are optional, and whoever built a server
object has its library imported already. Sessions run on the transport's server thread,
inside its event loop; the server's code runs there and nowhere else.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Callable
from typing import Any, Protocol

import orjson

from ..errors import Error

#: The kinds, by the first class of the server's MRO that names one.
_KINDS: dict[tuple[str, str], str] = {
    ("conduit_mcp.testing", "ScriptedServer"): "conduit_mcp.testing.ScriptedServer",
    ("mcp.server.lowlevel.server", "Server"): "mcp.server.Server",
    ("mcp.server.mcpserver.server", "MCPServer"): "mcp.MCPServer",
    ("fastmcp.server.server", "FastMCP"): "fastmcp.FastMCP",
}

Out = Callable[[bytes], None]
Down = Callable[[str, "str | None"], None]


def server_kind(server: Any) -> str:
    """The kind of ``server``, or a ``config`` error naming what is accepted.

    >>> server_kind(42)
    Traceback (most recent call last):
      ...
    conduit_mcp.errors.Error: config (inprocess.server): InProcess server must be a \
conduit_mcp.testing.ScriptedServer, an mcp.server.Server or MCPServer (mcp 2.x) or a \
fastmcp.FastMCP, not int
    """
    for cls in type(server).__mro__:
        kind = _KINDS.get((cls.__module__, cls.__qualname__))
        if kind is not None:
            return kind
    raise Error(
        "config",
        "inprocess.server",
        "InProcess server must be a conduit_mcp.testing.ScriptedServer, an mcp.server.Server "
        f"or MCPServer (mcp 2.x) or a fastmcp.FastMCP, not {type(server).__name__}",
    )


class Session(Protocol):
    """One connection's worth of a server, on the server thread's loop."""

    async def start(self, out: Out, down: Down) -> None:
        """Begin serving; frames the server sends go to ``out``; its own end to ``down``."""
        ...

    def receive(self, frame: bytes) -> bool:
        """Hand the server one frame; False when the server no longer reads its input."""
        ...

    async def close(self, grace: float) -> None:
        """End the session: close its input, wait up to ``grace``, then cancel it."""
        ...


def open_session(server: Any) -> Session:
    """A fresh session of ``server`` (one per connection attempt, like a new process)."""
    kind = server_kind(server)
    if kind == "conduit_mcp.testing.ScriptedServer":
        return ScriptedSession(server)
    return SdkSession(server, kind)


# -- conduit_mcp.testing ------------------------------------------------------------------------


class Exited(Exception):
    """Unwinds the scripted server's ``exit`` (its stdio front calls ``os._exit`` there)."""


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
        self._out: Out = _drop
        self._down: Down = _drop_down

    async def start(self, out: Out, down: Down) -> None:
        from ..testing.common.event_log import EventLog, bump_start_counter
        from ..testing.scripted.options import config_from_args
        from ..testing.scripted.server import ScriptedMcpServer

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
            self._event("eof", ignored=False)
            server.cancel_all()
            self._event("exit", code=0, reason="eof")
        log, self._log = self._log, None
        fd = getattr(log, "_fd", None)
        if isinstance(fd, int):
            with contextlib.suppress(OSError):
                os.close(fd)


# -- the official SDK 2.x and fastmcp -----------------------------------------------------------


class SdkSession:
    """A low-level ``mcp.server.Server`` served as the SDK's own in-memory transport serves it:
    ``Server.run`` over a pair of streams, which serves both eras (the first request
    decides). A ``MCPServer`` and a ``FastMCP`` hold such a server; a ``FastMCP``'s lifespan
    is entered around the session, as fastmcp's in-memory transport does. Frames are
    validated by the SDK's own message adapter and its answers serialised as its stdio
    writer does.

    The streams are the SDK's stream protocols (``ReadStream``/``WriteStream``), not its
    memory-stream pair with a pump task each way: measured, each task hop was a loop turn
    per message, a third of a sequential call. A frame goes into the read stream as it
    arrives (``send_nowait``), and the server's write calls ``out`` directly.
    """

    def __init__(self, server: Any, kind: str) -> None:
        self._server = server
        self._kind = kind
        self._task: asyncio.Task[None] | None = None
        self._closing = False
        self._reading = True
        self._inlet: Any = None
        self._validate: Callable[[bytes], Any] = _drop
        self._wrap: Callable[[Any], Any] = _drop

    def _lowlevel(self) -> Any:
        if self._kind == "mcp.MCPServer":
            return self._server._lowlevel_server
        if self._kind == "fastmcp.FastMCP":
            return self._server._mcp_server
        return self._server

    async def start(self, out: Out, down: Down) -> None:
        import anyio
        from mcp.shared.message import SessionMessage
        from mcp.types import jsonrpc_message_adapter

        adapter = jsonrpc_message_adapter

        def validate(frame: bytes) -> Any:
            return adapter.validate_json(frame, by_name=False)

        self._validate, self._wrap = validate, SessionMessage
        inlet, s_read = anyio.create_memory_object_stream[Any](float("inf"))
        self._inlet = inlet
        started: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        run = self._run(s_read, _Writer(out), down, started)
        self._task = asyncio.get_running_loop().create_task(run)
        await started

    async def _run(
        self, s_read: Any, s_write: _Writer, down: Down, started: asyncio.Future[None]
    ) -> None:
        lowlevel = self._lowlevel()
        lifespan: Any = (
            self._server._lifespan_manager()
            if self._kind == "fastmcp.FastMCP"
            else contextlib.nullcontext()
        )
        detail: str | None = None
        try:
            async with lifespan:
                if not started.done():
                    started.set_result(None)
                await lowlevel.run(s_read, s_write, lowlevel.create_initialization_options())
        except Exception as exc:
            # The class only: a server's exception text may carry its arguments.
            detail = type(exc).__name__
            if not started.done():
                started.set_exception(exc)
        finally:
            if not started.done():
                started.set_result(None)
            self._reading = False
            if not self._closing:
                down("exit", detail)

    def receive(self, frame: bytes) -> bool:
        if not self._reading:
            return False
        try:
            item: Any = self._wrap(self._validate(frame))
        except Exception as exc:  # the SDK's stdio reader hands it to the server too
            item = exc
        try:
            self._inlet.send_nowait(item)
        except Exception:  # closed: the session is ending
            return False
        return True

    async def close(self, grace: float) -> None:
        self._closing = True
        task = self._task
        if task is None or task.done():
            return
        self._inlet.close()  # EOF: the dispatcher ends the session, cancelling its handlers
        with contextlib.suppress(Exception, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(task), grace)
        if not task.done():
            task.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(task, grace)


class _Writer:
    """The server's write stream (the SDK's ``WriteStream`` protocol): each message is
    serialised as the SDK's stdio writer does and handed to the transport at once."""

    __slots__ = ("_out", "_closed")

    def __init__(self, out: Out) -> None:
        self._out = out
        self._closed = False

    async def send(self, item: Any) -> None:
        if self._closed:
            import anyio

            raise anyio.ClosedResourceError
        message = getattr(item, "message", None)
        if message is not None:
            self._out(message.model_dump_json(by_alias=True, exclude_unset=True).encode())

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> _Writer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()


def _drop(frame: bytes) -> None:
    pass


def _drop_down(reason: str, detail: str | None) -> None:
    pass
