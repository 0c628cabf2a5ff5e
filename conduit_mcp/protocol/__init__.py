"""The MCP protocol as pure functions: no threads, no I/O, no state beyond a line buffer.

* :mod:`.versions`: the versions we speak, their eras, the ``protocol=`` option.
* :mod:`.jsonrpc`: stdio framing (``encode``, ``LineDecoder``) and message classification
  (``decode``), error codes, and the ``Error`` for a server's JSON-RPC error.
* :mod:`.meta` and :mod:`.messages`: the ``_meta`` keys and the requests we send.
* :mod:`.negotiation`: the ``server/discover`` probe classifier; :mod:`.handshake` parses
  ``DiscoverResult`` and checks ``InitializeResult``.
* :mod:`.results`: typed results (``conduit_mcp.types``) from result objects;
  :mod:`.metadata`: their icons, titles and annotations, dropped rather than failed when bad.
* :mod:`.clock`: a call's deadline, paused while the handler works, and its total bound.

Actors and transports call these; every rule here is testable without a thread or socket.
"""

from __future__ import annotations

from .jsonrpc import (
    ErrorResponse,
    FrameError,
    Inbound,
    Invalid,
    LineDecoder,
    Notification,
    Request,
    Response,
    decode,
    encode,
    server_error,
)
from .messages import (
    DISCOVER,
    cancelled,
    client_info,
    discover_request,
    error_response,
    initialize_params,
    initialized,
    notification,
    request,
    result_response,
)
from .negotiation import (
    AuthRequired,
    Close,
    Decision,
    DiscoverInfo,
    HttpProbe,
    InitInfo,
    Legacy,
    Modern,
    ProbeError,
    ProbeExit,
    ProbeOutcome,
    ProbeResult,
    ProbeTimeout,
    Reconnect,
    Rediscover,
    check_initialize,
    classify_probe,
    parse_discover,
)
from .results import (
    check_result_type,
    parse_call_tool,
    parse_complete,
    parse_get_prompt,
    parse_page,
    parse_progress,
    parse_read_resource,
    parse_server_info,
)
from .versions import (
    LATEST_LEGACY,
    LATEST_MODERN,
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    ProtocolChoice,
    era_of,
    mutual_version,
    parse_protocol_option,
)

__all__ = [
    "DISCOVER",
    "LATEST_LEGACY",
    "LATEST_MODERN",
    "LEGACY_VERSIONS",
    "MODERN_VERSIONS",
    "AuthRequired",
    "Close",
    "Decision",
    "DiscoverInfo",
    "ErrorResponse",
    "FrameError",
    "HttpProbe",
    "Inbound",
    "InitInfo",
    "Invalid",
    "Legacy",
    "LineDecoder",
    "Modern",
    "Notification",
    "ProbeError",
    "ProbeExit",
    "ProbeOutcome",
    "ProbeResult",
    "ProbeTimeout",
    "ProtocolChoice",
    "Reconnect",
    "Rediscover",
    "Request",
    "Response",
    "cancelled",
    "check_initialize",
    "check_result_type",
    "classify_probe",
    "client_info",
    "decode",
    "discover_request",
    "encode",
    "era_of",
    "error_response",
    "initialize_params",
    "initialized",
    "mutual_version",
    "notification",
    "parse_call_tool",
    "parse_complete",
    "parse_discover",
    "parse_get_prompt",
    "parse_page",
    "parse_progress",
    "parse_protocol_option",
    "parse_read_resource",
    "parse_server_info",
    "request",
    "result_response",
    "server_error",
]
