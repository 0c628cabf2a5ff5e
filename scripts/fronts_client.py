"""The client's request methods, the one source of them for ``Client``, ``AsyncClient`` and
``FutureClient`` (rendered into each by ``scripts/gen_fronts.py``; see ``scripts/fronts.py``
for the mechanism and how to add a method).

Each body goes through the front end's hand-written dispatch: ``self._call(request, timeout,
on_progress=None)`` for one request (built by a ``conduit_mcp.request`` builder),
``self._list_all(kind, timeout, refresh)`` for a page walk, ``self._await_ready(seconds)``.
"""

from __future__ import annotations

from fronts import ASYNCIO, BLOCKING, FUTURES, Family, Front, Method

#: What a request method raises (the kinds of ``Client``'s "Errors" paragraph).
REQUEST_RAISES = """``argument``, ``timeout``, ``overloaded``, ``closed``, ``transport``,
    ``unavailable``, ``auth``, ``server`` or ``protocol`` (``Client``'s "Errors")."""
#: What a ``list_all_*`` walk raises.
WALK_RAISES = (
    REQUEST_RAISES.removesuffix(".") + "; ``protocol``/``too_many_pages`` past 1000 pages."
)

#: The per-call keywords of a call that may run long (docs/connecting.md, "Progress").
RESET = """``reset_timeout_on_progress`` (else the client's option): each progress
        report restarts ``timeout``, ``max_total_timeout`` bounding the whole call."""

PAGE = "cursor: str | None = None, *, timeout: float | None = None"
WALK = "*, timeout: float | None = None, refresh: bool = False"


def _page(kind: str, item: str, what: str, extra: str = "") -> Method:
    return Method(
        f"list_{kind}",
        params=PAGE,
        result=f"Page[{item}]",
        body=f"self._call(rq.list_{kind}(cursor), timeout)",
        doc=f"One page of {what}{extra}.",
        raises=REQUEST_RAISES,
    )


def _walk(kind: str, item: str, doc: str, notes: dict[str, str] | None = None) -> Method:
    return Method(
        f"list_all_{kind}",
        params=WALK,
        result=f"tuple[{item}, ...]",
        body=f'self._list_all("{kind}", timeout, refresh)',
        doc=doc,
        raises=WALK_RAISES,
        notes=notes or {},
    )


