"""Wire vocabulary shared by every part of the scripted MCP server.

The ``_meta`` keys, protocol versions, JSON-RPC error codes, log levels and sentinels that the
rules, the catalogue, the handlers, the tools and the server core all speak, plus
:class:`RpcError` (how any of them answers with a JSON-RPC error) and ``Ctx`` (what a handler
sees of one request). It exists so those modules share one definition without importing one
another; it imports nothing from the package.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "DEFAULT_LEGACY_VERSIONS",
    "DEFAULT_MODERN_VERSIONS",
    "RpcError",
    "dict_at",
    "is_modern_version",
]

PV_KEY = "io.modelcontextprotocol/protocolVersion"
CAPS_KEY = "io.modelcontextprotocol/clientCapabilities"
LOG_LEVEL_KEY = "io.modelcontextprotocol/logLevel"
SERVER_INFO_KEY = "io.modelcontextprotocol/serverInfo"
SUBSCRIPTION_KEY = "io.modelcontextprotocol/subscriptionId"

FIRST_MODERN_VERSION = "2026-07-28"
DEFAULT_MODERN_VERSIONS: tuple[str, ...] = ("2026-07-28",)
DEFAULT_LEGACY_VERSIONS: tuple[str, ...] = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603
LEGACY_RESOURCE_NOT_FOUND = -32002
MISSING_CLIENT_CAPABILITY = -32021
UNSUPPORTED_PROTOCOL_VERSION = -32022

LOG_LEVELS = ("debug", "info", "notice", "warning", "error", "critical", "alert", "emergency")
LOG_RANK = {level: i for i, level in enumerate(LOG_LEVELS)}
CACHEABLE = frozenset(
    {
        "server/discover",
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "skills/list",
        "skills/get",
    }
)
GARBAGE_LINE = b"<<conduit_mcp.testing: this line is not JSON>>\n"
NO_RESPONSE: Any = object()  # a handler's way of saying "answer later, or never"
MISSING: Any = object()


def dict_at(value: Any, key: str) -> dict[str, Any]:
    """``value[key]`` when both are JSON objects, else an empty one: reading untrusted input."""
    inner = value.get(key) if isinstance(value, dict) else None
    return inner if isinstance(inner, dict) else {}


def is_modern_version(version: str) -> bool:
    """Whether ``version`` belongs to the modern (per-request ``_meta``) era.

    Date versions from ``2026-07-28`` on are modern, earlier ones legacy; a version that is
    not a ``YYYY-MM-DD`` date (e.g. ``"draft"``) counts as modern.
    """
    if len(version) == 10 and version[4] == "-" and version[7] == "-":
        return version >= FIRST_MODERN_VERSION
    return True


class RpcError(Exception):
    """Raised by a handler to answer with a JSON-RPC error."""

    def __init__(self, code: int, message: str, data: Any = MISSING) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data

    def to_dict(self) -> dict[str, Any]:
        err: dict[str, Any] = {"code": self.code, "message": self.message}
        if self.data is not MISSING:
            err["data"] = self.data
        return err


class Ctx:
    """What a handler sees of one request: its id, method, params, ``_meta`` and era."""

    __slots__ = ("era", "id", "meta", "method", "params")

    def __init__(self, request_id: Any, method: str, params: Any, meta: Any, era: str) -> None:
        self.id = request_id
        self.method = method
        self.params = params
        self.meta = meta if isinstance(meta, dict) else None
        self.era = era
