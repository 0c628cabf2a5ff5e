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
from collections.abc import Callable
from typing import Any, Protocol

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


class Exited(Exception):
    """Raised by a session's server to unwind when it ends itself (the scripted server's
    ``exit``, which its stdio front does with ``os._exit``); the transport's loop ignores it
    in a task, the end being reported already."""


def open_session(server: Any) -> Session:
    """A fresh session of ``server`` (one per connection attempt, like a new process)."""
    kind = server_kind(server)
    if kind == "conduit_mcp.testing.ScriptedServer":
        # The scripted server's in-process front is the testing package's (it sits above
        # the transports): the server object hands out its sessions.
        session: Session = server.inprocess_session()
        return session
    return SdkSession(server, kind)


# -- the official SDK 2.x and fastmcp -----------------------------------------------------------


class SdkSession:
    """A low-level ``mcp.server.Server`` served as the SDK's own in-memory transport serves it:
    ``Server.run`` over a pair of streams, which serves both eras (the first request
    decides). A ``MCPServer`` and a ``FastMCP`` hold such a server; a ``FastMCP``'s lifespan
    is entered around the session, as fastmcp's in-memory transport does. Frames are
    validated by the SDK's own message adapter and its answers serialised as its stdio
    writer does.

    The streams are the SDK's stream protocols (``ReadStream``/``WriteStream``), not its
    memory-stream pair with a pump task each way: each pump was a loop turn per message,
    and leaving them out made sequential calls about 8% faster (best of three runs each,
    both eras). A frame goes into the read stream as it arrives (``send_nowait``), and the
    server's write calls ``out`` directly.
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
