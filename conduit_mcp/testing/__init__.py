r"""A scriptable MCP server for tests: both protocol eras, over stdio, driven from Python.

Run it as ``python -m conduit_mcp.testing [options]``, or let :class:`ScriptedServer` build
the command, the script and the log for you. The server speaks newline-delimited JSON-RPC on
stdin/stdout (stdout carries nothing else; diagnostics go to stderr) and is cheap enough to
benchmark clients against: a ``tools/call add`` costs about 7 µs of protocol work, and
30-45 µs of server CPU per round trip with the event loop and pipe system calls.

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

With the conduit client, give it ``server.stdio()`` (a
:class:`~conduit_mcp.transports.stdio_spec.Stdio`) and assert on ``server.log()`` /
``server.wait_for(...)`` afterwards.

Command line
============

``--era {both,modern,legacy}`` (default ``both``)
    ``both``: a dual-era server. Like the official ``mcp`` SDK, the first request decides the
    connection's era: one without ``params._meta["io.modelcontextprotocol/protocolVersion"]``
    (or ``initialize``) makes it legacy; an enveloped one makes it modern once it passes the
    envelope checks (a request refused with ``-32022``/``-32602``/``-32601``, or intercepted by
    a rule, decides nothing, so a client may still ``initialize``). Afterwards ``initialize``
    on a modern connection is answered ``-32022`` (``data: {supported, requested}``) and an
    enveloped request on a legacy connection ``-32600``.

    ``modern``: ``server/discover`` only; ``initialize`` and ``ping`` are ``-32601``.

    ``legacy``: ``initialize`` only; ``server/discover`` is ``-32601 Method not found``, like
    real legacy servers, and ``_meta`` is ignored.
``--versions V,...``
    The versions supported. Dates from ``2026-07-28`` on (and non-dates such as ``draft``) are
    modern, earlier ones legacy. Defaults: modern ``2026-07-28``; legacy ``2025-11-25,
    2025-06-18,2025-03-26,2024-11-05``.
``--advertise-legacy``
    Also list the legacy versions in ``supportedVersions`` and in ``-32022``'s
    ``data.supported`` (by default both list the modern versions only, as the official SDK does).
``--name NAME`` / ``--server-version V`` / ``--instructions TEXT``
    ``serverInfo`` and instructions (defaults ``scripted``, ``1.0.0``).
``--page-size N``
    Paginate every ``*/list`` (``nextCursor`` is opaque; a bad cursor is ``-32602``).
``--ttl-ms N`` / ``--cache-scope {public,private}``
    The caching hints of cacheable modern results (defaults ``0``, ``public``).
``--extra-tools N``
    Add tools ``extra_0`` .. ``extra_{N-1}`` (each answers its name), e.g. for pagination.
``--log FILE``
    Append one JSON line per received message, ``{"t": monotonic, "pid", "dir": "in", "id",
    "method", "params"}`` (plus ``result``/``error`` for responses to the server's own
    requests), and one per event, ``{"t", "pid", "event": name, ...}``. Every line is one
    unbuffered ``write``, so it is on disk before the server answers. Events: ``started``
    (``start``: this process's start number, ``era``, ``modern_versions``,
    ``legacy_versions``, ``argv``, ``cwd``), ``era`` (``both`` decided), ``initialize``
    (``requested``, ``version``), ``initialized``, ``cancelled`` (``id``, ``found``: whether
    work or a listen was still running, ``reason``), ``rule`` (``rule`` index, ``id``,
    ``method``, ``action``), ``listen``, ``stdout_closed``, ``stdout_broken``, ``parse_error``,
    ``unexpected_response``, ``handler_crashed``, ``sigterm`` (``ignored``), ``eof``, ``exit``
    (``code``, ``reason``).
``--log-out``
    Also log every message sent (``"dir": "out"``, the message's fields inline).
``--script FILE``
    JSON rules (below). A counter file ``FILE.starts`` counts process starts.
``--stderr-noise N``
    Write N lines to stderr at start.
``--startup-delay S``
    Wait S seconds before reading stdin.
``--ignore-eof``
    Keep running after stdin closes (to test a client's SIGTERM/SIGKILL escalation); by
    default the server exits 0 at EOF.
``--ignore-sigterm``
    Survive SIGTERM (logged as ``sigterm``); by default SIGTERM is logged, then kills the process.

Protocol
========

Modern (2026-07-28): every request needs ``params._meta`` with
``io.modelcontextprotocol/protocolVersion`` and ``io.modelcontextprotocol/clientCapabilities``
(missing or mistyped: ``-32602``); a version the server does not support: ``-32022`` with
``data: {"supported": [...], "requested": v}``; an invalid ``io.modelcontextprotocol/logLevel``:
``-32602``. Results carry ``"resultType": "complete"`` and
``_meta["io.modelcontextprotocol/serverInfo"]``; cacheable ones (discover, the four lists,
``resources/read``) carry ``ttlMs`` and ``cacheScope``. ``server/discover`` answers
``supportedVersions``, ``capabilities`` (tools and prompts ``listChanged``, resources
``subscribe``+``listChanged``, ``completions``) and ``instructions``. No ``ping``.
``subscriptions/listen`` sends ``notifications/subscriptions/acknowledged`` (the honoured
subset of the filter), then stays open until the client cancels it or ``end_listens`` ends it.

Legacy (2024-11-05 .. 2025-11-25): ``initialize`` answers the requested version if supported,
else the newest legacy one (no legacy version at all: ``-32602`` with ``data.supported``).
``ping`` → ``{}`` (also before ``initialize``). Any other known method before ``initialize``
→ ``-32602 Invalid request parameters``: the spec defines no code for this, and ``-32602`` is
what the official ``mcp`` SDK answers. ``resources/subscribe``/``unsubscribe``,
``logging/setLevel``. Unknown resources are ``-32002``.

Both eras: ``tools/list``, ``tools/call``, ``prompts/list``, ``prompts/get``,
``resources/list``, ``resources/templates/list``, ``resources/read``,
``completion/complete``. Unknown method: ``-32601``; unknown tool or prompt: ``-32602``;
bad tool arguments: a result with ``isError: true``. ``notifications/cancelled {requestId}``
cancels that request's work (its asyncio task) or listen, logs a ``cancelled`` event, and the
request is never answered. Malformed JSON: ``-32700`` with ``id: null``.

Tools (each with an ``inputSchema``; bad arguments give a result with ``isError: true``):

* ``add(a, b)``: text ``str(a+b)`` and ``structuredContent {"sum": a+b}``.
* ``echo(text)``: the text.
* ``progress(steps=3, delay=0.01)``: one ``notifications/progress {progressToken, progress:
  i, total: steps, message: "step i"}`` per step (sleeping ``delay`` before each) when the
  request has ``_meta.progressToken``, then the result ``done N steps``.
* ``slow(seconds)``: answers after that delay. ``never()``: never answers (until cancelled).
* ``crash(code=1)``: exits the process at once with that code, without answering.
* ``garbage(text?)``: writes a non-JSON line to stdout, then answers normally.
* ``big(size)``: a text content of exactly ``size`` bytes.
* ``stderr(text)``: writes the text (plus a newline) to stderr, then answers.
* ``fail(message?)``: a result with ``isError: true``.
* ``error(code, message, data?)``: answers that JSON-RPC error.
* ``notify(method, count=1, params=None)``: sends ``count`` notifications, then answers.
* ``env(name)``: the variable's value as text, and ``structuredContent {"name", "value"}``
  (``value`` is null when unset), for testing the spawn environment.
* ``cwd()`` / ``pid()``: ``os.getcwd()`` / ``os.getpid()`` as text.
* ``cpu()``: the server's CPU time (``structuredContent {"cpu", "user", "system"}``).
* ``log(level="info", data="hello", logger="scripted")``: ``notifications/message`` when
  allowed: modern, by the request's ``_meta`` logLevel (absent: never); legacy, by
  ``logging/setLevel`` (default ``debug``).
* ``changed(kind, uri?)``: kind ``tools|prompts|resources`` sends
  ``notifications/<kind>/list_changed``, kind ``resource`` sends
  ``notifications/resources/updated {uri}``. Modern: on each listen that asked for it (with
  ``_meta.subscriptionId``); legacy: directly (``updated`` only for subscribed URIs).
  ``structuredContent.sent`` counts them.
* ``add_tool(name)`` / ``remove_tool(name)``: add or remove a dynamic tool (it answers
  ``"<name> called"``), then announce the change as ``changed(kind="tools")`` does.
* ``client_request(method, params={})``: modern: MRTR, an ``input_required`` result with
  ``inputRequests.request`` and a ``requestState``; the retry (with ``inputResponses.request``
  and the same ``requestState``, else ``-32602``) gets the response back as
  ``structuredContent.response``; ``-32021`` when the request's clientCapabilities lack
  elicitation/sampling/roots. Legacy: a real server-to-client request (ids ``s-1``,
  ``s-2``, ...); the client's response comes back as above (an error: ``isError``), and
  cancelling the call sends ``notifications/cancelled`` for the server's request.
* ``end_listens(how="result")``: ends every listen with a ``SubscriptionsListenResult``
  (``how="cancelled"``: with a ``notifications/cancelled``).
* ``extra_0`` .. (``--extra-tools``): each answers ``"<name> called"``.

Prompts: ``greet(name)`` (one user message ``Hello, <name>!``) and ``plain``. Resources:
``test://static/hello`` (text ``Hello, world!``), ``test://static/blob`` (16 bytes, base64),
template ``test://item/{id}`` (text ``item <id>``). Completions: ``greet``'s ``name`` from
``alice, bob, carol`` and the template's ``id`` from ``1, 2, 3``, filtered by prefix.

Scripts
=======

``{"rules": [rule, ...]}`` (or a bare list). Each incoming message is checked against every
rule in order before the default behaviour; the first rule that fires decides. A rule::

    {"match": {"method": "tools/call", "tool": "add", "name": "...", "nth": 2},
     "action": ..., "times": 1, "first_process_only": true, "process": 1}

``match`` (every key optional): ``method``; ``tool`` (a ``tools/call`` of that tool);
``name`` (``params.name``, else ``params.uri``); ``nth``: fire only on the k-th (1-based)
message matching the other keys, counted within one process. Without ``method`` a rule
matches requests only; with one it also matches notifications of that method. ``times``:
fire at most n times per process (default unlimited). ``first_process_only: true`` (or
``process: k``): the rule only exists in the first (k-th) process started with this script;
starts are counted in ``<script>.starts``, so rules survive restarts.

``action``: a string (``"drop"``, ``"exit"``, ``"garbage"``, ``"respond_twice"``,
``"wrong_id"``, ``"close_stdout"``) or an object combining:

* ``{"delay": s}``: wait s seconds first (cancellable), then the rest (default: the normal answer);
* one of ``{"error": {"code", "message", "data"?}}`` (answer that error),
  ``{"result": {...}}`` (answer that result verbatim), ``{"drop": true}`` (never answer),
  ``{"exit": true | code}`` (exit at once, code 3 by default), ``{"garbage": true | "text"}``
  (write a non-JSON line instead of answering), ``{"close_stdout": true}`` (close stdout,
  keep running, never answer);
* modifiers of whatever answer is sent: ``{"respond_twice": true}`` (send it twice),
  ``{"wrong_id": true | id}`` (send it with an id nobody asked: ``-1000000000 - id`` for
  integer ids, ``"<id>-wrong"`` for strings, or the given id).

On a notification, ``error``/``result``/``drop`` swallow it (e.g. drop a
``notifications/cancelled``). Invalid scripts are refused at start (exit code 2, reason on
stderr) and by :class:`ScriptedServer` at construction (``ValueError``).
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

from .rules import ConfigError, parse_rules

if TYPE_CHECKING:
    from ..transports.stdio_spec import Stdio
    from .raw import RawPeer

__all__ = ["ConfigError", "ScriptedServer"]

_PACKAGE_ROOT = str(Path(__file__).resolve().parent.parent.parent)

Match = str | Mapping[str, Any] | Callable[[dict[str, Any]], bool]


class ScriptedServer:
    """Files and command line of one scripted server, plus readers for its log.

    ``workdir`` receives the script (``<name>.<token>.script.json``), its start counter
    (``….script.json.starts``) and the log (``<name>.<token>.log.jsonl``). Every process
    started from :meth:`command`/:meth:`stdio`/:meth:`spawn_raw` shares them, so the log
    covers restarts (each entry has the ``pid``).
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
        return args + self.extra_args

    def command(self) -> list[str]:
        """The full command line (``sys.executable`` first)."""
        return [sys.executable, *self.args()]

    def env(self) -> dict[str, str]:
        """Variables the child needs: ``PYTHONPATH`` so ``conduit_mcp`` imports from any cwd."""
        existing = os.environ.get("PYTHONPATH")
        path = _PACKAGE_ROOT if not existing else _PACKAGE_ROOT + os.pathsep + existing
        return {"PYTHONPATH": path}

    def stdio(self, **kw: Any) -> Stdio:
        """A :class:`~conduit_mcp.transports.stdio_spec.Stdio` spec for this server.

        Keyword arguments go to ``Stdio`` (``env`` is merged over :meth:`env`).
        """
        from ..transports.stdio_spec import Stdio

        env = {**self.env(), **dict(kw.pop("env", None) or {})}
        return Stdio(sys.executable, self.args(), env=env, **kw)

    def spawn_raw(
        self,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | os.PathLike[str] | None = None,
        inherit_env: bool = True,
    ) -> RawPeer:
        """Start a process driven by a :class:`~conduit_mcp.testing.raw.RawPeer`."""
        from .raw import RawPeer

        full = dict(os.environ) if inherit_env else {"PATH": os.environ.get("PATH", "")}
        full.update(self.env())
        full.update(env or {})
        return RawPeer(self.command(), env=full, cwd=cwd)

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
