"""What the test servers' subprocess handles share: reaping, stopping, restarting and the
context manager (``HttpServerProcess`` and ``AuthServerProcess`` differ only in how they
start and what they serve)."""

from __future__ import annotations

import signal
import subprocess
from types import TracebackType
from typing import Self


class ProcessHandle:
    """A server subprocess started by ``_start``; ``kill`` on leaving a ``with`` block."""

    proc: subprocess.Popen[bytes] | None

    def _start(self) -> None:
        raise NotImplementedError

    @staticmethod
    def _reap(proc: subprocess.Popen[bytes], sig: int, timeout: float = 5.0) -> int:
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
