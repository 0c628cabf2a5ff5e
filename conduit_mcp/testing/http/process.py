"""A handle on one scripted HTTP server subprocess: start, find its port, kill, restart.

The server runs in its own process so a test can kill it (SIGKILL) or stop it (SIGTERM) and
start it again on the same port, as a client's reconnect logic needs. Start-up waits for the
``listening <port>`` line with a deadline (a selector on the pipe, no sleeping); a server that
fails to start raises with its stderr. Get one from
:meth:`conduit_mcp.testing.ScriptedServer.http_server`.
"""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..common.process_handle import ProcessHandle

if TYPE_CHECKING:
    from ...transports.http_spec import Http
    from .. import ScriptedServer

__all__ = ["HttpServerProcess", "option_args"]


def option_args(options: Mapping[str, Any]) -> list[str]:
    """Keyword options as command-line arguments: ``http_response="sse"`` gives
    ``--http-response sse``, ``header_tools=True`` gives ``--header-tools``, a list repeats
    the option; False and None are left out.

    >>> option_args({"http_response": "sse", "header_tools": True, "require_bearer": None})
    ['--http-response', 'sse', '--header-tools']
    >>> option_args({"tool_scope": ["add=math", "echo=talk"]})
    ['--tool-scope', 'add=math', '--tool-scope', 'echo=talk']
    """
    args: list[str] = []
    for key, value in options.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            args.append(flag)
        elif isinstance(value, (list, tuple)):
            for item in value:
                args += [flag, str(item)]
        elif value is not None and value is not False:
            args += [flag, str(value)]
    return args


class HttpServerProcess(ProcessHandle):
    """One ``python -m conduit_mcp.testing --http`` process (restartable on its port).

    ``url`` is ``http://127.0.0.1:<port>/mcp`` (``https`` with ``tls_cert``); the server's log is its
    :class:`~conduit_mcp.testing.ScriptedServer`'s (each start logs one ``started`` event).
    """

    def __init__(
        self,
        server: ScriptedServer,
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
        self.proc: subprocess.Popen[bytes] | None = None
        self.stderr_path: Path | None = None
        self._start()

    # ---- the process ------------------------------------------------------------------------

    def command(self, port: int) -> list[str]:
        """The command line of a start on ``port`` (0: any free port)."""
        return [sys.executable, *self.server.args(), "--http", "--port", str(port), *self._extra]

    def _start(self) -> None:
        self._runs += 1
        stem = self.server.log_path.name.removesuffix(".log.jsonl")
        self.stderr_path = self.server.workdir / f"{stem}.http{self._runs}.stderr"
        with open(self.stderr_path, "wb") as err:
            proc = subprocess.Popen(
                self.command(self.port),
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=err,
                env=self._env,
            )
        self.proc = proc
        try:
            line = self._read_line(proc, time.monotonic() + self.startup_timeout)
        except BaseException:
            self._reap(proc, signal.SIGKILL)
            raise
        words = line.split()
        if len(words) != 2 or words[0] != b"listening" or not words[1].isdigit():
            self._reap(proc, signal.SIGKILL)
            raise RuntimeError(f"unexpected start-up line {line!r}; stderr: {self._stderr()}")
        self.port = int(words[1])

    def _read_line(self, proc: subprocess.Popen[bytes], deadline: float) -> bytes:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"the HTTP server did not start within {self.startup_timeout}s; "
                        f"stderr: {self._stderr()}"
                    )
                if not selector.select(left):
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    code = proc.wait()
                    raise RuntimeError(
                        f"the HTTP server exited with code {code} before listening; "
                        f"stderr: {self._stderr()}"
                    )
                buf += chunk
        proc.stdout.close()  # it prints nothing else
        return buf.split(b"\n", 1)[0]

    def _stderr(self) -> str:
        try:
            assert self.stderr_path is not None
            return self.stderr_path.read_text(errors="replace")[-4000:]
        except OSError as e:
            return f"<unreadable: {e}>"

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
