"""What the caller's side needs of an engine (Ray's is ``conduit_mcp.cluster.ray_engine``)."""

from __future__ import annotations

from typing import Any, Protocol


class HostLost(Exception):
    """The host's process died under a message (``permanent``: it will not come back)."""

    def __init__(self, host: str, permanent: bool) -> None:
        super().__init__(host, permanent)
        self.host = host
        self.permanent = permanent


class HostHandle(Protocol):
    """One host, as a caller reaches it: each method one message, plain data each way;
    a host that died under a message raises :class:`HostLost`."""

    name: str

    def submit(self, caller: str, calls: list[dict[str, Any]], linger: float) -> Any: ...
    def poll(self, caller: str, wait: float) -> Any: ...
    def leave(self, caller: str) -> Any: ...
    def notes(self, caller: str, methods: Any, servers: Any) -> None: ...
    def info(self, timeout: float = 30.0) -> dict[str, Any]: ...
    def views(self) -> dict[str, Any]: ...
    def await_ready(self, timeout: float, servers: Any) -> dict[str, Any]: ...
    def kill(self) -> None: ...
