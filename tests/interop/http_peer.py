"""Start a real third-party MCP server on a loopback HTTP port, for the interop tests.

The server is ready when it says so on its output (node: "listening on port") or, for servers
that log nothing at their log level (the Python peers run uvicorn at WARNING), when its port
accepts a TCP connection; the start waits for that with a deadline. A reader thread keeps
draining the output, so a chatty server never blocks on a full pipe.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class HttpPeer:
    """A server process on ``127.0.0.1:port``; ``url`` is its MCP endpoint."""

    def __init__(
        self,
        argv: Sequence[str],
        port: int,
        *,
        ready: Sequence[str],
        env: Mapping[str, str] | None = None,
        path: str = "/mcp",
        timeout: float = 30.0,
    ) -> None:
        self.port = port
        self.url = f"http://127.0.0.1:{port}{path}"
        self.output: list[str] = []
        self._markers = [r.lower() for r in ready]
        self._ready = threading.Event()
        self._changed = threading.Condition()
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=dict(env) if env is not None else None,
            start_new_session=True,
        )
        threading.Thread(target=self._drain, name="http-peer-output", daemon=True).start()
        deadline = time.monotonic() + timeout
        while not self._ready.is_set() and time.monotonic() < deadline:
            if self.proc.poll() is not None:
                break
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                self._ready.set()
            except OSError:
                self._ready.wait(0.05)  # woken early by the output marker or EOF
        if not self._ready.is_set() or self.proc.poll() is not None:
            self.kill()
            raise RuntimeError(f"HTTP peer not ready: {self.output[-20:]}")

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            text = line.decode(errors="replace").rstrip()
            with self._changed:
                if len(self.output) < 2000:
                    self.output.append(text)
                self._changed.notify_all()
            if not self._ready.is_set() and any(m in text.lower() for m in self._markers):
                self._ready.set()
        self._ready.set()  # EOF: the process died; the starter checks poll()

    def wait_for_output(self, text: str, timeout: float = 10.0) -> bool:
        """Wait (with a deadline) until a line of the server's output contains ``text``."""
        with self._changed:
            return self._changed.wait_for(
                lambda: any(text in line for line in self.output), timeout
            )

    def wait_until(self, predicate: Callable[[], bool], timeout: float = 10.0) -> bool:
        """Wait (with a deadline) until ``predicate()`` holds, looking again at each line of
        output (for a predicate over ``output``)."""
        with self._changed:
            return self._changed.wait_for(predicate, timeout)

    def kill(self) -> None:
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(10)
