"""Attribute and instrument names: the MCP semantic conventions, as our own constants.

The MCP conventions moved to the OpenTelemetry GenAI semantic-conventions repository, and the
Python constants in ``opentelemetry.semconv._incubating`` are private and deprecated, so the
names are spelled out here (docs/telemetry.md, "Telemetry").

Nothing here ever names a tool argument, a result, a header, a token or a session id: those
are never recorded (docs/secrets.md).
"""

from __future__ import annotations

from typing import Final

# -- span and metric attributes (MCP / GenAI / JSON-RPC / network semconv) -------------------

MCP_METHOD_NAME: Final = "mcp.method.name"
MCP_PROTOCOL_VERSION: Final = "mcp.protocol.version"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_PROMPT_NAME: Final = "gen_ai.prompt.name"
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
JSONRPC_REQUEST_ID: Final = "jsonrpc.request.id"
#: conduit-mcp's own: the modern ``input_required`` rounds one call went through.
INPUT_ROUNDS: Final = "conduit_mcp.input_rounds"
RPC_RESPONSE_STATUS_CODE: Final = "rpc.response.status_code"
ERROR_TYPE: Final = "error.type"
NETWORK_TRANSPORT: Final = "network.transport"
SERVER_ADDRESS: Final = "server.address"
SERVER_PORT: Final = "server.port"

#: ``gen_ai.operation.name`` of ``tools/call``.
EXECUTE_TOOL: Final = "execute_tool"
#: ``error.type`` of a ``tools/call`` result with ``isError: true``.
TOOL_ERROR: Final = "tool_error"
#: ``network.transport`` of a stdio server.
PIPE: Final = "pipe"
TCP: Final = "tcp"

# -- connection-level counter attributes (docs/porting.md, "Telemetry events to OpenTelemetry") --

FROM: Final = "from"
TO: Final = "to"
REASON: Final = "reason"

# -- instruments ---------------------------------------------------------------------------------

OPERATION_DURATION: Final = "mcp.client.operation.duration"
CONNECTION_TRANSITIONS: Final = "mcp.client.connection.transitions"
REQUEST_CANCELLATIONS: Final = "mcp.client.request.cancellations"
RESPONSE_DROPPED: Final = "mcp.client.response.dropped"
NOTIFICATIONS: Final = "mcp.client.notifications"
CACHE_REFRESHES: Final = "mcp.client.cache.refreshes"
TOOL_DEFINITION_CHANGES: Final = "mcp.client.tool.definition_changes"
#: What a flood made the client drop (``kind``: inbound, answer, notification).
DROPPED: Final = "mcp.client.dropped"
KIND: Final = "kind"
OUTCOME: Final = "outcome"
METHOD: Final = "mcp.method.name"

#: The semconv's explicit bucket boundaries for ``mcp.client.operation.duration`` (seconds).
DURATION_BUCKETS: Final = (
    0.01,
    0.02,
    0.05,
    0.1,
    0.2,
    0.5,
    1.0,
    2.0,
    5.0,
    10.0,
    30.0,
    60.0,
    120.0,
    300.0,
)

#: The instrumentation scope of every tracer and meter this library gets.
SCOPE: Final = "conduit_mcp"

# -- propagation -------------------------------------------------------------------------------

#: ``params._meta`` key whose value must be a mapping we may copy and extend.
META: Final = "_meta"
