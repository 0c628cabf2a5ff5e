"""Hostile and broken OAuth peers must not make the client loop, wait or lie: a real authorization server subprocess (``conduit_mcp.testing.auth.server``, with its
hostile options) and the scripted MCP server protected by it, both on loopback.

Every bound below is counted at the servers and derived from a documented limit: the
handshake's refusal cap (``MAX_AUTH_RESENDS``) and the reconnect backoff, the renewal
floor (``REFRESH_FLOOR``), one ``on_authorize`` per authorization a person must do."""

from __future__ import annotations

import itertools
import math
import queue
import threading
import time
import urllib.parse
from typing import Any

import orjson
import pytest

import conduit_mcp as mcp
from conduit_mcp.testing import AuthServerProcess

from .conftest import ADD, m2m_oauth

pytestmark = [pytest.mark.timeout(60), pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def token_requests(auth: AuthServerProcess) -> list[dict[str, Any]]:
    return auth.requests("/token")


# -- a token that cannot be a header value ---------------------------------------------------


@pytest.mark.parametrize("bad", ["cr", "lf", "nul"])
def test_a_token_that_cannot_be_a_header_value_is_refused_when_issued(
    auth_server, make_server, start_client, bad
):
    auth = auth_server(bad_access_token=bad)
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=10)
        started = time.monotonic()
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert time.monotonic() - started < 5.0  # at once, not at the 10 s deadline
        assert (err.value.kind, err.value.reason) == ("auth", "token_failed")
        assert "HTTP header" in err.value.message
        assert client.status().state == "closed"
        with pytest.raises(mcp.Error) as again:  # and every later call, at once
            client.call_tool("add", ADD, timeout=10)
        assert (again.value.kind, again.value.reason) == ("auth", "token_failed")
        assert len(token_requests(auth)) == 1
        # The token never reached the MCP server: only the first, tokenless request did.
        posts = [e for e in server.events("http") if e["path"] == "/mcp"]
        assert all("authorization" not in p["headers"] for p in posts)


# -- very short token lifetimes ------------------------------------------------------------


def test_a_tiny_expires_in_is_never_renewed_ahead_only_on_a_401(
    auth_server, make_server, start_client
):
    """``expires_in: 0.05``: renewing ahead of expiry would be 20 renewals a second (37 were
    measured before the floor). Below ``REFRESH_FLOOR`` the token is renewed only when the
    server refuses it."""
    from conduit_mcp.oauth.records import REFRESH_FLOOR

    auth = auth_server(expires_in=0.05)  # the real lifetime stays an hour
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        assert client.call_tool("add", ADD).text == "3"
        assert len(token_requests(auth)) == 1
        window = 3 * REFRESH_FLOOR
        time.sleep(window)  # an idle client over a window: what it asks for is counted
        assert len(token_requests(auth)) == 1  # 0.05 s < 2 * REFRESH_FLOOR: nothing ahead
        assert client.status().state == "ready"
        auth.expire_access_tokens()  # now the server refuses it: renewed on that 401
        assert client.call_tool("add", ADD).text == "3"
        assert len(token_requests(auth)) == 2


def test_a_short_lifetime_is_renewed_ahead_no_sooner_than_the_floor(
    auth_server, make_server, start_client
):
    """``expires_in: 1.5``: its renewal would be due halfway (0.75 s), under the floor; it
    comes REFRESH_FLOOR after the token instead, still before it expires."""
    from conduit_mcp.oauth.records import REFRESH_FLOOR

    auth = auth_server(expires_in=1.5 * REFRESH_FLOOR)
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        assert client.call_tool("add", ADD).text == "3"
        auth.wait_for("token", timeout=10, count=4)  # renewed ahead, three times
        times = [e["t"] for e in auth.events("token")]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        assert min(gaps) >= REFRESH_FLOOR - 0.05, gaps  # never sooner than the floor
        assert max(gaps[:3]) < 1.5 * REFRESH_FLOOR + 0.5, gaps  # and before each expired
        assert client.call_tool("add", ADD).text == "3"
        mcp_statuses = [p["status"] for p in server.events("http") if p["path"] == "/mcp"]
        assert mcp_statuses.count(401) == 1  # the first request only


