"""OAuth through the public API (docs/connection.md, "Authorizing"; docs/actor-tree.md, "The
OAuth actor"): a real authorization server subprocess (``conduit_mcp.testing.auth.server``)
and the scripted MCP server protected by it (``--require-oauth``), both on loopback.

A 401 enters ``authorizing`` and the refused call succeeds once a token exists; while a
person must act calls fail at once with ``authorization_required`` and succeed after
``Client.authorize``; the loopback listener; expiry refreshed with no person; a rotating
refresh token never spent twice under concurrency; a revoked refresh token asks a person
again; step-up; ``client_credentials``; a restarted process with a ``FileTokenStore``
refreshes instead of asking a person."""

from __future__ import annotations

import threading
import time
import urllib.request
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.testing import AuthServerProcess
from conduit_mcp.testing.waiting import until

from .conftest import ADD, Person, m2m_oauth, mcp_posts, person_oauth

pytestmark = [pytest.mark.timeout(60), pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def tokens_issued(auth: AuthServerProcess, grant: str | None = None) -> list[dict[str, Any]]:
    return [e for e in auth.events("token") if grant is None or e["grant"] == grant]


def authorized(client: mcp.Client, auth: AuthServerProcess, person: Person) -> None:
    """Run a person's authorization to its end: the call fails authorization_required, the
    person approves, ``Client.authorize`` completes it."""
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", ADD)
    assert (err.value.kind, err.value.reason) == ("auth", "authorization_required")
    client.authorize(auth.approve(person.next_url()))


# -- machine to machine ----------------------------------------------------------------------


def test_client_credentials_a_401_authorizes_and_the_refused_call_succeeds(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        assert client.call_tool("add", ADD).text == "3"  # no person anywhere
        assert client.status().state == "ready"
        posts = mcp_posts(server)
        assert posts[0]["status"] == 401 and "authorization" not in posts[0]["headers"]
        assert all(p["headers"]["authorization"].startswith("Bearer ") for p in posts[1:])
        assert posts[-1]["status"] == 200
        (issued,) = tokens_issued(auth)
        assert issued["grant"] == "client_credentials" and issued["resource"] == srv.url


class StuckStore(mcp.MemoryTokenStore):
    """A token store whose first read hangs until released (a slow disk, a remote vault)."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = threading.Event()
        self.release = threading.Event()

    def get(self, key: str) -> dict[str, Any] | None:
        if not self.entered.is_set():
            self.entered.set()
            self.release.wait(20)
        return super().get(key)


def test_a_store_that_hangs_never_blocks_the_oauth_actor(auth_server, make_server, start_client):
    auth = auth_server()
    server = make_server()
    store = StuckStore()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth(store=store)), request_timeout=5)
        results: list[str] = []
        call = threading.Thread(target=lambda: results.append(client.call_tool("add", ADD).text))
        call.start()
        try:
            assert store.entered.wait(10)  # the acquisition reads the store: it hangs
            started = time.monotonic()
            with pytest.raises(mcp.Error) as err:  # the OAuth actor answers meanwhile
                client.authorize("http://127.0.0.1:9/callback?code=c&state=s", timeout=3)
            assert (err.value.kind, err.value.reason) == ("argument", "no_authorization")
            assert time.monotonic() - started < 2.0
        finally:
            store.release.set()
            call.join(20)
        assert results == ["3"]  # and the call goes on once the store answers


def test_requests_wait_in_authorizing_and_count_against_max_queued(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5, max_queued=4)
        results: list[Any] = []

        def call() -> None:
            try:
                results.append(client.call_tool("add", ADD).text)
            except mcp.Error as exc:
                results.append(exc.reason)

        threads = [threading.Thread(target=call) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(20)
        # Those that found room waited for the token and succeeded; the others were refused
        # at once, never queued without end.
        assert set(results) <= {"3", "max_queued"} and results.count("3") >= 4
        assert len(tokens_issued(auth)) == 1  # one token for the whole burst


# -- a person ----------------------------------------------------------------------------------


def test_calls_fail_at_once_while_a_person_must_act_and_succeed_after_authorize(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    person = Person()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=person_oauth(person)), request_timeout=5)
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert (err.value.kind, err.value.reason) == ("auth", "authorization_required")
        assert "client.authorize" in err.value.message
        url = person.next_url()
        assert "state=" not in err.value.message and url not in repr(err.value)
        status = client.status()
        assert (status.state, status.reason) == ("authorizing", "authorization_required")
        started = time.monotonic()
        with pytest.raises(mcp.Error) as again:
            client.call_tool("add", ADD, timeout=5)
        assert again.value.reason == "authorization_required"
        assert time.monotonic() - started < 1.0  # at once: never waiting for a human

        # A forged redirect (another state) is refused; the real one still completes it.
        forged = "http://127.0.0.1:9/callback?code=stolen&state=not-the-state"
        with pytest.raises(mcp.Error) as bad:
            client.authorize(forged)
        assert bad.value.reason in ("state_mismatch", "issuer_mismatch")
        client.authorize(auth.approve(url))
        assert client.call_tool("add", ADD).text == "3"
        assert client.status().state == "ready"
        assert person.count == 1


def test_await_ready_waits_through_a_persons_authorization(auth_server, make_server, start_client):
    auth = auth_server()
    server = make_server()
    person = Person()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=person_oauth(person)), request_timeout=5)
        threading.Thread(
            target=lambda: client.authorize(auth.approve(person.next_url())), daemon=True
        ).start()
        assert client.await_ready(timeout=20).state == "ready"
        assert client.call_tool("add", ADD).text == "3"


def test_the_loopback_listener_receives_the_redirect_and_closes(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    seen: list[str] = []

    def browser(url: str) -> None:
        # The person's browser: approve, then follow the redirect to the loopback listener.
        redirect = auth.approve(url)
        seen.append(redirect)
        with urllib.request.urlopen(redirect, timeout=5) as resp:
            assert resp.status == 200

    with server.http_server(require_oauth=auth.issuer) as srv:
        oauth = mcp.OAuth(loopback=True, on_authorize=browser)
        client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=5)
        assert client.await_ready(timeout=20).state == "ready"
        assert client.call_tool("add", ADD).text == "3"
        (redirect,) = seen
        assert redirect.startswith("http://127.0.0.1:") and "/callback?" in redirect
        with pytest.raises(OSError):  # closed after the one redirect
            urllib.request.urlopen(redirect, timeout=2)


# -- tokens over time --------------------------------------------------------------------------


def test_expiry_is_refreshed_before_it_happens_with_no_person(
    auth_server, make_server, start_client
):
    auth = auth_server(token_ttl=2.0)
    server = make_server()
    person = Person()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=person_oauth(person)), request_timeout=5)
        authorized(client, auth, person)
        auth.wait_for({"event": "token", "grant": "refresh_token"}, timeout=15, count=2)
        assert client.call_tool("add", ADD).text == "3"
        assert person.count == 1  # nobody was asked again
        assert [p["status"] for p in mcp_posts(server)].count(401) == 1  # the first only


def test_a_401_refreshes_before_asking_a_person(auth_server, make_server, start_client):
    auth = auth_server()  # tokens live an hour: only the 401 makes the client refresh
    server = make_server()
    person = Person()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=person_oauth(person)), request_timeout=5)
        authorized(client, auth, person)
        auth.admin("expire")
        assert client.call_tool("add", ADD).text == "3"  # the refused call, sent again
        assert len(tokens_issued(auth, "refresh_token")) == 1
        assert person.count == 1


def test_a_rotating_refresh_token_is_never_spent_twice_under_concurrency(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    person = Person()
    store = mcp.MemoryTokenStore()
    with server.http_server(require_oauth=auth.issuer) as srv:
        first = start_client(
            mcp.Http(srv.url, auth=person_oauth(person, store=store)), request_timeout=5
        )
        authorized(first, auth, person)
        second = start_client(
            mcp.Http(srv.url, auth=person_oauth(person, store=store)), request_timeout=5
        )
        assert second.call_tool("add", ADD).text == "3"  # the stored token: no person
        for _round in range(3):
            auth.admin("expire")
            results: list[str] = []
            threads = [
                threading.Thread(
                    target=lambda c=c, out=results: out.append(c.call_tool("add", ADD).text)
                )
                for c in (first, second) * 6
            ]
            for t in threads:
                t.start()
            for t in threads:
                t.join(20)
            assert results == ["3"] * 12
        assert auth.events("refresh_reuse") == []  # a spent token was never sent again
        assert len(tokens_issued(auth, "refresh_token")) == 3  # one per expiry, both clients
        assert person.count == 1


def test_a_revoked_refresh_token_leads_to_authorization_required(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    person = Person()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=person_oauth(person)), request_timeout=5)
        authorized(client, auth, person)
        auth.admin("revoke", all=True)  # the access and the refresh tokens
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert (err.value.kind, err.value.reason) == ("auth", "authorization_required")
        client.authorize(auth.approve(person.next_url()))  # a new URL went to the app
        assert client.call_tool("add", ADD).text == "3"
        assert person.count == 2


def test_a_restarted_process_with_a_file_store_refreshes_instead_of_asking(
    auth_server, make_server, start_client, tmp_path
):
    auth = auth_server()
    server = make_server()
    person = Person()
    path = tmp_path / "tokens.json"
    with server.http_server(require_oauth=auth.issuer) as srv:
        spec = mcp.Http(srv.url, auth=person_oauth(person, store=mcp.FileTokenStore(path)))
        client = start_client(spec, request_timeout=5)
        authorized(client, auth, person)
        client.stop()
        assert path.stat().st_mode & 0o077 == 0  # owner-only
        auth.admin("expire")  # the stored access token is dead by the time we come back
        later = mcp.Http(srv.url, auth=person_oauth(person, store=mcp.FileTokenStore(path)))
        again = start_client(later, request_timeout=5)
        assert again.call_tool("add", ADD).text == "3"
        assert person.count == 1
        assert len(tokens_issued(auth, "refresh_token")) == 1


# -- step-up -------------------------------------------------------------------------------------


def test_step_up_re_authorizes_with_the_union_of_scopes(auth_server, make_server, start_client):
    auth = auth_server()
    server = make_server()
    with server.http_server(require_oauth=auth.issuer, tool_scope=["add=write"]) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth(scopes=["mcp"])), request_timeout=5)
        assert {t.name for t in client.list_all_tools()} >= {"add"}  # "mcp" is enough
        assert client.call_tool("add", ADD).text == "3"  # 403 insufficient_scope, stepped up
        scopes = [e["scope"] for e in tokens_issued(auth)]
        assert scopes == [["mcp"], ["mcp", "write"]]


def test_a_step_up_the_authorization_server_refuses_fails_only_that_call(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    # "admin" is a scope the authorization server never grants.
    with server.http_server(require_oauth=auth.issuer, tool_scope=["add=admin"]) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert (err.value.kind, err.value.reason) == ("auth", "insufficient_scope")
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"  # the others go on
        assert client.status().state == "ready"


def test_step_up_stops_at_its_limit(auth_server, make_server, start_client):
    auth = auth_server()
    server = make_server(
        rules=[
            {
                "match": {"tool": "add"},
                "action": {
                    "http": {
                        "status": 403,
                        "headers": {
                            "WWW-Authenticate": 'Bearer error="insufficient_scope", scope="write"'
                        },
                    }
                },
            }
        ]
    )
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        for _ in range(2):  # the second call of the same operation gets no more step-ups
            with pytest.raises(mcp.Error) as err:
                client.call_tool("add", ADD)
            assert (err.value.kind, err.value.reason) == ("auth", "step_up_limit")
        adds = [p for p in mcp_posts(server) if p["headers"].get("mcp-name") == "add"]
        assert len(adds) == 4  # sent, then sent again after each of the 2 step-ups; then 1
        scopes = [e["scope"] for e in tokens_issued(auth)]
        assert scopes == [["mcp"], ["mcp", "write"], ["mcp", "write"]]
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"


def test_the_loopback_listener_gives_up_after_its_timeout(
    auth_server, make_server, start_client, monkeypatch
):
    from urllib.parse import parse_qs, urlsplit

    from conduit_mcp.actors import oauth as oauth_actor

    monkeypatch.setattr(oauth_actor, "LOOPBACK_TIMEOUT", 0.5)
    auth = auth_server()
    server = make_server()
    person = Person()  # who never opens the URL
    with server.http_server(require_oauth=auth.issuer) as srv:
        oauth = mcp.OAuth(loopback=True, on_authorize=person)
        client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=5)
        url = person.next_url()
        redirect = parse_qs(urlsplit(url).query)["redirect_uri"][0]
        assert client.wait_for_state("closed", timeout=10).state == "closed"
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert (err.value.kind, err.value.reason) == ("auth", "authorization_required")
        assert "reconnect" in err.value.message
        with pytest.raises(OSError):
            urllib.request.urlopen(redirect + "?code=x&state=y", timeout=2)  # closed
        client.reconnect()
        client.authorize(auth.approve(person.next_url()))  # a new URL, and paste-back works too
        assert client.call_tool("add", ADD).text == "3"


def test_on_authorize_that_raises_is_logged_by_class_only(
    auth_server, make_server, start_client, caplog
):
    auth = auth_server()
    server = make_server()
    urls: list[str] = []

    def broken(url: str) -> None:
        urls.append(url)
        raise RuntimeError(f"cannot open {url}")

    with server.http_server(require_oauth=auth.issuer) as srv:
        oauth = mcp.OAuth(on_authorize=broken, redirect_uri="http://127.0.0.1:9/callback")
        client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=5)
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert err.value.reason == "authorization_required"
        until(lambda: "on_authorize raised RuntimeError" in caplog.text)
        assert urls and urls[0] not in caplog.text
        client.authorize(auth.approve(urls[0]))  # the app can still complete it
        assert client.call_tool("add", ADD).text == "3"


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_401_in_the_handshake_of_either_era(auth_server, make_server, start_client, era):
    auth = auth_server()
    server = make_server(era=era)
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        status = client.await_ready(timeout=10)
        assert (status.state, status.era) == ("ready", era)
        assert client.call_tool("add", ADD).text == "3"
        first = mcp_posts(server)[0]
        assert first["status"] == 401


def test_set_auth_never_changes_an_oauth_clients_credentials(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        assert client.call_tool("add", ADD).text == "3"
        with pytest.raises(mcp.Error) as err:
            client.set_auth(bearer="someone-else")
        assert (err.value.kind, err.value.reason) == ("argument", "oauth")
        assert client.call_tool("add", ADD).text == "3"


def test_authorize_needs_an_oauth_client_and_a_waiting_authorization(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        plain = start_client(mcp.Http(srv.url, bearer="whatever"), request_timeout=5)
        with pytest.raises(mcp.Error) as err:
            plain.authorize("http://127.0.0.1:9/callback?code=c&state=s")
        assert (err.value.kind, err.value.reason) == ("argument", "no_oauth")
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        assert client.call_tool("add", ADD).text == "3"
        with pytest.raises(mcp.Error) as none:
            client.authorize("http://127.0.0.1:9/callback?code=c&state=s")
        assert (none.value.kind, none.value.reason) == ("argument", "no_authorization")
        with pytest.raises(mcp.Error) as bad:
            client.authorize("")
        assert (bad.value.kind, bad.value.reason) == ("argument", "redirect_url")


def test_a_server_refusing_every_token_fails_the_call_after_two_resends(
    auth_server, make_server, start_client
):
    auth = auth_server()
    challenge = {"WWW-Authenticate": 'Bearer error="invalid_token"'}
    server = make_server(
        rules=[
            {"match": {"tool": "add"}, "action": {"http": {"status": 401, "headers": challenge}}}
        ]
    )
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        assert client.await_ready(timeout=10).state == "ready"
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert (err.value.kind, err.value.reason) == ("auth", "unauthorized")
        adds = [p for p in mcp_posts(server) if p["headers"].get("mcp-name") == "add"]
        assert len(adds) == 3  # sent, then sent again with each of two new tokens
        assert len(tokens_issued(auth)) == 3
        assert client.call_tool("echo", {"text": "hi"}).text == "hi"
        assert client.status().state == "ready"


def test_client_credentials_are_renewed_before_they_expire(auth_server, make_server, start_client):
    auth = auth_server(token_ttl=2.0)
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        assert client.call_tool("add", ADD).text == "3"
        auth.wait_for("token", timeout=15, count=3)
        assert client.call_tool("add", ADD).text == "3"
        assert [p["status"] for p in mcp_posts(server)].count(401) == 1  # the first only


class _Boom:
    """Crashes the OAuth actor (fault injection)."""


def test_a_crashed_oauth_actor_is_asked_again_by_the_authorizing_connection(
    auth_server, make_server, start_client, monkeypatch
):
    from conduit_mcp.actors import oauth as oauth_actor

    original = oauth_actor.OAuthActor.receive

    def receive(self: Any, message: Any) -> Any:
        if isinstance(message, _Boom):
            raise RuntimeError("injected OAuth actor crash")
        return original(self, message)

    monkeypatch.setattr(oauth_actor.OAuthActor, "receive", receive)
    auth = auth_server()
    server = make_server()
    person = Person()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=person_oauth(person)), request_timeout=5)
        lost = person.next_url()  # the pending authorization dies with the actor
        registry = client._handle.tree().registry
        before = registry.get("oauth")
        before.tell(_Boom())
        url = person.next_url()  # the new incarnation was asked again: a new URL
        assert registry.get("oauth") is not before
        assert client.status().reason == "authorization_required"
        with pytest.raises(mcp.Error) as err:
            client.authorize(auth.approve(lost))
        assert err.value.reason == "state_mismatch"
        client.authorize(auth.approve(url))
        assert client.call_tool("add", ADD).text == "3"


def test_a_loopback_port_in_use_closes_with_loopback_failed(auth_server, make_server, start_client):
    import socket

    auth = auth_server()
    server = make_server()
    busy = socket.socket()
    busy.bind(("127.0.0.1", 0))
    busy.listen()
    port = busy.getsockname()[1]
    try:
        with server.http_server(require_oauth=auth.issuer) as srv:
            person = Person()
            oauth = mcp.OAuth(
                loopback=True,
                redirect_uri=f"http://127.0.0.1:{port}/callback",
                on_authorize=person,
            )
            client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=5)
            with pytest.raises(mcp.Error) as err:
                client.call_tool("add", ADD)
            assert (err.value.kind, err.value.reason) == ("auth", "loopback_failed")
            assert "redirect_uri" in err.value.message
            assert client.status().state == "closed" and person.count == 0
    finally:
        busy.close()


def test_a_redirect_with_the_wrong_issuer_closes_the_client(auth_server, make_server, start_client):
    auth = auth_server()
    auth.admin("iss", mode="wrong")  # RFC 9207: a mix-up; the code is never used
    server = make_server()
    person = Person()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=person_oauth(person)), request_timeout=5)
        with pytest.raises(mcp.Error) as err:
            client.authorize(auth.approve(person.next_url()))
        assert (err.value.kind, err.value.reason) == ("auth", "issuer_mismatch")
        assert client.wait_for_state("closed", timeout=10).state == "closed"
        with pytest.raises(mcp.Error) as call:
            client.call_tool("add", ADD)
        assert (call.value.kind, call.value.reason) == ("auth", "issuer_mismatch")
        assert tokens_issued(auth) == []


def test_a_step_up_in_the_handshake_is_limited_too(auth_server, make_server, start_client):
    auth = auth_server()
    challenge = {"WWW-Authenticate": 'Bearer error="insufficient_scope", scope="write"'}
    server = make_server(
        rules=[
            {
                "match": {"method": "server/discover"},
                "action": {"http": {"status": 403, "headers": challenge}},
            }
        ]
    )
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(
            mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5, protocol="modern"
        )
        with pytest.raises(mcp.Error) as err:
            client.await_ready(timeout=15)
        assert (err.value.kind, err.value.reason) == ("auth", "step_up_limit")
        assert len(tokens_issued(auth)) == 3  # the first token and two step-ups


def test_a_listen_refusing_its_token_renews_it(auth_server, make_server, start_client):
    auth = auth_server()
    challenge = {"WWW-Authenticate": 'Bearer error="invalid_token"'}
    server = make_server(
        rules=[
            {
                "match": {"method": "subscriptions/listen"},
                "action": {"http": {"status": 401, "headers": challenge}},
                "times": 1,
            }
        ]
    )
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        client.list_all_tools()  # a cached list: the client listens for its changes
        assert client.await_listening(timeout=15) is not None  # reopened with the new token
        assert len(tokens_issued(auth)) == 2  # the listen's 401 renewed the token
        listens = [
            p for p in mcp_posts(server) if p["headers"].get("mcp-method") == "subscriptions/listen"
        ]
        assert [p["status"] for p in listens][:1] == [401]
        assert client.call_tool("add", ADD).text == "3"


def test_a_persons_step_up_asks_them_again_with_the_union_of_scopes(
    auth_server, make_server, start_client
):
    from urllib.parse import parse_qs, urlsplit

    auth = auth_server()
    server = make_server()
    person = Person()
    with server.http_server(require_oauth=auth.issuer, tool_scope=["add=write"]) as srv:
        client = start_client(mcp.Http(srv.url, auth=person_oauth(person)), request_timeout=5)
        with pytest.raises(mcp.Error):
            client.list_all_tools()
        first = person.next_url()
        client.authorize(auth.approve(first))
        assert {t.name for t in client.list_all_tools()} >= {"add"}
        with pytest.raises(mcp.Error) as err:  # 403 insufficient_scope: a person again
            client.call_tool("add", ADD)
        assert err.value.reason == "authorization_required"
        second = person.next_url()
        asked = parse_qs(urlsplit(second).query)["scope"][0].split()
        held = parse_qs(urlsplit(first).query)["scope"][0].split()
        assert set(held) < set(asked) and "write" in asked  # the union, never fewer
        client.authorize(auth.approve(second))
        assert client.call_tool("add", ADD).text == "3"
        assert person.count == 2


def test_an_unreachable_authorization_server_is_retried_not_fatal(
    auth_server, make_server, start_client
):
    """No refusal, only silence: the client backs off and tries again, like a server that is
    down, and gets its token once the authorization server is back."""
    auth = auth_server()
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        auth.stop()
        client = start_client(
            mcp.Http(srv.url, auth=m2m_oauth()),
            request_timeout=5,
            max_reconnects=None,
            backoff=lambda attempt: 0.2,
        )
        client.wait_for_state("reconnecting", timeout=20)
        assert client.status().reason == "oauth_unreachable"
        auth.restart()
        assert client.call_tool("add", ADD, timeout=30).text == "3"
        assert client.status().state == "ready"
