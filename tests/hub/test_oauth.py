"""OAuth per server through the Hub: one ``on_authorize(server, url)`` told which server
needs a person, and each member authorized on its own."""

from __future__ import annotations

import queue
from pathlib import Path
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.testing import AuthServerProcess, ScriptedServer

pytestmark = pytest.mark.timeout(60)


def test_one_on_authorize_is_told_which_server_needs_a_person(tmp_path: Path) -> None:
    auth = AuthServerProcess(tmp_path / "as", scopes="mcp")
    asked: queue.Queue[tuple[str, str]] = queue.Queue()
    for name in ("s1", "s2"):
        (tmp_path / name).mkdir()
    servers = [ScriptedServer(tmp_path / name) for name in ("s1", "s2")]
    procs: list[Any] = []
    hub = None
    try:
        for server in servers:
            procs.append(server.http_server(require_oauth=auth.issuer).__enter__())
        oauth = {"oauth": {"redirect_uri": "http://127.0.0.1:9/callback"}}
        config = {
            "mcpServers": {
                "mail": {"url": procs[0].url, "conduit": {"auth": oauth, "request_timeout": 5}},
                "calendar": {"url": procs[1].url, "conduit": {"auth": oauth, "request_timeout": 5}},
            }
        }
        hub = mcp.Hub.start(config, on_authorize=lambda server, url: asked.put((server, url)))
        seen = {}
        for _ in range(2):
            server, url = asked.get(timeout=20)
            seen[server] = url
        assert set(seen) == {"mail", "calendar"}
        # not ready while a person must act: calls fail at once, saying so
        with pytest.raises(mcp.Error) as info:
            hub.call_tool("mail.add", {"a": 1, "b": 2})
        assert info.value.reason == "server_not_ready"
        assert info.value.data["reason"] == "authorization_required"
        for server, url in seen.items():
            hub.client(server).authorize(auth.approve(url))
        hub.await_ready(timeout=20, servers="all")
        assert hub.call_tool("mail.add", {"a": 1, "b": 2}).text == "3"
        assert hub.call_tool("calendar.add", {"a": 2, "b": 2}).text == "4"
    finally:
        if hub is not None:
            hub.stop()
        for proc in procs:
            proc.__exit__(None, None, None)
        auth.stop()
