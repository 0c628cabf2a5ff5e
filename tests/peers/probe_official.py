"""Drive a peer with the official ``mcp`` 2.3.0 client and print what it saw (a hand check).

Not a test module. Usage (from the repo root, after ``make venv peers``):

    .venv/bin/python tests/peers/probe_official.py auto   -- .venv/bin/python tests/peers/modern_peer.py stdio
    .venv/bin/python tests/peers/probe_official.py auto   -- .venv-legacy/bin/python tests/peers/legacy_peer.py stdio
    .venv/bin/python tests/peers/probe_official.py legacy -- node .peers/node/node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio
    .venv/bin/python tests/peers/probe_official.py 2026-07-28 --url http://127.0.0.1:39021/mcp

Modes: ``auto`` | ``legacy`` | ``2026-07-28`` (the official client's ``Client(mode=...)``).
"""

from __future__ import annotations

import argparse
import collections
import sys
import uuid
import warnings

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.subscriptions import ListenNotSupportedError

warnings.filterwarnings("ignore", message=".*SEP-2577.*")


async def probe(target: StdioServerParameters | str, mode: str, listen: bool) -> int:
    seen: collections.Counter[str] = collections.Counter()

    async def on_message(message: object) -> None:
        seen[getattr(message, "method", type(message).__name__)] += 1

    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(p: float, total: float | None, message: str | None) -> None:
        progress.append((p, total, message))

    async with Client(target, mode=mode, message_handler=on_message, read_timeout_seconds=30) as c:
        info = c.server_info
        print(f"mode={mode} negotiated={c.protocol_version} server={info.name if info else None}")
        tools = await c.list_tools()
        names = sorted(t.name for t in tools.tools)
        print(f"tools ({len(names)}): {names}")
        if "add" in names:
            r = await c.call_tool("add", {"a": 1, "b": 2})
            print(
                f"add -> content={[b.text for b in r.content]} structured={r.structured_content} isError={r.is_error}"
            )
        if "slow_count" in names:
            r = await c.call_tool(
                "slow_count", {"steps": 3, "delay": 0.05}, progress_callback=on_progress
            )
            print(f"slow_count -> {[b.text for b in r.content]} progress={progress}")
        if "add_dynamic_tool" in names:
            tool = f"dyn_{uuid.uuid4().hex[:8]}"
            if listen and c.protocol_version == "2026-07-28":
                try:
                    async with c.listen(tools_list_changed=True) as sub:
                        await c.call_tool("add_dynamic_tool", {"name": tool})
                        with anyio.fail_after(5):
                            event = await sub.__anext__()
                        print(f"listen event: {event!r}")
                except ListenNotSupportedError as e:
                    print(f"listen: not supported ({e})")
            else:
                await c.call_tool("add_dynamic_tool", {"name": tool})
            after = sorted(t.name for t in (await c.list_tools(cache_mode="refresh")).tools)
            r = await c.call_tool(tool, {"text": "hi"})
            print(f"{tool} listed={tool in after} -> {[b.text for b in r.content]}")
            await c.call_tool("remove_dynamic_tool", {"name": tool})
        if "echo" in names:
            r = await c.call_tool("echo", {"text": "héllo"})
            print(f"echo -> {[b.text for b in r.content]}")
        caps = c.server_capabilities
        if caps.resources is not None:
            res = await c.list_resources()
            print(f"resources: {[str(r.uri) for r in res.resources][:8]}")
        if caps.prompts is not None:
            prompts = await c.list_prompts()
            print(f"prompts: {[p.name for p in prompts.prompts]}")
        await anyio.sleep(0.2)
    print(f"notifications: {dict(seen)}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["auto", "legacy", "2026-07-28"])
    parser.add_argument("--url", help="streamable HTTP endpoint instead of a command")
    parser.add_argument("--no-listen", action="store_true", help="skip subscriptions/listen")
    argv = sys.argv[1:]
    cut = argv.index("--") if "--" in argv else len(argv)
    a = parser.parse_args(argv[:cut])
    cmd = argv[cut + 1 :]  # -- CMD ARGS... (stdio)
    if a.url:
        target: StdioServerParameters | str = a.url
    elif cmd:
        target = StdioServerParameters(command=cmd[0], args=cmd[1:])
    else:
        parser.error("give --url or -- COMMAND")
    return anyio.run(probe, target, a.mode, not a.no_listen)


if __name__ == "__main__":
    sys.exit(main())
