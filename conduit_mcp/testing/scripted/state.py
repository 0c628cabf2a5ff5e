"""The state the scripted server's parts share, declared once.

:class:`~conduit_mcp.testing.scripted.server.ScriptedMcpServer` is assembled from its core and two
mixins (:mod:`.handlers`, :mod:`.tools`). Each attribute and callback they share is declared
here with its type, so that a reader of one part sees where a name comes from and a type
checker can follow it. The core assigns every attribute in its ``__init__`` and defines the
three methods.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import Callable
from typing import Any

from .options import Config
from .protocol import Ctx

__all__ = ["ServerState"]


class ServerState:
    """Declarations only: what the server core, the handlers and the tools share."""

    config: Config
    """The parsed options and script of this server."""

    # The era and the legacy session.
    _era: str | None  # "modern" or "legacy"; None until the first request decides (era both)
    _advertised: list[str]  # the versions named to a client whose version is refused
    _modern_set: frozenset[str]  # modern versions this server speaks
    _legacy_set: frozenset[str]  # legacy versions this server speaks
    _initialized: bool  # legacy: notifications/initialized arrived
    _legacy_version: str | None  # legacy: the version initialize agreed
    _legacy_caps: dict[str, Any]  # legacy: the client's capabilities from initialize
    _legacy_level: str  # legacy: the level of logging/setLevel
    _legacy_subscriptions: set[str]  # legacy: resource URIs of resources/subscribe
    _listens: dict[Any, dict[str, Any]]  # modern: open subscriptions/listen by request id

    # Routing and the tool table.
    _modern_handlers: dict[str, Callable[[Ctx], Any]]
    _legacy_handlers: dict[str, Callable[[Ctx], Any]]
    _tool_fns: dict[str, Callable[[Ctx, dict[str, Any]], Any]]  # tool name -> implementation
    _static_tools: list[dict[str, Any]]  # the built-in and generated tools
    _dynamic_tools: dict[str, dict[str, Any]]  # tools added by the add_tool tool
    _dynamic_results: dict[str, dict[str, Any]]  # what a dynamic tool answers, if scripted
    _tools_list: list[dict[str, Any]]  # what tools/list pages through: static + dynamic
    _prompts: list[dict[str, Any]]  # what prompts/list pages through (PROMPTS, or --metadata's)
    _resources: list[dict[str, Any]]
    _templates: list[dict[str, Any]]

    # What every answer carries.
    _server_info: dict[str, Any]
    _result_meta: dict[str, Any]  # modern results' _meta (the server info)

    # Requests this server sends to the client, and the process.
    _client_requests: dict[Any, asyncio.Future[Any]]  # by request id
    _next_client_request: int
    _pid: int

    # Sending.
    _emit: Callable[[dict[str, Any]], None]  # one JSON-RPC message
    _emit_raw: Callable[[bytes], None]  # one raw line (possibly not JSON)
    _stop_input: Callable[[], None]  # stop reading the client's messages for good (stdio)

    _open_stream: Callable[[], None]  # HTTP: answer the current POST with SSE (server requests)

    def _send_request(
        self, method: str, params: Any, origin: str, *, via: str = "post", wait: bool = True
    ) -> tuple[str, asyncio.Future[Any] | None]:
        """Send and record a server request (see asking)."""
        raise NotImplementedError

    _asked: collections.OrderedDict[Any, dict[str, Any]]  # server requests sent, by id

    def _notify(self, method: str, params: Any = None) -> None:
        """Send a notification."""
        raise NotImplementedError

    def _event(self, name: str, **fields: Any) -> None:
        """Log a notable event (when the server logs)."""
        raise NotImplementedError

    def _exit(self, code: int, reason: str) -> None:
        """End the process (over HTTP: the server's exit callback)."""
        raise NotImplementedError

    def _note_carrier(self, ctx: Ctx) -> None:
        """Record a modern request carrying inputResponses or requestState (see rounds)."""
        raise NotImplementedError

    def _rounds_prompt(self, ctx: Ctx, args: dict[str, Any]) -> dict[str, Any]:
        """The ``rounds`` prompt (see rounds)."""
        raise NotImplementedError

    def _listen_task_ids(self, ctx: Ctx, wanted: dict[str, Any]) -> list[str] | None:
        """The taskIds a listen asks for that the server agrees to (see tasks)."""
        raise NotImplementedError

    def _watch_tasks(self, listen_id: Any, task_ids: list[str]) -> None:
        """Push notifications/tasks on a listen for these tasks (see tasks)."""
        raise NotImplementedError

    def _rounds_resource(self, ctx: Ctx, uri: str) -> dict[str, Any]:
        """A ``test://rounds/`` resource (see rounds)."""
        raise NotImplementedError
