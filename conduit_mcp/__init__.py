"""conduit-mcp: a supervised, self-healing MCP client on Pykka actors.

The whole public surface is named here; nothing else needs importing.

>>> import conduit_mcp as mcp
>>> mcp.Error("timeout", "deadline").kind
'timeout'
>>> mcp.Client.__name__
'Client'

Names are imported on first use (PEP 562): a server process that only needs
``conduit_mcp.testing`` (every test spawn, every reconnect of a test) does not pay for
importing the client, the actors and Pykka (measured: the testing server's import went from
194 ms to 64 ms).
"""

from __future__ import annotations

import importlib
import logging
from typing import TYPE_CHECKING, Any

from ._version import __version__
from .errors import KINDS, Error, Kind

# A library logs, the application decides where to: nothing reaches stderr unless it
# configures logging (docs/telemetry.md, "Logging", lists the loggers).
logging.getLogger("conduit_mcp").addHandler(logging.NullHandler())

_LAZY = {
    "ChildSpec": ".otp.supervisor",
    "Supervisor": ".otp.supervisor",
    "full_jitter": ".backoff",
    "AsyncClient": ".aio",
    "Client": ".client",
    "FutureClient": ".futures",
    "ClientOptions": ".config",
    "Status": ".status",
    "State": ".status",
    "Era": ".status",
    "Origin": ".status",
    "LoggingLevel": ".protocol.server_logs",
    "Skill": ".protocol.skills",
    "SkillFile": ".protocol.skills",
    "LoadedSkill": ".protocol.skills",
    "ServerNotification": ".notifications",
    "LIST_REFRESHED": ".notifications",
    "TOOL_DEFINITION_CHANGED": ".notifications",
    "Stdio": ".transports.stdio_spec",
    "Hub": ".hub",
    "HubConfig": ".hub",
    "HubNotification": ".hub",
    "ServerEntry": ".hub",
    "Collision": ".hub",
    "load_config": ".hub",
    "Cluster": ".cluster",
    "RayEngine": ".cluster",
    "Http": ".transports.http_spec",
    "Sse": ".transports.sse_spec",
    "InProcess": ".transports.inprocess_spec",
    "OAuth": ".oauth.config",
    "TokenStore": ".oauth.store",
    "MemoryTokenStore": ".oauth.store",
    "FileTokenStore": ".oauth.store",
    "KeyringTokenStore": ".oauth.keyring_store",
    "TokenSet": ".oauth.records",
    "TaskHandle": ".tasks",
    "Tasks": ".tasks",
    "TaskStore": ".task_store",
    "MemoryTaskStore": ".task_store",
    "SqliteTaskStore": ".task_store",
    "Annotations": ".types",
    "CallToolResult": ".types",
    "CompleteResult": ".types",
    "GetPromptResult": ".types",
    "Icon": ".types",
    "Page": ".types",
    "Progress": ".types",
    "Prompt": ".types",
    "ReadResourceResult": ".types",
    "Resource": ".types",
    "ResourceTemplate": ".types",
    "ServerInfo": ".types",
    "Tool": ".types",
    "ToolAnnotations": ".types",
    "Declined": ".handler",
    "Handler": ".handler",
    "HandlerContext": ".handler",
    "ElicitRequest": ".handler_types",
    "ElicitResult": ".handler_types",
    "Root": ".handler_types",
    "SamplingRequest": ".handler_types",
    "SamplingResult": ".handler_types",
}

if TYPE_CHECKING:
    from .aio import AsyncClient
    from .backoff import full_jitter
    from .client import Client
    from .cluster import Cluster, RayEngine
    from .config import ClientOptions
    from .futures import FutureClient
    from .handler import Declined, Handler, HandlerContext
    from .handler_types import ElicitRequest, ElicitResult, Root, SamplingRequest, SamplingResult
    from .hub import Collision, Hub, HubConfig, HubNotification, ServerEntry, load_config
    from .notifications import LIST_REFRESHED, TOOL_DEFINITION_CHANGED, ServerNotification
    from .oauth.config import OAuth
    from .oauth.keyring_store import KeyringTokenStore
    from .oauth.records import TokenSet
    from .oauth.store import FileTokenStore, MemoryTokenStore, TokenStore
    from .otp.supervisor import ChildSpec, Supervisor
    from .protocol.server_logs import LoggingLevel
    from .protocol.skills import LoadedSkill, Skill, SkillFile
    from .status import Era, Origin, State, Status
    from .task_store import MemoryTaskStore, SqliteTaskStore, TaskStore
    from .tasks import TaskHandle, Tasks
    from .transports.http_spec import Http
    from .transports.inprocess_spec import InProcess
    from .transports.sse_spec import Sse
    from .transports.stdio_spec import Stdio
    from .types import (
        Annotations,
        CallToolResult,
        CompleteResult,
        GetPromptResult,
        Icon,
        Page,
        Progress,
        Prompt,
        ReadResourceResult,
        Resource,
        ResourceTemplate,
        ServerInfo,
        Tool,
        ToolAnnotations,
    )


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'conduit_mcp' has no attribute {name!r}")
    value = getattr(importlib.import_module(module, __name__), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "Annotations",
    "AsyncClient",
    "CallToolResult",
    "ChildSpec",
    "Client",
    "ClientOptions",
    "Collision",
    "CompleteResult",
    "Declined",
    "ElicitRequest",
    "ElicitResult",
    "Era",
    "Error",
    "FileTokenStore",
    "FutureClient",
    "GetPromptResult",
    "Handler",
    "HandlerContext",
    "Http",
    "Hub",
    "HubConfig",
    "Cluster",
    "RayEngine",
    "HubNotification",
    "Icon",
    "InProcess",
    "KINDS",
    "Kind",
    "LIST_REFRESHED",
    "LoadedSkill",
    "LoggingLevel",
    "MemoryTaskStore",
    "MemoryTokenStore",
    "KeyringTokenStore",
    "OAuth",
    "Origin",
    "Page",
    "Progress",
    "Prompt",
    "ReadResourceResult",
    "Resource",
    "ResourceTemplate",
    "Root",
    "SamplingRequest",
    "SamplingResult",
    "ServerEntry",
    "ServerInfo",
    "ServerNotification",
    "Skill",
    "SkillFile",
    "SqliteTaskStore",
    "Sse",
    "State",
    "Status",
    "Stdio",
    "Supervisor",
    "TOOL_DEFINITION_CHANGED",
    "TaskHandle",
    "TaskStore",
    "Tasks",
    "TokenSet",
    "TokenStore",
    "Tool",
    "ToolAnnotations",
    "__version__",
    "full_jitter",
    "load_config",
]
