"""Starting the benchmarks' server processes, written once: the ``listening <port>`` line
read under a deadline (never a blocking read of a pipe that may stay silent), and
``fast_http_server.py`` as one object every benchmark of many HTTP clients shares.
"""

from __future__ import annotations

import os
import selectors
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

HERE = Path(__file__).resolve().parent
FAST_HTTP_SERVER = str(HERE / "fast_http_server.py")


def read_port(proc: subprocess.Popen[bytes], deadline: float, what: str) -> int:
    """The port of a server that prints ``listening <port>`` first; RuntimeError naming
    ``what`` if it exits or says nothing by ``deadline`` (a monotonic time)."""
    assert proc.stdout is not None
    fd, buf = proc.stdout.fileno(), b""
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while b"\n" not in buf:
            if time.monotonic() > deadline:
                raise RuntimeError(f"{what} did not start")
            if sel.select(0.1):
                chunk = os.read(fd, 4096)
                if not chunk:
                    raise RuntimeError(f"{what} exited")
                buf += chunk
    proc.stdout.close()  # it prints nothing else
    words = buf.split(b"\n", 1)[0].split()
    if len(words) != 2 or words[0] != b"listening":
        raise RuntimeError(f"unexpected start-up line {buf!r} from {what}")
    return int(words[1])


class FastHttpServer:
    """One ``fast_http_server.py`` process on 127.0.0.1 (``url``), stopped by :meth:`stop`
    or on leaving a ``with`` block."""

    def __init__(self, *args: str) -> None:
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115 - closed by stop()
        self.proc = subprocess.Popen(
            [sys.executable, FAST_HTTP_SERVER, "--port", "0", *args],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
        )
        try:
            self.port = read_port(self.proc, time.monotonic() + 20, "fast_http_server.py")
        except BaseException:
            self.stop()
            raise
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self.stderr.close()

    def __enter__(self) -> FastHttpServer:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