# -- a server that refuses every token -------------------------------------------------------


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_a_handshake_refusing_every_token_backs_off_and_says_why(
    auth_server, make_server, start_client, era
):
    """401 to the handshake even with a fresh token: at most MAX_AUTH_RESENDS fresh tokens per
    attempt (one more on the first, which had none), then the reconnect backoff. Before the
    cap: about 120 token requests a second."""
    from conduit_mcp.actors.authorizing import MAX_AUTH_RESENDS

    auth = auth_server()
    challenge = {"WWW-Authenticate": 'Bearer error="invalid_token"'}
    method = "server/discover" if era == "modern" else "initialize"
    server = make_server(
        rules=[
            {"match": {"method": method}, "action": {"http": {"status": 401, "headers": challenge}}}
        ]
    )
    backoff = 0.5
    with server.http_server(require_oauth=auth.issuer) as srv:
        started = time.monotonic()
        client = start_client(
            mcp.Http(srv.url, auth=m2m_oauth()),
            protocol=era,
            request_timeout=10,
            max_reconnects=None,
            backoff=lambda attempt: backoff,
        )
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert time.monotonic() - started < 5.0  # at once, not at the 10 s deadline
        assert (err.value.kind, err.value.reason) == ("auth", "unauthorized")
        assert "fresh tokens" in err.value.message and "resource" in err.value.message
        status = client.wait_for_state("reconnecting", timeout=10)
        assert status.reason == "unauthorized"
        window = 3.0
        time.sleep(max(0.0, window - (time.monotonic() - started)))  # count over a window
        elapsed = time.monotonic() - started
        attempts = 1 + math.floor(elapsed / backoff)  # at most: each waits `backoff` first
        tokens = len(token_requests(auth))
        print(f"{era}: {tokens} token requests in {elapsed:.1f} s, {attempts} attempts at most")
        assert 1 + MAX_AUTH_RESENDS <= tokens <= 1 + MAX_AUTH_RESENDS * attempts, tokens
        metadata = [r for r in auth.requests() if "/.well-known/" in r["path"]]
        assert len(metadata) <= 2 * tokens  # one rediscovery per refused token, at most
        asked = time.monotonic()
        with pytest.raises(mcp.Error) as again:  # await_ready hears it at the next attempt
            client.await_ready(timeout=10)
        assert (again.value.kind, again.value.reason) == ("auth", "unauthorized")
        assert time.monotonic() - asked < backoff + 5.0


# -- an authorization server that is down at start -----------------------------------------


def test_an_authorization_server_down_at_start_fails_the_first_call_at_once(
    auth_server, make_server, start_client
):
    """Before: the first error came at the call's deadline (43 s measured with the
    defaults) and named neither the server nor what to do."""
    auth = auth_server()
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        auth.stop()
        client = start_client(
            mcp.Http(srv.url, auth=m2m_oauth()),
            request_timeout=20,
            max_reconnects=None,
            backoff=lambda attempt: 0.5,
        )
        started = time.monotonic()
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert time.monotonic() - started < 5.0  # at once, not at the 20 s deadline
        e = err.value
        assert (e.kind, e.reason) == ("auth", "oauth_unreachable")
        assert auth.base in e.message  # the authorization server's origin
        assert "ClientConnectorError" in e.message  # what the last attempt met
        assert "keeps trying" in e.message
        assert e.data["origin"] == auth.base
        asked = time.monotonic()
        with pytest.raises(mcp.Error) as ready:  # await_ready says the same
            client.await_ready(timeout=20)
        assert (ready.value.kind, ready.value.reason) == ("auth", "oauth_unreachable")
        assert auth.base in ready.value.message
        assert time.monotonic() - asked < 5.0
        status = client.status()
        assert (status.state, status.reason) in (
            ("reconnecting", "oauth_unreachable"),
            ("connecting", "oauth_unreachable"),
            ("discovering", None),
            ("authorizing", None),
        )
        auth.restart()  # the client kept trying: it gets its token now
        assert client.call_tool("add", ADD, timeout=20).text == "3"


