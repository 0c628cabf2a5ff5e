"""The official SDKs' HTTP+SSE servers, for the SSE interop tests and the benchmark.

Not a test module. It serves the peers of ``tests/peers/`` (the same tools, prompts and
resources) over the SSE transport instead of stdio or streamable HTTP:

    .venv/bin/python tests/sse/sse_peers.py modern --port 39031         # mcp 2.3.0
    .venv-legacy/bin/python tests/sse/sse_peers.py legacy --port 39032  # mcp 1.30.0

Both serve ``GET http://127.0.0.1:PORT/sse`` and ``POST /messages/?session_id=...``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

PEERS = Path(__file__).resolve().parent.parent / "peers"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("which", choices=["modern", "legacy"])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    sys.path.insert(0, str(PEERS))
    if args.which == "modern":
        from modern_peer import server

        server.run("sse", host=args.host, port=args.port)
    else:
        from legacy_peer import build

        build(args.host, args.port).run("sse")


if __name__ == "__main__":
    main()
