"""How the scripted server answers a request: dispatch by era, then the method handlers.

``_dispatch`` decides the era (``--era both``: the first request does), checks the modern
``_meta`` envelope or the legacy session, routes to one ``_h_*`` method per JSON-RPC method
(discovery and ``initialize``, ``ping``, the paged ``*/list`` results, ``tools/call``,
``prompts/get``, ``resources/read``, completion, subscriptions, ``logging/setLevel``) and
completes modern results (``resultType``, server info, cache hints). A handler takes a ``Ctx``
and returns a result dict, an awaitable or ``NO_RESPONSE``, or raises :class:`RpcError`. It
is a mixin of ``ScriptedMcpServer`` and exists so that the protocol semantics read in one
place, while the core in :mod:`conduit_mcp.testing.scripted.server` handles input, rules, tasks and
sending.
"""

from __future__ import annotations

from typing import Any

from .catalog import (
    BLOB,
    ITEM_ID_CANDIDATES,
    NAME_CANDIDATES,
    decode_cursor,
    encode_cursor,
)
from .protocol import (
    CACHEABLE,
    CAPS_KEY,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LEGACY_RESOURCE_NOT_FOUND,
    LOG_LEVEL_KEY,
    LOG_RANK,
    METHOD_NOT_FOUND,
    NO_RESPONSE,
    PV_KEY,
    SERVER_INFO_KEY,
    SUBSCRIPTION_KEY,
    UNSUPPORTED_PROTOCOL_VERSION,
    Ctx,
    RpcError,
)
from .rounds import ROUNDS_URI_PREFIX
from .state import ServerState
from .tasks import LEGACY_TASKS_CAPABILITY, TASKS_EXTENSION

__all__ = ["HandlersMixin"]


