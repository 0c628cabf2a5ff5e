"""The built-in tools of the scripted MCP server, as a mixin of ``ScriptedMcpServer``.

Each ``_t_<name>`` implements the tool ``<name>`` declared in :mod:`conduit_mcp.testing.scripted.catalog`
(the server binds them by that name): it takes the request's ``Ctx`` and the call's arguments
and returns a tool result, an awaitable, or ``NO_RESPONSE``. The helpers only tools need
(progress reports, change announcements, requests to the client) live here too. It exists
because the tools are the part of the server that grows: adding one touches this module and the
catalogue, not the protocol core.
"""

from __future__ import annotations

import asyncio
import os
import time
from typing import Any

import orjson

from .catalog import CAPABILITY_FOR, STRING, is_number, object_schema, text_content, tool_error
from .protocol import (
    CAPS_KEY,
    GARBAGE_LINE,
    INVALID_PARAMS,
    LOG_LEVEL_KEY,
    LOG_RANK,
    MISSING,
    MISSING_CLIENT_CAPABILITY,
    NO_RESPONSE,
    SERVER_INFO_KEY,
    SUBSCRIPTION_KEY,
    Ctx,
    RpcError,
)
from .state import ServerState

__all__ = ["ToolsMixin"]


class ToolsMixin(ServerState):
    """The ``_t_*`` tool implementations; only meaningful as a base of ``ScriptedMcpServer``.

    Uses the server's sending (``_emit``, ``_emit_raw``, ``_notify``, ``_exit``), its session
    state (``_pid``, ``_legacy_level``, ``_legacy_caps``, ``_legacy_subscriptions``,
    ``_listens``, ``_server_info``), its tool table (``_tool_fns``, ``_static_tools``,
    ``_dynamic_tools``, ``_tools_list``) and its pending requests to the client
    (``_client_requests``, ``_next_client_request``).
    """

    def _t_add(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        a = args.get("a")
        b = args.get("b")
        if not (is_number(a) and is_number(b)):
            return tool_error("add: a and b must be numbers")
        total = a + b
        return {
            "content": [{"type": "text", "text": str(total)}],
            "structuredContent": {"sum": total},
        }

    def _t_echo(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        text = args.get("text")
        if not isinstance(text, str):
            return tool_error("echo: text must be a string")
        return text_content(text)

    def _t_progress(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        steps = args.get("steps", 3)
        delay = args.get("delay", 0.01)
        silence = args.get("silence", 0)
        if (
            type(steps) is not int
            or steps < 0
            or not is_number(delay)
            or delay < 0
            or not is_number(silence)
            or silence < 0
        ):
            return tool_error(
                "progress: steps must be an integer >= 0, delay and silence numbers >= 0"
            )
        token = ctx.meta.get("progressToken") if ctx.meta else None
        if delay == 0 and silence == 0:
            for i in range(1, steps + 1):
                self._progress(token, i, steps)
            return text_content(f"done {steps} steps")
        return self._progress_later(token, steps, delay, silence)

    def _progress(self, token: Any, i: int, steps: int) -> None:
        if token is not None:
            self._notify(
                "notifications/progress",
                {"progressToken": token, "progress": i, "total": steps, "message": f"step {i}"},
            )

    async def _progress_later(
        self, token: Any, steps: int, delay: float, silence: float = 0
    ) -> dict[str, Any]:
        for i in range(1, steps + 1):
            await asyncio.sleep(delay)
            self._progress(token, i, steps)
        if silence:
            await asyncio.sleep(silence)  # working, but no longer saying so
        return text_content(f"done {steps} steps")

    def _t_slow(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        seconds = args.get("seconds")
        if not is_number(seconds) or seconds < 0:
            return tool_error("slow: seconds must be a number >= 0")
        return self._slow(seconds)

    async def _slow(self, seconds: float) -> dict[str, Any]:
        await asyncio.sleep(seconds)
        return text_content(f"slept {seconds}")

    def _t_never(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        return asyncio.get_running_loop().create_future()

    def _t_crash(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        code = args.get("code", 1)
        if type(code) is not int or not 0 <= code <= 255:
            return tool_error("crash: code must be an integer 0..255")
        self._exit(code, "crash tool")
        return NO_RESPONSE  # only reached when the exit callback returns

    def _t_garbage(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        text = args.get("text")
        if isinstance(text, str) and "\n" not in text:
            self._emit_raw(text.encode() + b"\n")
        else:
            self._emit_raw(GARBAGE_LINE)
        return text_content("garbage sent")

    def _t_big(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        size = args.get("size")
        if type(size) is not int or not 0 <= size <= 1 << 30:
            return tool_error("big: size must be an integer 0..2**30")
        return text_content("x" * size)

    def _t_stderr(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        text = args.get("text")
        if not isinstance(text, str):
            return tool_error("stderr: text must be a string")
        data = text.encode()
        if not data.endswith(b"\n"):
            data += b"\n"
        try:
            os.write(2, data)
        except OSError:
            pass
        return text_content("written")

    def _t_fail(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        message = args.get("message")
        return tool_error(message if isinstance(message, str) else "failure requested")

    def _t_error(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        code = args.get("code")
        message = args.get("message")
        if type(code) is not int or not isinstance(message, str):
            return tool_error("error: code must be an integer and message a string")
        raise RpcError(code, message, args.get("data", MISSING))

    def _t_notify(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        method = args.get("method")
        count = args.get("count", 1)
        params = args.get("params")
        if not isinstance(method, str) or type(count) is not int or count < 0:
            return tool_error("notify: method must be a string and count an integer >= 0")
        if params is not None and not isinstance(params, dict):
            return tool_error("notify: params must be an object")
        if args.get("malformed") is True:  # not JSON-RPC 2.0: the client must drop it
            for _ in range(count):
                self._emit({"jsonrpc": "1.0", "method": method, "params": params or {}})
            return text_content(f"sent {count}")
        for _ in range(count):
            self._notify(method, params)
        return text_content(f"sent {count}")

    def _t_flood(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        what = args.get("what")
        count = args.get("count")
        method = args.get("method")
        if what not in ("request", "notification", "progress") or type(count) is not int:
            return tool_error("flood: what must be request, notification or progress")
        if count < 0 or (method is not None and not isinstance(method, str)):
            return tool_error("flood: count must be >= 0 and method a string")
        if args.get("stop_reading") is True:
            self._stop_input()
        if what == "request":
            name = method or "ping"
            messages: Any = (
                {"jsonrpc": "2.0", "id": f"flood-{i}", "method": name} for i in range(count)
            )
        elif what == "notification":
            name = method or "notifications/message"
            params = {"level": "info", "data": "flood"}
            messages = ({"jsonrpc": "2.0", "method": name, "params": params} for _ in range(count))
        else:
            token = ctx.meta.get("progressToken") if ctx.meta else None
            messages = (
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": i, "total": count},
                }
                for i in range(1, count + 1)
            )
        return self._flood(messages, count, args.get("then") == "never")

    async def _flood(self, messages: Any, count: int, never: bool) -> Any:
        # Written as fast as the transport takes them: over stdio a full pipe blocks the
        # write; over HTTP the loop must run the stream's writer, so yield every few hundred.
        emit = self._emit
        for i, msg in enumerate(messages):
            emit(msg)
            if i % 200 == 199:
                await asyncio.sleep(0)
        if never:
            await asyncio.get_running_loop().create_future()
        return text_content(f"flooded {count}")

    def _t_env(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        name = args.get("name")
        if not isinstance(name, str):
            return tool_error("env: name must be a string")
        value = os.environ.get(name)
        return {
            "content": [{"type": "text", "text": "" if value is None else value}],
            "structuredContent": {"name": name, "value": value},
        }

    def _t_cwd(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        return text_content(os.getcwd())

    def _t_pid(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        return text_content(str(self._pid))

    def _t_weather(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        region = args.get("region")
        days = args.get("days")
        metric = args.get("metric")
        if (
            not isinstance(region, str)
            or (days is not None and type(days) is not int)
            or (metric is not None and type(metric) is not bool)
        ):
            return tool_error("weather: region must be a string, days an integer, metric a bool")
        # days and metric as JSON: 3, true, null (absent)
        text = f"{region} {orjson.dumps(days).decode()} {orjson.dumps(metric).decode()}"
        return text_content(text)

    def _t_bad_header(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        v = args.get("v")
        if not is_number(v):
            return tool_error("bad_header: v must be a number")
        return text_content(repr(v))

    def _t_cpu(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        spent = time.process_time()
        times = os.times()
        return {
            "content": [{"type": "text", "text": repr(spent)}],
            "structuredContent": {"cpu": spent, "user": times.user, "system": times.system},
        }

    def _t_log(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        level = args.get("level", "info")
        if level not in LOG_RANK:
            return tool_error(f"log: unknown level {level!r}")
        logger = args.get("logger", "scripted")
        data = args.get("data", "hello")
        if ctx.era == "modern":
            wanted = ctx.meta.get(LOG_LEVEL_KEY) if ctx.meta else None
        else:
            wanted = self._legacy_level
        if wanted is None or LOG_RANK[level] < LOG_RANK[wanted]:
            return text_content("suppressed")
        self._notify("notifications/message", {"level": level, "logger": logger, "data": data})
        return text_content("logged")

    def _announce(self, kind: str, era: str, uri: str | None = None) -> int:
        """Send a change notification to whoever asked for it; return how many were sent."""
        if kind == "resource":
            method, flag = "notifications/resources/updated", None
        else:
            method, flag = f"notifications/{kind}/list_changed", f"{kind}ListChanged"
        sent = 0
        if era == "modern":
            for listen_id, honored in self._listens.items():
                if flag is not None and honored.get(flag):
                    self._notify(method, {"_meta": {SUBSCRIPTION_KEY: listen_id}})
                    sent += 1
                elif flag is None and uri in honored.get("resourceSubscriptions", ()):
                    self._notify(method, {"_meta": {SUBSCRIPTION_KEY: listen_id}, "uri": uri})
                    sent += 1
        elif flag is not None:
            self._notify(method)
            sent = 1
        elif uri in self._legacy_subscriptions:
            self._notify(method, {"uri": uri})
            sent = 1
        return sent

    def _t_changed(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        kind = args.get("kind")
        uri = args.get("uri")
        if kind not in ("tools", "prompts", "resources", "resource"):
            return tool_error("changed: kind must be tools, prompts, resources or resource")
        if kind == "resource" and not isinstance(uri, str):
            return tool_error("changed: kind resource needs a uri")
        sent = self._announce(kind, ctx.era, uri)
        return {
            "content": [{"type": "text", "text": f"notified {sent}"}],
            "structuredContent": {"sent": sent},
        }

    def _t_add_tool(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        name = args.get("name")
        if not isinstance(name, str) or not name or name in self._tool_fns:
            return tool_error("add_tool: name must be a new, non-empty string")
        input_schema = args.get("input_schema", object_schema({"text": STRING}))
        output_schema = args.get("output_schema")
        result = args.get("result")
        if not all(x is None or type(x) is dict for x in (input_schema, output_schema, result)):
            return tool_error("add_tool: input_schema, output_schema and result must be objects")
        tool = {
            "name": name,
            "description": "A tool added at run time.",
            "inputSchema": input_schema,
        }
        if output_schema is not None:
            tool["outputSchema"] = output_schema
        if result is not None:
            self._dynamic_results[name] = result
        self._dynamic_tools[name] = tool
        self._tool_fns[name] = self._t_dynamic
        self._tools_list = self._static_tools + list(self._dynamic_tools.values())
        self._announce("tools", ctx.era)
        return text_content(f"added {name}")

    def _t_remove_tool(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        name = args.get("name")
        if name not in self._dynamic_tools:
            return tool_error(f"remove_tool: no dynamic tool {name!r}")
        del self._dynamic_tools[name]
        self._dynamic_results.pop(name, None)
        del self._tool_fns[name]
        self._tools_list = self._static_tools + list(self._dynamic_tools.values())
        self._announce("tools", ctx.era)
        return text_content(f"removed {name}")

    def _t_dynamic(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        name = ctx.params["name"]
        scripted = self._dynamic_results.get(name)
        if scripted is not None:
            return dict(scripted)
        return {
            "content": [{"type": "text", "text": f"{name} called"}],
            "structuredContent": {"arguments": args},
        }

    def _t_end_listens(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        how = args.get("how", "result")
        if how not in ("result", "cancelled"):
            return tool_error("end_listens: how must be result or cancelled")
        listens = list(self._listens)
        self._listens.clear()
        for listen_id in listens:
            if how == "result":
                result = {
                    "resultType": "complete",
                    "_meta": {SUBSCRIPTION_KEY: listen_id, SERVER_INFO_KEY: self._server_info},
                }
                self._emit({"jsonrpc": "2.0", "id": listen_id, "result": result})
            else:
                self._notify(
                    "notifications/cancelled", {"requestId": listen_id, "reason": "server"}
                )
        return {
            "content": [{"type": "text", "text": f"ended {len(listens)}"}],
            "structuredContent": {"ended": listens},
        }

    def _t_client_request(self, ctx: Ctx, args: dict[str, Any]) -> Any:
        method = args.get("method")
        req_params = args.get("params", {})
        if not isinstance(method, str) or not isinstance(req_params, dict):
            return tool_error("client_request: method must be a string and params an object")
        capability = CAPABILITY_FOR.get(method)
        if ctx.era == "modern":
            declared = ctx.meta.get(CAPS_KEY) if ctx.meta else None
            if capability is not None and capability not in (declared or {}):
                raise RpcError(
                    MISSING_CLIENT_CAPABILITY,
                    f"Server requires the {capability} capability for this request",
                    {"requiredCapabilities": {capability: {}}},
                )
            params = ctx.params
            responses = params.get("inputResponses")
            state = f"client_request:{method}"
            if responses is None:
                return {
                    "resultType": "input_required",
                    "inputRequests": {"request": {"method": method, "params": req_params}},
                    "requestState": state,
                }
            if params.get("requestState") != state:
                raise RpcError(INVALID_PARAMS, "Invalid params: requestState was not echoed")
            if not isinstance(responses, dict) or "request" not in responses:
                raise RpcError(INVALID_PARAMS, "Invalid params: inputResponses.request missing")
            answer = responses["request"]
            return {
                "content": [{"type": "text", "text": orjson.dumps(answer).decode()}],
                "structuredContent": {"response": answer},
            }
        if capability is not None and capability not in self._legacy_caps:
            return tool_error(f"client_request: the client did not declare {capability}")
        return self._ask_client(method, req_params)

    async def _ask_client(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        request_id, future = self._send_request(method, params, "client_request")
        assert future is not None
        try:
            reply = await future
        except asyncio.CancelledError:
            self._client_requests.pop(request_id, None)
            self._asked[request_id]["outcome"] = "cancelled"
            self._notify(
                "notifications/cancelled", {"requestId": request_id, "reason": "cancelled"}
            )
            raise
        if "error" in reply:
            return {
                "content": [{"type": "text", "text": orjson.dumps(reply["error"]).decode()}],
                "structuredContent": {"error": reply["error"]},
                "isError": True,
            }
        return {
            "content": [{"type": "text", "text": orjson.dumps(reply.get("result")).decode()}],
            "structuredContent": {"response": reply.get("result")},
        }