def test_an_authorization_server_that_stays_down_closes_after_max_reconnects_naming_it(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        auth.stop()
        client = start_client(
            mcp.Http(srv.url, auth=m2m_oauth()),
            request_timeout=5,
            max_reconnects=2,
            backoff=lambda attempt: 0.1,
        )
        status = client.wait_for_state("closed", timeout=20)
        assert status.reason == "max_reconnects"
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert err.value.reason == "max_reconnects"
        assert "oauth_unreachable" in err.value.message and auth.base in err.value.message


# -- a registration that cannot work -------------------------------------------------------


class Browser:
    """Plays a desktop application's ``on_authorize``: each URL opens a tab whose person
    consents at once (the authorization server auto-approves), and the browser follows the
    redirect to the loopback listener. Counts the tabs."""

    def __init__(self, auth: AuthServerProcess) -> None:
        self.auth = auth
        self.tabs = 0
        self.lock = threading.Lock()

    def __call__(self, url: str) -> None:
        with self.lock:
            self.tabs += 1
        self.auth.approve(url, follow=True)


@pytest.mark.parametrize(
    "answer",
    [
        {"token_endpoint_auth_method": "client_secret_basic", "client_secret": None},
        {"token_endpoint_auth_method": "client_secret_post", "client_secret": None},
        {"token_endpoint_auth_method": "private_key_jwt"},
        {"token_endpoint_auth_method": "tls_client_auth"},
    ],
    ids=["basic-no-secret", "post-no-secret", "jwt-no-key", "unsupported"],
)
def test_a_registration_answer_no_token_request_can_use_is_refused(
    auth_server, make_server, start_client, answer
):
    """Before: 300 to 700 registrations and as many browser tabs in 6 s (register, a tab,
    the exchange fails, a new loopback port, register again...)."""
    auth = auth_server(register_answer=orjson.dumps(answer).decode())
    server = make_server()
    browser = Browser(auth)
    with server.http_server(require_oauth=auth.issuer) as srv:
        oauth = mcp.OAuth(loopback=True, on_authorize=browser)
        client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=10)
        started = time.monotonic()
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert time.monotonic() - started < 5.0
        assert (err.value.kind, err.value.reason) == ("auth", "registration_failed")
        assert "register the client" in err.value.message or "private_key" in err.value.message
        assert client.wait_for_state("closed", timeout=10).reason == "auth_failed"
        time.sleep(2.0)  # a window: nothing more may happen by itself
        assert len(auth.requests("/register")) == 1
        assert browser.tabs == 0 and token_requests(auth) == []


def test_a_code_exchange_no_person_can_fix_closes_after_one_tab(
    auth_server, make_server, start_client
):
    """The token endpoint refuses the client (``invalid_client``): one tab, one exchange,
    closed; never a new authorization by itself."""
    auth = auth_server(token_error="invalid_client")
    server = make_server()
    browser = Browser(auth)
    with server.http_server(require_oauth=auth.issuer) as srv:
        oauth = mcp.OAuth(loopback=True, on_authorize=browser)
        client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=10)
        with pytest.raises(mcp.Error):
            client.call_tool("add", ADD)  # authorization_required: the tab is open
        status = client.wait_for_state("closed", timeout=15)
        assert status.reason == "auth_failed"
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert (err.value.kind, err.value.reason) == ("auth", "token_failed")
        assert "invalid_client" in err.value.message
        time.sleep(2.0)  # a window: nothing more may happen by itself
        assert browser.tabs == 1 and len(token_requests(auth)) == 1
        assert len(auth.requests("/register")) == 1


