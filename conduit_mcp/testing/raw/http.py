"""A raw Streamable HTTP driver (aiohttp), for tests below the client: the HTTP ``RawPeer``.

It builds POSTs with the right headers (or deliberately wrong ones), keeps a legacy session
id, and reads JSON and SSE answers, incrementally where a test needs to (:class:`SseReader`).
It follows no transport rule by itself beyond what each call says, so tests can check what
the scripted server does with a broken client as well as a good one.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

import aiohttp
import orjson

from ..http.headers import encode_header_value
from .stdio import MODERN_VERSION, envelope

__all__ = ["ACCEPT", "RawHttpPeer", "Reply", "SseEvent", "SseReader", "modern_headers"]

ACCEPT = "application/json, text/event-stream"
_NAME_PARAM = {
    "tools/call": "name",
    "prompts/get": "name",
    "resources/read": "uri",
    "tasks/get": "taskId",  # ext-tasks: Mcp-Name is the task id on tasks/get|update|cancel
    "tasks/update": "taskId",
    "tasks/cancel": "taskId",
}


def modern_headers(method: str, params: Mapping[str, Any] | None = None) -> dict[str, str]:
    """``MCP-Protocol-Version``, ``Mcp-Method`` and (where due) ``Mcp-Name`` for a request."""
    params = params or {}
    meta = params.get("_meta") or {}
    headers = {
        "MCP-Protocol-Version": meta.get("io.modelcontextprotocol/protocolVersion", MODERN_VERSION),
        "Mcp-Method": method,
    }
    key = _NAME_PARAM.get(method)
    if key is not None and isinstance(params.get(key), str):
        headers["Mcp-Name"] = encode_header_value(params[key])
    return headers


@dataclass(slots=True)
class SseEvent:
    id: str | None
    data: Any  # the decoded JSON, or the raw text when it is not JSON
    raw: str


class SseReader:
    """Reads SSE events one by one from a response (``retry`` keeps the last retry field)."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.retry: int | None = None
        self.last_id: str | None = None

    async def next(self) -> SseEvent | None:
        """The next event; None at the end of the stream."""
        event_id: str | None = None
        data: list[str] = []
        while True:
            line = await self.response.content.readline()
            if not line:
                return None
            text = line.decode().rstrip("\r\n")
            if not text:
                if data:
                    raw = "\n".join(data)
                    try:
                        value = orjson.loads(raw)
                    except orjson.JSONDecodeError:
                        value = raw
                    if event_id is not None:
                        self.last_id = event_id
                    return SseEvent(event_id, value, raw)
                continue
            name, _, value = text.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if name == "data":
                data.append(value)
            elif name == "id":
                event_id = value
            elif name == "retry" and value.isdigit():
                self.retry = int(value)

    async def all(self) -> list[SseEvent]:
        events = []
        while (event := await self.next()) is not None:
            events.append(event)
        return events


@dataclass(slots=True)
class Reply:
    """A whole HTTP answer: status, headers, body, and its SSE events when it is a stream."""

    status: int
    headers: Mapping[str, str]
    content_type: str
    body: bytes = b""
    events: list[SseEvent] = field(default_factory=list)
    retry: int | None = None

    @property
    def json(self) -> Any:
        """The JSON body, or the last SSE event's data (the response)."""
        if self.content_type == "text/event-stream":
            return self.events[-1].data if self.events else None
        return orjson.loads(self.body) if self.body else None


class RawHttpPeer:
    """``async with RawHttpPeer(url) as peer:`` one aiohttp session against one endpoint."""

    def __init__(self, url: str, *, headers: Mapping[str, str] | None = None) -> None:
        self.url = url
        self.base_headers = dict(headers or {})
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self._ids = itertools.count(1)
        self._http: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> RawHttpPeer:
        self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=None))
        return self

    async def __aexit__(
        self, t: type[BaseException] | None, e: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._http is not None:
            await self._http.close()

    @property
    def http(self) -> aiohttp.ClientSession:
        assert self._http is not None, "use RawHttpPeer as an async context manager"
        return self._http

    def next_id(self) -> int:
        return next(self._ids)

    def headers(self, extra: Mapping[str, str] | None = None) -> dict[str, str]:
        """Accept, the session and negotiated version (legacy), the base headers, ``extra``."""
        out = {"Accept": ACCEPT, **self.base_headers}
        if self.session_id is not None:
            out["Mcp-Session-Id"] = self.session_id
        if self.protocol_version is not None:
            out["MCP-Protocol-Version"] = self.protocol_version
        out.update(extra or {})
        return {k: v for k, v in out.items() if v is not None}

    @asynccontextmanager
    async def open_post(
        self, msg: Any, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """POST ``msg`` (JSON) and yield the response unread (for streaming)."""
        body = msg if isinstance(msg, bytes) else orjson.dumps(msg)
        hdrs = {"Content-Type": "application/json", **self.headers(headers)}
        async with self.http.post(self.url, data=body, headers=hdrs) as response:
            yield response

    @asynccontextmanager
    async def open_get(
        self, last_event_id: str | None = None, headers: Mapping[str, str] | None = None
    ) -> AsyncIterator[aiohttp.ClientResponse]:
        """GET the session's SSE stream (or resume one with ``Last-Event-ID``)."""
        extra = {"Accept": "text/event-stream", **dict(headers or {})}
        if last_event_id is not None:
            extra["Last-Event-ID"] = last_event_id
        async with self.http.get(self.url, headers=self.headers(extra)) as response:
            yield response

    @staticmethod
    async def read(response: aiohttp.ClientResponse) -> Reply:
        reply = Reply(response.status, response.headers, response.content_type)
        if response.content_type == "text/event-stream":
            reader = SseReader(response)
            reply.events = await reader.all()
            reply.retry = reader.retry
        else:
            reply.body = await response.read()
        return reply

    async def post(self, msg: Any, headers: Mapping[str, str] | None = None) -> Reply:
        async with self.open_post(msg, headers) as response:
            return await self.read(response)

    async def modern(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        request_id: Any = None,
        **meta: Any,
    ) -> Reply:
        """A modern request: enveloped params, the metadata headers, then ``headers``."""
        full = envelope(params, **meta)
        rid = self.next_id() if request_id is None else request_id
        msg = {"jsonrpc": "2.0", "id": rid, "method": method, "params": full}
        return await self.post(msg, {**modern_headers(method, full), **dict(headers or {})})

    async def legacy(
        self,
        method: str,
        params: Mapping[str, Any] | None = None,
        *,
        headers: Mapping[str, str] | None = None,
    ) -> Reply:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "id": self.next_id(), "method": method}
        if params is not None:
            msg["params"] = dict(params)
        return await self.post(msg, headers)

    async def notify(self, method: str, params: Mapping[str, Any] | None = None) -> Reply:
        msg: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = dict(params)
        return await self.post(msg)

    async def initialize(
        self, version: str = "2025-11-25", capabilities: Mapping[str, Any] | None = None
    ) -> Reply:
        """The legacy handshake: ``initialize``, keep the session id, ``initialized``."""
        params = {
            "protocolVersion": version,
            "capabilities": dict(capabilities or {}),
            "clientInfo": {"name": "raw-http-peer", "version": "0"},
        }
        reply = await self.legacy("initialize", params)
        if reply.status == 200 and "result" in (reply.json or {}):
            self.session_id = reply.headers.get("Mcp-Session-Id")
            self.protocol_version = reply.json["result"]["protocolVersion"]
            await self.notify("notifications/initialized")
        return reply

    async def delete(self) -> Reply:
        async with self.http.delete(self.url, headers=self.headers()) as response:
            return await self.read(response)
