"""OAuth against a real authorization server: npm ``oidc-provider`` 9.13 (panva's certified
OpenID provider, ``peers/oidc_provider.mjs``) protecting the official ``mcp`` 2.3.0 server on
uvicorn (``peers/protected_peer.py``: ``AuthSettings(required_scopes=["mcp"],
validate_token_resource=True)`` and a verifier that checks each JWT access token against the
provider's JWKS: signature, ``iss``, ``aud`` = the MCP server's URL, ``exp``).

Everything goes through the public API (``mcp.Http(url, auth=mcp.OAuth(...))``); the person is
:class:`~.oauth_person.Person`, who signs in and consents (or refuses) on the provider's own
pages with plain HTTP. One provider and one MCP server serve the whole module; every test
starts its clients with stores of its own. Covered: the desktop flow (loopback listener), the
headless flow (paste-back), ``client_credentials``, refreshes of short-lived tokens (rotating
refresh tokens), a restarted process with a ``FileTokenStore``, a registration the provider
has forgotten (restarted with nothing remembered), a refused consent (pasted back, and in a
desktop browser), and idle pauses around and past uvicorn's 5 s keep-alive.

``make test`` installs what this needs (``make peers``: oidc-provider in ``.peers/`` and Node
>= 22); nothing here is skipped: without them each test fails and says so.
"""

from __future__ import annotations

import queue
import re
import time
import urllib.parse
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

import conduit_mcp as mcp

from .http_peer import free_port
from .oauth_peers import Event, OidcProvider, ProtectedServer
from .oauth_person import Person

pytestmark = [pytest.mark.interop, pytest.mark.timeout(60)]

ROOT = Path(__file__).resolve().parents[2]
ADD = {"a": 1, "b": 2}
# Pre-registered for client_credentials (oidc-provider's static clients).
SERVICE = {
    "client_id": "svc-interop",
    "client_secret": "svc-interop-s3cret-4f1d",
    "grant_types": ["client_credentials"],
    "redirect_uris": [],
    "response_types": [],
}
# A paste-back redirect URI: nothing listens there, the person's browser stops at it.
PASTE_BACK = "http://127.0.0.1:9/callback"


def provider_module() -> Path:
    """``lib/index.js`` of the oidc-provider the Makefile pins (OIDC_PROVIDER_VERSION)."""
    found = re.search(r"^OIDC_PROVIDER_VERSION := (\S+)", (ROOT / "Makefile").read_text(), re.M)
    assert found, "the Makefile names no OIDC_PROVIDER_VERSION"
    module = ROOT / ".peers" / f"oidc-provider-{found[1]}" / "node_modules" / "oidc-provider"
    path = module / "lib" / "index.js"
    if not path.is_file():
        pytest.fail(
            f"oidc-provider {found[1]} is not installed at {module}: `make test` installs it "
            "(`make peers`; see the Makefile)",
            pytrace=False,
        )
    return path


@pytest.fixture(scope="module")
def servers(node22: str) -> Iterator[tuple[OidcProvider, ProtectedServer]]:
    """One provider and the MCP server it protects, for the whole module."""
    as_port, mcp_port = free_port(), free_port()
    resource = f"http://127.0.0.1:{mcp_port}/mcp"
    provider = OidcProvider(node22, provider_module(), as_port, resource, service_clients=[SERVICE])
    try:
        server = ProtectedServer(mcp_port, provider.issuer)
    except BaseException:
        provider.stop()
        raise
    assert server.url == resource
    yield provider, server
    server.stop()
    provider.stop()


@pytest.fixture
def provider(servers: tuple[OidcProvider, ProtectedServer]) -> OidcProvider:
    return servers[0]


@pytest.fixture
def server(servers: tuple[OidcProvider, ProtectedServer]) -> ProtectedServer:
    return servers[1]


@pytest.fixture
def start_client() -> Iterator[Callable[..., mcp.Client]]:
    clients: list[mcp.Client] = []

    def start(transport: Any, **options: Any) -> mcp.Client:
        options.setdefault("request_timeout", 10)
        client = mcp.Client.start(transport, **options)
        clients.append(client)
        return client

    yield start
    for client in reversed(clients):
        client.stop()


