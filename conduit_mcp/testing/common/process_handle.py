"""What the test servers' subprocess handles share: starting with a deadline on the first line,
reaping, stopping, restarting and the context manager (``HttpServerProcess`` and
``AuthServerProcess`` differ only in their command line, what their ``listening`` line says and
what they serve)."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from . import zygote

#: A server's process: started with ``subprocess.Popen``, or forked by :mod:`.zygote`.
Proc = subprocess.Popen[bytes] | zygote.ForkedProcess

__all__ = ["Proc", "ProcessHandle", "option_args", "pythonpath_env"]

# The folder that holds the ``conduit_mcp`` package (common/ -> testing/ -> conduit_mcp/ -> it).
_PACKAGE_ROOT = str(Path(__file__).resolve().parents[3])


def pythonpath_env() -> dict[str, str]:
    """``PYTHONPATH`` for a server subprocess, so ``conduit_mcp`` imports from any cwd."""
    existing = os.environ.get("PYTHONPATH")
    return {"PYTHONPATH": _PACKAGE_ROOT if not existing else _PACKAGE_ROOT + os.pathsep + existing}


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


class ProcessHandle:
    """A server subprocess started by ``_start``; ``kill`` on leaving a ``with`` block.

    A subclass's ``_start`` calls :meth:`_launch` and parses the line it returns; ``what``
    names the server in start-up errors.
    """

    what = "the server"
    #: What the server imports, for the fork server to import once (zygote.py).
    imports: tuple[str, ...] = ()
    proc: Proc | None
    port: int
    startup_timeout: float
    stderr_path: Path | None
    _env: Mapping[str, str]

    def _start(self) -> None:
        raise NotImplementedError

    def command(self, port: int) -> list[str]:
        """The command line of a start on ``port`` (0: any free port)."""
        raise NotImplementedError

    def _launch(self, stderr_path: Path) -> bytes:
        """Start ``command(port)`` (stderr to ``stderr_path``) and return its first stdout line,
        read with a deadline of ``startup_timeout`` (a selector on the pipe, no sleeping). A
        process that prints nothing in time, or exits first, is killed; the error has its
        stderr."""
        self.stderr_path = stderr_path
        command = self.command(self.port)
        with open(stderr_path, "wb") as err:
            # Forked from a process that has imported the servers already when it can be
            # (zygote.py: a start in milliseconds instead of ~250 ms of imports).
            proc: Proc | None = zygote.launch(
                command, env=self._env, stderr=err.fileno(), imports=self.imports
            )
            if proc is None:
                proc = subprocess.Popen(
                    command,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=err,
                    env=self._env,
                )
        self.proc = proc
        try:
            return self._read_line(proc, time.monotonic() + self.startup_timeout)
        except BaseException:
            self._reap(proc, signal.SIGKILL)
            raise

    def _read_line(self, proc: Proc, deadline: float) -> bytes:
        assert proc.stdout is not None
        fd = proc.stdout.fileno()
        buf = b""
        with selectors.DefaultSelector() as selector:
            selector.register(fd, selectors.EVENT_READ)
            while b"\n" not in buf:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(
                        f"{self.what} did not start within {self.startup_timeout}s; "
                        f"stderr: {self._stderr()}"
                    )
                if not selector.select(left):
                    continue
                chunk = os.read(fd, 4096)
                if not chunk:
                    code = proc.wait()
                    raise RuntimeError(
                        f"{self.what} exited with code {code} before listening; "
                        f"stderr: {self._stderr()}"
                    )
                buf += chunk
        proc.stdout.close()  # it prints nothing else
        return buf.split(b"\n", 1)[0]

    def _bad_start(self, line: bytes) -> RuntimeError:
        """Kill a process whose first line is not what was expected; the error to raise."""
        assert self.proc is not None
        self._reap(self.proc, signal.SIGKILL)
        return RuntimeError(f"unexpected start-up line {line!r}; stderr: {self._stderr()}")

    def _stderr(self) -> str:
        try:
            assert self.stderr_path is not None
            return self.stderr_path.read_text(errors="replace")[-4000:]
        except OSError as e:
            return f"<unreadable: {e}>"

    @staticmethod
    def _reap(proc: Proc, sig: int, timeout: float = 5.0) -> int:
        if proc.poll() is None:
            proc.send_signal(sig)
            try:
                return proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
        code = proc.wait()
        if proc.stdout is not None and not proc.stdout.closed:
            proc.stdout.close()
        return code

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> int:
        """SIGKILL the process and wait for it; return its exit status."""
        assert self.proc is not None
        return self._reap(self.proc, signal.SIGKILL)

    def stop(self, timeout: float = 5.0) -> int:
        """SIGTERM the process (SIGKILL after ``timeout``) and wait; return its exit status."""
        assert self.proc is not None
        return self._reap(self.proc, signal.SIGTERM, timeout)

    def restart(self) -> Self:
        """Start again on the same port (stopping it first if it still runs)."""
        if self.running():
            self.stop()
        self._start()
        return self

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.proc is not None:
            self.kill()
