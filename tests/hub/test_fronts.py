"""The Hub's three front ends, its handler given once for all members, and telemetry: every
span of a member carries the server's config key."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from typing import Any

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import conduit_mcp as mcp
from conduit_mcp.hub.fronts import AsyncHub, FutureHub
from conduit_mcp.hub.telemetry import HUB_SERVER

from .conftest import MISSING, scripted

pytestmark = pytest.mark.timeout(60)

StartHub = Callable[..., mcp.Hub]
ROUTED = (
    "call_tool",
    "get_prompt",
    "read_resource",
    "complete",
    "request",
    "subscribe",
    "unsubscribe",
)


def test_the_three_front_ends_have_the_same_routed_calls() -> None:
    for name in (*ROUTED, "await_ready"):
        blocking = inspect.signature(getattr(mcp.Hub, name))
        for front in (AsyncHub, FutureHub):
            other = inspect.signature(getattr(front, name))
            assert list(other.parameters) == list(blocking.parameters), (front, name)
        assert inspect.iscoroutinefunction(getattr(AsyncHub, name))
    # where they mean the same, the hub's calls take what the client's take
    for name in ("call_tool", "get_prompt", "read_resource", "complete"):
        hub_params = list(inspect.signature(getattr(mcp.Hub, name)).parameters)
        client_params = list(inspect.signature(getattr(mcp.Client, name)).parameters)
        assert hub_params == client_params, name


def test_aio_routes_and_fails_at_once(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"a": scripted(), "gone": MISSING}})

    async def main() -> tuple[str, str, Any]:
        await hub.aio.await_ready(timeout=20, servers=["a"])
        result = await hub.aio.call_tool("a.add", {"a": 1, "b": 2})
        raw = await hub.aio.request("a", "tools/list")
        try:
            await hub.aio.call_tool("gone.add", {})
        except mcp.Error as e:
            return result.text, e.reason, raw
        raise AssertionError("no error")

    text, reason, raw = asyncio.run(main())
    assert (text, reason) == ("3", "server_not_ready") and raw["tools"]


def test_futures_route_and_fail_at_once(start_hub: StartHub) -> None:
    hub = start_hub({"mcpServers": {"a": scripted(), "gone": MISSING}})
    hub.futures.await_ready(timeout=20, servers=["a"]).get(timeout=25)
    assert hub.futures.call_tool(("a", "add"), {"a": 2, "b": 2}).get(timeout=10).text == "4"
    assert hub.futures.get_prompt("a.plain").get(timeout=10).messages
    with pytest.raises(mcp.Error) as info:
        hub.futures.call_tool("gone.add", {})  # raises at once: nothing to wait for
    assert info.value.reason == "server_not_ready"
    with pytest.raises(mcp.Error) as info:
        hub.futures.await_ready(timeout=0.2, servers="all").get(timeout=5)
    assert info.value.reason == "deadline"


def test_one_handler_serves_every_member_and_knows_which_server_asks(start_hub: StartHub) -> None:
    asked: list[str] = []

    class Roots(mcp.Handler):
        def list_roots(self, ctx: mcp.HandlerContext) -> list[mcp.Root]:
            asked.append(ctx.client_name)
            return [mcp.Root("file:///work", "work")]

    hub = start_hub(
        {"mcpServers": {"a": scripted(), "b": scripted("--era", "legacy")}}, handler=Roots()
    )
    hub.await_ready(timeout=20, servers="all")
    for server in ("b", "a"):
        result = hub.call_tool(f"{server}.client_request", {"method": "roots/list", "params": {}})
        assert "file:///work" in (result.text or str(result.structured_content))
    assert [hub.server_of(name) for name in asked] == ["b", "a"]


def test_every_member_span_carries_its_server(start_hub: StartHub) -> None:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        hub = start_hub(
            {"mcpServers": {"files": scripted(), "git": scripted()}}, tracer_provider=provider
        )
        hub.await_ready(timeout=20, servers="all")
        hub.call_tool("files.add", {"a": 1, "b": 2})
        hub.call_tool("git.echo", {"text": "x"})
        spans = exporter.get_finished_spans()
        by_name = {s.name: s for s in spans}
        assert by_name["tools/call add"].attributes[HUB_SERVER] == "files"
        assert by_name["tools/call echo"].attributes[HUB_SERVER] == "git"
        # the view's own fetches are member requests too
        listed = [s for s in spans if s.name == "tools/list"]
        assert {s.attributes[HUB_SERVER] for s in listed} == {"files", "git"}
        assert all(HUB_SERVER in s.attributes for s in spans)
    finally:
        provider.shutdown()


def test_a_routed_call_is_kept_alive_by_its_progress(start_hub: StartHub) -> None:
    """``reset_timeout_on_progress`` goes through to the member: a call that reports every
    0.15 s outlives its 0.6 s timeout (docs/connecting.md, "Progress that keeps a call
    alive"); without it the same call is cut off."""
    hub = start_hub({"mcpServers": {"a": scripted()}})
    hub.await_ready(timeout=20, servers=["a"])
    steady = {"steps": 9, "delay": 0.15}
    done = hub.call_tool("a.progress", steady, timeout=0.6, reset_timeout_on_progress=True)
    assert done.text == "done 9 steps"
    with pytest.raises(mcp.Error) as err:
        hub.call_tool("a.progress", steady, timeout=0.6)
    assert (err.value.kind, err.value.reason) == ("timeout", "deadline")
