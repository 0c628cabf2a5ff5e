"""Server log messages to Python ``logging``: one logger per client,
``conduit_mcp.server.<client name>`` (docs/telemetry.md, "Server logs").

The connection asks :meth:`ServerLog.wants` (a level check, no I/O) whether a message would be
logged at all; the notifier, which runs what the application plugged in and never the
connection, calls :meth:`ServerLog.emit`: a ``logging`` handler is the application's code and
may be slow (a socket, a file on a full disk), so it must not hold the connection up. What the
server sent is rendered by :func:`conduit_mcp.protocol.server_logs.render`, which escapes and
bounds it; the record carries the server's values as ``extra`` attributes for structured
handlers:

=================  ===========================================================================
attribute          value
=================  ===========================================================================
``mcp_client``     the client's name
``mcp_level``      the protocol level (``notice``, ``alert``, ... where Python has none)
``mcp_logger``     the server's logger name, escaped and cut (None when it sent none)
``mcp_data``       the server's ``data`` as it sent it: untrusted JSON, for a handler that
                   encodes it itself (a JSON formatter), never to print raw
=================  ===========================================================================
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .protocol.server_logs import python_level, render

__all__ = ["LOGGER_PREFIX", "ServerLog", "logger_name"]

#: The parent of every client's server logger.
LOGGER_PREFIX = "conduit_mcp.server"


def logger_name(client_name: str) -> str:
    """The Python logger a client's server logs go to.

    >>> logger_name("weather")
    'conduit_mcp.server.weather'
    """
    return f"{LOGGER_PREFIX}.{client_name}"


class ServerLog:
    """One client's server logger, looked up on the first message (``logging`` keeps every
    logger it ever made, so a client whose server never logs makes none)."""

    __slots__ = ("client_name", "_logger")

    def __init__(self, client_name: str) -> None:
        self.client_name = client_name
        self._logger: logging.Logger | None = None

    def __repr__(self) -> str:
        return f"<ServerLog {logger_name(self.client_name)}>"

    @property
    def logger(self) -> logging.Logger:
        lg = self._logger
        if lg is None:
            lg = self._logger = logging.getLogger(logger_name(self.client_name))
        return lg

    def wants(self, params: Any) -> bool:
        """Whether a message with these params would be logged (its level is enabled)."""
        level = params.get("level") if isinstance(params, Mapping) else None
        return self.logger.isEnabledFor(python_level(level))

    def emit(self, params: Any) -> None:
        """Log one message (if its level is enabled): the text as a ``%s`` argument, never
        as the format."""
        lg = self.logger
        line = render(params)
        if not lg.isEnabledFor(line.levelno):
            return
        data = params.get("data") if isinstance(params, Mapping) else None
        lg.log(
            line.levelno,
            "%s",
            line.text,
            extra={
                "mcp_client": self.client_name,
                "mcp_level": line.level,
                "mcp_logger": line.logger,
                "mcp_data": data,
            },
        )
