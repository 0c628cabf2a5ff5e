"""Server log messages (``notifications/message``) as pure functions: the levels, the level a
caller may set, and how one message becomes a Python log line a hostile server cannot forge.

MCP spec 2025-11-25, Server, "Logging": the eight syslog levels of RFC 5424 and
``notifications/message {level, logger?, data}``; a client sets the least severe level it
wants with ``logging/setLevel``. MCP spec 2026-07-28 (Logging, deprecated): no setLevel; the
level travels in every request's ``_meta["io.modelcontextprotocol/logLevel"]``, and a server
sends no log message for a request without it.

What a server sends is untrusted. :func:`render` turns one message into the text of one log
record so that no server can make it look like another record or another program's output:

* the Python logger is always the client's (``conduit_mcp.server.<client name>``): the
  server's ``logger`` field is text in the message, never a logger name (a name per message
  would also make Python keep one ``Logger`` per name, forever);
* control characters (newlines, ANSI escapes, C1 codes), the Unicode line and paragraph
  separators and the bidirectional overrides are escaped (``\\n``, ``\\x1b``, ``\\u2028``),
  so a message is one line and reads as what it is;
* the text is cut at :data:`MAX_TEXT` characters (the logger name at :data:`MAX_LOGGER`),
  saying how much was left out;
* the text is a ``%s`` argument of a constant format, never a format itself, so ``%`` in it
  is only a character.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from typing import Any, Final, Literal, NamedTuple

import orjson

from ..errors import Error

__all__ = [
    "LEVELS",
    "LOG_METHOD",
    "MAX_LOGGER",
    "MAX_TEXT",
    "LogLine",
    "LoggingLevel",
    "check_level",
    "declared",
    "escape",
    "python_level",
    "render",
    "set_level",
]

#: The notification a server logs with (both eras).
LOG_METHOD: Final = "notifications/message"

LoggingLevel = Literal[
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"
]
"""The protocol's log levels, least severe first (RFC 5424's severities): what
``Client.set_logging_level`` takes. In Python logging: ``debug`` DEBUG, ``info`` and
``notice`` INFO, ``warning`` WARNING, ``error`` ERROR, ``critical``, ``alert`` and
``emergency`` CRITICAL (docs/telemetry.md, "Server logs").

