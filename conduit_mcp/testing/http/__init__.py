"""The Streamable HTTP front of the scripted MCP server (``--http``), on aiohttp.web.

It serves the core of :mod:`conduit_mcp.testing.scripted` on ``/mcp`` in both eras, checks the
transport's rules strictly and plays the OAuth-protected resource (``--require-oauth``);
:class:`~conduit_mcp.testing.http.process.HttpServerProcess` is the handle on its subprocess.
"""
