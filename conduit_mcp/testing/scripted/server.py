"""The protocol logic of the scripted MCP test server, independent of any transport.

:class:`ScriptedMcpServer` takes decoded JSON-RPC messages (:meth:`~ScriptedMcpServer.receive`)
or raw lines (:meth:`~ScriptedMcpServer.receive_line`) and answers through callbacks:
``emit(msg)`` for a JSON-RPC message, ``emit_raw(bytes)`` for a raw (possibly invalid) line,
``close_output()`` and ``exit(code)``. Work that takes time (delays, ``slow``, ``never``,
progress with a delay) runs in asyncio tasks on the running loop, so ``receive`` must be
called from a coroutine or a callback of a running event loop.

The behaviour (options, tools, rules) is documented in ``docs/testing.md``.
Requests that need no waiting are answered synchronously inside ``receive``: no task, no
copy, one ``orjson.dumps`` per answer, so the server costs a few microseconds per call.

This module is the core: entry points, logging, applying script rules, sending, running and
finishing requests, notifications and responses. The rest sits beside it: :mod:`.protocol`
(wire constants, ``RpcError``), :mod:`.rules` (script parsing), :mod:`.options` (``Config`` and
the command line), :mod:`.catalog` (the static tools, prompts and resources), :mod:`.handlers`
(dispatch by era and the ``_h_*`` method handlers) and :mod:`.tools` (the ``_t_*`` tools).
Every public name once defined here is still importable from here.
"""

from __future__ import annotations

import asyncio
import collections
import functools
import os
import time
from collections.abc import Callable
from typing import Any

import orjson

from .asking import AskMixin
from .catalog import (
    FLOOD_TOOL_SPECS,
    HEADER_TOOL_SPECS,
    METADATA_PROMPTS,
    METADATA_RESOURCES,
    METADATA_SERVER,
    METADATA_TEMPLATES,
    METADATA_TOOLS,
    PROMPTS,
    RESOURCE_TEMPLATES,
    RESOURCES,
    TOOL_SPECS,
    derive_wrong_id,
    object_schema,
    with_metadata,
)
from .handlers import HandlersMixin
from .options import Config
from .protocol import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    NO_RESPONSE,
    PARSE_ERROR,
    SERVER_INFO_KEY,
    Ctx,
    RpcError,
)
from .rounds import MAX_CARRIERS, MAX_KEPT, RoundsMixin
from .rules import HTTP_FAULTS, Rule
from .skills import SkillsMixin
from .task_state import shared_table
from .tasks import CONFORMANCE_TASK_TOOL_SPECS, TASK_TOOL_SPECS, TasksMixin
from .tools import ToolsMixin

__all__ = ["ScriptedMcpServer"]


