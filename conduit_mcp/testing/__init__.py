r"""A scriptable MCP server for tests: both protocol eras, over stdio or Streamable HTTP.

Run it as ``python -m conduit_mcp.testing [options]``, or let :class:`ScriptedServer` build
the command, the script and the log for you. It can answer late, never, twice or with
garbage, crash, flood, expire a session or demand credentials, and it is cheap enough to
benchmark clients against. The manual (the command line, what each era answers, the tools,
script rules and the HTTP front) is ``docs/testing.md`` in the repository, and
``python -m conduit_mcp.testing --help`` lists the options.

Example (runs as a doctest)::

    >>> import tempfile
    >>> from conduit_mcp.testing import ScriptedServer
    >>> server = ScriptedServer(tempfile.mkdtemp(), rules=[
    ...     {"match": {"tool": "add", "nth": 1},
    ...      "action": {"error": {"code": -32603, "message": "boom"}}},
    ... ])
    >>> with server.spawn_raw() as peer:
    ...     print(peer.modern("server/discover")["result"]["supportedVersions"])
    ...     print(peer.call("add", {"a": 1, "b": 2})["error"]["message"])
    ...     print(peer.call("add", {"a": 1, "b": 2})["result"]["structuredContent"])
    ['2026-07-28']
    boom
    {'sum': 3}
    >>> [e["params"]["arguments"] for e in server.received("tools/call")]
    [{'a': 1, 'b': 2}, {'a': 1, 'b': 2}]
    >>> server.starts()
    1

With the conduit client, give it ``server.stdio()`` (a ``conduit_mcp.Stdio``),
``server.inprocess()`` (a ``conduit_mcp.InProcess``: the same server in this process), or
``server.http_server()`` and its ``spec()`` over HTTP, and assert on ``server.log()`` /
``server.wait_for(...)`` afterwards.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson

from .common.process_handle import pythonpath_env
from .scripted.rules import ConfigError, parse_rules

if TYPE_CHECKING:
    from ..transports.inprocess_spec import InProcess
    from ..transports.stdio_spec import Stdio
    from .auth.issuers import JwtIssuer
    from .auth.process import AuthServerProcess
    from .http.process import HttpServerProcess
    from .raw.stdio import RawPeer
    from .scripted.inprocess import ScriptedSession

__all__ = ["AuthServerProcess", "ConfigError", "JwtIssuer", "ScriptedServer"]


def __getattr__(name: str) -> Any:
    """The authorization server's names, imported when first used: every scripted server
    process (``python -m conduit_mcp.testing``) imports this package first, and
    ``http.client`` with the rest of ``auth`` cost it ~11 ms of its ~70 ms of imports."""
    if name == "AuthServerProcess":
        from .auth.process import AuthServerProcess

        return AuthServerProcess
    if name == "JwtIssuer":
        from .auth.issuers import JwtIssuer

        return JwtIssuer
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


Match = str | Mapping[str, Any] | Callable[[dict[str, Any]], bool]


class ScriptedServer:
    """Files and command line of one scripted server, plus readers for its log.

    ``workdir`` receives the script (``<name>.<token>.script.json``), its start counter
    (``….script.json.starts``) and the log (``<name>.<token>.log.jsonl``). Every process
    started from :meth:`command`/:meth:`stdio`/:meth:`spawn_raw` shares them, so the log
    covers restarts (each entry has the ``pid``).

    Tasks (docs/testing-guide.md, "Tasks"): ``tasks=False`` serves none (``--no-tasks``);
    ``durable`` names the JSON file keeping task state across restarts
    (``--tasks-durable``); ``tasks_conformance=True`` adds the conformance harness's task
    fixtures (``--tasks-conformance``).
    """

    def __init__(
        self,
        workdir: Path | str,
        *,
        era: str = "both",
        versions: Sequence[str] | None = None,
        rules: Iterable[Mapping[str, Any]] = (),
        page_size: int | None = None,
        name: str = "scripted",
        extra_args: Sequence[str] = (),
        tasks: bool = True,
        durable: Path | str | None = None,
        tasks_conformance: bool = False,
    ) -> None:
        if era not in ("both", "modern", "legacy"):
            raise ValueError(f"era must be both, modern or legacy, not {era!r}")
        self.workdir = Path(workdir)
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.era = era
        self.versions = None if versions is None else list(versions)
        self.page_size = page_size
        self.name = name
        self.extra_args = list(extra_args)
        self.tasks = tasks
        self.durable = None if durable is None else Path(durable)
        self.tasks_conformance = tasks_conformance
        stem = f"{name}.{secrets.token_hex(4)}"
        self.script_path = self.workdir / f"{stem}.script.json"
        self.starts_path = Path(f"{self.script_path}.starts")
        self.log_path = self.workdir / f"{stem}.log.jsonl"
        self._entries: list[dict[str, Any]] = []
        self._offset = 0
        self.set_rules(rules)

    # ---- configuration ----------------------------------------------------------------------

    def set_rules(self, rules: Iterable[Mapping[str, Any]]) -> None:
        """Replace the script; processes started from now on use it (validated first)."""
        raw = [dict(r) for r in rules]
        try:
            parse_rules({"rules": raw})
        except ConfigError as e:
            raise ValueError(str(e)) from None
        tmp = self.script_path.with_suffix(".tmp")
        tmp.write_bytes(orjson.dumps({"rules": raw}, option=orjson.OPT_INDENT_2))
        os.replace(tmp, self.script_path)

    def args(self) -> list[str]:
        """The arguments after the interpreter: ``-m conduit_mcp.testing ...``."""
        args = ["-m", "conduit_mcp.testing", "--era", self.era, "--name", self.name]
        if self.versions is not None:
            args += ["--versions", ",".join(self.versions)]
        if self.page_size is not None:
            args += ["--page-size", str(self.page_size)]
        args += ["--log", str(self.log_path), "--script", str(self.script_path)]
        if not self.tasks:
            args.append("--no-tasks")
        if self.durable is not None:
            args += ["--tasks-durable", str(self.durable)]
        if self.tasks_conformance:
            args.append("--tasks-conformance")
        return args + self.extra_args

    def command(self) -> list[str]:
        """The full command line (``sys.executable`` first)."""
        return [sys.executable, *self.args()]

    def env(self) -> dict[str, str]:
        """Variables the child needs: ``PYTHONPATH`` so ``conduit_mcp`` imports from any cwd."""
        return pythonpath_env()

    def stdio(self, **kw: Any) -> Stdio:
        """A :class:`~conduit_mcp.transports.stdio_spec.Stdio` spec for this server.

        Keyword arguments go to ``Stdio`` (``env`` is merged over :meth:`env`).
        """
        from ..transports.stdio_spec import Stdio

        env = {**self.env(), **dict(kw.pop("env", None) or {})}
        return Stdio(sys.executable, self.args(), env=env, **kw)

    def inprocess(self, **kw: Any) -> InProcess:
        """A :class:`~conduit_mcp.InProcess` spec for this server: the same server in this
        process, no subprocess (keyword arguments go to ``InProcess``)."""
        from ..transports.inprocess_spec import InProcess

        return InProcess(self, **kw)

    def inprocess_session(self) -> ScriptedSession:
        """A fresh session of this server for ``InProcess`` (it opens one per connection, as
        a reconnect over stdio spawns a new process): same script, start counter and log."""
        from .scripted.inprocess import ScriptedSession

        return ScriptedSession(self)

    def spawn_raw(
        self,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        inherit_env: bool = True,
    ) -> RawPeer:
        """Start a process driven by a :class:`~conduit_mcp.testing.raw.stdio.RawPeer`."""
        from .raw.stdio import RawPeer

        full = dict(os.environ) if inherit_env else {"PATH": os.environ.get("PATH", "")}
        full.update(self.env())
        full.update(env or {})
        return RawPeer(self.command(), env=full, cwd=cwd)

    def http_server(
        self,
        *,
        env: Mapping[str, str] | None = None,
        startup_timeout: float = 10.0,
        **options: Any,
    ) -> HttpServerProcess:
        """Start this server over Streamable HTTP (``--http --port 0``) in a subprocess.

        Keyword ``options`` become command-line options (``http_response="sse"``,
        ``require_bearer="t0k"``, ``header_tools=True``, ``sse_retry_ms=10``; a list repeats
        one: ``require_oauth=auth.issuer, tool_scope=["add=write"]`` protects ``/mcp`` with
        an :class:`AuthServerProcess`). Returns once the server listens; use the handle as a
        context manager to kill it afterwards.
        """
        from .http.process import HttpServerProcess

        return HttpServerProcess(self, options, env=env, startup_timeout=startup_timeout)

    # ---- the log ----------------------------------------------------------------------------

    def log(self) -> list[dict[str, Any]]:
        """Every complete log line so far, parsed (a torn last line is left for later)."""
        try:
            with open(self.log_path, "rb") as f:
                size = os.fstat(f.fileno()).st_size
                if size < self._offset:  # the file was replaced or truncated
                    self._entries, self._offset = [], 0
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return list(self._entries)
        end = data.rfind(b"\n")
        if end >= 0:
            for line in data[:end].split(b"\n"):
                if line.strip():
                    try:
                        self._entries.append(orjson.loads(line))
                    except orjson.JSONDecodeError:
                        pass
            self._offset += end + 1
        return list(self._entries)

    def received(self, method: str) -> list[dict[str, Any]]:
        """Log entries of received messages with that method."""
        return [e for e in self.log() if e.get("dir") == "in" and e.get("method") == method]

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """Log entries of events (all, or those named ``name``)."""
        return [e for e in self.log() if "event" in e and (name is None or e["event"] == name)]

    def cancelled_ids(self) -> list[Any]:
        """Ids named by the ``cancelled`` events, in order."""
        return [e["id"] for e in self.events("cancelled")]

    def starts(self) -> int:
        """How many processes started (``started`` events in the log)."""
        return len(self.events("started"))

    def pids(self) -> list[int]:
        """Process ids of the starts, in order."""
        return [e["pid"] for e in self.events("started")]

    def find(self, match: Match) -> list[dict[str, Any]]:
        """Log entries matching ``match`` (see :meth:`wait_for`)."""
        pred = _predicate(match)
        return [e for e in self.log() if pred(e)]

    def wait_for(self, match: Match, timeout: float = 5.0, *, count: int = 1) -> dict[str, Any]:
        """Wait until ``count`` log entries match; return the ``count``-th.

        ``match`` is a method or event name (``"tools/call"``, ``"cancelled"``), a mapping
        (every key equal, e.g. ``{"event": "cancelled", "id": 3}``) or a predicate. Polls the
        log every 10 ms until the deadline, then raises ``TimeoutError``.
        """
        deadline = time.monotonic() + timeout
        while True:
            found = self.find(match)
            if len(found) >= count:
                return found[count - 1]
            if time.monotonic() >= deadline:
                raise TimeoutError(self._timeout_message(match, timeout, found))
            time.sleep(0.01)

    async def wait_for_async(
        self, match: Match, timeout: float = 5.0, *, count: int = 1
    ) -> dict[str, Any]:
        """:meth:`wait_for` without blocking the event loop."""
        deadline = time.monotonic() + timeout
        while True:
            found = self.find(match)
            if len(found) >= count:
                return found[count - 1]
            if time.monotonic() >= deadline:
                raise TimeoutError(self._timeout_message(match, timeout, found))
            await asyncio.sleep(0.01)

    def _timeout_message(self, match: Match, timeout: float, found: list[Any]) -> str:
        tail = self.log()[-5:]
        return f"{match!r}: {len(found)} match(es) within {timeout}s; last log entries: {tail!r}"


def _predicate(match: Match) -> Callable[[dict[str, Any]], bool]:
    if isinstance(match, str):
        return lambda e: (
            e.get("event") == match or (e.get("dir") == "in" and e.get("method") == match)
        )
    if isinstance(match, Mapping):
        items = list(match.items())
        return lambda e: all(k in e and e[k] == v for k, v in items)
    if callable(match):
        return match
    raise TypeError("match must be a str, a mapping or a callable")
