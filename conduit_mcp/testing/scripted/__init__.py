"""The scripted MCP server: its protocol core (both eras, every tool, the script rules) and its
stdio front.

``python -m conduit_mcp.testing`` runs it; :class:`conduit_mcp.testing.ScriptedServer` builds
its command line, script and log. The core (:mod:`.server`) knows no transport: the stdio
front (:mod:`.stdio`) and the HTTP front (:mod:`conduit_mcp.testing.http`) feed it.
"""
