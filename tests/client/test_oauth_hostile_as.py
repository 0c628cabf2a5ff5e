"""Hostile and unwell authorization servers, through the public API: a real authorization server subprocess
(``conduit_mcp.testing.auth.server``) and the scripted MCP server it protects
(``--require-oauth``), both on loopback, with the levers that make them misbehave
(docs/testing.md: ``metadata_fault``, ``set_hostile``, ``forget_clients``).

What a user observes: a metadata fetch that fails backs off and recovers and never sends a
credential anywhere; answers written in segments or large are read whole; pre-registered
credentials stay with their issuer; a pasted URL that is no redirect is an argument error; a
registration the server forgot is replaced once; a desktop login keeps its loopback port and
so its registration."""

from __future__ import annotations

import socket
import urllib.request
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest

import conduit_mcp as mcp
from conduit_mcp.testing import AuthServerProcess
from conduit_mcp.testing.waiting import until

from .conftest import ADD, M2M, Person, m2m_oauth, person_oauth

pytestmark = [pytest.mark.timeout(60), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

PRM = "/.well-known/oauth-protected-resource"


def tokens_issued(auth: AuthServerProcess, grant: str | None = None) -> list[dict[str, Any]]:
    return [e for e in auth.events("token") if grant is None or e["grant"] == grant]


def no_credential_reached(server: Any) -> None:
    """Nothing but bearer tokens ever reached the MCP server: no Basic header, no token
    request, and the client secret nowhere in what it received."""
    requests = server.events("http")
    assert requests, "the MCP server received nothing"
    for r in requests:
        assert not r["headers"].get("authorization", "").lower().startswith("basic"), r["path"]
        assert not r["path"].endswith(("/token", "/register", "/authorize")), r["path"]
    assert M2M["client_secret"] not in server.log_path.read_text()


def authorized(client: mcp.Client, auth: AuthServerProcess, person: Person) -> str:
    """Run a person's authorization to its end; the URL they were given."""
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", ADD)
    assert (err.value.kind, err.value.reason) == ("auth", "authorization_required")
    url = person.next_url()
    client.authorize(auth.approve(url))
    return url


# -- a failed metadata fetch is no "no metadata" ---------------------------------------------


def test_a_metadata_url_answering_503_sends_no_credential_and_recovers(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        srv.set_oauth(metadata_fault="unavailable")
        client = start_client(
            mcp.Http(srv.url, auth=m2m_oauth()),
            request_timeout=5,
            max_reconnects=None,
            backoff=lambda attempt: 0.2,
        )
        status = client.wait_for_state("reconnecting", timeout=20)
        assert status.reason == "oauth_unreachable"

        def refused_fetches() -> int:
            return sum(
                1 for e in server.events("http") if e["path"].startswith(PRM) and e["status"] == 503
            )

        first = refused_fetches()
        until(lambda: refused_fetches() > first, timeout=20)  # it backs off and tries again
        no_credential_reached(server)
        assert auth.requests() == []  # not even the authorization server was asked yet

        srv.set_oauth(metadata_fault=None)  # the metadata is back
        assert client.call_tool("add", ADD, timeout=30).text == "3"
        assert client.status().state == "ready"
        (issued,) = tokens_issued(auth)
        assert issued["grant"] == "client_credentials" and issued["client_id"] == M2M["client_id"]
        no_credential_reached(server)


def test_an_authorization_server_metadata_answering_503_is_retried(
    auth_server, make_server, start_client
):
    auth = auth_server(metadata_status=503)
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(
            mcp.Http(srv.url, auth=m2m_oauth()),
            request_timeout=5,
            max_reconnects=None,
            backoff=lambda attempt: 0.2,
        )
        assert client.wait_for_state("reconnecting", timeout=20).reason == "oauth_unreachable"
        assert tokens_issued(auth) == []
        auth.set_hostile(metadata_status=None)
        assert client.call_tool("add", ADD, timeout=30).text == "3"
        no_credential_reached(server)


# -- answers are read to their end -----------------------------------------------------------


def test_answers_written_in_two_segments_are_read_whole(auth_server, make_server, start_client):
    auth = auth_server(split_bodies=0.2)  # metadata and token answers, each in two segments
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        srv.set_oauth(metadata_fault="split")  # and the protected resource metadata
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        assert client.call_tool("add", ADD).text == "3"
        assert len(tokens_issued(auth)) == 1
        no_credential_reached(server)


def test_a_200_kb_registration_answer_is_read_whole(auth_server, make_server, start_client):
    auth = auth_server(registration_padding=200_000)
    server = make_server()
    person = Person()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=person_oauth(person)), request_timeout=5)
        authorized(client, auth, person)
        assert client.call_tool("add", ADD).text == "3"
        (registered,) = [e for e in auth.events("registered") if e["kind"] == "dcr"]
        assert tokens_issued(auth)[0]["client_id"] == registered["client_id"]


