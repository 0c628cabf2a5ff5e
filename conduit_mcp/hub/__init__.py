"""The Hub: every server of an ``mcpServers`` config behind one supervised client
(docs/hub.md). The public names are re-exported by ``conduit_mcp``."""

from __future__ import annotations

from .config import HubConfig, ServerEntry, load_config
from .hub import Hub
from .names import MODEL_SAFE
from .notify import HubNotification
from .view import Collision

__all__ = [
    "MODEL_SAFE",
    "Collision",
    "Hub",
    "HubConfig",
    "HubNotification",
    "ServerEntry",
    "load_config",
]
