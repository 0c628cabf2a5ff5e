"""``InProcess``: a server object run in this process, for users' own test suites.

A frozen value like ``Stdio`` and ``Http``: it names the server and how long closing may
wait; the transport (:mod:`.inprocess`) runs one session of it per connection attempt. Which
kinds of server object are accepted, and how each is driven, is :mod:`.inprocess_servers`'s.
docs/inprocess.md describes the transport.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import Error
from .inprocess_servers import server_kind


@dataclass(frozen=True, slots=True, repr=False)
class InProcess:
    """A server object served in this process: no subprocess, no socket.

    ``server`` is a :class:`conduit_mcp.testing.ScriptedServer`, or (optional adapters, used
    when the library is installed) a server of the official ``mcp`` SDK 2.x (its low-level
    ``mcp.server.Server`` or its ``MCPServer``) or a ``fastmcp.FastMCP``. Each connection
    attempt opens a fresh session of it, as a subprocess would be a fresh process. The
    server's code runs on a thread of its own (one per connection), never on the caller's
    thread, an actor's or the client's I/O loop. ``close_grace`` is how long closing waits for
    the server's session to end after its input is closed before it is cancelled.

    >>> import tempfile
    >>> from conduit_mcp.testing import ScriptedServer
    >>> InProcess(ScriptedServer(tempfile.mkdtemp()))
    InProcess(server='conduit_mcp.testing.ScriptedServer', close_grace=2.0)
    >>> InProcess(object())
    Traceback (most recent call last):
      ...
    conduit_mcp.errors.Error: config (inprocess.server): InProcess server must be a \
conduit_mcp.testing.ScriptedServer, an mcp.server.Server or MCPServer (mcp 2.x) or a \
fastmcp.FastMCP, not object
    """

    server: Any
    close_grace: float = 2.0

    def __post_init__(self) -> None:
        server_kind(self.server)  # raises the config error for anything else
        grace = self.close_grace
        if isinstance(grace, bool) or not isinstance(grace, (int, float)) or not grace >= 0:
            raise Error("config", "inprocess.close_grace", "close_grace must be a number >= 0")

    def __repr__(self) -> str:
        # The kind of server, never the object's repr (it may show its settings).
        return f"InProcess(server={server_kind(self.server)!r}, close_grace={self.close_grace!r})"