class ScriptedMcpServer(HandlersMixin, ToolsMixin, AskMixin, RoundsMixin, TasksMixin, SkillsMixin):
    """One connection's worth of MCP server state (one process on stdio).

    ``emit(msg)`` sends a JSON-RPC message; ``emit_raw(line)`` writes raw bytes (a whole line,
    newline included); ``close_output()`` closes the output stream; ``exit(code)`` ends the
    process (it should not return). ``log(record)`` receives one dict per received message and
    per notable event; ``log_raw(line)``, if given, receives the log line of a received
    message as bytes instead (spliced from the input line: no re-encoding). ``start_number``
    is this process's start count (1 for the first), used by rules with
    ``first_process_only``/``process``.

    Two hooks serve the HTTP front: ``rule_hook(rule)`` is called synchronously when a rule
    fires (before its delay), so the front can see modifiers such as ``drop_stream``;
    ``fault(rule, request_id)`` carries out the HTTP-only terminal actions (``http``,
    ``expire_session``) when they are due. Without ``fault`` (stdio) those actions give the
    default answer. ``open_stream()`` is called by a tool that is about to send server
    requests on its call's stream: over HTTP the POST is then answered with SSE.
    """

    def __init__(
        self,
        config: Config,
        emit: Callable[[dict[str, Any]], None],
        *,
        emit_raw: Callable[[bytes], None] | None = None,
        close_output: Callable[[], None] | None = None,
        stop_input: Callable[[], None] | None = None,
        exit: Callable[[int], None] | None = None,
        log: Callable[[dict[str, Any]], None] | None = None,
        log_raw: Callable[[bytes], None] | None = None,
        start_number: int = 1,
        rule_hook: Callable[[Rule], None] | None = None,
        fault: Callable[[Rule, Any], None] | None = None,
        open_stream: Callable[[], None] | None = None,
    ) -> None:
        self.config = config
        self._rule_hook = rule_hook
        self._fault = fault
        self._log = log
        self._log_raw = log_raw if log is not None else None
        self._pid = os.getpid()
        if log is not None and config.log_out:
            raw_emit = emit

            def emit(msg: dict[str, Any]) -> None:
                log({"t": time.monotonic(), "pid": self._pid, "dir": "out", **msg})
                raw_emit(msg)

        self._emit = emit
        self._emit_raw = emit_raw or (lambda line: None)
        self._close_output = close_output or (lambda: None)
        self._stop_input = stop_input or (lambda: None)
        self._open_stream = open_stream or (lambda: None)
        self._exit_cb = exit
        self.start_number = start_number
        self._rules = [r for r in config.rules if r.process is None or r.process == start_number]
        self._era: str | None = None if config.era == "both" else config.era
        self._advertised = list(config.modern_versions)
        if config.advertise_legacy:
            self._advertised += list(config.legacy_versions)
        self._modern_set = frozenset(config.modern_versions)
        self._legacy_set = frozenset(config.legacy_versions)
        self._initialized = False
        self._legacy_version: str | None = None
        self._legacy_caps: dict[str, Any] = {}
        self._legacy_level = "debug"
        self._legacy_subscriptions: set[str] = set()
        self._tasks: dict[Any, asyncio.Task[Any]] = {}
        self._listens: dict[Any, dict[str, Any]] = {}
        self._client_requests: dict[Any, asyncio.Future[Any]] = {}
        self._next_client_request = 0
        self._asked = collections.OrderedDict()
        self._unexpected = collections.deque(maxlen=1000)
        self._roots_changed = 0
        self._detached = set()
        self._conversations = {}
        self._ended = collections.deque(maxlen=MAX_KEPT)
        self._carriers = collections.deque(maxlen=MAX_CARRIERS)
        self._server_info = {"name": config.name, "version": config.server_version}
        if config.metadata:
            self._server_info.update(METADATA_SERVER)
        self._result_meta = {SERVER_INFO_KEY: self._server_info}
        self._tool_fns: dict[str, Callable[[Ctx, dict[str, Any]], Any]] = {}
        self._static_tools: list[dict[str, Any]] = []
        specs = TOOL_SPECS + HEADER_TOOL_SPECS if config.header_tools else TOOL_SPECS
        if config.flood_tools:
            specs = specs + FLOOD_TOOL_SPECS
        for name, description, schema, output in specs:
            tool: dict[str, Any] = {"name": name, "description": description, "inputSchema": schema}
            if output is not None:
                tool["outputSchema"] = output
            self._static_tools.append(tool)
            self._tool_fns[name] = getattr(self, "_t_" + name)
        self._task_table = shared_table(config.tasks_durable)
        self._task_watchers = {}
        self._task_poke = None
        task_specs = TASK_TOOL_SPECS
        if config.tasks_conformance:
            task_specs = task_specs + CONFORMANCE_TASK_TOOL_SPECS
        for name, description, schema, _output, support in task_specs:
            tool = {"name": name, "description": description, "inputSchema": schema}
            if support is not None and config.tasks and config.era != "modern":
                tool["execution"] = {"taskSupport": support}  # legacy (2025-11-25) only
            self._static_tools.append(tool)
            self._tool_fns[name] = getattr(self, "_t_" + name)
        for i in range(config.extra_tools):
            name = f"extra_{i}"
            self._static_tools.append(
                {
                    "name": name,
                    "description": f"Generated tool {i}.",
                    "inputSchema": object_schema({}),
                }
            )
            self._tool_fns[name] = self._t_dynamic
        self._dynamic_tools: dict[str, dict[str, Any]] = {}
        self._prompts, self._resources, self._templates = PROMPTS, RESOURCES, RESOURCE_TEMPLATES
        if config.metadata:
            self._static_tools = with_metadata(self._static_tools, METADATA_TOOLS)
            self._prompts = with_metadata(PROMPTS, METADATA_PROMPTS)
            self._resources = with_metadata(RESOURCES, METADATA_RESOURCES)
            self._templates = with_metadata(RESOURCE_TEMPLATES, METADATA_TEMPLATES)
        self._dynamic_results: dict[str, dict[str, Any]] = {}
        self._tools_list = list(self._static_tools)
        common = {
            "tools/list": self._h_tools_list,
            "tools/call": self._h_tools_call,
            "prompts/list": self._h_prompts_list,
            "prompts/get": self._h_prompts_get,
            "resources/list": self._h_resources_list,
            "resources/templates/list": self._h_templates_list,
            "resources/read": self._h_resources_read,
            "completion/complete": self._h_complete,
        }
        self._modern_handlers: dict[str, Callable[[Ctx], Any]] = {
            "server/discover": self._h_discover,
            "subscriptions/listen": self._h_listen,
            **common,
        }
        if config.tasks:
            self._modern_handlers["tasks/get"] = self._h_tasks_get
            self._modern_handlers["tasks/update"] = self._h_tasks_update
            self._modern_handlers["tasks/cancel"] = self._h_tasks_cancel
        self._legacy_handlers: dict[str, Callable[[Ctx], Any]] = {
            "initialize": self._h_initialize,
            "ping": self._h_ping,
            "resources/subscribe": self._h_subscribe,
            "resources/unsubscribe": self._h_unsubscribe,
            "logging/setLevel": self._h_set_level,
            "tasks/get": self._h_legacy_tasks_get,
            "tasks/result": self._h_legacy_tasks_result,
            "tasks/list": self._h_legacy_tasks_list,
            "tasks/cancel": self._h_legacy_tasks_cancel,
            **common,
        }
        for table in (self._modern_handlers, self._legacy_handlers):
            table.update(self._skill_handlers())  # with --skills

    # ---- entry points -----------------------------------------------------------------------

    @property
    def era(self) -> str | None:
        """``"modern"`` or ``"legacy"`` once decided (at once unless ``--era both``)."""
        return self._era

    def receive_line(self, line: bytes) -> None:
        """Handle one line of input (without its newline). Blank lines are ignored."""
        try:
            msg = orjson.loads(line)
        except orjson.JSONDecodeError:
            if not line.strip():
                return
            self._event("parse_error", line=line[:200].decode("utf-8", "replace"))
            self._emit(
                {
                    "jsonrpc": "2.0",
                    "id": None,
                    "error": {"code": PARSE_ERROR, "message": "Parse error"},
                }
            )
            return
        if self._log_raw is not None and type(msg) is dict and msg:
            # {"t":..,"pid":..,"dir":"in", + the message's own members: id, method, params...
            head = b'{"t":%.9f,"pid":%d,"dir":"in",' % (time.monotonic(), self._pid)
            if "id" not in msg:
                head += b'"id":null,'
            if "method" not in msg:
                head += b'"method":null,'
            if "params" not in msg:
                head += b'"params":null,'
            self._log_raw(head + line.strip()[1:] + b"\n")
            self._handle(msg)
        else:
            self.receive(msg)

    def receive(self, msg: Any) -> None:
        """Handle one decoded JSON-RPC message."""
        if type(msg) is not dict:
            self._log_in({"invalid": msg})
            self._send_error(None, RpcError(INVALID_REQUEST, "Invalid Request"), None)
            return
        if self._log is not None:
            self._log_in(msg)
        self._handle(msg)

    def _handle(self, msg: dict[str, Any]) -> None:
        method = msg.get("method")
        if method is None:
            if "id" in msg and ("result" in msg or "error" in msg):
                self._on_response(msg)
            else:
                self._send_error(msg.get("id"), RpcError(INVALID_REQUEST, "Invalid Request"), None)
            return
        if type(method) is not str:
            self._send_error(msg.get("id"), RpcError(INVALID_REQUEST, "Invalid Request"), None)
            return
        params = msg.get("params")
        if "id" in msg:
            request_id = msg["id"]
            if type(request_id) not in (int, str):
                self._send_error(None, RpcError(INVALID_REQUEST, "Invalid Request: bad id"), None)
                return
            if self._rules:
                rule = self._match(method, params, True)
                if rule is not None:
                    self._apply(rule, request_id, method, params, True)
                    return
            self._run_default(request_id, method, params, None)
        else:
            if self._rules:
                rule = self._match(method, params, False)
                if rule is not None:
                    self._apply(rule, None, method, params, False)
                    return
            self._notification(method, params)

    def cancel_all(self) -> None:
        """Cancel every piece of work in progress (e.g. when the transport closes)."""
        for task in [*self._tasks.values(), *self._detached, *self._task_watchers.values()]:
            task.cancel()
        self._tasks.clear()

    # ---- logging ----------------------------------------------------------------------------

    def _log_in(self, msg: dict[str, Any]) -> None:
        if self._log is None:
            return
        record = {
            "t": time.monotonic(),
            "pid": self._pid,
            "dir": "in",
            "id": msg.get("id"),
            "method": msg.get("method"),
            "params": msg.get("params"),
        }
        if "result" in msg:
            record["result"] = msg["result"]
        if "error" in msg:
            record["error"] = msg["error"]
        if "invalid" in msg:
            record["invalid"] = msg["invalid"]
        self._log(record)

    def _event(self, name: str, **fields: Any) -> None:
        if self._log is not None:
            self._log({"t": time.monotonic(), "pid": self._pid, "event": name, **fields})

    # ---- rules ------------------------------------------------------------------------------

    def _match(self, method: str, params: Any, is_request: bool) -> Rule | None:
        chosen = None
        for rule in self._rules:
            if not rule.matches(method, params, is_request):
                continue
            rule.seen += 1
            if chosen is not None:
                continue
            if rule.nth is not None and rule.seen != rule.nth:
                continue
            if rule.times is not None and rule.applied >= rule.times:
                continue
            rule.applied += 1
            chosen = rule
        return chosen

    def _apply(
        self, rule: Rule, request_id: Any, method: str, params: Any, is_request: bool
    ) -> None:
        self._event("rule", rule=rule.index, id=request_id, method=method, action=rule.terminal)
        if self._rule_hook is not None:
            self._rule_hook(rule)
        if rule.delay > 0:
            self._spawn(request_id, self._delayed(rule, request_id, method, params, is_request))
            return
        pending = self._act(rule, request_id, method, params, is_request)
        if pending is not None:
            self._spawn(request_id, self._finish(request_id, pending, rule))

    async def _delayed(
        self, rule: Rule, request_id: Any, method: str, params: Any, is_request: bool
    ) -> None:
        await asyncio.sleep(rule.delay)
        pending = self._act(rule, request_id, method, params, is_request)
        if pending is not None:
            await self._finish(request_id, pending, rule)

    def _act(self, rule: Rule, request_id: Any, method: str, params: Any, is_request: bool) -> Any:
        """Do the rule's terminal action (or the default); return an awaitable still to finish."""
        kind = rule.terminal
        if kind in HTTP_FAULTS:
            if self._fault is not None:
                self._fault(rule, request_id)
                return None
            kind = None  # stdio: the default answer
        if kind is None:
            if is_request:
                return self._run_default(request_id, method, params, rule, spawn=False)
            self._notification(method, params)
        elif kind == "exit":
            self._exit(rule.arg, f"rule {rule.index}")
        elif kind == "garbage":
            self._emit_raw(rule.arg)
        elif kind == "close_stdout":
            self._event("stdout_closed", id=request_id)
            self._close_output()
        elif kind == "drop" or not is_request:
            pass
        elif kind == "error":
            self._send_error(request_id, rule.arg, rule)
        elif kind == "result":
            self._send_result(request_id, rule.arg, rule)
        return None

    # ---- sending ----------------------------------------------------------------------------

    def _send_result(self, request_id: Any, result: Any, mods: Rule | None) -> None:
        if mods is None:
            self._emit({"jsonrpc": "2.0", "id": request_id, "result": result})
            return
        if mods.wrong_id is not None:
            request_id = derive_wrong_id(request_id) if mods.wrong_id is True else mods.wrong_id
        msg = {"jsonrpc": "2.0", "id": request_id, "result": result}
        self._emit(msg)
        if mods.twice:
            self._emit(msg)

    def _send_error(self, request_id: Any, error: RpcError, mods: Rule | None) -> None:
        if mods is not None and mods.wrong_id is not None:
            request_id = derive_wrong_id(request_id) if mods.wrong_id is True else mods.wrong_id
        msg = {"jsonrpc": "2.0", "id": request_id, "error": error.to_dict()}
        self._emit(msg)
        if mods is not None and mods.twice:
            self._emit(msg)

    def _notify(self, method: str, params: Any = None) -> None:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self._emit(msg)

    def _exit(self, code: int, reason: str) -> None:
        self._event("exit", code=code, reason=reason)
        if self._exit_cb is not None:
            self._exit_cb(code)
        else:
            os._exit(code)

    # ---- requests ---------------------------------------------------------------------------

    def _spawn(self, request_id: Any, coro: Any) -> None:
        task = asyncio.get_running_loop().create_task(coro)
        if request_id is not None:
            self._tasks[request_id] = task
            task.add_done_callback(functools.partial(self._forget, request_id))

    def _forget(self, request_id: Any, task: asyncio.Task[Any]) -> None:
        if self._tasks.get(request_id) is task:
            del self._tasks[request_id]

    def _run_default(
        self, request_id: Any, method: str, params: Any, mods: Rule | None, spawn: bool = True
    ) -> Any:
        try:
            out = self._dispatch(request_id, method, params)
        except RpcError as e:
            self._send_error(request_id, e, mods)
            return None
        if type(out) is dict:
            self._send_result(request_id, out, mods)
            return None
        if out is NO_RESPONSE:
            return None
        if spawn:
            self._spawn(request_id, self._finish(request_id, out, mods))
            return None
        return out

    async def _finish(self, request_id: Any, pending: Any, mods: Rule | None) -> None:
        try:
            result = await pending
        except RpcError as e:
            self._send_error(request_id, e, mods)
            return
        except asyncio.CancelledError:
            raise
        except Exception as e:  # a bug in a handler: say so instead of hanging the client
            self._event("handler_crashed", id=request_id, error=repr(e))
            self._send_error(request_id, RpcError(INTERNAL_ERROR, f"Internal error: {e!r}"), mods)
            return
        if result is not NO_RESPONSE:
            self._send_result(request_id, result, mods)

    # ---- notifications and responses ----------------------------------------------------------

    def _notification(self, method: str, params: Any) -> None:
        if method == "notifications/cancelled":
            self._cancel(params)
        elif method == "notifications/initialized":
            self._event("initialized")
            if self._era == "legacy" and self._initialized:
                self._after_initialized()
        elif method == "notifications/roots/list_changed":
            self._roots_list_changed()

    def _cancel(self, params: Any) -> None:
        request_id = params.get("requestId") if isinstance(params, dict) else None
        reason = params.get("reason") if isinstance(params, dict) else None
        if type(request_id) not in (int, str):
            self._event("cancelled", id=request_id, found=False, reason=reason)
            return
        task = self._tasks.pop(request_id, None)
        listen = self._listens.pop(request_id, None)
        if task is not None:
            task.cancel()
        self._event(
            "cancelled",
            id=request_id,
            found=task is not None or listen is not None,
            reason=reason,
        )

    def _on_response(self, msg: dict[str, Any]) -> None:
        request_id = msg.get("id")
        future = (
            self._client_requests.pop(request_id, None) if type(request_id) in (int, str) else None
        )
        known = self._learn(msg)
        if future is None:
            if not known:
                self._event("unexpected_response", id=request_id)
        elif not future.done():
            future.set_result(msg)
