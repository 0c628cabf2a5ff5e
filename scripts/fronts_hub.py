"""The Hub's routed calls, the one source of them for ``Hub``, ``AsyncHub`` and ``FutureHub``
(rendered into each by ``scripts/gen_fronts.py``; see ``scripts/fronts.py``).

Each body resolves the member in the caller's thread (``conduit_mcp.hub.routing``: lock-free,
failing at once for a server that is not ready or a name nobody lists), then sends through
that member's matching front end: ``client`` (blocking), ``client.aio``,
``client.futures`` (``$member``).
"""

from __future__ import annotations

from dataclasses import replace

from fronts import ASYNCIO, BLOCKING, FUTURES, Family, Front, Method

#: What a routed call raises.
ROUTED_RAISES = """``unavailable``/``server_not_ready`` at once for a server that is not ready
    (``data``: ``server``, ``state``, ``reason``); ``argument``/``unknown_server``,
    ``unknown_tool``, ``unknown_prompt`` or ``unknown_resource`` with the closest names
    (``data["closest"]``); ``closed``/``stopped`` after the hub's ``stop()``; then what the
    member ``Client`` raises (its "Errors")."""

NAME = "name: str | tuple[str, str]"
URI = "uri: str | tuple[str, str]"

METHODS = [
    Method(
        "call_tool",
        params=f"""{NAME}, arguments: Mapping[str, Any] | None = None, *,
        timeout: float | None = None, max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None,
        on_progress: $progress = None, meta: Mapping[str, Any] | None = None""",
        result="CallToolResult",
        body="""
        client, tool = routing.tool(self._board, name)
        client$member.call_tool(
            tool,
            arguments,
            timeout=timeout,
            max_total_timeout=max_total_timeout,
            reset_timeout_on_progress=reset_timeout_on_progress,
            on_progress=on_progress,
            meta=meta,
        )
        """,
        doc="""Call a tool by its qualified name (``"files.read"``) or ``(server, name)``, on
        the server that lists it; its result (one with ``is_error`` is a result).""",
        raises=ROUTED_RAISES,
    ),
    Method(
        "get_prompt",
        params=f"""{NAME}, arguments: Mapping[str, str] | None = None, *,
        timeout: float | None = None, max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None""",
        result="GetPromptResult",
        body="""
        client, prompt = routing.prompt(self._board, name)
        client$member.get_prompt(
            prompt,
            arguments,
            timeout=timeout,
            max_total_timeout=max_total_timeout,
            reset_timeout_on_progress=reset_timeout_on_progress,
        )
        """,
        doc="``prompts/get`` by qualified name or ``(server, name)``.",
        raises=ROUTED_RAISES,
    ),
    Method(
        "read_resource",
        params=f"""{URI}, *, timeout: float | None = None,
        max_total_timeout: float | None = None, reset_timeout_on_progress: bool | None = None""",
        result="ReadResourceResult",
        body="""
        client, target = routing.resource(self._board, uri)
        client$member.read_resource(
            target,
            timeout=timeout,
            max_total_timeout=max_total_timeout,
            reset_timeout_on_progress=reset_timeout_on_progress,
        )
        """,
        doc="""``resources/read``, sent to the server that listed ``uri`` (the first in config
        order when two did), or to the server of ``(server, uri)``.""",
        raises=ROUTED_RAISES,
    ),
    Method(
        "complete",
        params="""ref: Mapping[str, Any], argument: Mapping[str, str], *,
        context: Mapping[str, Any] | None = None, timeout: float | None = None""",
        result="CompleteResult",
        body="""
        client, own = routing.completion_ref(self._board, ref)
        client$member.complete(own, argument, context=context, timeout=timeout)
        """,
        doc="""``completion/complete``: a ``ref/prompt`` names its prompt qualified, a
        ``ref/resource`` a template as a server listed it.""",
        raises=ROUTED_RAISES,
    ),
    Method(
        "request",
        params="""server: str, method: str, params: Mapping[str, Any] | None = None, *,
        timeout: float | None = None, max_total_timeout: float | None = None,
        reset_timeout_on_progress: bool | None = None, on_progress: $progress = None""",
        result="dict[str, Any]",
        body="""
        client = routing.member(self._board, server)
        client$member.request(
            method,
            params,
            timeout=timeout,
            max_total_timeout=max_total_timeout,
            reset_timeout_on_progress=reset_timeout_on_progress,
            on_progress=on_progress,
        )
        """,
        doc="Any request to one server by method name; its raw result (a dict).",
        raises=ROUTED_RAISES,
    ),
    Method(
        "subscribe",
        params=f"{URI}, *, timeout: float | None = None",
        result="None",
        body="""
        client, target = routing.resource(self._board, uri)
        client$member.subscribe(target, timeout=timeout)
        """,
        doc="""Subscribe to updates of a resource at the server that listed it (or of
        ``(server, uri)``); its ``notifications/resources/updated`` reach the hub's
        subscribers tagged with that server.""",
        raises=ROUTED_RAISES,
    ),
    Method(
        "unsubscribe",
        params=f"{URI}, *, timeout: float | None = None",
        result="None",
        body="""
        client, target = routing.resource(self._board, uri)
        client$member.unsubscribe(target, timeout=timeout)
        """,
        doc="Undo :meth:`subscribe`.",
        raises=ROUTED_RAISES,
    ),
]

#: A routed call resolves its server before it has a future: those errors raise at once.
HUB_FUTURES = replace(
    FUTURES, raises="at once the routing errors (``unavailable``, ``argument``); from ``get()``: {}"
)

FAMILY = Family(
    spec="scripts/fronts_hub.py",
    methods=METHODS,
    fronts=[
        Front("conduit_mcp/hub/hub.py", "Hub", BLOCKING, names={"member": ""}),
        Front("conduit_mcp/hub/fronts.py", "AsyncHub", ASYNCIO, names={"member": ".aio"}),
        Front(
            "conduit_mcp/hub/fronts.py",
            "FutureHub",
            HUB_FUTURES,
            names={"member": ".futures"},
        ),
    ],
)