METHODS = [
    Method(
        "await_ready",
        params="timeout: float = 30.0",
        result="Status",
        body="self._await_ready(rq.check_timeout(timeout, timeout))",
        doc="""The ready status, once the connection is ready.

        A handle from :meth:`~conduit_mcp.Client.whereis` waits through the client's start
        and restart windows, and past an incarnation that gave up while an application
        supervisor replaces it.""",
        raises="""``timeout``/``deadline``; ``closed`` (the client is stopped or gave up, with
        the reason); ``overloaded``/``max_queued``; ``argument`` for a bad timeout.""",
        notes={"asyncio": "The loop runs on while it waits."},
    ),
    Method(
        "call_tool",
        params="""name: str, arguments: Mapping[str, Any] | None = None, *,
        timeout: float | None = None, max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None,
        on_progress: $progress = None, meta: Mapping[str, Any] | None = None""",
        result="CallToolResult",
        body="""self._call_tool(rq.with_total(rq.call_tool(name, arguments, meta),
        max_total_timeout, reset_timeout_on_progress), timeout, on_progress)""",
        doc=f"""Call a tool; its result. A result with ``is_error`` is a result, not an
        exception: the tool ran and failed. A tool that declares an ``outputSchema`` has its
        ``structuredContent`` checked against it (``validate_output``; with
        ``validate_arguments``, the arguments too, before anything is sent). {RESET}""",
        raises=REQUEST_RAISES.removesuffix(".")
        + """; ``protocol``/``invalid_structured_content`` for a result that does not match
        the tool's ``outputSchema``; ``argument``/``invalid_arguments`` (with
        ``validate_arguments``).""",
    ),
    Method(
        "start_task",
        params="""name: str, arguments: Mapping[str, Any] | None = None, *,
        timeout: float | None = None, meta: Mapping[str, Any] | None = None""",
        result="TaskHandle",
        body="self._start_task(rq.call_tool(name, arguments, meta), timeout)",
        doc="""Call a tool as a task and return at once with its :class:`TaskHandle`
        (``status()``, ``wait()``, ``result()``, ``cancel()``, ``record``), polled in the
        background without a thread of its own (docs/tasks.md). A task is asked for
        whenever the tool supports one (2025-11-25: ``execution.taskSupport``
        ``"required"`` or ``"optional"``; the modern Tasks extension: declared, the server
        decides); a server that answers at once gives a handle that is already completed.
        ``timeout`` bounds the call that creates the task, not the task.""",
        raises=REQUEST_RAISES.removesuffix(".")
        + """; ``argument``/``invalid_arguments`` (with ``validate_arguments``).""",
    ),
    _page("tools", "Tool", "tools", " (``Page.next_cursor`` is None on the last page)"),
    _page("prompts", "Prompt", "prompts"),
    _page("resources", "Resource", "resources"),
    _page("resource_templates", "ResourceTemplate", "resource templates"),
    Method(
        "read_resource",
        params="""uri: str, *, timeout: float | None = None,
        max_total_timeout: float | None = None, reset_timeout_on_progress: bool | None = None""",
        result="ReadResourceResult",
        body="""self._call(rq.with_total(rq.read_resource(uri), max_total_timeout,
        reset_timeout_on_progress), timeout)""",
        doc=f"``resources/read`` for one URI. {RESET}",
        raises=REQUEST_RAISES,
    ),
    Method(
        "get_prompt",
        params="""name: str, arguments: Mapping[str, str] | None = None, *,
        timeout: float | None = None, max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None""",
        result="GetPromptResult",
        body="""self._call(rq.with_total(rq.get_prompt(name, arguments), max_total_timeout,
        reset_timeout_on_progress), timeout)""",
        doc=f"""``prompts/get``; prompt arguments are strings (MCP spec, Server Features,
        "Prompts"). {RESET}""",
        raises=REQUEST_RAISES,
    ),
    Method(
        "complete",
        params="""ref: Mapping[str, Any], argument: Mapping[str, str], *,
        context: Mapping[str, Any] | None = None, timeout: float | None = None""",
        result="CompleteResult",
        body="self._call(rq.complete(ref, argument, context), timeout)",
        doc="``completion/complete`` for a prompt or resource-template argument.",
        raises=REQUEST_RAISES,
    ),
    Method(
        "request",
        params="""method: str, params: Mapping[str, Any] | None = None, *,
        timeout: float | None = None, max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None, on_progress: $progress = None""",
        result="dict[str, Any]",
        body="""self._call(rq.with_total(rq.raw(method, params), max_total_timeout,
        reset_timeout_on_progress), timeout, on_progress)""",
        doc=f"""Any request by method name; its raw result (a dict), for a method this
        client has no typed call for. {RESET}""",
        raises=REQUEST_RAISES,
    ),
    Method(
        "ping",
        params="*, timeout: float | None = None",
        result="None",
        body="self._call(rq.ping(self._handle.status().era), timeout)",
        doc="""A liveness round trip: ``ping`` in the legacy era, ``server/discover`` in the
        modern one (which has no ping).""",
        raises=REQUEST_RAISES,
    ),
    Method(
        "subscribe",
        params="uri: str, *, timeout: float | None = None",
        result="None",
        body="self._call(rq.resource_subscription(uri, True), timeout)",
        doc="""Subscribe to ``notifications/resources/updated`` for ``uri``. Kept across
        reconnects: sent again on every new session (legacy ``resources/subscribe``) or
        carried by every listen (modern).""",
        raises=REQUEST_RAISES,
    ),
    Method(
        "unsubscribe",
        params="uri: str, *, timeout: float | None = None",
        result="None",
        body="self._call(rq.resource_subscription(uri, False), timeout)",
        doc="Undo :meth:`subscribe`.",
        raises=REQUEST_RAISES,
    ),
    Method(
        "set_logging_level",
        params="level: LoggingLevel, *, timeout: float | None = None",
        result="None",
        body="self._call(rq.set_logging_level(level), timeout)",
        doc="""Receive the server's log messages at ``level`` and above (``debug``, ``info``,
        ``notice``, ``warning``, ``error``, ``critical``, ``alert``, ``emergency``). They go
        to Python logging on ``conduit_mcp.server.<client name>`` and to the handler's
        ``handle_log``. Kept across reconnects: legacy ``logging/setLevel``, sent again to
        every new session; modern: ``_meta["io.modelcontextprotocol/logLevel"]`` on every
        request from now on (a call's own ``_meta`` one wins).""",
        raises="""``argument``/``level`` for a level not in that list;
        ``unavailable``/``not_supported`` when a legacy server declares no ``logging``
        capability; otherwise as any request: """
        + REQUEST_RAISES,
    ),
    _walk(
        "tools",
        "Tool",
        """Every tool, following cursors; ``timeout`` bounds the whole walk. Served from the
        cache while it is fresh (the server's ``ttlMs``, capped by ``max_cache_ttl``; not
        after a ``list_changed``); ``refresh=True`` always asks the server.""",
        notes={
            "futures": "A worker thread fetches the pages, one after another, never the caller's."
        },
    ),
    _walk(
        "prompts", "Prompt", "Every prompt, following cursors (cached like :meth:`list_all_tools`)."
    ),
    _walk(
        "resources",
        "Resource",
        "Every resource, following cursors (cached like :meth:`list_all_tools`).",
    ),
    _walk(
        "resource_templates",
        "ResourceTemplate",
        "Every resource template, following cursors (cached like :meth:`list_all_tools`).",
    ),
    Method(
        "list_skills",
        params=WALK,
        result="tuple[Skill, ...]",
        body='self._list_all("skills", timeout, refresh)',
        doc="""Every skill the server serves (the skills extension, ``skills/list``), following
        cursors; cached like :meth:`list_all_tools`. Reads no file of any skill: a skill's
        files are read by :meth:`load_skill`, when it is needed (docs/skills.md).""",
        raises=WALK_RAISES.removesuffix(".")
        + """; ``unavailable``/``not_supported`` when the server does not declare the
        ``io.modelcontextprotocol/skills`` extension; ``protocol``/``bad_result`` for a
        malformed entry (a file outside the skill's directory, a bad digest, a name that is
        not the URI's last segment).""",
        notes={
            "futures": "A worker thread fetches the pages, one after another, never the caller's."
        },
    ),
    Method(
        "get_skill",
        params="uri: str, *, timeout: float | None = None",
        result="Skill",
        body="self._call(rq.get_skill(uri), timeout)",
        doc="""One skill's entry by the URI of its ``SKILL.md`` (``skills/get``): for a skill
        named by the server's instructions or by the user, which a listing may not hold, or
        to refresh one entry.""",
        raises=REQUEST_RAISES.removesuffix(".")
        + """; ``server`` (-32602) for a URI that is no skill of the server;
        ``unavailable``/``not_supported`` as :meth:`list_skills`.""",
    ),
    Method(
        "load_skill",
        params="""skill: Skill, *, timeout: float | None = None,
        max_bytes: int = 16_777_216""",
        result="LoadedSkill",
        body="self._load_skill(rq.begin_skill_load(self._handle, skill, timeout, max_bytes))",
        doc="""Read every file of ``skill`` and verify it against the skill's entry before
        returning any of it: ``SKILL.md`` first, then the other files, one
        ``resources/read`` each; every file's byte length and ``sha256:`` digest, and
        ``SKILL.md``'s frontmatter field by field. The first file that fails stops the load
        (nothing after it is read). ``timeout`` bounds the whole load; a skill over 512
        files or ``max_bytes`` in all (the extension's limits: 16 MiB) is declined before
        anything is read.""",
        raises=REQUEST_RAISES.removesuffix(".")
        + """; ``protocol``/``skill_mismatch`` for a file whose size, digest or
        frontmatter is not what the entry says (the message names the file and what
        differed, never its content); ``protocol``/``skill_too_large`` over the limits;
        ``protocol``/``skill_dynamic`` for a skill whose server publishes no digests;
        ``argument``/``skill`` or ``max_bytes``.""",
        notes={"futures": "A worker thread reads the files, one after another."},
    ),
]

FAMILY = Family(
    spec="scripts/fronts_client.py",
    methods=METHODS,
    fronts=[
        Front("conduit_mcp/client.py", "Client", BLOCKING),
        Front("conduit_mcp/aio.py", "AsyncClient", ASYNCIO),
        Front("conduit_mcp/futures.py", "FutureClient", FUTURES),
    ],
)

#: The methods by name, for another family that offers one of them with its own routing
#: (``dataclasses.replace(BY_NAME["call_tool"], params=..., body=...)``).
BY_NAME = {method.name: method for method in METHODS}