def test_a_registration_answer_past_the_limit_is_refused_clearly(
    auth_server, make_server, start_client
):
    auth = auth_server(registration_padding=300_000)
    server = make_server()
    person = Person()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=person_oauth(person)), request_timeout=5)
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert (err.value.kind, err.value.reason) == ("auth", "registration_failed")
        assert "more than 262144 bytes" in err.value.message
        assert client.wait_for_state("closed", timeout=10).state == "closed"
        assert person.count == 0


# -- a pasted URL that is no redirect --------------------------------------------------------


@pytest.mark.parametrize(
    "pasted",
    ["javascript:alert(document.cookie)", "data:text/html,<b>hi</b>", "file:///etc/passwd"],
)
def test_authorize_with_text_that_is_no_http_redirect_is_an_argument_error(
    auth_server, make_server, start_client, pasted
):
    auth = auth_server()  # advertises RFC 9207 iss: before, this read as a wrong issuer
    server = make_server()
    person = Person()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=person_oauth(person)), request_timeout=5)
        with pytest.raises(mcp.Error):
            client.call_tool("add", ADD)
        url = person.next_url()
        with pytest.raises(mcp.Error) as err:
            client.authorize(pasted)
        assert (err.value.kind, err.value.reason) == ("argument", "redirect_url")
        assert "http(s)" in err.value.message and pasted not in str(err.value)
        assert client.status().reason == "authorization_required"  # nothing changed
        client.authorize(auth.approve(url))  # the real redirect still completes it
        assert client.call_tool("add", ADD).text == "3"


# -- pre-registered credentials stay with their issuer ---------------------------------------


def test_pre_registered_credentials_never_follow_a_server_to_another_issuer(
    auth_server, make_server, start_client
):
    first, moved = auth_server(), auth_server()  # both know the client: a real risk
    server = make_server()
    store = mcp.MemoryTokenStore()
    with server.http_server(require_oauth=first.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth(store=store)), request_timeout=5)
        assert client.call_tool("add", ADD).text == "3"
        assert len(tokens_issued(first)) == 1

        srv.set_oauth(authorization_server=moved.issuer)  # the server "moved"
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert (err.value.kind, err.value.reason) == ("auth", "issuer_changed")
        assert first.issuer in err.value.message and moved.issuer in err.value.message
        assert "confirm" in err.value.message and f"OAuth(issuer='{moved.issuer}')" in (
            err.value.message
        )
        assert client.wait_for_state("closed", timeout=10).state == "closed"
        assert moved.requests("/token") == []  # the secret never went there
        for r in moved.requests():  # (its log's "started" record holds the secret it was given)
            assert "authorization" not in r["headers"], r["path"]
            assert M2M["client_secret"] not in orjson.dumps(r.get("form")).decode()
        assert M2M["client_secret"] not in str(err.value)

        # A person confirms the move: the same credentials and store, issuer= named.
        confirmed = start_client(
            mcp.Http(srv.url, auth=m2m_oauth(store=store, issuer=moved.issuer)),
            request_timeout=5,
        )
        assert confirmed.call_tool("add", ADD).text == "3"
        assert len(tokens_issued(moved)) == 1


def test_an_issuer_option_refuses_any_other_from_the_first_request(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    person = Person()
    elsewhere = "https://as.example.com"
    with server.http_server(require_oauth=auth.issuer) as srv:
        for oauth in (m2m_oauth(issuer=elsewhere), person_oauth(person, issuer=elsewhere)):
            client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=5)
            with pytest.raises(mcp.Error) as err:
                client.call_tool("add", ADD)
            assert (err.value.kind, err.value.reason) == ("auth", "issuer_changed")
            assert "allows only https://as.example.com" in err.value.message
        assert auth.requests("/token") == [] and auth.requests("/register") == []
        assert person.count == 0


