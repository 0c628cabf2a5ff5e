"""``python -m conduit_mcp`` / ``conduit-mcp``: the demo, and list/call on any server.

conduit-mcp demo                      # the embedded scriptable server: stdio, then HTTP
conduit-mcp tools -- CMD [ARGS...]    # list a stdio server's tools
conduit-mcp tools --url URL           # ... or a streamable HTTP server's
conduit-mcp call TOOL '{"a": 1}' -- CMD [ARGS...]
conduit-mcp call TOOL '{"a": 1}' --url URL
"""

from __future__ import annotations

import json
import queue
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

from . import LIST_REFRESHED, Client, Error, Http, Stdio


def _connect(transport: Any, protocol: str) -> Client:
    # One-shot use: a server that cannot start is reported at once, not retried for minutes.
    client = Client.start(transport, protocol=protocol, max_reconnects=0)
    client.await_ready(timeout=15)
    return client


def demo_http() -> None:
    """The same server over streamable HTTP: the cache, and a change notification that
    reaches a subscriber through a ``subscriptions/listen`` stream and refreshes the cache."""
    from .testing import ScriptedServer

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


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    command = args[0]
    try:
        if command == "demo":
            return demo()
        if "--url" in args:
            at = args.index("--url")
            if at + 1 >= len(args):
                print("give the server's URL after --url", file=sys.stderr)
                return 2
            transport: Any = Http(args[at + 1])
            rest = args[1:at]
        elif "--" in args:
            split = args.index("--")
            server, rest = args[split + 1 :], args[1:split]
            transport = Stdio(server[0], list(server[1:]))
        else:
            print("give the server command after --, or its URL after --url", file=sys.stderr)
            return 2
        client = _connect(transport, "auto")
        try:
            if command == "tools":
                for tool in client.list_all_tools():
                    print(f"{tool.name}: {tool.description or ''}")
                return 0
            if command == "call":
                name = rest[0]
                arguments = json.loads(rest[1]) if len(rest) > 1 else {}
                result = client.call_tool(name, arguments)
                print(json.dumps(dict(result.raw), indent=2, default=str))
                return 1 if result.is_error else 0
        finally:
            client.stop()
    except Error as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"unknown command {command!r}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
