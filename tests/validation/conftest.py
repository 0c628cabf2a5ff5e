"""Fixtures for the validation tests: a scripted server per module, clients stopped at teardown,
and a loopback HTTP server that records every request (for the "never fetched" tests)."""

from __future__ import annotations

import http.server
import itertools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.testing import ScriptedServer

_names = itertools.count()


@pytest.fixture
def scripted(tmp_path: Path) -> ScriptedServer:
    return ScriptedServer(tmp_path)


@pytest.fixture
def start_client() -> Iterator[Callable[..., mcp.Client]]:
    """``start_client(transport, **options)``: a ready client, stopped at teardown."""
    clients: list[mcp.Client] = []

    def start(transport: Any, **options: Any) -> mcp.Client:
        client = mcp.Client.start(transport, **options)
        clients.append(client)
        client.await_ready(timeout=20)
        return client

    yield start
    for client in reversed(clients):
        client.stop()


def add_tool(
    client: mcp.Client,
    *,
    output_schema: dict[str, Any] | None = None,
    input_schema: dict[str, Any] | None = None,
    result: dict[str, Any] | None = None,
) -> str:
    """Add a dynamic tool to the scripted server (a fresh name each time); its name."""
    name = f"tool_{next(_names)}"
    args: dict[str, Any] = {"name": name}
    for key, value in (
        ("output_schema", output_schema),
        ("input_schema", input_schema),
        ("result", result),
    ):
        if value is not None:
            args[key] = value
    assert client.call_tool("add_tool", args).text == f"added {name}"
    return name


def structured(value: Any) -> dict[str, Any]:
    """A tool result whose structuredContent is ``value``."""
    return {"content": [{"type": "text", "text": "done"}], "structuredContent": value}


class Recorder(http.server.BaseHTTPRequestHandler):
    """Answers every GET with a JSON Schema, and records the path it was asked for."""

    hits: list[str]

    def do_GET(self) -> None:
        self.hits.append(self.path)
        body = b'{"type": "string"}'
        self.send_response(200)
        self.send_header("content-type", "application/schema+json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def schema_host() -> Iterator[tuple[str, list[str]]]:
    """A loopback HTTP server that would serve any schema: (its base URL, the paths asked)."""
    hits: list[str] = []
    handler = type("Handler", (Recorder,), {"hits": hits})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}", hits
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
