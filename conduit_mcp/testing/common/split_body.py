"""Answers written in two segments with a pause between them: the hostile (and ordinary:
any proxy may do it) way of sending a body that a client reading it with one ``read(n)``
gets only half of. Shared by the test authorization server and the protected MCP server's
metadata (docs/testing.md, "The test authorization server", ``split_bodies``).
"""

from __future__ import annotations

import asyncio

from aiohttp import web

__all__ = ["write_split"]


async def write_split(
    request: web.Request, response: web.Response, delay: float
) -> web.StreamResponse:
    """Send ``response`` (status, headers and body) as two writes ``delay`` seconds apart:
    the first half, flushed, then the rest. ``Content-Length`` is kept, so the body is whole
    and well framed; only its arrival is split."""
    body = response.body
    data = bytes(body) if isinstance(body, (bytes, bytearray, memoryview)) else b""
    stream = web.StreamResponse(status=response.status, reason=response.reason)
    for name, value in response.headers.items():
        if name.lower() != "content-length":
            stream.headers[name] = value
    stream.content_length = len(data)
    await stream.prepare(request)
    half = max(1, len(data) // 2)
    await stream.write(data[:half])
    await asyncio.sleep(delay)
    await stream.write(data[half:])
    await stream.write_eof()
    return stream
