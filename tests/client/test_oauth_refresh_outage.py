"""A refresh that cannot reach the authorization server keeps the tokens (issue 18): no
answer, a dropped connection or a 5xx is the server's trouble, not its word on the refresh
token, so the client backs off (``oauth_unreachable``) and refreshes once the server is back,
asking no person. A refused refresh (``invalid_grant``) still deletes them
(test_oauth_flows.py, ``test_a_revoked_refresh_token_leads_to_authorization_required``).

The outage is a reverse proxy on loopback in front of the test authorization server: it
forwards every request, points the metadata's ``token_endpoint`` at itself, and fails
``/token`` while it is down; the authorization server itself keeps running, so the refresh
token it issued is still good when the outage ends."""

from __future__ import annotations

import http.client
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest

import conduit_mcp as mcp

from .conftest import ADD, Person, person_oauth

pytestmark = [pytest.mark.timeout(60), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

_HOP = frozenset({"connection", "content-length", "transfer-encoding", "date", "server", "host"})


class TokenOutage:
    """The reverse proxy (module docstring). ``down``: None (forward), ``"dropped"`` (close
    the connection without an answer) or ``"503"``; ``failed`` counts the ``/token``
    requests it failed."""

    def __init__(self, target: str) -> None:
        parts = urlsplit(target)
        self.host, self.port = parts.hostname or "127.0.0.1", parts.port
        self.down: str | None = None
        self.failed = 0
        self.refused = threading.Event()  # set at the first /token it failed
        outage = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                outage.forward(self)

            def do_POST(self) -> None:
                outage.forward(self)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> TokenOutage:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)

    def forward(self, h: BaseHTTPRequestHandler) -> None:
        length = int(h.headers.get("Content-Length") or 0)
        body = h.rfile.read(length) if length else None
        if h.path.startswith("/token") and self.down is not None:
            self.failed += 1
            self.refused.set()
            if self.down == "dropped":
                h.close_connection = True  # no status line at all
                return
            h.send_response(503)
            h.send_header("Content-Length", "0")
            h.end_headers()
            return
        conn = http.client.HTTPConnection(self.host, self.port, timeout=10)
        headers = {k: v for k, v in h.headers.items() if k.lower() not in _HOP}
        conn.request(h.command, h.path, body, headers)
        resp = conn.getresponse()
        data = resp.read()
        conn.close()
        if "/.well-known/" in h.path and resp.status == 200:
            doc = orjson.loads(data)
            doc["token_endpoint"] = f"{self.base}/token"
            data = orjson.dumps(doc)
        h.send_response(resp.status)
        for name, value in resp.getheaders():
            if name.lower() not in _HOP:
                h.send_header(name, value)
        h.send_header("Content-Length", str(len(data)))
        h.end_headers()
        h.wfile.write(data)


@pytest.mark.parametrize("outage", ["dropped", "503"])
def test_a_refresh_that_cannot_reach_the_authorization_server_keeps_the_tokens(
    auth_server, make_server, start_client, outage
):
    auth = auth_server()
    server = make_server()
    person = Person()
    with TokenOutage(auth.base) as proxy:
        auth.set_issuer(proxy.base)  # the proxy is the authorization server, to the client
        with server.http_server(require_oauth=proxy.base) as srv:
            client = start_client(
                mcp.Http(srv.url, auth=person_oauth(person)),
                request_timeout=5,
                max_reconnects=None,
                backoff=lambda attempt: 0.2,
            )
            with pytest.raises(mcp.Error) as first:
                client.call_tool("add", ADD)
            assert first.value.reason == "authorization_required"
            client.authorize(auth.approve(person.next_url()))
            assert client.call_tool("add", ADD).text == "3"

            proxy.down = outage
            auth.admin("expire")  # the next call is refused: the client refreshes
            with pytest.raises(mcp.Error) as err:
                client.call_tool("add", ADD)
            e = err.value
            assert (e.kind, e.reason) == ("auth", "oauth_unreachable"), e
            assert proxy.base in e.message and "keeps trying" in e.message
            assert proxy.failed >= 1
            assert person.count == 1  # nobody was asked: the tokens are still held

            proxy.down = None  # the server is back: the same refresh token works
            assert client.call_tool("add", ADD, timeout=20).text == "3"
            assert person.count == 1
            refreshes = [e for e in auth.events("token") if e["grant"] == "refresh_token"]
            assert len(refreshes) == 1
            assert auth.events("refresh_reuse") == []


def test_a_renewal_ahead_of_expiry_that_cannot_reach_the_server_keeps_the_tokens(
    auth_server, make_server, start_client
):
    auth = auth_server(token_ttl=6)  # renewed 3 s after it is issued
    server = make_server()
    person = Person()
    with TokenOutage(auth.base) as proxy:
        auth.set_issuer(proxy.base)
        with server.http_server(require_oauth=proxy.base) as srv:
            client = start_client(
                mcp.Http(srv.url, auth=person_oauth(person)),
                request_timeout=5,
                max_reconnects=None,
                backoff=lambda attempt: 0.2,
            )
            with pytest.raises(mcp.Error):
                client.call_tool("add", ADD)
            client.authorize(auth.approve(person.next_url()))
            proxy.down = "dropped"  # before the renewal, 3 s after the token came
            assert proxy.refused.wait(10)  # the renewal met the outage
            proxy.down = None
            auth.admin("expire")  # a 401 now: the kept refresh token answers it
            assert client.call_tool("add", ADD, timeout=20).text == "3"
            assert person.count == 1
            assert auth.events("refresh_reuse") == []
