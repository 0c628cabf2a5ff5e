"""The protocol logic of the scripted MCP test server, independent of any transport.

:class:`ScriptedMcpServer` takes decoded JSON-RPC messages (:meth:`~ScriptedMcpServer.receive`)
or raw lines (:meth:`~ScriptedMcpServer.receive_line`) and answers through callbacks:
``emit(msg)`` for a JSON-RPC message, ``emit_raw(bytes)`` for a raw (possibly invalid) line,
``close_output()`` and ``exit(code)``. Work that takes time (delays, ``slow``, ``never``,
progress with a delay) runs in asyncio tasks on the running loop, so ``receive`` must be
called from a coroutine or a callback of a running event loop.

The behaviour (options, tools, rules) is documented in :mod:`conduit_mcp.testing`.
Requests that need no waiting are answered synchronously inside ``receive``: no task, no
copy, one ``orjson.dumps`` per answer, so the server costs a few microseconds per call.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

__all__ = [
    "DEFAULT_LEGACY_VERSIONS",
    "DEFAULT_MODERN_VERSIONS",
    "Config",
    "ConfigError",
    "Rule",
    "RpcError",
    "ScriptedMcpServer",
    "build_parser",
    "config_from_args",
    "is_modern_version",
    "parse_rules",
]

PV_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"

FIRST_MODERN_VERSION = "2026-07-28"
DEFAULT_MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
DEFAULT_LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
DEFAULT_INSTRUCTIONS = (
    "Scripted MCP test server (conduit_mcp.testing): deterministic tools for exercising clients."
)

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
LEGACY_RESOURCE_NOT_FOUND = -32002
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
_LOG_RANK = {level: i for i, level in enumerate(LOG_LEVELS)}
_CACHEABLE = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
    }
)
_GARBAGE_LINE = b"<<conduit_mcp.testing: this line is not JSON>>\n"
_NO_RESPONSE: Any = object()  # a handler's way of saying "answer later, or never"
_MISSING: Any = object()


def is_modern_version(version: str) -> bool:
    """Whether ``version`` belongs to the modern (per-request ``_meta``) era.

    Date versions from ``2026-07-28`` on are modern, earlier ones legacy; a version that is
    not a ``YYYY-MM-DD`` date (e.g. ``"draft"``) counts as modern.
    """
    if len(version) == 10 and version[4] == "-" and version[7] == "-":
        return version >= FIRST_MODERN_VERSION
    return True


class ConfigError(ValueError):
    """An invalid option or script."""


class RpcError(Exception):
    """Raised by a handler to answer with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = _MISSING) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not _MISSING:
            err["data"] = self.data
        return err


# --------------------------------------------------------------------------------------------
# Configuration and scripts


@dataclass(slots=True)
class Rule:
    """One parsed script rule (see the module docs of :mod:`conduit_mcp.testing`)."""

    index: int
    method: str | None = None
    tool: str | None = None
    name: str | None = None
    nth: int | None = None
    times: int | None = None
    process: int | None = None
    delay: float = 0.0
    terminal: str | None = None  # error | result | drop | exit | garbage | close_stdout
    arg: Any = None
    twice: bool = False
    wrong_id: Any = None  # None: keep the id; True: derive one; anything else: use it
    seen: int = 0
    applied: int = 0

    def matches(self, method: str, params: Any, is_request: bool) -> bool:
        if self.method is not None:
            if self.method != method:
                return False
        elif not is_request:
            return False
        if self.tool is not None:
            if method != "tools/call" or not isinstance(params, dict):
                return False
            if params.get("name") != self.tool:
                return False
        if self.name is not None:
            if not isinstance(params, dict):
                return False
            if params.get("name", params.get("uri")) != self.name:
                return False
        return True


_RULE_KEYS = {"match", "action", "times", "first_process_only", "process"}
_MATCH_KEYS = {"method", "tool", "name", "nth", "first_process_only", "process"}
_ACTION_KEYS = {
    "error",
    "result",
    "drop",
    "delay",
    "exit",
    "garbage",
    "respond_twice",
    "wrong_id",
    "close_stdout",
}
_TERMINALS = ("error", "result", "drop", "exit", "garbage", "close_stdout")


def _positive_int(value: Any, what: str) -> int:
    if type(value) is not int or value < 1:
        raise ConfigError(f"{what} must be an integer >= 1, got {value!r}")
    return value


