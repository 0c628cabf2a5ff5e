"""The reserved ``_meta`` keys (MCP spec 2026-07-28, Basic, "General fields"; the schema's
``RequestMetaObject`` and friends).

Any ``_meta`` key whose prefix's second label is ``modelcontextprotocol`` or ``mcp`` is
reserved for the spec, so these exact strings are the only ones the client writes.
"""

from __future__ import annotations

from typing import Final

#: Request ``_meta`` (modern, REQUIRED): the protocol version this request speaks.
META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
#: Request ``_meta`` (modern, SHOULD): the client's ``Implementation`` (name, version).
META_CLIENT_INFO: Final = "io.modelcontextprotocol/clientInfo"
#: Request ``_meta`` (modern, REQUIRED): the client's capabilities; ``{}`` means none.
META_CLIENT_CAPS: Final = "io.modelcontextprotocol/clientCapabilities"
#: Request ``_meta`` (modern, optional, deprecated with Logging): log level for this request.
META_LOG_LEVEL: Final = "io.modelcontextprotocol/logLevel"
#: Result ``_meta`` (modern, SHOULD on every result): the server's ``Implementation``.
META_SERVER_INFO: Final = "io.modelcontextprotocol/serverInfo"
#: Notification ``_meta`` on a ``subscriptions/listen`` stream: the listen request's id.
META_SUBSCRIPTION_ID: Final = "io.modelcontextprotocol/subscriptionId"
#: Request ``_meta`` (both eras): the token ``notifications/progress`` will carry.
META_PROGRESS_TOKEN: Final = "progressToken"