>>> import typing
>>> import conduit_mcp as mcp
>>> typing.get_args(mcp.LoggingLevel)[:3]
('debug', 'info', 'notice')
"""

#: The protocol's levels, least severe first (RFC 5424's severities, reversed).
LEVELS: Final = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")

_PYTHON: Final[Mapping[str, int]] = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "notice": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
    "alert": logging.CRITICAL,
    "emergency": logging.CRITICAL,
}

#: The longest text of one record (the rendered ``data``), in characters; the rest is cut.
MAX_TEXT: Final = 8192
#: The longest server logger name shown, in characters.
MAX_LOGGER: Final = 128
#: The longest unknown level shown.
_MAX_LEVEL = 32

# C0 and C1 controls, DEL, the Unicode line/paragraph separators, the bidirectional marks,
# embeddings, overrides and isolates ("Trojan Source"), lone surrogates (no encoder takes
# them: a stream handler would fail on the record) and the byte order mark.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufeff]"
)


def check_level(level: Any) -> LoggingLevel:
    """The level a caller asked for, checked: one of :data:`LEVELS`.

    >>> check_level("warning")
    'warning'
    >>> check_level("WARN")
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: argument (level): level must be one of debug, info, notice, \
warning, error, critical, alert, emergency (got 'WARN')
    """
    if type(level) is str and level in _PYTHON:
        return level  # type: ignore[return-value]
    got = repr(level[:20]) if type(level) is str else f"a {type(level).__name__}"
    raise Error("argument", "level", f"level must be one of {', '.join(LEVELS)} (got {got})")


def declared(capabilities: Mapping[str, Any] | None) -> bool:
    """Whether the server's capabilities declare ``logging`` (servers that send log
    messages MUST, MCP spec 2025-11-25, Server, "Logging", "Capabilities").

    >>> declared({"logging": {}}), declared({"tools": {}}), declared(None)
    (True, False, False)
    """
    return isinstance(capabilities, Mapping) and isinstance(capabilities.get("logging"), dict)


def set_level(
    params: Any, capabilities: Mapping[str, Any] | None, era: str | None
) -> tuple[str, Error | None]:
    """What the connection does with a ``logging/setLevel`` call: the level to keep, or the
    error it fails with: a level that is not one of :data:`LEVELS`, or, legacy, a server
    that declares no ``logging`` (it has no ``logging/setLevel`` to call). Modern, the level
    is only a ``_meta`` field of each request, which a server without logging ignores; and
    servers that log without declaring it are common (the official SDK's ``MCPServer``
    does, in both eras), so it is never refused there.

    >>> set_level({"level": "info"}, {"logging": {}}, "legacy")
    ('info', None)
    >>> set_level({"level": "info"}, {"tools": {}}, "legacy")[1]
    Error(kind='unavailable', reason='not_supported')
    >>> set_level({"level": "info"}, {"tools": {}}, "modern")
    ('info', None)
    """
    try:
        level = check_level(params.get("level") if isinstance(params, Mapping) else None)
    except Error as exc:
        return "", exc
    if era != "modern" and not declared(capabilities):
        return level, Error(
            "unavailable",
            "not_supported",
            "the server declares no logging capability, so it has no logging/setLevel "
            "(MCP spec 2025-11-25, Server, Logging); whatever log messages it sends still "
            "reach conduit_mcp.server.<client name> and handle_log",
        )
    return level, None


def python_level(level: Any) -> int:
    """The Python level of a protocol level: debug to DEBUG, info and notice to INFO,
    warning to WARNING, error to ERROR, critical, alert and emergency to CRITICAL; a level
    the protocol does not have (a broken server) to WARNING, so it is not hidden.

    >>> [python_level(x) for x in ("debug", "notice", "alert", "fatal", None)]
    [10, 20, 50, 30, 30]
    """
    if type(level) is str:
        return _PYTHON.get(level, logging.WARNING)
    return logging.WARNING


def escape(text: str, limit: int) -> str:
    """``text`` on one line, its unsafe characters escaped, cut at ``limit`` characters
    (saying how long it was).

    >>> escape("ok\\n2026-12-01 CRITICAL root: forged", 100)
    'ok\\\\n2026-12-01 CRITICAL root: forged'
    >>> escape("\\x1b[31mred\\u202e", 100)
    '\\\\x1b[31mred\\\\u202e'
    >>> escape("x" * 10, 4)
    'xxxx... (cut: 10 characters in all)'
    """
    cut = len(text) > limit
    head = text[:limit] if cut else text
    if _UNSAFE.search(head) is not None:
        head = _UNSAFE.sub(_escaped, head)
        if len(head) > limit:  # escapes lengthen it: cut again
            cut = True
            head = head[:limit]
    if cut:
        return f"{head}... (cut: {len(text)} characters in all)"
    return head


def _escaped(match: re.Match[str]) -> str:
    c = ord(match.group())
    if c == 0x0A:
        return "\\n"
    if c == 0x0D:
        return "\\r"
    if c == 0x09:
        return "\\t"
    return f"\\x{c:02x}" if c <= 0xFF else f"\\u{c:04x}"


class LogLine(NamedTuple):
    """One server log message, ready for a Python log record."""

    levelno: int
    """The Python level (:func:`python_level`)."""
    level: str
    """The protocol level, or the server's unknown one (escaped and cut), or ``"?"``."""
    logger: str | None
    """The server's logger name, escaped and cut (None: it sent none)."""
    text: str
    """The record's message: ``[level] `` for a level Python has no name for, then
    ``logger: `` when the server named one, then the rendered ``data``."""


def render(params: Any, limit: int = MAX_TEXT) -> LogLine:
    """The log line of one ``notifications/message``'s params (any JSON: a broken server's
    too). String ``data`` is the text itself; any other JSON value is its compact JSON.

    >>> render({"level": "error", "logger": "db", "data": {"host": "h", "port": 5432}})
    LogLine(levelno=40, level='error', logger='db', text='db: {"host":"h","port":5432}')
    >>> render({"level": "alert", "data": "100% full\\nCRITICAL forged"}).text
    '[alert] 100% full\\\\nCRITICAL forged'
    >>> render("garbage")
    LogLine(levelno=30, level='?', logger=None, text='[?] ')
    """
    p: Mapping[str, Any] = params if isinstance(params, Mapping) else {}
    raw_level = p.get("level")
    levelno = python_level(raw_level)
    if type(raw_level) is str and raw_level in _PYTHON:
        level = raw_level
    elif type(raw_level) is str:
        level = escape(raw_level, _MAX_LEVEL)
    else:
        level = "?"
    raw_logger = p.get("logger")
    logger = escape(raw_logger, MAX_LOGGER) if type(raw_logger) is str else None
    text = escape(_data_text(p.get("data")), limit)
    prefix = "" if level == logging.getLevelName(levelno).lower() else f"[{level}] "
    if logger is not None:
        prefix = f"{prefix}{logger}: "
    return LogLine(levelno, level, logger, prefix + text)


def _data_text(data: Any) -> str:
    if type(data) is str:
        return data
    if data is None:
        return ""
    try:
        # orjson: compact, and measured 3x cheaper than json.dumps here (10.6 -> 3.3 us for
        # a small object); json takes what it refuses (an integer past 64 bits, a lone
        # surrogate), and what neither can dump is named.
        return orjson.dumps(data).decode()
    except (TypeError, orjson.JSONEncodeError):
        pass
    try:
        return json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError):
        return "<data that is not JSON>"