def _parse_rule(index: int, raw: Any) -> Rule:
    where = f"rule {index}"
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: a rule must be an object")
    unknown = set(raw) - _RULE_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}")
    rule = Rule(index=index)
    match = raw.get("match", {})
    if not isinstance(match, dict):
        raise ConfigError(f"{where}: match must be an object")
    unknown = set(match) - _MATCH_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown match key(s) {sorted(unknown)}")
    for key in ("method", "tool", "name"):
        value = match.get(key)
        if value is not None and not isinstance(value, str):
            raise ConfigError(f"{where}: match.{key} must be a string")
        setattr(rule, key, value)
    if rule.tool is not None and rule.method not in (None, "tools/call"):
        raise ConfigError(f"{where}: match.tool only applies to tools/call")
    if match.get("nth") is not None:
        rule.nth = _positive_int(match["nth"], f"{where}: match.nth")
    if raw.get("times") is not None:
        rule.times = _positive_int(raw["times"], f"{where}: times")
    for container in (raw, match):
        if container.get("first_process_only"):
            rule.process = 1
        if container.get("process") is not None:
            rule.process = _positive_int(container["process"], f"{where}: process")

    if "action" not in raw:
        raise ConfigError(f"{where}: missing action")
    action = raw["action"]
    if isinstance(action, str):
        if action not in _ACTION_KEYS or action in ("error", "result", "delay"):
            raise ConfigError(f"{where}: unknown action {action!r}")
        action = {action: True}
    if not isinstance(action, dict) or not action:
        raise ConfigError(f"{where}: action must be a non-empty object or a string")
    unknown = set(action) - _ACTION_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown action key(s) {sorted(unknown)}")
    terminals = [k for k in _TERMINALS if k in action and action[k] is not False]
    if len(terminals) > 1:
        raise ConfigError(f"{where}: at most one of {list(_TERMINALS)} per action")
    if "delay" in action:
        delay = action["delay"]
        if type(delay) not in (int, float) or delay < 0:
            raise ConfigError(f"{where}: delay must be a number of seconds >= 0")
        rule.delay = float(delay)
    rule.twice = bool(action.get("respond_twice", False))
    wrong = action.get("wrong_id")
    rule.wrong_id = None if wrong is None or wrong is False else wrong
    if terminals:
        kind = terminals[0]
        value = action[kind]
        rule.terminal = kind
        if kind == "error":
            if not isinstance(value, dict) or type(value.get("code")) is not int:
                raise ConfigError(f"{where}: error must be an object with an integer code")
            rule.arg = RpcError(
                value["code"],
                str(value.get("message", "Scripted error")),
                value.get("data", _MISSING),
            )
        elif kind == "result":
            if not isinstance(value, dict):
                raise ConfigError(f"{where}: result must be an object")
            rule.arg = value
        elif kind == "exit":
            if value is True:
                rule.arg = 3
            elif type(value) is int and 0 <= value <= 255:
                rule.arg = value
            else:
                raise ConfigError(f"{where}: exit must be true or an exit code 0..255")
        elif kind == "garbage":
            if value is True:
                rule.arg = _GARBAGE_LINE
            elif isinstance(value, str) and "\n" not in value:
                rule.arg = value.encode() + b"\n"
            else:
                raise ConfigError(f"{where}: garbage must be true or a one-line string")
    elif not (rule.delay or rule.twice or rule.wrong_id is not None):
        raise ConfigError(f"{where}: the action does nothing")
    return rule


def parse_rules(rules: Any) -> list[Rule]:
    """Validate and parse a script: ``{"rules": [...]}`` or a bare list of rules."""
    if isinstance(rules, dict):
        unknown = set(rules) - {"rules"}
        if unknown:
            raise ConfigError(f"script: unknown key(s) {sorted(unknown)}")
        rules = rules.get("rules", [])
    if not isinstance(rules, list | tuple):
        raise ConfigError("script: rules must be a list")
    return [_parse_rule(i, raw) for i, raw in enumerate(rules)]


