"""The modern request-metadata headers, as the scripted HTTP server checks them.

A 2026-07-28 POST mirrors parts of its body in headers: ``MCP-Protocol-Version`` (the
``_meta`` protocol version), ``Mcp-Method``, ``Mcp-Name`` (``params.name`` of ``tools/call``
and ``prompts/get``, ``params.uri`` of ``resources/read``, ``params.taskId`` of ``tasks/get``,
``tasks/update`` and ``tasks/cancel``) and one ``Mcp-Param-{Name}`` per
``x-mcp-header`` annotation of the called tool's ``inputSchema``. Values that are not safe
ASCII travel as ``=?base64?{base64(utf8)}?=``. A mismatch is HTTP 400 with ``-32020``.

This module is pure functions (no aiohttp), kept apart from the HTTP front so the encoding
rules read in one place and tests can use :func:`encode_header_value` to build headers.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Callable, Mapping
from typing import Any

from ..scripted.protocol import PV_KEY, dict_at

__all__ = [
    "HEADER_MISMATCH",
    "decode_header_value",
    "encode_header_value",
    "header_mismatch",
    "param_headers",
]

HEADER_MISMATCH = -32020
_SENTINEL = re.compile(r"\A=\?base64\?(.*)\?=\Z", re.DOTALL)
_TOKEN = re.compile(r"\A[!#$%&'*+\-.^_`|~0-9A-Za-z]+\Z")  # RFC 9110 1*tchar
_NAME_PARAM = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",  # ext-tasks: Mcp-Name is the task id on tasks/get|update|cancel
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}
_MAX_SAFE_INT = 2**53 - 1


def _safe(value: str) -> bool:
    """Printable ASCII, no leading/trailing whitespace, not sentinel-looking."""
    if value != value.strip(" \t") or _SENTINEL.match(value):
        return False
    return all(" " <= c <= "~" for c in value)


def encode_header_value(value: str) -> str:
    """A header value for ``value``: as is when safe ASCII, else the base64 sentinel form.

    >>> encode_header_value("Paris")
    'Paris'
    >>> encode_header_value("Zürich")
    '=?base64?WsO8cmljaA==?='
    >>> encode_header_value(" padded")
    '=?base64?IHBhZGRlZA==?='
    """
    if _safe(value):
        return value
    return "=?base64?" + base64.b64encode(value.encode()).decode() + "?="


def decode_header_value(raw: str) -> str | None:
    """The value a received header stands for; None when it is malformed.

    A raw value must be safe ASCII; the sentinel form must hold valid base64 of UTF-8.

    >>> decode_header_value("=?base64?WsO8cmljaA==?=")
    'Zürich'
    >>> decode_header_value("=?base64?%%%?=") is None
    True
    """
    match = _SENTINEL.match(raw)
    if match is None:
        return raw if all(" " <= c <= "~" for c in raw) else None
    try:
        return base64.b64decode(match.group(1), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        return None


def _annotations(schema: Any, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], str]]:
    """(argument path, header name) of every valid ``x-mcp-header`` reachable by properties."""
    out: list[tuple[tuple[str, ...], str]] = []
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict):
        return out
    for key, sub in props.items():
        if not isinstance(sub, dict):
            continue
        name = sub.get("x-mcp-header")
        if (
            isinstance(name, str)
            and _TOKEN.match(name)
            and sub.get("type") in ("string", "integer", "boolean")
        ):
            out.append(((*path, key), name))
        out.extend(_annotations(sub, (*path, key)))
    return out


def _lookup(args: Any, path: tuple[str, ...]) -> Any:
    for key in path:
        if not isinstance(args, dict):
            return None
        args = args.get(key)
    return args


def param_headers(schema: Any, arguments: Any) -> dict[str, str | None]:
    """``{"Mcp-Param-{Name}": expected value or None (header must be absent)}`` for a call.

    Annotations a client must refuse (a ``number``, a bad name) are not checked. An argument
    of the wrong type is not checked either (the tool itself refuses it).

    >>> schema = {"properties": {"days": {"type": "integer", "x-mcp-header": "Days"}}}
    >>> param_headers(schema, {"days": 3}), param_headers(schema, {})
    ({'Mcp-Param-Days': '3'}, {'Mcp-Param-Days': None})
    """
    out: dict[str, str | None] = {}
    for path, name in _annotations(schema):
        value = _lookup(arguments, path)
        key = f"Mcp-Param-{name}"
        if value is None:
            out[key] = None
        elif type(value) is bool:
            out[key] = "true" if value else "false"
        elif type(value) is int and abs(value) <= _MAX_SAFE_INT:
            out[key] = str(value)
        elif type(value) is str:
            out[key] = value
    return out


def header_mismatch(
    headers: Mapping[str, str],
    msg: dict[str, Any],
    tool_schema: Callable[[str], Any],
) -> str | None:
    """Why a modern request's headers do not match its body (None: they do).

    ``headers`` is case-insensitive (an aiohttp ``CIMultiDictProxy``); ``tool_schema(name)``
    returns a tool's ``inputSchema`` (None for an unknown tool).
    """
    method = msg.get("method")
    params = dict_at(msg, "params")
    meta = dict_at(params, "_meta")
    version = headers.get("MCP-Protocol-Version")
    if version is None:
        return "MCP-Protocol-Version header is missing"
    if PV_KEY in meta and decode_header_value(version) != meta[PV_KEY]:
        return f"MCP-Protocol-Version header does not match {PV_KEY}"
    raw = headers.get("Mcp-Method")
    if raw is None or decode_header_value(raw) != method:
        return "Mcp-Method header does not match the request body's method"
    key = _NAME_PARAM.get(method) if isinstance(method, str) else None
    if key is not None and isinstance(params.get(key), str):
        raw = headers.get("Mcp-Name")
        if raw is None or decode_header_value(raw) != params[key]:
            return f"Mcp-Name header does not match the request body's {key!r} parameter"
    if method == "tools/call" and isinstance(params.get("name"), str):
        schema = tool_schema(params["name"])
        if schema is not None:
            for name, expected in param_headers(schema, params.get("arguments")).items():
                raw = headers.get(name)
                if expected is None:
                    if raw is not None:
                        return f"{name} header sent for an absent argument"
                elif raw is None or decode_header_value(raw) != expected:
                    return f"{name} header does not match the argument"
    return None
