r"""A scriptable MCP server for tests: both protocol eras, over stdio or Streamable HTTP.

Run it as ``python -m conduit_mcp.testing [options]``, or let :class:`ScriptedServer` build
the command, the script and the log for you. The server speaks newline-delimited JSON-RPC on
stdin/stdout (stdout carries nothing else; diagnostics go to stderr), or with ``--http``
Streamable HTTP on ``http://127.0.0.1:<port>/mcp`` (see "Streamable HTTP" below), and is cheap
enough to
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
``server.wait_for(...)`` afterwards. Over HTTP::

    with server.http_server(header_tools=True) as srv:   # an HttpServerProcess
        client_spec = srv.spec()                          # transports.http_spec.Http(srv.url)
        ...; srv.kill(); srv.restart()                    # same port; server.starts() == 2

Below the client, :class:`~conduit_mcp.testing.http_raw.RawHttpPeer` (aiohttp) sends raw
POST/GET/DELETE requests, as :class:`~conduit_mcp.testing.raw.RawPeer` does on stdio.

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
    ``legacy_versions``, ``argv``, ``cwd``; over HTTP also ``transport: "http"``), ``era``
    (``both`` decided), ``initialize``
    (``requested``, ``version``), ``initialized``, ``cancelled`` (``id``, ``found``: whether
    work or a listen was still running, ``reason``), ``rule`` (``rule`` index, ``id``,
    ``method``, ``action``), ``listen``, ``stdout_closed``, ``stdout_broken``, ``parse_error``,
    ``unexpected_response``, ``handler_crashed``, ``sigterm`` (``ignored``), ``eof``, ``exit``
    (``code``, ``reason``). Over HTTP, see "Streamable HTTP" for more.
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
``--header-tools``
    Add the tools ``weather`` and ``bad_header`` (below), whose parameters carry
    ``x-mcp-header`` annotations (not by default, so tool counts stay as they are).
``--http`` / ``--port N`` / ``--port-file F``
    Serve Streamable HTTP on ``127.0.0.1:N`` (``0``, the default: a free port) instead of
    stdio. Once listening, print ``listening <port>`` on stdout (one flushed line, nothing
    else follows) and write the port to ``F``. Every other option works as on stdio.
``--http-response {auto,json,sse}``
    How requests are answered: ``auto`` (default) uses SSE when the request has
    ``_meta.progressToken``, JSON otherwise; ``subscriptions/listen`` always uses SSE.
``--sse-retry-ms N``
    The ``retry:`` field that starts every legacy SSE stream (default 50).
``--require-bearer TOKEN``
    Every request to ``/mcp`` without ``Authorization: Bearer TOKEN`` gets 401 with
    ``WWW-Authenticate: Bearer resource_metadata="http://127.0.0.1:<port>/.well-known/
    oauth-protected-resource", scope="mcp"`` (that document is served, unauthenticated).

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
* ``weather(region: string, days?: integer, metric?: boolean)`` (``--header-tools``): text
  ``"<region> <days> <metric>"`` with days and metric as JSON (``"Oslo 3 true"``,
  ``"Oslo null null"``); annotated ``x-mcp-header`` ``Region``, ``Days``, ``Metric``.
* ``bad_header(v: number)`` (``--header-tools``): answers ``repr(v)``; its ``x-mcp-header``
  ``V`` sits on a ``number``, which is invalid: a conforming client hides the tool.

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
* HTTP faults (over stdio the message gets the default answer instead):
  ``{"http": {"status": 429, "headers": {"Retry-After": "2"}, "body": ...}}`` answers the
  POST with exactly that status, headers and body (a string as ``text/plain``, a JSON value
  as ``application/json``, absent: empty) instead of processing it (one of the terminal
  actions; combines with ``delay``); ``{"expire_session": true}`` forgets the legacy session
  (event ``session_expired``), then answers 404 with the ``Session not found`` body (with
  ``delay``, several requests in flight each get their 404; modern: just the 404);
  ``{"drop_stream": N}`` (a modifier, not with ``http``/``expire_session``) answers with SSE,
  sends the first N events, then aborts the TCP connection. The work goes on; in a legacy
  session the later events stay in the stream's history, so ``GET`` with ``Last-Event-ID``
  resumes it; modern has no resumption.

On a notification, ``error``/``result``/``drop`` swallow it (e.g. drop a
``notifications/cancelled``). Invalid scripts are refused at start (exit code 2, reason on
stderr) and by :class:`ScriptedServer` at construction (``ValueError``). Rule counters
(``nth``, ``times``) count within one process: over HTTP, across all sessions.

Streamable HTTP
===============

One endpoint, ``/mcp`` on 127.0.0.1 (aiohttp). Checks before anything else, on every verb: an
``Origin`` other than 127.0.0.1/localhost is 403; ``--require-bearer`` as above (401). A POST
must ``Accept`` both ``application/json`` and ``text/event-stream`` (wildcards count; else
406) and be ``Content-Type: application/json`` (else 415); its body is one JSON-RPC message
(not JSON: 400 ``-32700``; not an object: 400 ``-32600``). Error bodies of the HTTP layer are
JSON-RPC errors; ``"server-error"`` is their id where the official ``mcp`` 1.x SDK puts it.

Modern (2026-07-28), no session, one shared core. A request must carry
``MCP-Protocol-Version`` (equal to ``_meta["io.modelcontextprotocol/protocolVersion"]`` when
that is present), ``Mcp-Method`` (the method) and, for ``tools/call``/``prompts/get``/
``resources/read``, ``Mcp-Name`` (``params.name``/``params.uri``); for ``tools/call``, one
``Mcp-Param-{Name}`` per valid ``x-mcp-header`` of the tool's ``inputSchema`` whose argument
is present (strings as is, integers in decimal, booleans ``true``/``false``; absent or null:
no header), and none for absent arguments. Values may use ``=?base64?{base64(utf8)}?=``, and
must when not safe ASCII. Any mismatch: 400 ``{"jsonrpc": "2.0", "id": <request id>, "error":
{"code": -32020, "message": ...}}`` (event ``header_mismatch``, ``reason``). Answers: JSON-RPC
errors ``-32700 -32600 -32602 -32020 -32021 -32022`` are HTTP 400, ``-32601`` is 404 (e.g.
``initialize``), everything else 200. A request refused synchronously with an error is always
answered as JSON (so the status tells), whatever ``--http-response`` says, unless
``drop_stream`` applies. SSE answers (``text/event-stream``): request-related notifications
(progress, ``log``'s messages, ``notify``'s), then the response, then the stream ends; events
are ``data:`` lines only (no ``id``, no ``retry``). ``subscriptions/listen``: SSE, the
acknowledgement first, then the notifications carrying its subscriptionId, until
``end_listens`` (a result, or a ``notifications/cancelled`` for it) ends the stream. A POSTed
notification: 202, no body; a POSTed response: 400. GET and DELETE (``--era modern``): 405.
Closing an answer (client disconnect, JSON or SSE) cancels the request: the core receives a
``notifications/cancelled`` (logged as received, ``reason: "client closed the response
stream"``), so its work stops and ``cancelled`` is logged.

Legacy (2025-11-25 and older). A POST of ``initialize`` without ``Mcp-Session-Id`` creates a
session (event ``session_created``): its own core, and an ``Mcp-Session-Id`` header (32 hex
digits) on the answer and on every later answer of the session. Later requests must carry it:
missing, 400 ``{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Bad
Request: Missing session ID"}}`` (as ``mcp`` 1.30.0 answers); unknown, deleted or expired, 404
``{"jsonrpc":"2.0","id":"server-error","error":{"code":-32600,"message":"Session not
found"}}``. ``MCP-Protocol-Version`` must be the negotiated version or absent (else 400).
Notifications and the client's responses to server requests: 202. JSON-RPC errors are 200.
GET (``Accept: text/event-stream``, else 406) opens the session's server-to-client stream:
what the session sends outside a request's SSE answer (list_changed from ``changed``/
``add_tool``, server requests of ``client_request`` when the call is answered as JSON), and
what was buffered (event ``buffered``) while no GET stream was open; a second GET while one
is open: 409. Every legacy SSE stream starts with ``retry: <--sse-retry-ms>`` and every event
has an ``id`` ``"<stream>-<n>"`` unique in the session; GET with ``Last-Event-ID`` replays
that stream after that event (from a bounded history), then follows it live (a POST's stream
until its response, the GET stream until the session ends); an unknown id: 400. A legacy
disconnection is not a cancellation: the work goes on, its events stay resumable. DELETE:
200, the session's work is cancelled, its streams end (``session_deleted``). In ``--era
both``, ``initialize`` POSTs make sessions, POSTs with a session go to it, and POSTs without
one go to the modern core when their ``MCP-Protocol-Version`` is a modern version, else get
the 400 above. ``--era legacy``: every POST without a session but ``initialize`` (e.g. a
``server/discover`` probe) gets that 400.

Routing what a core sends: a response goes to the open POST with its id (gone: dropped, event
``response_dropped``); a notification with ``_meta.subscriptionId`` to that listen; progress to
the POST with that progressToken; anything else to the SSE answer of the request being
handled, else (legacy) the GET stream; a notification meant for a JSON answer is dropped
(``notification_dropped``, ``reason``). ``garbage`` writes its line as a JSON body or an SSE
``data:`` line; ``close_stdout`` aborts the POST's connection.

Events (``--log``): ``http`` once per request when its answer starts (``verb``, ``path``,
``status``, ``status: null`` when the connection closed before any answer, ``headers``: the
request's, names lower-cased, ``session``), ``listening`` (``port``), ``session_created``,
``session_deleted``, ``session_expired`` (``session``), ``header_mismatch``,
``stream_dropped`` (``id``), ``stream_resumed`` (``last_event_id``, ``stream``),
``stream_closed_by_client`` (``id``; ``stream`` for a GET), ``response_dropped``,
``notification_dropped``, ``buffered``, ``raw_dropped``, ``parse_error``.
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
    from .http_process import HttpServerProcess
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

    def http_server(
        self,
        *,
        env: Mapping[str, str] | None = None,
        startup_timeout: float = 10.0,
        **options: Any,
    ) -> HttpServerProcess:
        """Start this server over Streamable HTTP (``--http --port 0``) in a subprocess.

        Keyword ``options`` become command-line options (``http_response="sse"``,
        ``require_bearer="t0k"``, ``header_tools=True``, ``sse_retry_ms=10``). Returns once
        the server listens; use the handle as a context manager to kill it afterwards.
        """
        from .http_process import HttpServerProcess

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