class HandlersMixin(ServerState):
    """Era dispatch and the ``_h_*`` method handlers: a base of ``ScriptedMcpServer`` only.

    Uses the server's ``config``, era and session state (``_era``, ``_advertised``,
    ``_modern_set``, ``_legacy_set``, ``_legacy_caps``, ``_legacy_version``, ``_initialized``,
    ``_legacy_level``, ``_legacy_subscriptions``, ``_listens``), its routing and tool tables
    (``_modern_handlers``, ``_legacy_handlers``, ``_tools_list``, ``_tool_fns``),
    ``_server_info``/``_result_meta``, and its ``_notify`` and ``_event``.
    """

    # ---- dispatch by era -------------------------------------------------------------------------

    def _dispatch(self, request_id: Any, method: str, params: Any) -> Any:
        era = self._era
        if era is None:
            if method != "initialize" and _enveloped(params):
                # Modern once a request passes the envelope checks (a refused one, e.g. -32022
                # naming legacy versions, leaves the client free to initialize instead).
                return self._dispatch_modern(request_id, method, params)
            self._era = era = "legacy"
            self._event("era", era=era, method=method)
        if era == "modern":
            return self._dispatch_modern(request_id, method, params)
        return self._dispatch_legacy(request_id, method, params)

    def _dispatch_modern(self, request_id: Any, method: str, params: Any) -> Any:
        handler = self._modern_handlers.get(method)
        if handler is None:
            if method == "initialize" and self.config.era == "both":
                requested = params.get("protocolVersion") if isinstance(params, dict) else None
                raise RpcError(
                    UNSUPPORTED_PROTOCOL_VERSION,
                    "Unsupported protocol version: this connection serves the modern protocol; "
                    "initialize is not accepted",
                    {"supported": self._advertised, "requested": requested},
                )
            raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": method})
        meta = params.get("_meta") if type(params) is dict else None
        if type(meta) is not dict:
            raise RpcError(
                INVALID_PARAMS,
                "Invalid params: params._meta must be an object carrying "
                f"{PV_KEY!r} and {CAPS_KEY!r}",
            )
        version = meta.get(PV_KEY)
        if version not in self._modern_set or type(meta.get(CAPS_KEY)) is not dict:
            self._reject_envelope(meta)
        if LOG_LEVEL_KEY in meta and meta[LOG_LEVEL_KEY] not in LOG_RANK:
            raise RpcError(
                INVALID_PARAMS, f"Invalid params: unknown log level {meta[LOG_LEVEL_KEY]!r}"
            )
        if self._era is None:
            self._era = "modern"
            self._event("era", era="modern", method=method)
        ctx = Ctx(request_id, method, params, meta, "modern")
        if "inputResponses" in params or "requestState" in params:
            self._note_carrier(ctx)
        out = handler(ctx)
        if type(out) is dict:
            return self._complete(method, out)
        if out is NO_RESPONSE:
            return out
        return self._complete_later(method, out)

    def _reject_envelope(self, meta: dict[str, Any]) -> None:
        missing = [k for k in (PV_KEY, CAPS_KEY) if k not in meta]
        if missing:
            raise RpcError(
                INVALID_PARAMS, f"Invalid params: params._meta is missing {', '.join(missing)}"
            )
        version = meta[PV_KEY]
        if type(version) is not str:
            raise RpcError(INVALID_PARAMS, f"Invalid params: {PV_KEY} must be a string")
        if type(meta[CAPS_KEY]) is not dict:
            raise RpcError(INVALID_PARAMS, f"Invalid params: {CAPS_KEY} must be an object")
        raise RpcError(
            UNSUPPORTED_PROTOCOL_VERSION,
            "Unsupported protocol version",
            {"supported": self._advertised, "requested": version},
        )

    def _complete(self, method: str, result: dict[str, Any]) -> dict[str, Any]:
        if "resultType" not in result:
            result["resultType"] = "complete"
        elif result["resultType"] is None:  # a scripted result without one (rounds)
            del result["resultType"]
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = self._result_meta
        elif SERVER_INFO_KEY not in meta:
            result["_meta"] = {**meta, SERVER_INFO_KEY: self._server_info}
        if method in CACHEABLE and result.get("resultType") == "complete":
            if "ttlMs" not in result:
                result["ttlMs"] = self.config.ttl_ms
            if "cacheScope" not in result:
                result["cacheScope"] = self.config.cache_scope
        return result

    async def _complete_later(self, method: str, pending: Any) -> Any:
        result = await pending
        if type(result) is dict:
            return self._complete(method, result)
        return result

    def _dispatch_legacy(self, request_id: Any, method: str, params: Any) -> Any:
        handler = self._legacy_handlers.get(method)
        if handler is None:
            raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": method})
        if self.config.era == "both" and method != "initialize" and _enveloped(params):
            raise RpcError(
                INVALID_REQUEST,
                "Invalid Request: this connection serves the handshake (legacy) era; "
                "requests carrying the modern _meta envelope are not accepted on it",
            )
        if not self._initialized and method != "initialize" and method != "ping":
            raise RpcError(
                INVALID_PARAMS, "Invalid request parameters: the session is not initialized"
            )
        meta = params.get("_meta") if type(params) is dict else None
        return handler(Ctx(request_id, method, params, meta, "legacy"))

    # ---- method handlers -------------------------------------------------------------------------

    def _modern_extensions(self) -> dict[str, Any]:
        """Every extension this server serves (tasks, skills) in the one ``extensions`` map:
        two spreads of an ``extensions`` key would keep only the last."""
        served: dict[str, Any] = {TASKS_EXTENSION: {}} if self.config.tasks else {}
        served.update(self._skills_capability().get("extensions", {}))  # type: ignore[attr-defined]
        return {"extensions": served} if served else {}

    def _h_discover(self, ctx: Ctx) -> dict[str, Any]:
        return {
            "resultType": "complete",
            "supportedVersions": list(self._advertised),
            "capabilities": {
                "tools": {"listChanged": True},
                "prompts": {"listChanged": True},
                "resources": {"subscribe": True, "listChanged": True},
                "completions": {},
                **self._logging_capability(),
                **self._modern_extensions(),
            },
            "_meta": self._result_meta,
            "instructions": self.config.instructions,
            "ttlMs": self.config.ttl_ms,
            "cacheScope": self.config.cache_scope,
        }

    def _h_initialize(self, ctx: Ctx) -> dict[str, Any]:
        params = ctx.params if isinstance(ctx.params, dict) else {}
        requested = params.get("protocolVersion")
        legacy = self.config.legacy_versions
        if not legacy:
            raise RpcError(
                INVALID_PARAMS,
                "Unsupported protocol version",
                {"supported": [], "requested": requested},
            )
        version = requested if requested in self._legacy_set else max(legacy)
        caps = params.get("capabilities")
        self._legacy_caps = caps if isinstance(caps, dict) else {}
        self._legacy_version = version
        self._initialized = True
        self._event("initialize", requested=requested, version=version)
        return {
            "protocolVersion": version,
            "capabilities": {
                "tools": {"listChanged": True},
                "prompts": {"listChanged": True},
                "resources": {"subscribe": True, "listChanged": True},
                "completions": {},
                **self._logging_capability(),
                **({"tasks": LEGACY_TASKS_CAPABILITY} if self.config.tasks else {}),
                **self._skills_capability(),  # type: ignore[attr-defined]
            },
            "serverInfo": dict(self._server_info),
            "instructions": self.config.instructions,
        }

    def _h_ping(self, ctx: Ctx) -> dict[str, Any]:
        return {}

    def _page(self, items: list[dict[str, Any]], ctx: Ctx, key: str) -> dict[str, Any]:
        params = ctx.params
        cursor = params.get("cursor") if type(params) is dict else None
        start = 0 if cursor is None else decode_cursor(cursor, len(items))
        size = self.config.page_size
        if size is None:
            return {key: items[start:] if start else items}
        end = start + size
        result: dict[str, Any] = {key: items[start:end]}
        if end < len(items):
            result["nextCursor"] = encode_cursor(end)
        return result

    def _h_tools_list(self, ctx: Ctx) -> dict[str, Any]:
        return self._page(self._tools_list, ctx, "tools")

    def _h_prompts_list(self, ctx: Ctx) -> dict[str, Any]:
        return self._page(self._prompts, ctx, "prompts")

    def _h_resources_list(self, ctx: Ctx) -> dict[str, Any]:
        return self._page(self._resources, ctx, "resources")

    def _h_templates_list(self, ctx: Ctx) -> dict[str, Any]:
        return self._page(self._templates, ctx, "resourceTemplates")

    def _h_tools_call(self, ctx: Ctx) -> Any:
        params = ctx.params
        if type(params) is not dict or type(params.get("name")) is not str:
            raise RpcError(INVALID_PARAMS, "Invalid params: tools/call needs a tool name")
        name = params["name"]
        fn = self._tool_fns.get(name)
        if fn is None:
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}", {"name": name})
        args = params.get("arguments")
        if args is None:
            args = {}
        elif type(args) is not dict:
            raise RpcError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        return fn(ctx, args)

    def _h_prompts_get(self, ctx: Ctx) -> dict[str, Any]:
        params = ctx.params if isinstance(ctx.params, dict) else {}
        name = params.get("name")
        args = params.get("arguments") or {}
        if not isinstance(args, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: arguments must be an object")
        if name == "greet":
            who = args.get("name")
            if not isinstance(who, str):
                raise RpcError(INVALID_PARAMS, "Missing required argument: name")
            text = f"Hello, {who}!"
            description = "A greeting"
        elif name == "plain":
            text, description = "Say hello.", "A plain prompt"
        elif name == "rounds":  # not listed: input_required rounds (docs/testing.md)
            return self._rounds_prompt(ctx, args)
        else:
            raise RpcError(INVALID_PARAMS, f"Unknown prompt: {name}", {"name": name})
        return {
            "description": description,
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        }

    def _h_resources_read(self, ctx: Ctx) -> dict[str, Any]:
        params = ctx.params if isinstance(ctx.params, dict) else {}
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: resources/read needs a uri")
        if uri == "test://static/hello":
            content = {"uri": uri, "mimeType": "text/plain", "text": "Hello, world!"}
        elif uri == "test://static/blob":
            content = {"uri": uri, "mimeType": "application/octet-stream", "blob": BLOB}
        elif uri.startswith("test://item/") and len(uri) > len("test://item/"):
            item = uri[len("test://item/") :]
            content = {"uri": uri, "mimeType": "text/plain", "text": f"item {item}"}
        elif uri.startswith(ROUNDS_URI_PREFIX):  # not listed: input_required rounds
            return self._rounds_resource(ctx, uri)
        elif uri.startswith("skill://") and self.config.skills is not None:
            return self._skill_read(ctx, uri)  # type: ignore[attr-defined,no-any-return]
        elif ctx.era == "modern":
            raise RpcError(INVALID_PARAMS, "Resource not found", {"uri": uri})
        else:
            raise RpcError(LEGACY_RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})
        return {"contents": [content]}

    def _h_complete(self, ctx: Ctx) -> dict[str, Any]:
        params = ctx.params if isinstance(ctx.params, dict) else {}
        ref = params.get("ref")
        argument = params.get("argument")
        if not isinstance(ref, dict) or not isinstance(argument, dict):
            raise RpcError(
                INVALID_PARAMS, "Invalid params: completion/complete needs ref and argument"
            )
        prefix = argument.get("value") or ""
        if not isinstance(prefix, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: argument.value must be a string")
        candidates: list[str] = []
        if ref.get("type") == "ref/prompt" and ref.get("name") == "greet":
            if argument.get("name") == "name":
                candidates = NAME_CANDIDATES
        elif ref.get("type") == "ref/resource" and ref.get("uri") == "test://item/{id}":
            if argument.get("name") == "id":
                candidates = ITEM_ID_CANDIDATES
        elif ref.get("type") not in ("ref/prompt", "ref/resource"):
            raise RpcError(INVALID_PARAMS, f"Invalid params: unknown ref type {ref.get('type')!r}")
        values = [c for c in candidates if c.startswith(prefix)]
        return {"completion": {"values": values, "total": len(values), "hasMore": False}}

    def _h_listen(self, ctx: Ctx) -> Any:
        params = ctx.params
        wanted = params.get("notifications") if isinstance(params, dict) else None
        if not isinstance(wanted, dict):
            raise RpcError(
                INVALID_PARAMS, "Invalid params: subscriptions/listen needs notifications"
            )
        honored: dict[str, Any] = {}
        for key in ("toolsListChanged", "promptsListChanged", "resourcesListChanged"):
            if wanted.get(key) is True:
                honored[key] = True
        uris = wanted.get("resourceSubscriptions")
        if isinstance(uris, list) and all(isinstance(u, str) for u in uris) and uris:
            honored["resourceSubscriptions"] = list(uris)
        task_ids = self._listen_task_ids(ctx, wanted) if self.config.tasks else None
        if task_ids is not None:
            honored["taskIds"] = task_ids
        self._listens[ctx.id] = honored
        self._event("listen", id=ctx.id, notifications=honored)
        self._notify(
            "notifications/subscriptions/acknowledged",
            {"_meta": {SUBSCRIPTION_KEY: ctx.id}, "notifications": honored},
        )
        if task_ids:
            self._watch_tasks(ctx.id, task_ids)
        return NO_RESPONSE

    def _h_subscribe(self, ctx: Ctx) -> dict[str, Any]:
        uri = ctx.params.get("uri") if isinstance(ctx.params, dict) else None
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: uri required")
        self._legacy_subscriptions.add(uri)
        return {}

    def _h_unsubscribe(self, ctx: Ctx) -> dict[str, Any]:
        uri = ctx.params.get("uri") if isinstance(ctx.params, dict) else None
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: uri required")
        self._legacy_subscriptions.discard(uri)
        return {}

    def _logging_capability(self) -> dict[str, Any]:
        return {} if self.config.no_logging else {"logging": {}}

    def _h_set_level(self, ctx: Ctx) -> dict[str, Any]:
        if self.config.no_logging:
            raise RpcError(METHOD_NOT_FOUND, "Method not found", {"method": "logging/setLevel"})
        level = ctx.params.get("level") if isinstance(ctx.params, dict) else None
        if level not in LOG_RANK:
            raise RpcError(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
        self._legacy_level = level
        return {}


def _enveloped(params: Any) -> bool:
    if type(params) is not dict:
        return False
    meta = params.get("_meta")
    return type(meta) is dict and PV_KEY in meta