@dataclass(slots=True)
class Config:
    """Everything the server needs; built from the command line by :func:`config_from_args`."""

    era: str = "both"
    versions: tuple[str, ...] | None = None
    name: str = "scripted"
    server_version: str = "1.0.0"
    instructions: str = DEFAULT_INSTRUCTIONS
    page_size: int | None = None
    ttl_ms: int = 0
    cache_scope: str = "public"
    advertise_legacy: bool = False
    extra_tools: int = 0
    rules: list[Rule] = field(default_factory=list)
    script_path: str | None = None
    log_path: str | None = None
    log_out: bool = False
    stderr_noise: int = 0
    startup_delay: float = 0.0
    ignore_eof: bool = False
    ignore_sigterm: bool = False
    modern_versions: tuple[str, ...] = ()
    legacy_versions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if self.era not in ("both", "modern", "legacy"):
            raise ConfigError(f"era must be both, modern or legacy, not {self.era!r}")
        if self.versions is None:
            modern = DEFAULT_MODERN_VERSIONS if self.era != "legacy" else ()
            legacy = DEFAULT_LEGACY_VERSIONS if self.era != "modern" else ()
        else:
            modern = tuple(v for v in self.versions if is_modern_version(v))
            legacy = tuple(v for v in self.versions if not is_modern_version(v))
            if self.era == "modern":
                legacy = ()
            elif self.era == "legacy":
                modern = ()
        self.modern_versions = modern
        self.legacy_versions = legacy
        if self.page_size is not None and self.page_size < 1:
            raise ConfigError("page size must be >= 1")
        if self.cache_scope not in ("public", "private"):
            raise ConfigError("cache scope must be public or private")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m conduit_mcp.testing",
        description="A scriptable MCP server (modern 2026-07-28 and legacy eras) over stdio.",
    )
    p.add_argument("--era", choices=("both", "modern", "legacy"), default="both")
    p.add_argument("--versions", help="comma-separated protocol versions the server supports")
    p.add_argument("--name", default="scripted", help="serverInfo name")
    p.add_argument("--server-version", default="1.0.0", help="serverInfo version")
    p.add_argument("--instructions", default=DEFAULT_INSTRUCTIONS)
    p.add_argument("--page-size", type=int, help="items per page of every */list result")
    p.add_argument("--ttl-ms", type=int, default=0, help="ttlMs of cacheable modern results")
    p.add_argument("--cache-scope", choices=("public", "private"), default="public")
    p.add_argument(
        "--advertise-legacy",
        action="store_true",
        help="also list the legacy versions in supportedVersions and -32022 data.supported",
    )
    p.add_argument("--extra-tools", type=int, default=0, help="add N tools extra_0..extra_N-1")
    p.add_argument("--log", help="append one JSON line per received message and event")
    p.add_argument("--log-out", action="store_true", help="also log every sent message")
    p.add_argument("--script", help="JSON rules file")
    p.add_argument("--stderr-noise", type=int, default=0, help="write N lines to stderr at start")
    p.add_argument("--startup-delay", type=float, default=0.0, help="seconds before reading")
    p.add_argument("--ignore-eof", action="store_true", help="keep running after stdin closes")
    p.add_argument("--ignore-sigterm", action="store_true", help="survive SIGTERM (logged)")
    return p


def config_from_args(argv: Iterable[str] | None = None) -> Config:
    """Parse the command line (argparse exits with code 2 on a bad option) and the script."""
    ns = build_parser().parse_args(None if argv is None else list(argv))
    versions = None
    if ns.versions is not None:
        versions = tuple(v.strip() for v in ns.versions.split(",") if v.strip())
    rules: list[Rule] = []
    if ns.script:
        try:
            with open(ns.script, "rb") as f:
                raw = orjson.loads(f.read())
        except (OSError, orjson.JSONDecodeError) as e:
            raise ConfigError(f"cannot read script {ns.script}: {e}") from e
        rules = parse_rules(raw)
    if ns.extra_tools < 0 or ns.stderr_noise < 0 or ns.ttl_ms < 0:
        raise ConfigError("--extra-tools, --stderr-noise and --ttl-ms must be >= 0")
    return Config(
        era=ns.era,
        versions=versions,
        name=ns.name,
        server_version=ns.server_version,
        instructions=ns.instructions,
        page_size=ns.page_size,
        ttl_ms=ns.ttl_ms,
        cache_scope=ns.cache_scope,
        advertise_legacy=ns.advertise_legacy,
        extra_tools=ns.extra_tools,
        rules=rules,
        script_path=ns.script,
        log_path=ns.log,
        log_out=ns.log_out,
        stderr_noise=ns.stderr_noise,
        startup_delay=ns.startup_delay,
        ignore_eof=ns.ignore_eof,
        ignore_sigterm=ns.ignore_sigterm,
    )


# --------------------------------------------------------------------------------------------
# Catalogue: tools, prompts, resources


