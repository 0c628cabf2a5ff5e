"""``conduit-mcp demo``: the embedded scriptable server driven by the client, stdio then HTTP.

What ``make demo`` runs; it needs nothing but this package.
"""

from __future__ import annotations

import queue
import sys
import tempfile
from typing import Any

from .. import LIST_REFRESHED, Client, Stdio


def demo_http() -> None:
    """The same server over streamable HTTP: the cache, and a change notification that
    reaches a subscriber through a ``subscriptions/listen`` stream and refreshes the cache."""
    from ..testing import ScriptedServer

    with tempfile.TemporaryDirectory() as workdir:
        server = ScriptedServer(workdir, name="demo-server", extra_args=["--ttl-ms", "60000"])
        print("starting it again over streamable HTTP on 127.0.0.1 ...")
        with server.http_server() as http, Client.start(http.spec(), name="demo-http") as client:
            status = client.await_ready(timeout=15)
            print(
                f"status: state={status.state} era={status.era} version={status.version} "
                f"url={http.url}"
            )
            notes: queue.Queue[Any] = queue.Queue()
            client.subscribe_notifications(notes)
            tools = client.list_all_tools()
            client.list_all_tools()
            fetched = len(server.received("tools/list"))
            print(
                f"tools: {len(tools)} listed twice, {fetched} tools/list sent "
                "(ttlMs 60000: the second came from the cache)"
            )
            client.await_listening(timeout=10)
            client.call_tool("add_tool", {"name": "hello_http"})
            note = notes.get(timeout=10)
            print(f"notification: {note.method}")
            while note.method != LIST_REFRESHED:
                note = notes.get(timeout=10)
            found = client.tool("hello_http")
            print(
                f"cache refreshed in the background: tool('hello_http') -> "
                f"{found.name if found else None}"
            )
    print("stopped: the HTTP server is closed.")


def demo() -> int:
    """Drive the embedded server over stdio (era, tools, progress, a call), then over HTTP."""
    server = Stdio(sys.executable, ["-m", "conduit_mcp.testing", "--name", "demo-server"])
    print("starting the embedded server as a stdio subprocess, protocol='auto' ...")
    with Client.start(server, name="demo", protocol="auto") as client:
        status = client.await_ready(timeout=15)
        info = client.server_info()
        print(
            f"status: state={status.state} era={status.era} version={status.version} "
            f"origin={status.origin}"
        )
        if info is not None:
            print(f"server: {info.name} {info.version}")
        tools = client.list_all_tools()
        print(f"tools ({len(tools)}): {', '.join(t.name for t in tools)}")
        print("calling progress(steps=3) ...")
        result = client.call_tool(
            "progress",
            {"steps": 3, "delay": 0.05},
            on_progress=lambda p: print(f"  progress {p.progress:g}/{p.total:g} {p.message or ''}"),
        )
        print(f"result: {result.text}")
        total = client.call_tool("add", {"a": 20, "b": 22})
        print(f"add(20, 22) = {total.text}  structured={total.structured_content}")
    print("stopped: the server process is closed.")
    demo_http()
    return 0
