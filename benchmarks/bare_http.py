"""The bare aiohttp loop over streamable HTTP, written once: no client at all, the era's
JSON-RPC POSTs with its headers, answers decoded with orjson. ``bench_http.py`` divides every
row by this loop's rate (``/bare``) and ``http_switches.py`` counts its CPU and switches, so
both must time the same exchange: the same legacy handshake, headers and body.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import orjson

if TYPE_CHECKING:
    import aiohttp

#: The protocol version of each era.
ERAS = {"modern": "2026-07-28", "legacy": "2025-11-25"}


def headers(era: str, session: str | None) -> dict[str, str]:
    """A POST's headers: ``MCP-Protocol-Version`` in the modern era and on a legacy session's
    requests (not on its ``initialize``), ``Mcp-Session-Id`` once the session has one."""
    out = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    if era == "modern" or session is not None:
        out["MCP-Protocol-Version"] = ERAS[era]
    if session is not None:
        out["Mcp-Session-Id"] = session
    return out


async def connect(
    http: aiohttp.ClientSession, url: str, era: str, arguments: dict[str, object]
) -> Callable[[], Awaitable[None]]:
    """One bare ``tools/call add`` for ``era`` over ``http``, ready to repeat: in the legacy
    era a session is initialized first (``initialize``, ``notifications/initialized``) and
    each call carries ``Mcp-Session-Id`` and ``MCP-Protocol-Version``, as a client's do; a
    modern call carries the version in ``_meta`` and the header. Each call takes the next id
    and raises RuntimeError on an answer without a ``result``."""
    session = None
    if era == "legacy":
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": ERAS[era],
                "capabilities": {},
                "clientInfo": {"name": "bare", "version": "0"},
            },
        }
        async with http.post(url, data=orjson.dumps(init), headers=headers(era, None)) as resp:
            await resp.read()
            session = resp.headers.get("Mcp-Session-Id")
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        async with http.post(url, data=orjson.dumps(note), headers=headers(era, session)) as resp:
            await resp.read()
    hdrs = headers(era, session)
    params: dict[str, object] = {"name": "add", "arguments": arguments}
    if era == "modern":
        params["_meta"] = {"io.modelcontextprotocol/protocolVersion": ERAS[era]}
    next_id = 0

    async def call() -> None:
        nonlocal next_id
        next_id += 1
        body = orjson.dumps(
            {"jsonrpc": "2.0", "id": next_id, "method": "tools/call", "params": params}
        )
        async with http.post(url, data=body, headers=hdrs) as resp:
            msg = orjson.loads(await resp.read())
        if "result" not in msg:
            raise RuntimeError(f"unexpected answer: {msg}")

    return call
