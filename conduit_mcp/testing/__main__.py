"""``python -m conduit_mcp.testing [options]``: the scripted MCP server, on stdio or HTTP.

The choice of front lives here, above both: the HTTP front builds on the scripted server's
core (:mod:`.scripted`), so the stdio front, which sits beside that core, must not reach up
to it. ``--http`` imports aiohttp; stdio never does (it is every test's spawn).
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Sequence

from .scripted.options import config_from_args
from .scripted.rules import ConfigError

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server the command line asks for; return its exit code (2: a bad option)."""
    try:
        config = config_from_args(argv)
    except ConfigError as e:
        print(f"conduit_mcp.testing: {e}", file=sys.stderr)
        return 2
    if config.http:
        from .http.front import serve_http

        return asyncio.run(serve_http(config))
    from .scripted.stdio import serve

    return asyncio.run(serve(config))


if __name__ == "__main__":
    sys.exit(main())
