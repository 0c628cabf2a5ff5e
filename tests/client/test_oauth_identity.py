"""The cache identity of every kind of credential (docs/cache.md, "Private results"): static
headers carry one too, so switching them to another principal never serves the previous
principal's private lists. Through the public API against the scripted HTTP server."""

from __future__ import annotations

from typing import Any

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(30)


def lists(server: Any) -> int:
    return len(server.received("tools/list"))


def keys_sent(server: Any) -> list[str | None]:
    return [
        e["headers"].get("x-api-key")
        for e in server.events("http")
        if e["verb"] == "POST" and e["headers"].get("mcp-method") == "tools/list"
    ]


def test_set_auth_headers_to_another_principal_deletes_the_private_lists(make_server, start_client):
    server = make_server()
    with server.http_server(ttl_ms=60000, cache_scope="private") as srv:
        client = start_client(mcp.Http(srv.url, headers={"X-Api-Key": "key-alice-7d1"}))
        client.await_ready(timeout=10)
        tools = client.list_all_tools()
        client.list_all_tools()
        assert lists(server) == 1  # cached: the same headers are sent
        assert client.cached_tools() == tools

        client.set_auth(headers={"X-Api-Key": "key-alice-7d1"})  # the same principal again
        assert client.cached_tools() == tools

        client.set_auth(headers={"X-Api-Key": "key-bob-0c4"})
        assert client.cached_tools() is None  # alice's private list is gone at once
        assert client.tool("add") is None
        client.list_all_tools()
        assert lists(server) == 2  # bob's own listing, asked of the server
        client.list_all_tools()
        assert lists(server) == 2  # and cached under bob's identity
        assert keys_sent(server) == ["key-alice-7d1", "key-bob-0c4"]


def test_public_lists_survive_a_header_switch(make_server, start_client):
    server = make_server()
    with server.http_server(ttl_ms=60000, cache_scope="public") as srv:
        client = start_client(mcp.Http(srv.url, headers={"X-Api-Key": "key-alice-7d1"}))
        client.await_ready(timeout=10)
        tools = client.list_all_tools()
        client.set_auth(headers={"X-Api-Key": "key-bob-0c4"})
        assert client.cached_tools() == tools
        assert lists(server) == 1


def test_header_identities_are_hashes_never_the_values():
    alice = mcp.Http("http://127.0.0.1:1/mcp", headers={"X-Api-Key": "key-alice-7d1"})
    bob = mcp.Http("http://127.0.0.1:1/mcp", headers={"x-api-key": "key-bob-0c4"})
    same = mcp.Http("http://127.0.0.1:1/mcp", headers={"x-api-key": "key-alice-7d1"})
    assert alice.credential() != bob.credential()
    assert alice.credential() == same.credential()  # header names are case-insensitive
    assert "key-alice" not in (alice.credential() or "")
    both = mcp.Http("http://127.0.0.1:1/mcp", bearer="t", headers={"X-Api-Key": "key-alice-7d1"})
    assert both.credential() not in (
        alice.credential(),
        mcp.Http("http://h/mcp", bearer="t").credential(),
    )


# -- OAuth: the identity is principal, issuer and resource ------------------------------------


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_a_new_token_for_the_same_principal_keeps_the_private_lists_another_issuer_deletes_them(
    make_server, start_client, tmp_path
):
    # A client of its own registration (dynamic): it follows the server to the new
    # authorization server (pre-registered credentials would not: issuer_changed).
    import queue

    from conduit_mcp.testing import AuthServerProcess

    urls: queue.Queue[str] = queue.Queue()
    with (
        AuthServerProcess(tmp_path / "as1", scopes="mcp,offline_access") as first,
        AuthServerProcess(tmp_path / "as2", scopes="mcp,offline_access") as moved,
    ):
        server = make_server()
        with server.http_server(
            require_oauth=first.issuer, ttl_ms=60000, cache_scope="private"
        ) as srv:
            oauth = mcp.OAuth(on_authorize=urls.put, redirect_uri="http://127.0.0.1:9/cb")
            # Without the schema check, whose first listing (and its failure while the
            # server's authorization server moves) would change when lists are fetched: this
            # test counts them.
            client = start_client(
                mcp.Http(srv.url, auth=oauth), request_timeout=5, validate_output=False
            )
            with pytest.raises(mcp.Error):
                client.await_ready(timeout=0.5)  # a person must authorize first
            client.authorize(first.approve(urls.get(timeout=10)))
            assert client.await_ready(timeout=10).state == "ready"  # the first token
            tools = client.list_all_tools()
            client.list_all_tools()
            assert lists(server) == 1 and client.cached_tools() == tools  # stored under the token
            client.await_listening(timeout=10)  # the listen is open before the token expires

            first.admin("expire")  # a 401, a refreshed token for the same principal
            assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
            assert len(first.events("token")) == 2
            assert client.cached_tools() == tools  # kept
            client.list_all_tools()
            assert lists(server) == 1

            srv.set_oauth(authorization_server=moved.issuer)  # the server moved
            with pytest.raises(mcp.Error) as err:
                client.call_tool("add", {"a": 1, "b": 2})
            assert err.value.reason == "authorization_required"  # a new registration there
            client.authorize(moved.approve(urls.get(timeout=10)))
            assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
            assert len(moved.events("token")) == 1  # a token of the new issuer
            assert client.cached_tools() is None  # the other identity's lists are gone
            client.list_all_tools()
            assert lists(server) == 2
            client.list_all_tools()
            assert lists(server) == 2
