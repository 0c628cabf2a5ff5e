"""The Hub's asyncio and Pykka front ends: the routed calls of :class:`~conduit_mcp.Hub`,
each resolved the same way (:mod:`conduit_mcp.hub.routing`, in the caller's thread, never
waiting) and sent through the member's own front end (``client.aio``, ``client.futures``),
so each waits the way that front end's caller waits.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pykka

from ..types import (
    CallToolResult,
    CompleteResult,
    GetPromptResult,
    Progress,
    ReadResourceResult,
)
from . import routing
from .board import Board

__all__ = ["AsyncHub", "FutureHub"]


class AsyncHub:
    """``Hub``'s routed calls for asyncio (``await hub.aio.call_tool(...)``)."""

    def __init__(self, board: Board) -> None:
        self._board = board

    def __repr__(self) -> str:
        return f"<conduit_mcp.hub.AsyncHub {self._board.name!r}>"

    async def call_tool(
        self,
        name: str | tuple[str, str],
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        on_progress: Callable[[Progress], object] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> CallToolResult:
        """As ``Hub.call_tool``."""
        found, tool = routing.tool(self._board, name)
        return await found.client.aio.call_tool(  # type: ignore[no-any-return]
            tool,
            arguments,
            timeout=timeout,
            max_total_timeout=max_total_timeout,
            on_progress=on_progress,
            meta=meta,
        )

    async def get_prompt(
        self,
        name: str | tuple[str, str],
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
    ) -> GetPromptResult:
        """As ``Hub.get_prompt``."""
        found, prompt = routing.prompt(self._board, name)
        return await found.client.aio.get_prompt(  # type: ignore[no-any-return]
            prompt, arguments, timeout=timeout, max_total_timeout=max_total_timeout
        )

    async def read_resource(
        self,
        uri: str | tuple[str, str],
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
    ) -> ReadResourceResult:
        """As ``Hub.read_resource``."""
        found, target = routing.resource(self._board, uri)
        return await found.client.aio.read_resource(  # type: ignore[no-any-return]
            target, timeout=timeout, max_total_timeout=max_total_timeout
        )

    async def complete(
        self,
        ref: Mapping[str, Any],
        argument: Mapping[str, str],
        *,
        context: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> CompleteResult:
        """As ``Hub.complete``."""
        found, own = routing.completion_ref(self._board, ref)
        return await found.client.aio.complete(  # type: ignore[no-any-return]
            own, argument, context=context, timeout=timeout
        )

    async def request(
        self,
        server: str,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        on_progress: Callable[[Progress], object] | None = None,
    ) -> dict[str, Any]:
        """As ``Hub.request``."""
        found = routing.member(self._board, server)
        return await found.client.aio.request(  # type: ignore[no-any-return]
            method,
            params,
            timeout=timeout,
            max_total_timeout=max_total_timeout,
            on_progress=on_progress,
        )


class FutureHub:
    """``Hub``'s routed calls for Pykka actors: each returns a ``pykka.Future`` at once; a
    call that cannot be routed raises at once (as ``client.futures`` does for ``argument``)."""

    def __init__(self, board: Board) -> None:
        self._board = board

    def __repr__(self) -> str:
        return f"<conduit_mcp.hub.FutureHub {self._board.name!r}>"

    def call_tool(
        self,
        name: str | tuple[str, str],
        arguments: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        on_progress: Any = None,
        meta: Mapping[str, Any] | None = None,
    ) -> pykka.Future[CallToolResult]:
        """As ``Hub.call_tool``; ``on_progress`` is an ``ActorRef`` (as ``client.futures``)."""
        found, tool = routing.tool(self._board, name)
        return found.client.futures.call_tool(  # type: ignore[no-any-return]
            tool,
            arguments,
            timeout=timeout,
            max_total_timeout=max_total_timeout,
            on_progress=on_progress,
            meta=meta,
        )

    def get_prompt(
        self,
        name: str | tuple[str, str],
        arguments: Mapping[str, str] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
    ) -> pykka.Future[GetPromptResult]:
        """As ``Hub.get_prompt``."""
        found, prompt = routing.prompt(self._board, name)
        return found.client.futures.get_prompt(  # type: ignore[no-any-return]
            prompt, arguments, timeout=timeout, max_total_timeout=max_total_timeout
        )

    def read_resource(
        self,
        uri: str | tuple[str, str],
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
    ) -> pykka.Future[ReadResourceResult]:
        """As ``Hub.read_resource``."""
        found, target = routing.resource(self._board, uri)
        return found.client.futures.read_resource(  # type: ignore[no-any-return]
            target, timeout=timeout, max_total_timeout=max_total_timeout
        )

    def complete(
        self,
        ref: Mapping[str, Any],
        argument: Mapping[str, str],
        *,
        context: Mapping[str, Any] | None = None,
        timeout: float | None = None,
    ) -> pykka.Future[CompleteResult]:
        """As ``Hub.complete``."""
        found, own = routing.completion_ref(self._board, ref)
        return found.client.futures.complete(  # type: ignore[no-any-return]
            own, argument, context=context, timeout=timeout
        )

    def request(
        self,
        server: str,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        timeout: float | None = None,
        max_total_timeout: float | None = None,
        on_progress: Any = None,
    ) -> pykka.Future[dict[str, Any]]:
        """As ``Hub.request``."""
        found = routing.member(self._board, server)
        return found.client.futures.request(  # type: ignore[no-any-return]
            method,
            params,
            timeout=timeout,
            max_total_timeout=max_total_timeout,
            on_progress=on_progress,
        )
