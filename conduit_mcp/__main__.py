"""``python -m conduit_mcp`` / ``conduit-mcp``: the demo, and list/call on any stdio server.

    conduit-mcp demo                      # the embedded scriptable server, auto mode
    conduit-mcp tools -- CMD [ARGS...]    # list a stdio server's tools
    conduit-mcp call TOOL '{"a": 1}' -- CMD [ARGS...]
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence

from . import Client, Error, Stdio


def _connect(command: Sequence[str], protocol: str) -> Client:
    # One-shot use: a server that cannot start is reported at once, not retried for minutes.
    client = Client.start(
        Stdio(command[0], list(command[1:])), protocol=protocol, max_reconnects=0
    )
    client.await_ready(timeout=15)
    return client


def demo() -> int:
    server = Stdio(sys.executable, ["-m", "conduit_mcp.testing", "--name", "demo-server"])
    print("starting the embedded server as a stdio subprocess, protocol='auto' ...")
    with Client.start(server, name="demo", protocol="auto") as client:
        status = client.await_ready(timeout=15)
        info = client.server_info()
        print(f"status: state={status.state} era={status.era} version={status.version} "
              f"origin={status.origin}")
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
        if "--" not in args:
            print("give the server command after --", file=sys.stderr)
            return 2
        split = args.index("--")
        server, rest = args[split + 1 :], args[1:split]
        client = _connect(server, "auto")
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
