"""conduit-mcp: a supervised, self-healing MCP client on Pykka actors.

The whole public surface is named here; nothing else needs importing.

>>> import conduit_mcp as mcp
>>> mcp.Error("timeout", "deadline").kind
'timeout'
"""

from .actors.base import Link, SafeActor
from .actors.registry import Registry
from .actors.statem import Statem
from .actors.supervisor import ChildExited, ChildSpec, Supervisor
from .backoff import full_jitter
from .client import AsyncClient, Client, FutureClient
from .config import Config
from .errors import KINDS, Error
from .status import Status
from .transports.stdio_spec import Stdio
from .types import (
    CallToolResult,
    CompleteResult,
    GetPromptResult,
    Page,
    Progress,
    Prompt,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    ServerInfo,
    Tool,
)

__version__ = "0.1.0"

__all__ = [
    "KINDS",
    "AsyncClient",
    "CallToolResult",
    "ChildExited",
    "ChildSpec",
    "Client",
    "CompleteResult",
    "Config",
    "Error",
    "FutureClient",
    "GetPromptResult",
    "Link",
    "Page",
    "Progress",
    "Prompt",
    "ReadResourceResult",
    "Registry",
    "Resource",
    "ResourceTemplate",
    "SafeActor",
    "ServerInfo",
    "Statem",
    "Status",
    "Stdio",
    "Supervisor",
    "Tool",
    "full_jitter",
    "__version__",
]
