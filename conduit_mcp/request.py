"""The caller side of a request, under the three front ends (``Client``, ``client.aio``,
``client.futures``).

It holds what the front ends share:

* argument checks and request builders: a bad argument raises ``Error("argument")`` in the
  caller's thread, where the mistake is, never inside the connection;
* :class:`Request` ``[R]``: a method, its params and the parser that turns the raw result into
  the ``R`` the caller gets (the parser runs in the caller, never in the connection);
* :class:`PageWalk` and the cache hand-off of ``list_all_*`` (:func:`begin_listing`,
  :func:`store_walk`);
* :data:`GRACE`, :func:`copy_error` and :func:`abandon`, used when a caller stops waiting,
  and :func:`wait_blocking` / :func:`await_ready_blocking`, the blocked thread's wait (also
  run by ``client.futures``'s worker threads);
* :class:`Handle`: the client's name and, for a client this process started, its pinned tree;
  it finds the connection and tells it a message, waiting through the windows in which a
  supervised client is starting or restarting (see docs/actor-tree.md).

Names here are public inside the package; the module is not part of the user's API (the user's
API is what ``conduit_mcp`` exports).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import queue
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Generic, Literal, TypeVar, cast

import pykka

from . import tree
from .actors.events import Abandon, AwaitReady, CacheStore, Call
from .config import DEFAULT_MAX_LIST_BYTES
from .errors import Error
from .otp.pooled import tell_here
from .protocol.clock import total_bound
from .protocol.results import (
    json_size,
    parse_call_tool,
    parse_complete,
    parse_get_prompt,
    parse_page,
    parse_progress,
    parse_read_resource,
)
from .protocol.server_logs import check_level
from .protocol.server_requests import ROUND_METHODS
from .protocol.skills import LoadedSkill, Skill, SkillLoad
from .replies import FAIL, OK, Reply, SyncReply
from .status import Status
from .telemetry import Operation
from .tree import ClientTree
from .types import (
    CallToolResult,
    CompleteResult,
    GetPromptResult,
    Page,
    Progress,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    Tool,
)

R = TypeVar("R")

ListKind = Literal["tools", "prompts", "resources", "resource_templates", "skills"]

#: How long a blocked caller waits past its deadline for the connection's own ``timeout``
#: answer (which comes after the server was told to cancel) before it gives up by itself.
GRACE = 1.0
#: A server whose cursors never end would make ``list_all_*`` loop forever.
MAX_PAGES = 1000
#: The ``max_list_bytes`` default: the most a whole ``list_all_*`` walk may fetch (its
#: pages' JSON size), so an endless cursor with large pages cannot grow the caller without
#: bound (``MAX_PAGES`` alone allows 1000 pages of ``max_frame`` each).
MAX_LIST_BYTES = DEFAULT_MAX_LIST_BYTES
#: The longest a ``list_all_*`` waits for its fetched list to be stored (never failing on it).
STORE_WAIT = 1.0
#: The deadline of a request made through a handle whose client is not running yet (the
#: ``request_timeout`` default; the client's own option applies once it runs).
DEFAULT_TIMEOUT = 30.0
#: The ``max_total_timeout`` of such a request (the option's default).
DEFAULT_MAX_TOTAL = 600.0

LIST_METHODS: Mapping[ListKind, str] = {
    "tools": "tools/list",
    "prompts": "prompts/list",
    "resources": "resources/list",
    "resource_templates": "resources/templates/list",
    "skills": "skills/list",
}


class Request(Generic[R]):
    """One request as a front end sends it: ``method``, ``params`` and ``parse``, which turns
    the raw result into the ``R`` the caller receives (run in the caller's thread or loop)."""

    __slots__ = ("method", "params", "parse", "total", "reset")

    def __init__(
        self, method: str, params: dict[str, Any] | None, parse: Callable[[Any], R]
    ) -> None:
        self.method = method
        self.params = params
        self.parse = parse
        # the call's own max_total_timeout (seconds), None: the client's option
        self.total: float | None = None
        # the call's own reset_timeout_on_progress, None: the client's option (set so by
        # with_total: only the calls with the keyword follow the option; a list page, a ping
        # or a subscription never asks for progress)
        self.reset: bool | None = False


def with_total(
    req: Request[R],
    max_total_timeout: float | None,
    reset_timeout_on_progress: bool | None = None,
) -> Request[R]:
    """``req`` with the call's ``max_total_timeout`` and ``reset_timeout_on_progress``
    keywords, checked here in the caller."""
    if reset_timeout_on_progress is not None and not isinstance(reset_timeout_on_progress, bool):
        raise Error(
            "argument",
            "reset_timeout_on_progress",
            "reset_timeout_on_progress must be True, False or None (the client's option)",
        )
    req.reset = reset_timeout_on_progress
    if max_total_timeout is not None:
        if (
            not isinstance(max_total_timeout, (int, float))
            or isinstance(max_total_timeout, bool)
            or not math.isfinite(max_total_timeout)
            or max_total_timeout <= 0
        ):
            raise Error(
                "argument",
                "max_total_timeout",
                "max_total_timeout must be a positive number of seconds",
            )
        req.total = float(max_total_timeout)
    return req


# -- errors and argument checks ------------------------------------------------------------------


def copy_error(error: Error) -> Error:
    """A copy of ``error`` for one caller to raise.

    One Error instance may be shared by every request a broken connection failed; each caller
    raises its own copy, so tracebacks of different threads never mix.
    """
    return Error(error.kind, error.reason, error.message, code=error.code, data=error.data)


def check_timeout(value: float | None, default: float) -> float:
    """``value`` seconds (``default`` when None); ``Error("argument", "timeout")`` unless it
    is a finite positive number."""
    if value is None:
        return default
    if (
        not isinstance(value, (int, float))
        or isinstance(value, bool)
        or not math.isfinite(value)
        or value <= 0
    ):
        raise Error("argument", "timeout", "timeout must be a positive number of seconds")
    return float(value)


def check_name(value: Any, what: str) -> str:
    """``value`` if it is a non-empty string, else ``Error("argument", what)``."""
    if not isinstance(value, str) or not value:
        raise Error("argument", what, f"{what} must be a non-empty string")
    return value


#: :func:`check_mapping`'s key types when they are all plain strings (or there are none).
_STR: Final = frozenset({str})


def check_mapping(value: Any, what: str) -> dict[str, Any] | None:
    """A dict copy of a mapping with string keys (None stays None), else
    ``Error("argument", what)``."""
    if value is None:
        return None
    if type(value) is dict and set(map(type, value)) <= _STR:  # no Python loop over the keys
        return value.copy()
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
        raise Error("argument", what, f"{what} must be a mapping with string keys")
    return dict(value)


def progress_value(params: dict[str, Any]) -> Progress:
    """The :class:`Progress` of a ``notifications/progress`` params object."""
    parsed = parse_progress(params)
    if parsed is None:
        return Progress(0.0, None, None)
    return parsed[1]


# -- request builders -----------------------------------------------------------------------------


def _identity(result: Any) -> dict[str, Any]:
    return cast("dict[str, Any]", result)


def _none(result: Any) -> None:
    return None


def call_tool(name: str, arguments: Any, meta: Any) -> Request[CallToolResult]:
    params: dict[str, Any] = {"name": check_name(name, "name")}
    args = check_mapping(arguments, "arguments")
    if args is not None:
        params["arguments"] = args
    extra = check_mapping(meta, "meta")
    if extra:
        params["_meta"] = extra
    return Request("tools/call", params, parse_call_tool)


def _cursor(cursor: Any) -> dict[str, Any] | None:
    if cursor is not None and not isinstance(cursor, str):
        raise Error("argument", "cursor", "cursor must be a string or None")
    return None if cursor is None else {"cursor": cursor}


def list_page(kind: ListKind, cursor: str | None) -> Request[Page[Any]]:
    """One page of ``kind``; the typed builders below name the item type."""

    def parse(result: Any) -> Page[Any]:
        return parse_page(kind, result)

    return Request(LIST_METHODS[kind], _cursor(cursor), parse)


def list_tools(cursor: str | None) -> Request[Page[Tool]]:
    return list_page("tools", cursor)


def list_prompts(cursor: str | None) -> Request[Page[Prompt]]:
    return list_page("prompts", cursor)


def list_resources(cursor: str | None) -> Request[Page[Resource]]:
    return list_page("resources", cursor)


def list_resource_templates(cursor: str | None) -> Request[Page[ResourceTemplate]]:
    return list_page("resource_templates", cursor)


def read_resource(uri: str) -> Request[ReadResourceResult]:
    return Request("resources/read", {"uri": check_name(uri, "uri")}, parse_read_resource)


def get_skill(uri: str) -> Request[Skill]:
    """``skills/get``: one skill's entry by the URI of its ``SKILL.md`` (the skills
    extension); the connection refuses it for a server that does not declare it."""
    from .protocol.skills import parse_get

    return Request("skills/get", {"uri": check_name(uri, "uri")}, parse_get)


class SkillWalk:
    """``load_skill``'s reads, one ``resources/read`` after another under one deadline: the
    front ends run it the same way (as they run a :class:`PageWalk`); what is read and how
    each file is verified is :class:`~conduit_mcp.protocol.skills.SkillLoad`'s."""

    __slots__ = ("deadline", "load")

    def __init__(self, load: SkillLoad, seconds: float) -> None:
        self.load = load
        self.deadline = time.monotonic() + seconds

    @property
    def done(self) -> bool:
        return self.load.done

    def next(self) -> tuple[Request[ReadResourceResult], float]:
        """The next file's read and the time left for it."""
        uri = self.load.next_uri()
        remaining = self.deadline - time.monotonic()
        if uri is None or remaining <= 0:
            raise Error(
                "timeout", "deadline", f"loading {self.load.skill.uri} took past its deadline"
            )
        return read_resource(uri), remaining

    def add(self, result: ReadResourceResult) -> None:
        self.load.add(result)

    def loaded(self) -> LoadedSkill:
        return self.load.loaded()


def begin_skill_load(
    handle: Handle, skill: Any, timeout: float | None, max_bytes: Any
) -> SkillWalk:
    """``load_skill``'s first step, in the caller: the argument checks and the extension's
    limits, from the entry alone, before any file is read."""
    load = SkillLoad(skill, max_bytes)
    runtime = handle.find()
    default = DEFAULT_TIMEOUT if runtime is None else runtime.config.request_timeout
    return SkillWalk(load, check_timeout(timeout, default))


def get_prompt(name: str, arguments: Any) -> Request[GetPromptResult]:
    params: dict[str, Any] = {"name": check_name(name, "name")}
    args = check_mapping(arguments, "arguments")
    if args is not None:
        if not all(isinstance(v, str) for v in args.values()):
            raise Error("argument", "arguments", "prompt arguments must be strings")
        params["arguments"] = args
    return Request("prompts/get", params, parse_get_prompt)


def complete(ref: Any, argument: Any, context: Any) -> Request[CompleteResult]:
    ref_ = check_mapping(ref, "ref")
    arg = check_mapping(argument, "argument")
    if not ref_ or ref_.get("type") not in ("ref/prompt", "ref/resource"):
        raise Error("argument", "ref", "ref must be {'type': 'ref/prompt'|'ref/resource', ...}")
    if not arg or not isinstance(arg.get("name"), str) or not isinstance(arg.get("value"), str):
        raise Error("argument", "argument", "argument must be {'name': str, 'value': str}")
    params: dict[str, Any] = {"ref": ref_, "argument": arg}
    ctx = check_mapping(context, "context")
    if ctx is not None:
        params["context"] = ctx
    return Request("completion/complete", params, parse_complete)


def raw(method: str, params: Any) -> Request[dict[str, Any]]:
    """Any request by method name; the result is the raw JSON object."""
    return Request(check_name(method, "method"), check_mapping(params, "params"), _identity)


def ping(era: str | None) -> Request[None]:
    """A liveness round trip: ``ping`` in the legacy era, ``server/discover`` in the modern
    one, which has no ping (MCP spec 2026-07-28, "Discovery")."""
    return Request("server/discover" if era == "modern" else "ping", None, _none)


def resource_subscription(uri: Any, subscribe: bool) -> Request[None]:
    """``resources/subscribe`` or ``resources/unsubscribe`` for ``uri``."""
    if not isinstance(uri, str) or not uri:
        raise Error("argument", "uri", "uri must be a non-empty string")
    method = "resources/subscribe" if subscribe else "resources/unsubscribe"
    return Request(method, {"uri": uri}, _none)


def set_logging_level(level: Any) -> Request[None]:
    """``logging/setLevel``: the least severe server log level to receive, checked here (the
    connection keeps it, and answers it itself in the modern era)."""
    return Request("logging/setLevel", {"level": check_level(level)}, _none)


def begin(
    handle: Handle, req: Request[Any], timeout: float | None
) -> tuple[float, Operation | None]:
    """A request's first step on every front end: its timeout in seconds (``timeout``, else
    the client's ``request_timeout``) and its telemetry operation (None when there is nothing
    to record or propagate: no OpenTelemetry SDK), started in the caller."""
    runtime = handle.find()
    if runtime is None:  # a supervised client not started yet: its calls wait for it
        return check_timeout(timeout, DEFAULT_TIMEOUT), None
    seconds = check_timeout(timeout, runtime.config.request_timeout)
    return seconds, runtime.telemetry.start(req.method, req.params)


def resets(handle: Handle, req: Request[Any]) -> bool:
    """Whether each progress report restarts the call's timeout: its
    ``reset_timeout_on_progress`` keyword, else the client's option (off for a supervised
    client not started yet: its options are not known). Only the calls with the keyword
    (``call_tool``, ``get_prompt``, ``read_resource``, ``request``) follow the option."""
    if req.reset is not None:
        return req.reset
    runtime = handle.find()
    return runtime is not None and runtime.config.reset_timeout_on_progress


def total_deadline(
    handle: Handle, req: Request[Any], seconds: float, now: float, reset: bool = False
) -> float | None:
    """The absolute bound on a call whose deadline the connection may move: paused while the
    client's handler works for it (a ``tools/call``, ``prompts/get`` or ``resources/read``
    of a client with a handler) or restarted by progress (``reset``):
    ``max_total_timeout`` from now (the call's keyword, else the client's option), never less
    than its timeout (the rule is protocol/clock.py's, the one the connection's clock of the
    call keeps). None for every other call: its deadline never moves. The caller waits until
    this bound, not the deadline, so that it never stops waiting before the connection's
    clock says the call has run out (docs/connection.md, "Server-to-client requests";
    docs/connecting.md, "Progress that keeps a call alive")."""
    if not reset and req.method not in ROUND_METHODS:
        return None
    runtime = handle.find()
    if not reset and (runtime is None or runtime.config.handler is None):
        return None
    if req.total is not None:
        total = req.total
    elif runtime is not None:
        total = runtime.config.max_total_timeout
    else:  # a supervised client not started yet: the option's default
        total = DEFAULT_MAX_TOTAL
    return total_bound(now + seconds, now, total)


# -- giving up ------------------------------------------------------------------------------------


def abandon(conn: pykka.ActorRef[Any], reply: Reply, reason: str = "caller_down") -> None:
    """Tell the connection the caller gave up, so the server is asked to cancel; a connection
    already gone has nothing to cancel."""
    try:
        conn.tell(Abandon(reply, reason))
    except pykka.ActorDeadError:
        pass


def call_blocking(
    handle: Handle,
    call: Call,
    until: float,
    on_progress: Callable[[Progress], object] | None,
    what: str,
) -> Any:
    """Tell the connection ``call`` and wait in this thread for its answer
    (:func:`wait_blocking`). Over stdio, the pipe may be taken for this thread before the
    call is written (``StdioTransport.send_call``); it is given back here whatever happens."""
    reply = cast(SyncReply, call.reply)
    pipe = handle.pipe()
    if pipe is None:
        return wait_blocking(reply, until, on_progress, handle.tell(call, call.deadline), what)
    try:
        pipe.here_for = (reply, threading.get_ident())
        try:
            conn = handle.tell(call, call.deadline)
        finally:
            pipe.here_for = None
        return wait_blocking(reply, until, on_progress, conn, what)
    finally:
        pipe.release(reply)


def wait_blocking(
    reply: SyncReply,
    deadline: float,
    on_progress: Callable[[Progress], object] | None,
    conn: pykka.ActorRef[Any],
    what: str,
) -> Any:
    """Wait in this thread for ``reply``'s answer (running ``on_progress`` here for each
    progress notification); give up :data:`GRACE` seconds past ``deadline``."""
    get = reply.queue.get
    try:
        pipe = reply.pipe
        if pipe is not None:
            # The stdio transport's pipe: this thread may read its answer itself
            pipe.wait_here(reply, deadline)
        while True:
            remaining = deadline + GRACE - time.monotonic()
            try:
                tag, value = get(timeout=remaining) if remaining > 0 else get(block=False)
            except queue.Empty:
                raise Error("timeout", "deadline", f"{what} got no answer in time") from None
            if tag == OK:
                return value
            if tag == FAIL:
                raise copy_error(value)
            # PROGRESS: run what is kept (at most PROGRESS_KEPT, replies.py), but none once
            # the deadline has passed: the answer or the timeout is due now.
            for params in reply.take_progress():
                if on_progress is None or time.monotonic() >= deadline:
                    break
                on_progress(progress_value(params))
    except BaseException:
        # Our own wait ran out, a progress callback raised, or Ctrl-C: tell the connection
        # so the server is asked to cancel (no-op if already answered).
        if not reply.done:
            reply.done = True
            abandon(conn, reply)
        raise


def await_ready_blocking(handle: Handle, seconds: float) -> Status:
    """``await_ready`` for a blocked thread. A handle that follows a name (``whereis``) also
    waits past an incarnation that closed while an application supervisor may replace it."""
    deadline = time.monotonic() + seconds
    while True:
        runtime = handle.find()
        if runtime is not None and runtime.shared.status.state == "ready" and runtime.alive():
            return runtime.shared.status
        reply = SyncReply()
        conn = handle.tell(AwaitReady(reply, deadline, seconds), deadline)
        try:
            return cast(Status, wait_blocking(reply, deadline, None, conn, "await_ready"))
        except Error as exc:
            if exc.kind != "closed" or not handle.follows_restarts(deadline):
                raise


# -- list_all_*: page walks and the cache hand-off ------------------------------------------------


class PageWalk:
    """Following cursors to the last page, for every front end's ``list_all_*`` (they differ
    only in how they wait for a page). One deadline bounds the whole walk; a server whose
    cursors never end is cut at :data:`MAX_PAGES`, and a walk whose pages add up to more
    than ``max_bytes`` (the client's ``max_list_bytes``) at the page that goes over it.
    """

    __slots__ = (
        "kind",
        "deadline",
        "items",
        "cursor",
        "pages",
        "done",
        "raws",
        "started",
        "credential",
        "size",
        "max_bytes",
    )

    def __init__(
        self,
        kind: ListKind,
        seconds: float,
        credential: str | None = None,
        max_bytes: int = MAX_LIST_BYTES,
    ) -> None:
        self.kind: ListKind = kind
        self.started = time.monotonic()
        self.deadline = self.started + seconds
        self.items: list[Any] = []
        self.cursor: str | None = None
        self.pages = 0
        self.done = False
        # For the cache: each page's raw result (its ttlMs and cacheScope) and the identity
        # of the credentials the walk started under (docs/cache.md, "Private results").
        self.raws: list[Any] = []
        self.credential = credential
        self.size = 0  # the JSON size of the pages so far
        self.max_bytes = max_bytes

    def next(self) -> tuple[Request[Page[Any]], float]:
        """The next page's request and the time left for it."""
        if self.pages >= MAX_PAGES:
            raise Error(
                "protocol", "too_many_pages", f"{self.kind} list has more than {MAX_PAGES} pages"
            )
        remaining = self.deadline - time.monotonic()
        if remaining <= 0:
            raise Error("timeout", "deadline", f"listing {self.kind} took past its deadline")
        return list_page(self.kind, self.cursor), remaining

    def add(self, page: Page[Any]) -> None:
        """Keep a page; ``protocol``/``list_too_large`` once the pages are over
        ``max_bytes`` (nothing of the walk is kept: the caller drops it)."""
        self.size += json_size(page.raw)
        if self.size > self.max_bytes:
            raise Error(
                "protocol",
                "list_too_large",
                f"the {self.kind} list is over max_list_bytes ({self.max_bytes} bytes) after "
                f"{self.pages + 1} pages; raise the client's max_list_bytes option if a list "
                "this large is expected",
                data={"limit": self.max_bytes, "pages": self.pages + 1},
            )
        self.pages += 1
        self.items.extend(page.items)
        self.raws.append(page.raw)
        # An empty-string cursor is a real cursor; only a missing one ends the list (MCP spec,
        # Utilities, "Pagination").
        self.cursor = page.next_cursor
        self.done = page.next_cursor is None


def fresh_items(runtime: ClientTree, kind: ListKind) -> tuple[Any, ...] | None:
    """The cached list if it is fresh under the current credentials, else None. A cache gone
    with its connection is a miss: the fetch then fails or succeeds on its own."""
    cache = runtime.shared.cache
    if cache is None:
        return None
    try:
        entry = cache.fresh(kind, time.monotonic())
    except Error:
        return None
    return entry.items if entry is not None else None


def walk_credential(runtime: ClientTree) -> str | None:
    cache = runtime.shared.cache
    try:
        return cache.credential if cache is not None else None
    except Error:
        return None


def begin_listing(
    handle: Handle, kind: ListKind, timeout: float | None, refresh: bool
) -> tuple[Any, ...] | PageWalk:
    """``list_all_*``'s first step: the cached items when fresh (and not ``refresh``), else
    the :class:`PageWalk` to run."""
    runtime = handle.find()
    if runtime is None:
        return PageWalk(kind, check_timeout(timeout, DEFAULT_TIMEOUT))
    if not refresh:
        cached = fresh_items(runtime, kind)
        if cached is not None:
            return cached
    cfg = runtime.config
    seconds = check_timeout(timeout, cfg.request_timeout)
    return PageWalk(kind, seconds, walk_credential(runtime), cfg.max_list_bytes)


def store_walk(handle: Handle, walk: PageWalk, reply: Reply | None = None) -> bool:
    """Hand a whole fetched list to the connection, the cache's only writer. With ``reply``
    the caller can wait until it is stored: a miss already cost a whole fetch, and one more
    round trip makes ``list_all_tools()`` then ``tool(name)`` find it. False if there is no
    connection to store it in (gone or restarting)."""
    message = CacheStore(
        walk.kind, tuple(walk.items), walk.raws, walk.started, walk.credential, reply
    )
    try:
        handle.tell_now(message)
        return True
    except Error:
        return False


def store_walk_and_wait(handle: Handle, walk: PageWalk) -> None:
    """:func:`store_walk`, then wait (blocking, at most :data:`STORE_WAIT`) until stored."""
    reply = SyncReply()
    if store_walk(handle, walk, reply):
        with contextlib.suppress(queue.Empty):
            reply.queue.get(timeout=max(0.0, min(STORE_WAIT, walk.deadline - time.monotonic())))


# -- sending at the end of a loop's turn (Handle.tell_soon) ---------------------------------------

#: The requests coroutines made during one turn of their loop, not sent yet, in order:
#: loop -> [(handle, connection, call)]. Each loop's entry is touched only by its own thread.
_soon: dict[asyncio.AbstractEventLoop, list[tuple[Handle, pykka.ActorRef[Any], Call]]] = {}
#: The asyncio calls of each loop sent (or kept to send) and not answered yet (counted by the
#: asyncio front end): with none, a call is sent at once, as no other can join its batch.
waiting: dict[asyncio.AbstractEventLoop, int] = {}
#: At most this many requests of one batch are sent in the loop's thread (the connection's
#: own burst bound, CORK_FRAMES); the rest go through the connection's mailbox.
SOON_BATCH = 32


def _send_soon(loop: asyncio.AbstractEventLoop) -> None:
    """Send what :meth:`Handle.tell_soon` kept for ``loop``: each connection's requests in
    one :func:`tell_here` when it is idle (this thread writes them, in one syscall over
    stdio); else, or past :data:`SOON_BATCH`, told as usual, in order. A connection that
    died meanwhile: the request waits for the next one (:meth:`Handle.tell_async`)."""
    # Grouped by connection in one pass, in order of first appearance: a turn may hold one
    # request to each of thousands of clients (a gateway's fan-out), and a scan of the whole
    # batch per connection made that turn quadratic (10,000 clients: 5 s of one core).
    groups: dict[int, tuple[Handle, pykka.ActorRef[Any], list[Call]]] = {}
    for handle, conn, call in _soon.pop(loop, []):
        group = groups.get(id(conn))
        if group is None:
            groups[id(conn)] = (handle, conn, [call])
        else:
            group[2].append(call)
    pending = list(groups.values())
    for index, (handle, conn, calls) in enumerate(pending):

        def rest(
            calls: list[Call], handle: Handle = handle, conn: pykka.ActorRef[Any] = conn
        ) -> None:
            for call in calls:
                try:
                    conn.tell(call)
                except pykka.ActorDeadError:
                    if not call.reply.done:
                        loop.create_task(handle.tell_async(call, call.deadline))

        try:
            tell_here(conn, calls[:SOON_BATCH], rest)
        except BaseException:
            # A signal held while they were sent raised (Ctrl-C): the rest are sent still.
            rest(calls[SOON_BATCH:])
            for other, ref, others in pending[index + 1 :]:
                rest(others, other, ref)
            raise
        rest(calls[SOON_BATCH:])


# -- the handle -----------------------------------------------------------------------------------

#: How often a caller looks again for a client that is starting or restarting (first step,
#: doubling up to the cap). These windows last milliseconds: a supervisor starting threads.
_LOOK_FIRST = 0.002
_LOOK_CAP = 0.05


class Handle:
    """A client's name and, for a client this process started with ``Client.start``, its
    pinned tree.

    A handle from ``Client.whereis(name)`` has no pinned tree: it finds the current
    incarnation by name at every call, so it follows an application supervisor's restarts.
    The connection is found in the tree's registry at every call (a restarted connection is a
    new actor): refs are never kept across restarts.
    """

    __slots__ = ("name", "pinned")

    def __init__(self, name: str, pinned: ClientTree | None = None) -> None:
        self.name = name
        self.pinned = pinned

    def __repr__(self) -> str:
        return f"<Handle {self.name!r}>"

    def find(self) -> ClientTree | None:
        """The tree now, or None if none is registered under the name."""
        return self.pinned or tree.lookup(self.name)

    def tree(self) -> ClientTree:
        """The tree now; ``Error("closed", "not_started")`` if none is registered."""
        runtime = self.pinned or tree.lookup(self.name)
        if runtime is None:
            raise Error("closed", "not_started", f"no client named {self.name!r} is running")
        return runtime

    def status(self) -> Status:
        """The client's status now, read without messaging (see ``Client.status``)."""
        runtime = self.pinned or tree.lookup(self.name)
        if runtime is None or (runtime.stopped.is_set() and not runtime.alive()):
            return Status("closed", reason="stopped")
        status = runtime.shared.status
        if runtime.starting():
            return status  # an application supervisor is starting it: "connecting"
        if not runtime.alive() and status.state != "closed":
            return Status("closed", status.era, status.version, "stopped", status.origin)
        return status

    def runtime(self) -> ClientTree | None:
        """The tree this handle stops: the pinned one, or the one running under its name."""
        return self.pinned or tree.lookup(self.name)

    def stop(self, timeout: float) -> None:
        """Stop the client's tree and wait (bounded) for its server processes to be gone."""
        runtime = self.runtime()
        if runtime is None:
            return
        runtime.stop(timeout)
        tree.unregister(runtime)

    def try_tell(self, message: Any) -> pykka.ActorRef[Any] | None:
        """Tell the connection ``message`` if it is there now; None if it is not (then
        :meth:`tell` or :meth:`tell_async` waits, or raises why)."""
        runtime = self.pinned or tree.lookup(self.name)
        if runtime is None:
            return None
        registry = runtime.registry
        if type(message) is Call:
            # An idle ready connection: this thread sends it (no pool worker woken).
            conn = registry.get("connection")
            if conn is not None:
                told: list[pykka.ActorRef[Any] | None] = [conn]

                def rest(messages: list[Any]) -> None:
                    told[0] = registry.tell("connection", messages[0])

                try:
                    tell_here(conn, [message], rest)
                except BaseException:
                    # A signal held while it was sent (Ctrl-C): the call is out, and its
                    # caller gone, so the server is asked to cancel it.
                    reply = message.reply
                    if not reply.done:
                        reply.done = True
                        if told[0] is not None:
                            abandon(told[0], reply)
                    raise
                return told[0]
        return registry.tell("connection", message)

    def pipe(self) -> Any:
        """The connection's transport when its callers may read their answers from its pipe
        themselves (stdio's ``reads_here``), else None. A hint read without messaging: the
        connection may be changing transports, and the transport decides under its lock."""
        runtime = self.pinned or tree.lookup(self.name)
        if runtime is None:
            return None
        transport = runtime.shared.transport
        return transport if getattr(transport, "reads_here", False) else None

    def tell_now(self, message: Any) -> pykka.ActorRef[Any]:
        """Tell the connection ``message`` without waiting; ``Error("closed")`` if there is
        none now (stopped, or in a start or restart window)."""
        conn = self.try_tell(message)
        if conn is None:
            raise self._closed(self.find())
        return conn

    def tell(self, message: Any, deadline: float) -> pykka.ActorRef[Any]:
        """Tell the connection ``message``, waiting (in this thread, until ``deadline``)
        through a start or restart window; ``Error("closed")`` if the client is stopped for
        good, or still not there at the deadline."""
        step = _LOOK_FIRST
        while (conn := self.try_tell(message)) is None:
            time.sleep(min(step, self._window_left(deadline)))
            step = min(step * 2, _LOOK_CAP)
        return conn

    def tell_soon(
        self, message: Call, loop: asyncio.AbstractEventLoop
    ) -> pykka.ActorRef[Any] | None:
        """:meth:`try_tell` for a coroutine on ``loop``: the request is sent at the end of the
        loop's turn, with the others its tasks made in this turn, as one batch
        (:func:`_send_soon`): 32 tasks woken by one read send their next requests in one
        write, as a pool worker's burst would, with no worker woken. The connection it goes
        to, or None if there is none now (then :meth:`tell_async` waits)."""
        runtime = self.pinned or tree.lookup(self.name)
        if runtime is None:
            return None
        if not waiting.get(loop) and loop not in _soon:
            # A lone call (nothing of this loop's in flight): no batch to wait for.
            return self.try_tell(message)
        conn = runtime.registry.get("connection")
        if conn is None or not conn.is_alive():
            return None
        batch = _soon.get(loop)
        if batch is None:
            batch = _soon[loop] = []
            loop.call_soon(_send_soon, loop)
        batch.append((self, conn, message))
        return conn

    async def tell_async(self, message: Any, deadline: float) -> pykka.ActorRef[Any]:
        """:meth:`tell` for a coroutine: it waits with ``asyncio.sleep``, never blocking the
        loop."""
        step = _LOOK_FIRST
        while (conn := self.try_tell(message)) is None:
            await asyncio.sleep(min(step, self._window_left(deadline)))
            step = min(step * 2, _LOOK_CAP)
        return conn

    def follows_restarts(self, deadline: float) -> bool:
        """After an incarnation answered ``closed``: whether to wait for the next one (a
        name-following handle of a supervised client, with time left), briefly yielding
        so the old incarnation can finish stopping."""
        runtime = self.find()
        if self.pinned is not None or runtime is None or not runtime.supervised:
            return False
        if runtime.ended or time.monotonic() >= deadline:
            return False
        # A client that gives up by closing stays closed: nothing will replace it.
        if runtime.config.on_give_up != "stop" and runtime.alive():
            return False
        time.sleep(_LOOK_CAP / 5)
        return True

    def in_window(self) -> bool:
        """Whether the connection is missing only for a while (a start or restart window):
        False when it is there, or when the client is stopped for good."""
        runtime = self.find()
        if runtime is not None and runtime.registry.get("connection") is not None:
            return False
        try:
            self._window_left(math.inf)
        except Error:
            return False
        return True

    def _window_left(self, deadline: float) -> float:
        """Seconds left to wait for the connection to appear; raises the ``closed`` error if
        the client will not come back, or the deadline passed."""
        runtime = self.find()
        if runtime is not None and not runtime.may_come_back():
            raise self._closed(runtime)
        if runtime is None and (self.pinned is not None or tree.was_stopped(self.name)):
            raise self._closed(None)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise self._closed(runtime, waited=True)
        return remaining

    def _closed(self, runtime: ClientTree | None, *, waited: bool = False) -> Error:
        tail = " (waited until the call's deadline for it to start)" if waited else ""
        if runtime is None and not tree.was_stopped(self.name):
            return Error("closed", "not_started", f"no client named {self.name!r} is running{tail}")
        return Error("closed", "stopped", f"client {self.name!r} is not running{tail}")
