"""A handle on one scripted HTTP server subprocess: start, find its port, kill, restart.

The server runs in its own process so a test can kill it (SIGKILL) or stop it (SIGTERM) and
start it again on the same port, as a client's reconnect logic needs. Start-up waits for the
``listening <port>`` line with a deadline (a selector on the pipe, no sleeping); a server that
fails to start raises with its stderr. Get one from
:meth:`conduit_mcp.testing.ScriptedServer.http_server`.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..common.process_handle import Proc, ProcessHandle, option_args

if TYPE_CHECKING:
    from ...transports.http_spec import Http

__all__ = ["HttpServerProcess", "ServerFiles"]


class ServerFiles(Protocol):
    """What the handle needs of the server it runs, a :class:`~conduit_mcp.testing.ScriptedServer`:
    its command line, its environment and the folder its files go to (a protocol, so that
    this module need not import the package above it)."""

    workdir: Path
    log_path: Path

    def args(self) -> list[str]: ...

    def env(self) -> dict[str, str]: ...


class HttpServerProcess(ProcessHandle):
    """One ``python -m conduit_mcp.testing --http`` process (restartable on its port).

    ``url`` is ``http://127.0.0.1:<port>/mcp`` (``https`` with ``tls_cert``); the server's log is its
    :class:`~conduit_mcp.testing.ScriptedServer`'s (each start logs one ``started`` event).
    """

    what = "the HTTP server"
    imports = (
        "conduit_mcp.testing.scripted.options",
        "conduit_mcp.testing.http.front",
        "conduit_mcp.testing.http.oauth_guard",
    )

    def __init__(
        self,
        server: ServerFiles,
        options: Mapping[str, Any] | None = None,
        *,
        env: Mapping[str, str] | None = None,
        startup_timeout: float = 10.0,
    ) -> None:
        self.server = server
        self.port = 0
        self.startup_timeout = startup_timeout
        self._extra = option_args(options or {})
        # tls_cert= and tls_key= (docs/testing.md, "TLS"): the server speaks https.
        self.scheme = "https" if (options or {}).get("tls_cert") else "http"
        self._env = {**os.environ, **server.env(), **dict(env or {})}
        self._runs = 0
        self.proc: Proc | None = None
        self.stderr_path: Path | None = None
        self._start()

    # ---- the process ------------------------------------------------------------------------

    def command(self, port: int) -> list[str]:
        """The command line of a start on ``port`` (0: any free port)."""
        return [sys.executable, *self.server.args(), "--http", "--port", str(port), *self._extra]

    def _start(self) -> None:
        self._runs += 1
        stem = self.server.log_path.name.removesuffix(".log.jsonl")
        line = self._launch(self.server.workdir / f"{stem}.http{self._runs}.stderr")
        words = line.split()
        if len(words) != 2 or words[0] != b"listening" or not words[1].isdigit():
            raise self._bad_start(line)
        self.port = int(words[1])

    # ---- the handle -------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/mcp"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def spec(self, **kw: Any) -> Http:
        """A :class:`~conduit_mcp.transports.http_spec.Http` spec for this server."""
        from ...transports.http_spec import Http

        return Http(self.url, **kw)

    def set_oauth(self, **changes: Any) -> dict[str, Any]:
        """With ``require_oauth``: change ``authorization_server`` (a server that moved),
        ``introspection_url``, ``prm_resource``, ``scope``, ``tool_scopes`` or
        ``metadata_fault`` (``"unavailable"``: the metadata answers 503; ``"split"``: it is
        written in two segments; None: whole) at run time (``POST /admin/oauth``); returns
        the protected resource metadata now served."""
        import http.client

        import orjson

        conn: http.client.HTTPConnection
        if self.scheme == "https":
            from ..common.tls import client_context

            conn = http.client.HTTPSConnection(
                "127.0.0.1", self.port, timeout=10, context=client_context()
            )
        else:
            conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
        try:
            body = orjson.dumps(changes)
            conn.request("POST", "/admin/oauth", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            data = resp.read()
        finally:
            conn.close()
        if resp.status != 200:
            raise RuntimeError(f"/admin/oauth answered {resp.status}: {data[:300]!r}")
        result: dict[str, Any] = orjson.loads(data)
        return result

    def __repr__(self) -> str:
        state = "running" if self.running() else "stopped"
        return f"<HttpServerProcess {self.url} pid={self.proc and self.proc.pid} {state}>"
