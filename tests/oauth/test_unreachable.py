"""An authorization server that cannot be reached: the error says where (its origin, never a
path, query or userinfo) and what the last attempt met, so the connection can back off and
the caller hears why (docs/connection.md, "Authorizing")."""

from __future__ import annotations

import socket

import pytest

from conduit_mcp import Error
from conduit_mcp.oauth._http import is_unreachable, request
from conduit_mcp.oauth.discovery import fetch_as_metadata

from .conftest import run


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_refused_connection_names_the_origin_and_the_failure():
    port = closed_port()
    url = f"http://user:pw@127.0.0.1:{port}/token?secret=1"
    with pytest.raises(Error) as e:
        run(request, "POST", url, what="token endpoint", reason="token_failed", timeout=5)
    assert (e.value.kind, e.value.reason) == ("auth", "token_failed")
    assert is_unreachable(e.value.data)
    assert e.value.data["origin"] == f"http://127.0.0.1:{port}"
    assert e.value.data["detail"].startswith("ClientConnectorError")
    shown = f"{e.value.message} {e.value.data}"
    assert "pw" not in shown and "secret" not in shown and "/token" not in shown


def test_metadata_that_cannot_be_reached_keeps_the_last_failure():
    port = closed_port()
    with pytest.raises(Error) as e:
        run(fetch_as_metadata, f"http://127.0.0.1:{port}/tenant", timeout=5)
    assert e.value.reason == "discovery_failed" and is_unreachable(e.value.data)
    assert e.value.data["origin"] == f"http://127.0.0.1:{port}"
    assert "ClientConnectorError" in e.value.data["detail"]
