"""What a test server writes down for the test that runs it: its event log and its start count.

Both are files, not pipes, so that a test reads them after the process is gone and across
restarts (every start appends to the same log; the script's ``.starts`` file counts them).
The scripted MCP server (both fronts) and the test authorization server write them.
"""

from __future__ import annotations

import os
from typing import Any

import orjson

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

__all__ = ["EventLog", "bump_start_counter"]


class EventLog:
    """Appends one JSON line per record to a file, each with a single unbuffered write."""

    def __init__(self, path: str) -> None:
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)

    def close(self) -> None:
        """Close the file; later writes are dropped. For a log that outlives its writer's
        last task (an in-process session); call it on the thread that writes."""
        fd, self._fd = self._fd, -1
        if fd >= 0:
            try:
                os.close(fd)
            except OSError:
                pass

    def write_raw(self, line: bytes) -> None:
        try:
            os.write(self._fd, line)
        except OSError:
            pass

    def write(self, record: dict[str, Any]) -> None:
        try:
            line = orjson.dumps(record, option=orjson.OPT_APPEND_NEWLINE | orjson.OPT_NON_STR_KEYS)
            os.write(self._fd, line)
        except (OSError, TypeError):
            pass


def bump_start_counter(path: str) -> int:
    """Increment the integer in ``path`` (created at 0) under a lock; return the new value."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        data = os.read(fd, 64).strip()
        count = (int(data) if data.isdigit() else 0) + 1
        os.lseek(fd, 0, os.SEEK_SET)
        os.ftruncate(fd, 0)
        os.write(fd, str(count).encode())
        return count
    finally:
        os.close(fd)  # releases the lock