class Inbox:
    """A headless app's ``on_authorize``: keeps each authorization URL for its person."""

    def __init__(self) -> None:
        self.urls: queue.Queue[str] = queue.Queue()
        self.count = 0

    def __call__(self, url: str) -> None:
        self.count += 1
        self.urls.put(url)

    def next(self, timeout: float = 10.0) -> str:
        return self.urls.get(timeout=timeout)


def since(provider: OidcProvider, mark: int, name: str) -> list[Event]:
    """The provider's events called ``name`` after the first ``mark`` events."""
    return [e for e in provider.events()[mark:] if e["event"] == name]


def test_headless_person_pastes_back_and_the_call_succeeds(provider, server, start_client):
    mark = len(provider.events())
    inbox = Inbox()
    person = Person(provider.issuer)
    oauth = mcp.OAuth(redirect_uri=PASTE_BACK, on_authorize=inbox)
    client = start_client(mcp.Http(server.url, auth=oauth))
    started = time.monotonic()
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", ADD)
    assert (err.value.kind, err.value.reason) == ("auth", "authorization_required")
    assert time.monotonic() - started < 5  # never waiting for a person
    landed = person.approve(inbox.next())
    assert landed.startswith(PASTE_BACK + "?") and "code=" in landed and "iss=" in landed
    client.authorize(landed)
    assert client.call_tool("add", ADD).text == "3"
    assert client.status().state == "ready"
    (registered,) = since(provider, mark, "registered")
    tokens = since(provider, mark, "token")
    assert [t["grant_type"] for t in tokens] == ["authorization_code"]
    assert tokens[0]["client_id"] == registered["client_id"]
    assert tokens[0]["resource"] == server.url
    assert inbox.count == 1


def test_desktop_person_through_the_loopback_listener(provider, server, start_client):
    mark = len(provider.events())
    person = Person(provider.issuer)
    # The browser: sign in, consent, and come back to the client's listener on 127.0.0.1.
    oauth = mcp.OAuth(loopback=True, on_authorize=person.browse)
    client = start_client(mcp.Http(server.url, auth=oauth))
    assert client.await_ready(timeout=30).state == "ready"
    assert client.call_tool("add", ADD).text == "3"
    assert person.asked == 1
    (registered,) = since(provider, mark, "registered")
    (redirect,) = registered["redirect_uris"]
    assert re.fullmatch(r"http://127\.0\.0\.1:\d+/callback", redirect), redirect
    (token,) = since(provider, mark, "token")
    assert token["grant_type"] == "authorization_code" and token["resource"] == server.url
    assert token["client_id"] == registered["client_id"]


def test_client_credentials_needs_no_person(provider, server, start_client):
    mark = len(provider.events())
    client = start_client(mcp.Http(server.url, auth=service_oauth()))
    assert client.call_tool("add", ADD).text == "3"
    assert client.call_tool("echo", {"text": "hi"}).text == "hi"
    (token,) = since(provider, mark, "token")
    assert token == {
        "event": "token",
        "grant_type": "client_credentials",
        "client_id": SERVICE["client_id"],
        "resource": server.url,
    }
    assert since(provider, mark, "registered") == []


def test_short_lived_tokens_are_refreshed_and_calls_go_on(provider, server, start_client):
    """Access tokens of 2 s: the client refreshes ahead of expiry (halfway through so short a
    lifetime), each refresh spending the rotating refresh token it was given last; calls made
    across several lifetimes all succeed and the provider refuses nothing."""
    mark = len(provider.events())
    inbox = Inbox()
    person = Person(provider.issuer)
    oauth = mcp.OAuth(
        redirect_uri=PASTE_BACK, on_authorize=inbox, client_name="conduit-mcp access-ttl=2"
    )
    client = start_client(mcp.Http(server.url, auth=oauth))
    with pytest.raises(mcp.Error):
        client.call_tool("add", ADD)
    client.authorize(person.approve(inbox.next()))
    first = time.monotonic()
    # Until three refreshes happened (about 3 s): a call every 0.1 s, at most 150 of them.
    for calls in range(150):
        if len(since(provider, mark, "token")) >= 4:
            break
        assert client.call_tool("add", {"a": calls, "b": 1}).text == str(calls + 1)
        time.sleep(0.1)
    grants = [t["grant_type"] for t in since(provider, mark, "token")]
    assert grants[0] == "authorization_code"
    assert grants[1:] == ["refresh_token"] * (len(grants) - 1) and len(grants) >= 4, grants
    assert since(provider, mark, "token_error") == []
    assert time.monotonic() - first > 2  # calls went on past the first token's lifetime
    assert inbox.count == 1 and client.status().state == "ready"


