"""Every span of a member carries its server's config key (``conduit_mcp.hub.server``).

The member's tracer provider is wrapped: its tracers add the attribute to each span they
start. Which provider: the member's own ``tracer_provider`` option, else the global one if
an SDK is installed when the member is built; with neither, nothing is recorded and the
member keeps the zero-SDK fast path (docs/hub.md, "Telemetry").
"""

from __future__ import annotations

from typing import Any, Final

from opentelemetry import trace

__all__ = ["HUB_SERVER", "keyed_provider"]

#: The span attribute naming the member's server (its config key).
HUB_SERVER: Final = "conduit_mcp.hub.server"


class _KeyedTracer:
    __slots__ = ("_inner", "_server")

    def __init__(self, inner: Any, server: str) -> None:
        self._inner = inner
        self._server = server

    def start_span(self, name: str, *args: Any, attributes: Any = None, **kwargs: Any) -> Any:
        merged = dict(attributes or {})
        merged[HUB_SERVER] = self._server
        return self._inner.start_span(name, *args, attributes=merged, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


class KeyedTracerProvider:
    """A tracer provider whose tracers stamp ``conduit_mcp.hub.server`` on every span."""

    __slots__ = ("_inner", "server")

    def __init__(self, inner: Any, server: str) -> None:
        self._inner = inner
        self.server = server

    def get_tracer(self, *args: Any, **kwargs: Any) -> Any:
        return _KeyedTracer(self._inner.get_tracer(*args, **kwargs), self.server)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)


def keyed_provider(provider: Any, server: str) -> Any:
    """The provider to give the member of ``server`` (None: keep the fast path)."""
    if provider is None:
        installed = getattr(trace, "_TRACER_PROVIDER", None)
        if installed is None:
            return None
        provider = installed
    return KeyedTracerProvider(provider, server)
