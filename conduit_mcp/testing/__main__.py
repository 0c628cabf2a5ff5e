"""``python -m conduit_mcp.testing [options]``: the scripted MCP server on stdio."""

import sys

from .scripted.stdio import main

if __name__ == "__main__":
    sys.exit(main())