def test_a_restarted_process_with_a_file_store_asks_no_person(
    provider, server, start_client, tmp_path
):
    """A person authorizes once; "the next start" (a new OAuth and client on the same
    ``FileTokenStore``) calls with no person and no new registration, and refreshes with the
    stored refresh token (the latest of the rotation) once its 2 s token runs out."""
    mark = len(provider.events())
    store = tmp_path / "tokens.json"
    name = "conduit-mcp access-ttl=2"
    inbox = Inbox()
    person = Person(provider.issuer)

    def oauth(inbox: Inbox) -> mcp.OAuth:
        return mcp.OAuth(
            redirect_uri=PASTE_BACK,
            on_authorize=inbox,
            store=mcp.FileTokenStore(store),
            client_name=name,
        )

    first = start_client(mcp.Http(server.url, auth=oauth(inbox)))
    with pytest.raises(mcp.Error):
        first.call_tool("add", ADD)
    first.authorize(person.approve(inbox.next()))
    assert first.call_tool("add", ADD).text == "3"
    first.stop()
    restarted = len(provider.events())

    again = Inbox()
    second = start_client(mcp.Http(server.url, auth=oauth(again)))
    # Until the restarted client has refreshed (within 1 s): a call every 0.1 s, at most 100.
    for _ in range(100):
        if since(provider, restarted, "token"):
            break
        assert second.call_tool("add", ADD).text == "3"
        time.sleep(0.1)
    assert [t["grant_type"] for t in since(provider, restarted, "token")] == ["refresh_token"]
    assert second.call_tool("add", ADD).text == "3"
    assert second.status().state == "ready"
    assert again.count == 0 and person.asked == 1
    assert len(since(provider, mark, "registered")) == 1
    assert since(provider, mark, "token_error") == []


def test_a_refused_consent_closes_the_client_with_authorization_denied(
    provider, server, start_client
):
    mark = len(provider.events())
    inbox = Inbox()
    person = Person(provider.issuer)
    oauth = mcp.OAuth(redirect_uri=PASTE_BACK, on_authorize=inbox)
    client = start_client(mcp.Http(server.url, auth=oauth))
    with pytest.raises(mcp.Error):
        client.call_tool("add", ADD)
    landed = person.refuse(inbox.next())
    assert "error=access_denied" in landed
    with pytest.raises(mcp.Error) as err:
        client.authorize(landed)
    assert (err.value.kind, err.value.reason) == ("auth", "authorization_denied")
    assert "access_denied" in err.value.message
    # The client closes for good (a retry cannot change the person's mind); what callers
    # see names the refusal.
    assert client.wait_for_state("closed", timeout=10).reason == "auth_failed"
    with pytest.raises(mcp.Error) as later:
        client.call_tool("add", ADD)
    assert (later.value.kind, later.value.reason) == ("auth", "authorization_denied")
    assert since(provider, mark, "token") == []
    assert [e["error"] for e in since(provider, mark, "authorization_error")] == ["access_denied"]


def test_a_consent_refused_in_the_desktop_browser_closes_the_client(provider, server, start_client):
    mark = len(provider.events())
    person = Person(provider.issuer)
    oauth = mcp.OAuth(loopback=True, on_authorize=person.refuse_in_browser)
    client = start_client(mcp.Http(server.url, auth=oauth))
    with pytest.raises(mcp.Error) as err:
        client.await_ready(timeout=30)
    assert (err.value.kind, err.value.reason) == ("auth", "authorization_denied")
    assert client.wait_for_state("closed", timeout=10).reason == "auth_failed"
    assert person.asked == 1
    assert since(provider, mark, "token") == []


