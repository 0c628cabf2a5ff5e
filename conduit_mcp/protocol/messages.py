"""Building the JSON-RPC messages the client sends, as plain dicts ready for ``encode``.

Plain dicts, not message objects: every request is built once and serialised once, so a
class per message would only add an allocation and a conversion on the hot path.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, Literal

from .._version import __version__
from ..errors import Error
from .meta import (
    META_CLIENT_CAPS,
    META_CLIENT_INFO,
    META_LOG_LEVEL,
    META_PROGRESS_TOKEN,
    META_VERSION,
)

#: The modern probe and capability query; servers MUST implement it (MCP spec 2026-07-28,
#: Server, "Discover").
DISCOVER: Final = "server/discover"
INITIALIZE: Final = "initialize"
INITIALIZED: Final = "notifications/initialized"
CANCELLED: Final = "notifications/cancelled"


#: This library's version, as sent in ``clientInfo`` by default. A constant, not
#: ``importlib.metadata`` (measured: ~50 ms at import, paid by every server a test spawns).
PACKAGE_VERSION: Final = __version__


def client_info(name: str = "conduit-mcp", version: str = PACKAGE_VERSION) -> dict[str, str]:
    """An ``Implementation`` object. ``name`` and ``version`` are its only required fields.

    Modern clients SHOULD send it on every request (MCP spec 2026-07-28, Basic, "General
    fields", ``_meta``), and the MCP conformance suite warns (one older scenario fails) when
    it is missing, so it is always sent.
    """
    return {"name": name, "version": version}


def _params_copy(params: Any) -> dict[str, Any]:
    # Fast path on the exact type: isinstance() against the Mapping ABC costs ~100 ns.
    if type(params) is dict:
        return params.copy()
    if isinstance(params, Mapping):
        return dict(params)
    raise Error("argument", "params", "params must be a mapping")


def _meta_copy(existing: Any) -> dict[str, Any]:
    if type(existing) is dict:
        return existing.copy()
    if isinstance(existing, Mapping):
        return dict(existing)
    raise Error("argument", "params._meta", "params['_meta'] must be a mapping")


def request(
    id: int | str,
    method: str,
    params: Mapping[str, Any] | None,
    *,
    era: Literal["modern", "legacy"],
    version: str,
    client_info: Mapping[str, Any],
    capabilities: Mapping[str, Any],
    progress_token: int | str | None = None,
    log_level: str | None = None,
) -> dict[str, Any]:
    """A JSON-RPC request for ``era``; the caller's ``params`` and ``_meta`` are not mutated.

    Modern (MCP spec 2026-07-28, Basic, "General fields"): ``params._meta`` carries the
    protocol version, ``clientInfo`` and ``clientCapabilities`` on every request, since
    there is no session to remember them.
    Those three keys overwrite any the caller put in ``_meta`` (the connection, not the
    caller, knows the negotiated version; on HTTP a disagreeing version header would be
    -32020); other caller keys (``traceparent``, a log level, custom ones) are kept.
    ``log_level`` (modern only; the client's ``set_logging_level``) is written as
    ``_meta["io.modelcontextprotocol/logLevel"]`` unless the caller's ``_meta`` has one: a
    server sends log messages only for a request that carries it (MCP spec 2026-07-28,
    Logging).
    Legacy (MCP spec 2025-11-25): ``_meta`` is optional and only written for a progress token;
    ``params`` is omitted when there are none.

    ``client_info`` and ``capabilities`` are embedded, not copied: they are built once per
    connection and must be treated as read-only afterwards. Only the top level of
    ``params`` (and of its ``_meta``) is copied; nested values are shared.
    """
    if era == "modern":
        meta: dict[str, Any] = {
            META_VERSION: version,
            META_CLIENT_INFO: client_info,
            META_CLIENT_CAPS: capabilities,
        }
        if params is None:
            p: dict[str, Any] = {"_meta": meta}
        else:
            p = _params_copy(params)
            existing = p.get("_meta")
            if existing is not None:
                merged = _meta_copy(existing)
                merged.update(meta)
                meta = merged
            p["_meta"] = meta
        if progress_token is not None:
            meta[META_PROGRESS_TOKEN] = progress_token
        if log_level is not None and META_LOG_LEVEL not in meta:
            meta[META_LOG_LEVEL] = log_level
        return {"jsonrpc": "2.0", "id": id, "method": method, "params": p}
    if era != "legacy":
        raise Error("argument", "era", "era must be 'modern' or 'legacy'")
    if params is None:
        if progress_token is None:
            return {"jsonrpc": "2.0", "id": id, "method": method}
        p = {"_meta": {META_PROGRESS_TOKEN: progress_token}}
    else:
        p = _params_copy(params)
        if progress_token is not None:
            existing = p.get("_meta")
            legacy_meta = {} if existing is None else _meta_copy(existing)
            legacy_meta[META_PROGRESS_TOKEN] = progress_token
            p["_meta"] = legacy_meta
    return {"jsonrpc": "2.0", "id": id, "method": method, "params": p}


def discover_request(
    id: int | str,
    version: str,
    client_info: Mapping[str, Any],
    capabilities: Mapping[str, Any],
) -> dict[str, Any]:
    """The ``server/discover`` probe: a modern request whose ``_meta`` offers ``version``.

    MCP spec 2026-07-28, Transports, "stdio": a dual-era client "SHOULD probe with
    server/discover before sending any other request, setting its preferred modern version
    in _meta".
    """
    return request(
        id, DISCOVER, None, era="modern", version=version,
        client_info=client_info, capabilities=capabilities,
    )  # fmt: skip


def notification(method: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """A JSON-RPC notification (no id, never answered). ``params`` is embedded as given."""
    if params is None:
        return {"jsonrpc": "2.0", "method": method}
    return {"jsonrpc": "2.0", "method": method, "params": params}


def cancelled(request_id: int | str, reason: str | None = None) -> dict[str, Any]:
    """``notifications/cancelled`` for one of our requests.

    It is the stdio way to cancel (MCP spec 2026-07-28, Basic, "Cancellation"); over HTTP the
    modern client closes the response stream instead.

    ``requestId`` is required in 2026-07-28 (optional before), so it is always sent;
    ``reason`` only when given. Never send it for ``initialize`` (legacy lifecycle: a client
    MUST NOT cancel initialize): that rule is the connection's to keep.
    """
    params: dict[str, Any] = {"requestId": request_id}
    if reason is not None:
        params["reason"] = reason
    return {"jsonrpc": "2.0", "method": CANCELLED, "params": params}


def initialize_params(
    version: str, capabilities: Mapping[str, Any], client_info: Mapping[str, Any]
) -> dict[str, Any]:
    """Legacy ``InitializeRequestParams`` (MCP spec 2025-11-25, Basic, "Lifecycle"): the
    version we offer, our capabilities, and who we are."""
    return {"protocolVersion": version, "capabilities": capabilities, "clientInfo": client_info}


def initialized() -> dict[str, Any]:
    """``notifications/initialized``, which the client MUST send after initialize succeeds."""
    return {"jsonrpc": "2.0", "method": INITIALIZED}


def result_response(id: int | str | float, result: Mapping[str, Any]) -> dict[str, Any]:
    """Our answer to a server-to-client request (legacy: ``ping`` is answered ``{}``)."""
    return {"jsonrpc": "2.0", "id": id, "result": result}


def error_response(
    id: int | str | float | None, code: int, message: str, data: Any = None
) -> dict[str, Any]:
    """Our error answer to a server-to-client request (e.g. -32601 for an unknown method)."""
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": id, "error": error}
