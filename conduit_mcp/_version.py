"""The package version: one place, read by packaging (pyproject) and by ``clientInfo``."""

__version__ = "0.1.0"
"""This conduit-mcp's version, also sent as ``clientInfo.version``.

>>> import conduit_mcp
>>> conduit_mcp.__version__.count(".")
2
"""