def _obj(properties: dict[str, Any], required: Iterable[str] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    req = list(required)
    if req:
        schema["required"] = req
    return schema


_STR = {"type": "string"}
_NUM = {"type": "number"}

# (name, description, inputSchema, outputSchema or None)
_TOOL_SPECS: list[tuple[str, str, dict[str, Any], dict[str, Any] | None]] = [
    (
        "add",
        "Add two numbers.",
        _obj({"a": _NUM, "b": _NUM}, ("a", "b")),
        _obj({"sum": _NUM}, ("sum",)),
    ),
    ("echo", "Return the text unchanged.", _obj({"text": _STR}, ("text",)), None),
    (
        "progress",
        "Report progress once per step (when the request has _meta.progressToken).",
        _obj(
            {
                "steps": {"type": "integer", "minimum": 0, "default": 3},
                "delay": {"type": "number", "minimum": 0, "default": 0.01},
            }
        ),
        None,
    ),
    (
        "slow",
        "Answer after the given number of seconds.",
        _obj({"seconds": {"type": "number", "minimum": 0}}, ("seconds",)),
        None,
    ),
    ("never", "Never answer (until cancelled).", _obj({}), None),
    (
        "crash",
        "Exit the server process at once, without answering.",
        _obj({"code": {"type": "integer", "minimum": 0, "maximum": 255, "default": 1}}),
        None,
    ),
    ("garbage", "Write a non-JSON line to stdout, then answer.", _obj({"text": _STR}), None),
    (
        "big",
        "Return a text content of exactly `size` bytes.",
        _obj({"size": {"type": "integer", "minimum": 0}}, ("size",)),
        None,
    ),
    ("stderr", "Write the text to stderr, then answer.", _obj({"text": _STR}, ("text",)), None),
    ("fail", "Return a tool result with isError: true.", _obj({"message": _STR}), None),
    (
        "error",
        "Answer with a JSON-RPC error.",
        _obj({"code": {"type": "integer"}, "message": _STR, "data": {}}, ("code", "message")),
        None,
    ),
    (
        "notify",
        "Send `count` notifications of `method` (with `params`), then answer.",
        _obj(
            {
                "method": _STR,
                "count": {"type": "integer", "minimum": 0, "default": 1},
                "params": {"type": "object"},
            },
            ("method",),
        ),
        None,
    ),
    (
        "env",
        "Return the value of an environment variable (structuredContent.value, null if unset).",
        _obj({"name": _STR}, ("name",)),
        _obj({"name": _STR, "value": {"type": ["string", "null"]}}, ("name", "value")),
    ),
    ("cwd", "Return the server's working directory.", _obj({}), None),
    ("pid", "Return the server's process id.", _obj({}), None),
    (
        "log",
        "Emit notifications/message at `level` (if the request's or session's level allows).",
        _obj({"level": {"type": "string", "enum": list(LOG_LEVELS)}, "data": {}, "logger": _STR}),
        None,
    ),
    (
        "changed",
        "Announce a change: kind tools|prompts|resources (list_changed) or resource (updated).",
        _obj(
            {
                "kind": {"type": "string", "enum": ["tools", "prompts", "resources", "resource"]},
                "uri": _STR,
            },
            ("kind",),
        ),
        None,
    ),
    (
        "add_tool",
        "Add a dynamic tool and announce tools/list_changed.",
        _obj({"name": _STR}, ("name",)),
        None,
    ),
    (
        "remove_tool",
        "Remove a dynamic tool and announce tools/list_changed.",
        _obj({"name": _STR}, ("name",)),
        None,
    ),
    (
        "client_request",
        "Ask the client (MRTR input_required when modern, a server request when legacy).",
        _obj({"method": _STR, "params": {"type": "object"}}, ("method",)),
        None,
    ),
    (
        "end_listens",
        "End every subscriptions/listen stream (how: result or cancelled).",
        _obj({"how": {"type": "string", "enum": ["result", "cancelled"]}}),
        None,
    ),
    ("cpu", "Return the server's CPU time (time.process_time()).", _obj({}), None),
]

_PROMPTS = [
    {
        "name": "greet",
        "title": "Greeting",
        "description": "Greet someone by name.",
        "arguments": [{"name": "name", "description": "Who to greet", "required": True}],
    },
    {"name": "plain", "title": "Plain", "description": "A prompt without arguments."},
]
_RESOURCES = [
    {"uri": "test://static/hello", "name": "hello", "title": "Hello", "mimeType": "text/plain"},
    {"uri": "test://static/blob", "name": "blob", "mimeType": "application/octet-stream"},
]
_TEMPLATES = [
    {"uriTemplate": "test://item/{id}", "name": "item", "title": "Item", "mimeType": "text/plain"}
]
_BLOB = base64.b64encode(bytes(range(16))).decode()
_NAMES = ["alice", "bob", "carol"]
_ITEM_IDS = ["1", "2", "3"]
_CAPABILITY_FOR = {
    "elicitation/create": "elicitation",
    "sampling/createMessage": "sampling",
    "roots/list": "roots",
}


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}]}