def test_a_forgotten_registration_is_replaced(provider, server, start_client, tmp_path):
    """The provider restarts with nothing remembered (as a real server that expired the
    registration and rotated its keys): the stored access token is refused by the MCP server
    and the stored refresh token by the provider (``invalid_client``). The client registers
    again and asks a person, once; the call then succeeds."""
    store = tmp_path / "tokens.json"
    inbox = Inbox()
    oauth = mcp.OAuth(redirect_uri=PASTE_BACK, on_authorize=inbox, store=mcp.FileTokenStore(store))
    first = start_client(mcp.Http(server.url, auth=oauth))
    with pytest.raises(mcp.Error):
        first.call_tool("add", ADD)
    first.authorize(Person(provider.issuer).approve(inbox.next()))
    assert first.call_tool("add", ADD).text == "3"
    first.stop()
    (old,) = [e["client_id"] for e in provider.events("registered")[-1:]]

    provider.restart()
    mark = len(provider.events())
    again = Inbox()
    oauth = mcp.OAuth(redirect_uri=PASTE_BACK, on_authorize=again, store=mcp.FileTokenStore(store))
    second = start_client(mcp.Http(server.url, auth=oauth))
    with pytest.raises(mcp.Error) as err:
        second.call_tool("add", ADD)
    assert (err.value.kind, err.value.reason) == ("auth", "authorization_required")
    url = again.next()
    asked_for = urllib.parse.parse_qs(urllib.parse.urlsplit(url).query)["client_id"]
    registered = [e["client_id"] for e in since(provider, mark, "registered")]
    assert asked_for[0] in registered, (
        "the authorization URL names the client the provider has forgotten (the one from "
        f"before its restart): the client did not register again (registered since: "
        f"{len(registered)}; the provider's errors: {since(provider, mark, 'token_error')})"
    )
    second.authorize(Person(provider.issuer).approve(url))
    assert second.call_tool("add", ADD).text == "3"
    (new,) = since(provider, mark, "registered")
    assert new["client_id"] != old
    assert again.count == 1


def service_oauth() -> mcp.OAuth:
    return mcp.OAuth(
        grant="client_credentials",
        client_id=SERVICE["client_id"],
        client_secret=SERVICE["client_secret"],
    )


# The keep-alive test's idle pauses, one per client: 0.5 ms apart around uvicorn's 5 s, and
# three clearly past it (the server closed the connection 20 to 100 ms before).
PAUSES = [4.994 + i * 0.0005 for i in range(24)] + [5.02, 5.05, 5.1]


def test_calls_succeed_after_an_idle_pause_past_uvicorns_keep_alive(provider, server, start_client):
    """uvicorn closes a connection idle for 5 s (its ``timeout_keep_alive``); aiohttp would
    keep it 15 s. A call sent just as uvicorn closes the pooled connection finds it gone
    before any byte of the answer (a ``tools/call``: ``transport``/``stream_broken``).

    One idle pause per client (``PAUSES``: 0.5 ms apart across 4.994 to 5.0055 s, then
    5.02, 5.05 and 5.1 s), each measured from the return of that client's first call, so
    that some client calls just as the server closes: all of them at once, in one 5 s
    window. Every call after its pause must succeed, and the client stay ready."""
    clients = [start_client(mcp.Http(server.url, auth=service_oauth())) for _ in PAUSES]

    def idle_then_call(client: mcp.Client, pause: float) -> str:
        assert client.call_tool("add", ADD).text == "3"
        time.sleep(pause)  # the idle pause under test
        try:
            return client.call_tool("add", ADD).text
        except mcp.Error as e:
            return f"{pause:.4f} s: {e.kind}/{e.reason}"

    with ThreadPoolExecutor(len(clients)) as pool:
        outcomes = list(pool.map(idle_then_call, clients, PAUSES, timeout=30))
    failed = [o for o in outcomes if o != "3"]
    assert not failed, f"{len(failed)} of {len(outcomes)} calls after the pause failed: {failed}"
    assert all(c.status().state == "ready" for c in clients)
