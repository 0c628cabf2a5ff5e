"""Script rules of the scripted MCP server: the :class:`Rule` record and its validation.

A script (the ``--script`` file, or the ``rules`` of :class:`~conduit_mcp.testing.ScriptedServer`)
is parsed once, up front, by :func:`parse_rules` into :class:`Rule` objects; anything malformed
is refused with :class:`ConfigError`. This module exists so that a script can be validated (the
test process does it when building a ``ScriptedServer``) without loading the protocol engine;
matching and applying rules to live messages is the server core's job
(:mod:`conduit_mcp.testing.scripted.server`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .protocol import GARBAGE_LINE, MISSING, RpcError

__all__ = ["HTTP_FAULTS", "ConfigError", "Rule", "parse_rules"]


class ConfigError(ValueError):
    """An invalid option or script."""


@dataclass(slots=True)
class Rule:
    """One parsed script rule (``docs/testing.md``, "Scripts")."""

    index: int
    method: str | None = None
    tool: str | None = None
    name: str | None = None
    nth: int | None = None
    times: int | None = None
    process: int | None = None
    delay: float = 0.0
    # error | result | drop | exit | garbage | close_stdout | http | expire_session
    terminal: str | None = None
    arg: Any = None
    drop_stream: int | None = None  # HTTP: abort the SSE response after this many events
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
    "http",
    "expire_session",
    "drop_stream",
}
_TERMINALS = (
    "error",
    "result",
    "drop",
    "exit",
    "garbage",
    "close_stdout",
    "http",
    "expire_session",
)
# Terminal actions that only the HTTP front can carry out (over stdio: the default answer).
HTTP_FAULTS = frozenset({"http", "expire_session"})


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
    _parse_match(rule, raw, where)
    _parse_action(rule, raw, where)
    return rule


def _parse_match(rule: Rule, raw: dict[str, Any], where: str) -> None:
    """The rule's ``match`` object, ``times`` and ``process``."""
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


def _parse_action(rule: Rule, raw: dict[str, Any], where: str) -> None:
    """The rule's ``action``: its modifiers, and at most one terminal."""
    if "action" not in raw:
        raise ConfigError(f"{where}: missing action")
    action = raw["action"]
    if isinstance(action, str):
        if action not in _ACTION_KEYS or action in (
            "error",
            "result",
            "delay",
            "http",
            "drop_stream",
        ):
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
    if action.get("drop_stream") is not None:
        drop = action["drop_stream"]
        if type(drop) is not int or drop < 0:
            raise ConfigError(f"{where}: drop_stream must be an integer >= 0")
        if terminals and terminals[0] in HTTP_FAULTS:
            raise ConfigError(f"{where}: drop_stream cannot be combined with {terminals[0]}")
        rule.drop_stream = drop
    rule.twice = bool(action.get("respond_twice", False))
    wrong = action.get("wrong_id")
    rule.wrong_id = None if wrong is None or wrong is False else wrong
    if terminals:
        _parse_terminal(rule, terminals[0], action[terminals[0]], where)
    elif not (
        rule.delay or rule.twice or rule.wrong_id is not None or rule.drop_stream is not None
    ):
        raise ConfigError(f"{where}: the action does nothing")


def _parse_terminal(rule: Rule, kind: str, value: Any, where: str) -> None:
    """The one terminal action (an answer or a fault) and its argument."""
    rule.terminal = kind
    if kind == "error":
        if not isinstance(value, dict) or type(value.get("code")) is not int:
            raise ConfigError(f"{where}: error must be an object with an integer code")
        rule.arg = RpcError(
            value["code"],
            str(value.get("message", "Scripted error")),
            value.get("data", MISSING),
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
            rule.arg = GARBAGE_LINE
        elif isinstance(value, str) and "\n" not in value:
            rule.arg = value.encode() + b"\n"
        else:
            raise ConfigError(f"{where}: garbage must be true or a one-line string")
    elif kind == "http":
        rule.arg = _parse_http(value, where)
    elif kind == "expire_session" and value is not True:
        raise ConfigError(f"{where}: expire_session must be true")


def _parse_http(value: Any, where: str) -> dict[str, Any]:
    """``{"status": int, "headers"?: {str: str}, "body"?: str | JSON}``, normalised."""
    if not isinstance(value, dict) or set(value) - {"status", "headers", "body"}:
        raise ConfigError(f"{where}: http must be an object with status, headers?, body?")
    status = value.get("status")
    if type(status) is not int or not 200 <= status <= 599:
        raise ConfigError(f"{where}: http.status must be an integer 200..599")
    headers = value.get("headers") or {}
    if not isinstance(headers, dict) or not all(
        isinstance(k, str) and isinstance(v, str) and "\n" not in k + v for k, v in headers.items()
    ):
        raise ConfigError(f"{where}: http.headers must map strings to one-line strings")
    out: dict[str, Any] = {"status": status, "headers": dict(headers)}
    if "body" in value:
        out["body"] = value["body"]
    return out


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