def test_a_refused_code_gets_one_new_authorization_then_closes(
    auth_server, make_server, start_client
):
    """``invalid_grant`` (a code expired while the person took their time) is the one
    refusal a new authorization can fix: one more tab, then closed."""
    auth = auth_server(token_error="invalid_grant")
    server = make_server()
    browser = Browser(auth)
    with server.http_server(require_oauth=auth.issuer) as srv:
        oauth = mcp.OAuth(loopback=True, on_authorize=browser)
        client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=10)
        with pytest.raises(mcp.Error):
            client.call_tool("add", ADD)
        status = client.wait_for_state("closed", timeout=15)
        assert status.reason == "auth_failed"
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert (err.value.kind, err.value.reason) == ("auth", "token_failed")
        time.sleep(2.0)
        assert browser.tabs == 2 and len(token_requests(auth)) == 2


# -- the loopback page after a refusal -----------------------------------------------------


def _loopback_client(start_client, srv, **kw: Any) -> tuple[mcp.Client, queue.Queue[str]]:
    urls: queue.Queue[str] = queue.Queue()
    oauth = mcp.OAuth(loopback=True, on_authorize=urls.put, **kw)
    return start_client(mcp.Http(srv.url, auth=oauth), request_timeout=10), urls


def test_the_loopback_page_says_the_person_refused(auth_server, make_server, start_client):
    auth = auth_server(require_person=True)
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client, urls = _loopback_client(start_client, srv)
        with pytest.raises(mcp.Error):
            client.call_tool("add", ADD)  # authorization_required
        location = auth.approve(urls.get(timeout=10), deny=True)  # the person clicks Deny
        assert "error=access_denied" in location
        status, _, body = auth.request("GET", location)  # the browser follows it
        page = body.decode()
        assert status == 200
        assert "refused" in page and "access_denied" in page and "received" not in page
        assert "try again" in page
        assert client.wait_for_state("closed", timeout=10).reason == "auth_failed"
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert (err.value.kind, err.value.reason) == ("auth", "authorization_denied")


def test_the_loopback_page_names_an_authorization_error(auth_server, make_server, start_client):
    auth = auth_server()
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client, urls = _loopback_client(start_client, srv, scopes=["no-such-scope"])
        with pytest.raises(mcp.Error):
            client.call_tool("add", ADD)
        location = auth.approve(urls.get(timeout=10))  # the server answers invalid_scope
        assert "error=invalid_scope" in location
        status, _, body = auth.request("GET", location)
        page = body.decode()
        assert status == 200
        assert "an error (invalid_scope)" in page and "received" not in page
        assert client.wait_for_state("closed", timeout=10).reason == "auth_failed"


def test_the_loopback_page_still_says_received_for_a_code(auth_server, make_server, start_client):
    auth = auth_server()
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client, urls = _loopback_client(start_client, srv)
        with pytest.raises(mcp.Error):
            client.call_tool("add", ADD)
        status, _, body = auth.request("GET", auth.approve(urls.get(timeout=10)))
        assert status == 200 and "received" in body.decode()
        assert client.await_ready(timeout=10).state == "ready"


# -- state_mismatch tells the truth --------------------------------------------------------


def test_a_stale_redirect_says_the_authorization_in_progress_still_waits(
    auth_server, make_server, start_client
):
    auth = auth_server()
    server = make_server()
    urls: queue.Queue[str] = queue.Queue()
    oauth = mcp.OAuth(on_authorize=urls.put, redirect_uri="http://127.0.0.1:9/callback")
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=10)
        with pytest.raises(mcp.Error):
            client.call_tool("add", ADD)
        url = urls.get(timeout=10)
        iss = urllib.parse.quote(auth.issuer, safe="")
        stale = f"http://127.0.0.1:9/callback?code=old&state=an-older-state&iss={iss}"
        with pytest.raises(mcp.Error) as err:
            client.authorize(stale)
        e = err.value
        assert (e.kind, e.reason) == ("auth", "state_mismatch")
        assert "still waits" in e.message and "start the authorization again" not in e.message
        assert "an-older-state" not in e.message
        assert client.status().reason == "authorization_required"  # what it said: it waits
        client.authorize(auth.approve(url))  # and the pending authorization does work
        assert client.call_tool("add", ADD).text == "3"
        assert urls.empty()  # no new authorization was started
