"""A raw newline-JSON driver for a stdio server subprocess, for tests below the client.

Every read has a deadline: a reader thread feeds a queue, and each wait is a ``queue.get``
with a timeout (no sleeping).
"""

from __future__ import annotations

import collections
import itertools
import os
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import orjson

__all__ = ["RawPeer", "envelope"]

MODERN_VERSION = "2026-07-28"
_EOF: Any = object()  # the end of stdout, in the line queue and the backlog


def envelope(
    params: Mapping[str, Any] | None = None,
    *,
    version: str = MODERN_VERSION,
    capabilities: Mapping[str, Any] | None = None,
    **meta: Any,
) -> dict[str, Any]:
    """``params`` plus the modern per-request ``_meta`` (protocol version, client info, caps).

    Extra keyword arguments become ``_meta`` entries, e.g. ``progressToken=7``.
    """
    out = dict(params or {})
    out["_meta"] = {
        "io.modelcontextprotocol/protocolVersion": version,
        "io.modelcontextprotocol/clientInfo": {"name": "raw-peer", "version": "0"},
        "io.modelcontextprotocol/clientCapabilities": dict(capabilities or {}),
        **dict(out.get("_meta") or {}),
        **meta,
    }
    return out


class RawPeer:
    """Spawn ``argv`` and talk newline-delimited JSON-RPC to it.

    Messages read while waiting for something else are kept, in order, and returned by later
    :meth:`recv`/:meth:`expect` calls; lines that are not JSON go to :attr:`garbage` (and are
    returned by :meth:`recv_line`).
    """

    def __init__(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
    ) -> None:
        self.proc = subprocess.Popen(
            list(argv),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=None if env is None else dict(env),
            cwd=cwd,
        )
        self._lines: queue.Queue[bytes] = queue.Queue()  # stdout lines, then _EOF
        self._backlog: collections.deque[Any] = collections.deque()
        self._stderr = bytearray()
        self._stderr_lock = threading.Lock()
        self._ids = itertools.count(1)
        self.garbage: list[bytes] = []
        self.eof = False
        self._threads = [
            threading.Thread(target=self._read_stdout, daemon=True),
            threading.Thread(target=self._read_stderr, daemon=True),
        ]
        for t in self._threads:
            t.start()

    # ---- reader threads -----------------------------------------------------------------

    def _read_stdout(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self._lines.put(line.rstrip(b"\n"))
        self._lines.put(_EOF)

    def _read_stderr(self) -> None:
        assert self.proc.stderr is not None
        while True:
            chunk = os.read(self.proc.stderr.fileno(), 65536)
            if not chunk:
                return
            with self._stderr_lock:
                self._stderr += chunk

    # ---- writing --------------------------------------------------------------------------

    def next_id(self) -> int:
        return next(self._ids)

    def send(self, msg: Mapping[str, Any]) -> None:
        self.send_raw(orjson.dumps(msg) + b"\n")

    def send_raw(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = dict(params)
        self.send(msg)

    def send_request(
        self, method: str, params: Mapping[str, Any] | None = None, *, id: Any = None
    ) -> Any:
        """Send a request without waiting; return its id."""
        request_id = self.next_id() if id is None else id
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
        if params is not None:
            msg["params"] = dict(params)
        self.send(msg)
        return request_id

    def request(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        id: Any = None,
        timeout: float = 5.0,
    ) -> dict[str, Any]:
        """Send a request and return its response (the whole message)."""
        request_id = self.send_request(method, params, id=id)
        return self.response(request_id, timeout=timeout)

    def modern(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        version: str = MODERN_VERSION,
        timeout: float = 5.0,
        **meta: Any,
    ) -> dict[str, Any]:
        """A request carrying the modern ``_meta`` envelope (see :func:`envelope`)."""
        return self.request(method, envelope(params, version=version, **meta), timeout=timeout)

    def call(
        self, tool: str, arguments: Mapping[str, Any] | None = None, **kw: Any
    ) -> dict[str, Any]:
        """A modern ``tools/call``."""
        return self.modern("tools/call", {"name": tool, "arguments": dict(arguments or {})}, **kw)

    def initialize(
        self, version: str = "2025-11-25", *, capabilities: Any = None
    ) -> dict[str, Any]:
        """The legacy handshake: ``initialize`` then ``notifications/initialized``."""
        response = self.request(
            "initialize",
            {
                "protocolVersion": version,
                "capabilities": capabilities or {},
                "clientInfo": {"name": "raw-peer", "version": "0"},
            },
        )
        self.notify("notifications/initialized")
        return response

    def close_stdin(self) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.close()
        except OSError:
            pass

    # ---- reading --------------------------------------------------------------------------

    def recv_line(self, timeout: float = 5.0) -> bytes | None:
        """The next raw stdout line (``None`` at EOF), including ones already parsed."""
        if self._backlog:
            item = self._backlog.popleft()
            return None if item is _EOF else orjson.dumps(item)
        item = self._lines.get(timeout=timeout) if timeout > 0 else self._lines.get_nowait()
        if item is _EOF:
            self.eof = True
            return None
        return item

    def _next(self, deadline: float) -> Any:
        if self._backlog:
            return self._backlog.popleft()
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            try:
                item = self._lines.get(timeout=remaining)
            except queue.Empty:
                raise TimeoutError from None
            if item is _EOF:
                self.eof = True
                return _EOF
            try:
                return orjson.loads(item)
            except orjson.JSONDecodeError:
                self.garbage.append(item)

    def recv(self, timeout: float = 5.0) -> dict[str, Any]:
        """The next JSON message; raises ``EOFError`` at EOF, ``TimeoutError`` at the deadline."""
        try:
            item = self._next(time.monotonic() + timeout)
        except TimeoutError:
            raise TimeoutError(
                f"no message within {timeout}s; stderr: {self.stderr()[-500:]!r}"
            ) from None
        if item is _EOF:
            self._backlog.appendleft(_EOF)
            raise EOFError("server closed stdout")
        message: dict[str, Any] = item
        return message

    def expect(
        self, predicate: Callable[[dict[str, Any]], bool], timeout: float = 5.0
    ) -> dict[str, Any]:
        """The first message (in arrival order) matching ``predicate``; others are kept."""
        deadline = time.monotonic() + timeout
        skipped: list[Any] = []
        try:
            while True:
                try:
                    item = self._next(deadline)
                except TimeoutError:
                    raise TimeoutError(
                        f"no matching message within {timeout}s; got {skipped!r}; "
                        f"stderr: {self.stderr()[-500:]!r}"
                    ) from None
                if item is _EOF:
                    skipped.append(_EOF)
                    raise EOFError(f"server closed stdout; got {skipped[:-1]!r}")
                if predicate(item):
                    message: dict[str, Any] = item
                    return message
                skipped.append(item)
        finally:
            self._backlog.extendleft(reversed(skipped))

    def response(self, request_id: Any, timeout: float = 5.0) -> dict[str, Any]:
        """The response to ``request_id``."""
        return self.expect(
            lambda m: (
                "method" not in m
                and m.get("id") == request_id
                and type(m.get("id")) is type(request_id)
            ),
            timeout,
        )

    def drain(self) -> list[dict[str, Any]]:
        """Every message received so far without waiting (backlog first)."""
        out = [m for m in self._backlog if m is not _EOF]
        eof = any(m is _EOF for m in self._backlog)
        self._backlog.clear()
        while True:
            try:
                item = self._lines.get_nowait()
            except queue.Empty:
                break
            if item is _EOF:
                eof = True
                self.eof = True
                break
            try:
                out.append(orjson.loads(item))
            except orjson.JSONDecodeError:
                self.garbage.append(item)
        if eof:
            self._backlog.append(_EOF)
        return out

    def stderr(self) -> str:
        with self._stderr_lock:
            return self._stderr.decode("utf-8", "replace")

    def wait_stderr(self, text: str, timeout: float = 5.0) -> str:
        """Wait (polling every 10 ms, with a deadline) until stderr contains ``text``."""
        deadline = time.monotonic() + timeout
        while True:
            current = self.stderr()
            if text in current:
                return current
            if time.monotonic() >= deadline:
                raise TimeoutError(f"{text!r} not in stderr within {timeout}s: {current[-500:]!r}")
            time.sleep(0.01)

    # ---- lifetime -------------------------------------------------------------------------

    def wait(self, timeout: float = 5.0) -> int:
        """Wait for the process to exit; return its exit code."""
        return self.proc.wait(timeout=timeout)

    def close(self) -> int | None:
        """Close stdin, wait briefly, then kill; return the exit code."""
        self.close_stdin()
        try:
            code = self.proc.wait(timeout=2.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(timeout=5.0)
        for t in self._threads:
            t.join(timeout=2.0)
        for stream in (self.proc.stdout, self.proc.stderr):
            if stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
        return code

    def __enter__(self) -> RawPeer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
