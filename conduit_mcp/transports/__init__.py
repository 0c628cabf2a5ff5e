"""Transports move frames; the connection speaks JSON-RPC over them (stdio now, HTTP next)."""

from .stdio_spec import Stdio

__all__ = ["Stdio"]
