"""``python -m conduit_mcp`` / the ``conduit-mcp`` script: the command line (``conduit_mcp.cli``)."""

from __future__ import annotations

import sys

from .cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
