"""The official mcp 2.3.0 server (dual-era), started slower than ``probe_timeout``: the
client still ends up ready in the modern era (auto mode), as the official client does."""

from __future__ import annotations

import shlex
from collections.abc import Callable

import pytest

import conduit_mcp as mcp

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]


def test_a_slow_starting_official_server_connects_modern(
    start_client: Callable[..., mcp.Client], modern_peer_cmd: list[str]
) -> None:
    # What a first `uvx` run, a container or a slow import looks like to the client.
    late = f"sleep 1.5; exec {shlex.join(modern_peer_cmd)}"
    client = start_client(
        mcp.Stdio("sh", ["-c", late], inherit_env=True), probe_timeout=0.5, request_timeout=20
    )
    status = client.await_ready(timeout=30)
    assert (status.state, status.era) == ("ready", "modern")
    assert client.list_all_tools()
