"""The official ``mcp`` 2.3.0 ``MCPServer`` on uvicorn or hypercorn with a chosen keep-alive
timeout, counting every tool call it runs: the keep-alive tests' server (not a test module).

    .venv/bin/python tests/peers/keepalive_peer.py --server uvicorn --keep-alive 1 --port N

Tools: ``hit(key)`` records ``key`` and returns how many hits the server ran; ``hits()``
returns ``{"total": n, "twice": [keys run more than once]}``: a call the client sent twice
shows up there, whatever the client believes. Both servers close a connection idle for
``--keep-alive`` seconds and announce no ``Keep-Alive`` header (the race the client must
survive: docs/connection.md, "Idle connections").
"""

from __future__ import annotations

import argparse
import asyncio
from collections import Counter
from typing import Any

from mcp.server.mcpserver import MCPServer

server = MCPServer("conduit-keepalive-peer", log_level="WARNING")
_hits: Counter[str] = Counter()


@server.tool()
def hit(key: str) -> int:
    """Record one call under `key`; the number of calls the server ran."""
    _hits[key] += 1
    return sum(_hits.values())


@server.tool()
def hits() -> dict[str, Any]:
    """How many hit calls ran, and the keys that ran more than once."""
    return {"total": sum(_hits.values()), "twice": sorted(k for k, n in _hits.items() if n > 1)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--server", choices=["uvicorn", "hypercorn"], required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--keep-alive", type=float, required=True)
    args = parser.parse_args()
    app = server.streamable_http_app(streamable_http_path="/mcp", host="127.0.0.1")
    if args.server == "uvicorn":
        import uvicorn

        config = uvicorn.Config(
            app,
            host="127.0.0.1",
            port=args.port,
            log_level="warning",
            timeout_keep_alive=args.keep_alive,  # type: ignore[arg-type]
        )
        uvicorn.Server(config).run()
    else:
        from hypercorn.asyncio import serve
        from hypercorn.config import Config

        config = Config()
        config.bind = [f"127.0.0.1:{args.port}"]
        config.keep_alive_timeout = args.keep_alive
        config.loglevel = "WARNING"
        asyncio.run(serve(app, config))  # type: ignore[arg-type]


if __name__ == "__main__":
    main()