# -- a registration the authorization server forgot ------------------------------------------


def client_id_of(url: str) -> str:
    return parse_qs(urlsplit(url).query)["client_id"][0]


def test_a_forgotten_registration_is_replaced_once_then_a_person_authorizes(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    person = Person()
    store = mcp.MemoryTokenStore()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(
            mcp.Http(srv.url, auth=person_oauth(person, store=store)), request_timeout=5
        )
        first = client_id_of(authorized(client, auth, person))
        assert client.call_tool("add", ADD).text == "3"

        auth.forget_clients()  # every registration and token gone: the refresh is invalid_client
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert (err.value.kind, err.value.reason) == ("auth", "authorization_required")
        url = person.next_url()
        second = client_id_of(url)
        assert second != first  # a new registration, never the forgotten one
        assert [e["client_id"] for e in auth.events("registered") if e["kind"] == "dcr"] == [
            first,
            second,
        ]
        refused = [r for r in auth.requests("/token") if r.get("error") == "invalid_client"]
        assert len(refused) == 1  # the refresh, once
        client.authorize(auth.approve(url))  # the authorization server knows this one
        assert client.call_tool("add", ADD).text == "3"
        assert client.status().state == "ready"

        # The replacement was kept: another client of the store uses it, registers nothing.
        other = start_client(
            mcp.Http(srv.url, auth=person_oauth(person, store=store, principal="bob")),
            request_timeout=5,
        )
        assert client_id_of(authorized(other, auth, person)) == second
        assert len([e for e in auth.events("registered") if e["kind"] == "dcr"]) == 2


def test_a_registration_forgotten_again_before_any_token_is_not_replaced_twice(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    person = Person()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=person_oauth(person)), request_timeout=5)
        authorized(client, auth, person)
        auth.forget_clients()
        with pytest.raises(mcp.Error):
            client.call_tool("add", ADD)  # replaced: a new registration, a person again
        redirect = auth.approve(person.next_url())
        auth.forget_clients()  # and forgotten again before its code is exchanged
        with pytest.raises(mcp.Error) as err:
            client.authorize(redirect)
        assert (err.value.kind, err.value.reason) == ("auth", "token_failed")
        assert "invalid_client" in err.value.message
        assert len([e for e in auth.events("registered") if e["kind"] == "dcr"]) == 2  # once


# -- a desktop login keeps its loopback port and its registration -----------------------------


def test_a_desktop_login_reuses_the_stored_registrations_port(
    auth_server, make_server, start_client, tmp_path
):
    auth = auth_server()
    server = make_server()
    redirects: list[str] = []

    def browser(url: str) -> None:
        redirect = auth.approve(url)
        redirects.append(redirect)
        with urllib.request.urlopen(redirect, timeout=5) as resp:
            assert resp.status == 200

    def login(principal: str) -> None:
        oauth = mcp.OAuth(
            loopback=True,
            on_authorize=browser,
            store=mcp.FileTokenStore(tmp_path / "tokens.json"),
            principal=principal,  # another principal: no tokens, a login of its own
        )
        client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=5)
        assert client.await_ready(timeout=20).state == "ready"
        assert client.call_tool("add", ADD).text == "3"
        client.stop()

    def dcr() -> list[dict[str, Any]]:
        return [e for e in auth.events("registered") if e["kind"] == "dcr"]

    with server.http_server(require_oauth=auth.issuer) as srv:
        login("alice")
        (registered,) = dcr()
        port = urlsplit(redirects[0]).port
        assert registered["redirect_uris"] == [f"http://127.0.0.1:{port}/callback"]

        login("bob")  # a later login (a restarted app): the same port, no new registration
        assert urlsplit(redirects[1]).port == port
        assert len(dcr()) == 1
        assert tokens_issued(auth)[-1]["client_id"] == registered["client_id"]

        busy = socket.socket()  # the port is taken now: another one, and a new registration
        try:
            busy.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAIT
            busy.bind(("127.0.0.1", port))
            busy.listen()
            login("carol")
        finally:
            busy.close()
        assert urlsplit(redirects[2]).port != port
        assert len(dcr()) == 2
