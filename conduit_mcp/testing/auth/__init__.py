"""The test authorization server: a real OAuth 2.1 server on aiohttp.web, run as a subprocess.

``python -m conduit_mcp.testing.auth.server`` runs it;
:class:`~conduit_mcp.testing.AuthServerProcess` starts it and plays the person. It shares
nothing with the scripted MCP server but the plumbing in :mod:`conduit_mcp.testing.common`.
"""