def _tool_error(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": True}


def _is_num(x: Any) -> bool:
    return type(x) is int or type(x) is float


def _encode_cursor(offset: int) -> str:
    return base64.urlsafe_b64encode(f"offset:{offset}".encode()).decode()


def _decode_cursor(cursor: Any, length: int) -> int:
    try:
        text = base64.urlsafe_b64decode(cursor.encode()).decode()
        prefix, _, number = text.partition(":")
        offset = int(number)
        if prefix == "offset" and 0 <= offset <= length:
            return offset
    except (AttributeError, ValueError, UnicodeError):
        pass
    raise RpcError(INVALID_PARAMS, "Invalid cursor", {"cursor": cursor})


def _wrong_id(request_id: Any) -> Any:
    if type(request_id) is int:
        return -1_000_000_000 - request_id
    return f"{request_id}-wrong"


class _Ctx:
    __slots__ = ("era", "id", "meta", "method", "params")

    def __init__(self, request_id: Any, method: str, params: Any, meta: Any, era: str) -> None:
        self.id = request_id
        self.method = method
        self.params = params
        self.meta = meta if isinstance(meta, dict) else None
        self.era = era


# --------------------------------------------------------------------------------------------
# The server


class ScriptedMcpServer:
    """One connection's worth of MCP server state (one process on stdio).

    ``emit(msg)`` sends a JSON-RPC message; ``emit_raw(line)`` writes raw bytes (a whole line,
    newline included); ``close_output()`` closes the output stream; ``exit(code)`` ends the
    process (it should not return). ``log(record)`` receives one dict per received message and
    per notable event; ``log_raw(line)``, if given, receives the log line of a received
    message as bytes instead (spliced from the input line: no re-encoding). ``start_number``
    is this process's start count (1 for the first), used by rules with
    ``first_process_only``/``process``.
    """

    def __init__(
        self,
        config: Config,
        emit: Callable[[dict[str, Any]], None],
        *,
        emit_raw: Callable[[bytes], None] | None = None,
        close_output: Callable[[], None] | None = None,
        exit: Callable[[int], None] | None = None,
        log: Callable[[dict[str, Any]], None] | None = None,
        log_raw: Callable[[bytes], None] | None = None,
        start_number: int = 1,
    ) -> None:
        self.config = config
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
        self._server_info = {"name": config.name, "version": config.server_version}
        self._result_meta = {SERVER_INFO_KEY: self._server_info}
        self._tool_fns: dict[str, Callable[[_Ctx, dict[str, Any]], Any]] = {}
        self._static_tools: list[dict[str, Any]] = []
        for name, description, schema, output in _TOOL_SPECS:
            tool: dict[str, Any] = {"name": name, "description": description, "inputSchema": schema}
            if output is not None:
                tool["outputSchema"] = output
            self._static_tools.append(tool)
            self._tool_fns[name] = getattr(self, "_t_" + name)
        for i in range(config.extra_tools):
            name = f"extra_{i}"
            self._static_tools.append(
                {"name": name, "description": f"Generated tool {i}.", "inputSchema": _obj({})}
            )
            self._tool_fns[name] = self._t_dynamic
        self._dynamic_tools: dict[str, dict[str, Any]] = {}
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
        self._modern_handlers: dict[str, Callable[[_Ctx], Any]] = {
            "server/discover": self._h_discover,
            "subscriptions/listen": self._h_listen,
            **common,
        }
        self._legacy_handlers: dict[str, Callable[[_Ctx], Any]] = {
            "initialize": self._h_initialize,
            "ping": self._h_ping,
            "resources/subscribe": self._h_subscribe,
            "resources/unsubscribe": self._h_unsubscribe,
            "logging/setLevel": self._h_set_level,
            **common,
        }

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
        for task in list(self._tasks.values()):
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
            request_id = _wrong_id(request_id) if mods.wrong_id is True else mods.wrong_id
        msg = {"jsonrpc": "2.0", "id": request_id, "result": result}
        self._emit(msg)
        if mods.twice:
            self._emit(msg)

    def _send_error(self, request_id: Any, error: RpcError, mods: Rule | None) -> None:
        if mods is not None and mods.wrong_id is not None:
            request_id = _wrong_id(request_id) if mods.wrong_id is True else mods.wrong_id
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
            task.add_done_callback(lambda t, rid=request_id: self._forget(rid, t))

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
        if out is _NO_RESPONSE:
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
        if result is not _NO_RESPONSE:
            self._send_result(request_id, result, mods)

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
        if LOG_LEVEL_KEY in meta and meta[LOG_LEVEL_KEY] not in _LOG_RANK:
            raise RpcError(
                INVALID_PARAMS, f"Invalid params: unknown log level {meta[LOG_LEVEL_KEY]!r}"
            )
        if self._era is None:
            self._era = "modern"
            self._event("era", era="modern", method=method)
        out = handler(_Ctx(request_id, method, params, meta, "modern"))
        if type(out) is dict:
            return self._complete(method, out)
        if out is _NO_RESPONSE:
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
        meta = result.get("_meta")
        if meta is None:
            result["_meta"] = self._result_meta
        elif SERVER_INFO_KEY not in meta:
            result["_meta"] = {**meta, SERVER_INFO_KEY: self._server_info}
        if method in _CACHEABLE and result["resultType"] == "complete":
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
        return handler(_Ctx(request_id, method, params, meta, "legacy"))

    # ---- notifications and responses ----------------------------------------------------------

    def _notification(self, method: str, params: Any) -> None:
        if method == "notifications/cancelled":
            self._cancel(params)
        elif method == "notifications/initialized":
            self._event("initialized")

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
        if future is None:
            self._event("unexpected_response", id=request_id)
        elif not future.done():
            future.set_result(msg)

    # ---- method handlers ----------------------------------------------------------------------

    def _h_discover(self, ctx: _Ctx) -> dict[str, Any]:
        return {
            "resultType": "complete",
            "supportedVersions": list(self._advertised),
            "capabilities": {
                "tools": {"listChanged": True},
                "prompts": {"listChanged": True},
                "resources": {"subscribe": True, "listChanged": True},
                "completions": {},
            },
            "_meta": self._result_meta,
            "instructions": self.config.instructions,
            "ttlMs": self.config.ttl_ms,
            "cacheScope": self.config.cache_scope,
        }

    def _h_initialize(self, ctx: _Ctx) -> dict[str, Any]:
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
                "logging": {},
            },
            "serverInfo": dict(self._server_info),
            "instructions": self.config.instructions,
        }

    def _h_ping(self, ctx: _Ctx) -> dict[str, Any]:
        return {}

    def _page(self, items: list[dict[str, Any]], ctx: _Ctx, key: str) -> dict[str, Any]:
        params = ctx.params
        cursor = params.get("cursor") if type(params) is dict else None
        start = 0 if cursor is None else _decode_cursor(cursor, len(items))
        size = self.config.page_size
        if size is None:
            return {key: items[start:] if start else items}
        end = start + size
        result: dict[str, Any] = {key: items[start:end]}
        if end < len(items):
            result["nextCursor"] = _encode_cursor(end)
        return result

    def _h_tools_list(self, ctx: _Ctx) -> dict[str, Any]:
        return self._page(self._tools_list, ctx, "tools")

    def _h_prompts_list(self, ctx: _Ctx) -> dict[str, Any]:
        return self._page(_PROMPTS, ctx, "prompts")

    def _h_resources_list(self, ctx: _Ctx) -> dict[str, Any]:
        return self._page(_RESOURCES, ctx, "resources")

    def _h_templates_list(self, ctx: _Ctx) -> dict[str, Any]:
        return self._page(_TEMPLATES, ctx, "resourceTemplates")

    def _h_tools_call(self, ctx: _Ctx) -> Any:
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

    def _h_prompts_get(self, ctx: _Ctx) -> dict[str, Any]:
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
        else:
            raise RpcError(INVALID_PARAMS, f"Unknown prompt: {name}", {"name": name})
        return {
            "description": description,
            "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        }

    def _h_resources_read(self, ctx: _Ctx) -> dict[str, Any]:
        params = ctx.params if isinstance(ctx.params, dict) else {}
        uri = params.get("uri")
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: resources/read needs a uri")
        if uri == "test://static/hello":
            content = {"uri": uri, "mimeType": "text/plain", "text": "Hello, world!"}
        elif uri == "test://static/blob":
            content = {"uri": uri, "mimeType": "application/octet-stream", "blob": _BLOB}
        elif uri.startswith("test://item/") and len(uri) > len("test://item/"):
            item = uri[len("test://item/") :]
            content = {"uri": uri, "mimeType": "text/plain", "text": f"item {item}"}
        elif ctx.era == "modern":
            raise RpcError(INVALID_PARAMS, "Resource not found", {"uri": uri})
        else:
            raise RpcError(LEGACY_RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})
        return {"contents": [content]}

    def _h_complete(self, ctx: _Ctx) -> dict[str, Any]:
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
                candidates = _NAMES
        elif ref.get("type") == "ref/resource" and ref.get("uri") == "test://item/{id}":
            if argument.get("name") == "id":
                candidates = _ITEM_IDS
        elif ref.get("type") not in ("ref/prompt", "ref/resource"):
            raise RpcError(INVALID_PARAMS, f"Invalid params: unknown ref type {ref.get('type')!r}")
        values = [c for c in candidates if c.startswith(prefix)]
        return {"completion": {"values": values, "total": len(values), "hasMore": False}}

    def _h_listen(self, ctx: _Ctx) -> Any:
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
        self._listens[ctx.id] = honored
        self._event("listen", id=ctx.id, notifications=honored)
        self._notify(
            "notifications/subscriptions/acknowledged",
            {"_meta": {SUBSCRIPTION_KEY: ctx.id}, "notifications": honored},
        )
        return _NO_RESPONSE

    def _h_subscribe(self, ctx: _Ctx) -> dict[str, Any]:
        uri = ctx.params.get("uri") if isinstance(ctx.params, dict) else None
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: uri required")
        self._legacy_subscriptions.add(uri)
        return {}

    def _h_unsubscribe(self, ctx: _Ctx) -> dict[str, Any]:
        uri = ctx.params.get("uri") if isinstance(ctx.params, dict) else None
        if not isinstance(uri, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: uri required")
        self._legacy_subscriptions.discard(uri)
        return {}

    def _h_set_level(self, ctx: _Ctx) -> dict[str, Any]:
        level = ctx.params.get("level") if isinstance(ctx.params, dict) else None
        if level not in _LOG_RANK:
            raise RpcError(INVALID_PARAMS, f"Invalid params: unknown log level {level!r}")
        self._legacy_level = level
        return {}

    # ---- tools ------------------------------------------------------------------------------

    def _t_add(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        a = args.get("a")
        b = args.get("b")
        if not (_is_num(a) and _is_num(b)):
            return _tool_error("add: a and b must be numbers")
        total = a + b
        return {
            "content": [{"type": "text", "text": str(total)}],
            "structuredContent": {"sum": total},
        }

    def _t_echo(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        text = args.get("text")
        if not isinstance(text, str):
            return _tool_error("echo: text must be a string")
        return _text(text)

    def _t_progress(self, ctx: _Ctx, args: dict[str, Any]) -> Any:
        steps = args.get("steps", 3)
        delay = args.get("delay", 0.01)
        if type(steps) is not int or steps < 0 or not _is_num(delay) or delay < 0:
            return _tool_error("progress: steps must be an integer >= 0 and delay a number >= 0")
        token = ctx.meta.get("progressToken") if ctx.meta else None
        if delay == 0:
            for i in range(1, steps + 1):
                self._progress(token, i, steps)
            return _text(f"done {steps} steps")
        return self._progress_later(token, steps, delay)

    def _progress(self, token: Any, i: int, steps: int) -> None:
        if token is not None:
            self._notify(
                "notifications/progress",
                {"progressToken": token, "progress": i, "total": steps, "message": f"step {i}"},
            )

    async def _progress_later(self, token: Any, steps: int, delay: float) -> dict[str, Any]:
        for i in range(1, steps + 1):
            await asyncio.sleep(delay)
            self._progress(token, i, steps)
        return _text(f"done {steps} steps")

    def _t_slow(self, ctx: _Ctx, args: dict[str, Any]) -> Any:
        seconds = args.get("seconds")
        if not _is_num(seconds) or seconds < 0:
            return _tool_error("slow: seconds must be a number >= 0")
        return self._slow(seconds)

    async def _slow(self, seconds: float) -> dict[str, Any]:
        await asyncio.sleep(seconds)
        return _text(f"slept {seconds}")

    def _t_never(self, ctx: _Ctx, args: dict[str, Any]) -> Any:
        return asyncio.get_running_loop().create_future()

    def _t_crash(self, ctx: _Ctx, args: dict[str, Any]) -> Any:
        code = args.get("code", 1)
        if type(code) is not int or not 0 <= code <= 255:
            return _tool_error("crash: code must be an integer 0..255")
        self._exit(code, "crash tool")
        return _NO_RESPONSE  # only reached when the exit callback returns

    def _t_garbage(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        text = args.get("text")
        if isinstance(text, str) and "\n" not in text:
            self._emit_raw(text.encode() + b"\n")
        else:
            self._emit_raw(_GARBAGE_LINE)
        return _text("garbage sent")

    def _t_big(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        size = args.get("size")
        if type(size) is not int or not 0 <= size <= 1 << 30:
            return _tool_error("big: size must be an integer 0..2**30")
        return _text("x" * size)

    def _t_stderr(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        text = args.get("text")
        if not isinstance(text, str):
            return _tool_error("stderr: text must be a string")
        data = text.encode()
        if not data.endswith(b"\n"):
            data += b"\n"
        try:
            os.write(2, data)
        except OSError:
            pass
        return _text("written")

    def _t_fail(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        message = args.get("message")
        return _tool_error(message if isinstance(message, str) else "failure requested")

    def _t_error(self, ctx: _Ctx, args: dict[str, Any]) -> Any:
        code = args.get("code")
        message = args.get("message")
        if type(code) is not int or not isinstance(message, str):
            return _tool_error("error: code must be an integer and message a string")
        raise RpcError(code, message, args.get("data", _MISSING))

    def _t_notify(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        method = args.get("method")
        count = args.get("count", 1)
        params = args.get("params")
        if not isinstance(method, str) or type(count) is not int or count < 0:
            return _tool_error("notify: method must be a string and count an integer >= 0")
        if params is not None and not isinstance(params, dict):
            return _tool_error("notify: params must be an object")
        for _ in range(count):
            self._notify(method, params)
        return _text(f"sent {count}")

    def _t_env(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        name = args.get("name")
        if not isinstance(name, str):
            return _tool_error("env: name must be a string")
        value = os.environ.get(name)
        return {
            "content": [{"type": "text", "text": "" if value is None else value}],
            "structuredContent": {"name": name, "value": value},
        }

    def _t_cwd(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        return _text(os.getcwd())

    def _t_pid(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        return _text(str(self._pid))

    def _t_cpu(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        spent = time.process_time()
        times = os.times()
        return {
            "content": [{"type": "text", "text": repr(spent)}],
            "structuredContent": {"cpu": spent, "user": times.user, "system": times.system},
        }

    def _t_log(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        level = args.get("level", "info")
        if level not in _LOG_RANK:
            return _tool_error(f"log: unknown level {level!r}")
        logger = args.get("logger", "scripted")
        data = args.get("data", "hello")
        if ctx.era == "modern":
            wanted = ctx.meta.get(LOG_LEVEL_KEY) if ctx.meta else None
        else:
            wanted = self._legacy_level
        if wanted is None or _LOG_RANK[level] < _LOG_RANK[wanted]:
            return _text("suppressed")
        self._notify("notifications/message", {"level": level, "logger": logger, "data": data})
        return _text("logged")

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

    def _t_changed(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        kind = args.get("kind")
        uri = args.get("uri")
        if kind not in ("tools", "prompts", "resources", "resource"):
            return _tool_error("changed: kind must be tools, prompts, resources or resource")
        if kind == "resource" and not isinstance(uri, str):
            return _tool_error("changed: kind resource needs a uri")
        sent = self._announce(kind, ctx.era, uri)
        return {
            "content": [{"type": "text", "text": f"notified {sent}"}],
            "structuredContent": {"sent": sent},
        }

    def _t_add_tool(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        name = args.get("name")
        if not isinstance(name, str) or not name or name in self._tool_fns:
            return _tool_error("add_tool: name must be a new, non-empty string")
        tool = {
            "name": name,
            "description": "A tool added at run time.",
            "inputSchema": _obj({"text": _STR}),
        }
        self._dynamic_tools[name] = tool
        self._tool_fns[name] = self._t_dynamic
        self._tools_list = self._static_tools + list(self._dynamic_tools.values())
        self._announce("tools", ctx.era)
        return _text(f"added {name}")

    def _t_remove_tool(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        name = args.get("name")
        if name not in self._dynamic_tools:
            return _tool_error(f"remove_tool: no dynamic tool {name!r}")
        del self._dynamic_tools[name]
        del self._tool_fns[name]
        self._tools_list = self._static_tools + list(self._dynamic_tools.values())
        self._announce("tools", ctx.era)
        return _text(f"removed {name}")

    def _t_dynamic(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        name = ctx.params["name"]
        return {
            "content": [{"type": "text", "text": f"{name} called"}],
            "structuredContent": {"arguments": args},
        }

    def _t_end_listens(self, ctx: _Ctx, args: dict[str, Any]) -> dict[str, Any]:
        how = args.get("how", "result")
        if how not in ("result", "cancelled"):
            return _tool_error("end_listens: how must be result or cancelled")
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

    def _t_client_request(self, ctx: _Ctx, args: dict[str, Any]) -> Any:
        method = args.get("method")
        req_params = args.get("params", {})
        if not isinstance(method, str) or not isinstance(req_params, dict):
            return _tool_error("client_request: method must be a string and params an object")
        capability = _CAPABILITY_FOR.get(method)
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
            return _tool_error(f"client_request: the client did not declare {capability}")
        return self._ask_client(method, req_params)

    async def _ask_client(self, method: str, params: dict[str, Any]) -> dict[str, Any]:
        self._next_client_request += 1
        request_id = f"s-{self._next_client_request}"
        future = asyncio.get_running_loop().create_future()
        self._client_requests[request_id] = future
        self._emit({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        try:
            reply = await future
        except asyncio.CancelledError:
            self._client_requests.pop(request_id, None)
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


def _enveloped(params: Any) -> bool:
    if type(params) is not dict:
        return False
    meta = params.get("_meta")
    return type(meta) is dict and PV_KEY in meta


def describe_tools() -> list[tuple[str, str]]:
    """(name, description) of every built-in tool, for documentation."""
    return [(name, description) for name, description, _, _ in _TOOL_SPECS]
