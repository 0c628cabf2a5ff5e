"""No value of an entry's ``env`` or ``headers`` (nor a URL's password or query) in any repr,
log record or error of the Hub."""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

import pytest

import conduit_mcp as mcp

from .conftest import scripted

pytestmark = pytest.mark.timeout(60)

SECRET = "hub-s3cret-0451"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_no_secret_in_reprs_logs_or_errors(
    start_hub: Callable[..., mcp.Hub], caplog: pytest.LogCaptureFixture
) -> None:
    port = _closed_port()
    config = {
        "mcpServers": {
            "local": scripted(env={"API_KEY": SECRET}),
            "remote": {
                "url": f"http://user:{SECRET}@127.0.0.1:{port}/mcp?key={SECRET}",
                "headers": {"X-Api-Key": SECRET},
                "conduit": {"max_reconnects": 1},
            },
        }
    }
    with caplog.at_level(logging.DEBUG, logger="conduit_mcp"):
        cfg = mcp.load_config(config)
        hub = start_hub(cfg)
        hub.await_ready(timeout=20, servers=["local"])
        assert hub.call_tool("local.env", {"name": "API_KEY"}).text == SECRET  # it is there
        hub.wait_for(lambda h: h.status()["remote"].reason is not None, timeout=20)
        with pytest.raises(mcp.Error) as info:
            hub.call_tool("remote.anything", {})
        shown = [
            repr(cfg),
            *map(repr, cfg.servers.values()),
            repr(hub),
            repr(hub.status()),
            repr(hub._board.members),
            str(info.value),
            repr(info.value),
            repr(info.value.data),
        ]
        for bad in (
            {"command": "x", "env": {"K": SECRET, "L": 3}},
            {"url": 3, "headers": {"A": SECRET}},
        ):
            with pytest.raises(mcp.Error) as bad_info:
                hub.add_server("bad", bad)
            shown.append(str(bad_info.value))
    logs = [r.getMessage() for r in caplog.records] + [
        str(r.exc_info) for r in caplog.records if r.exc_info
    ]
    for text in shown + logs:
        assert SECRET not in text, text
