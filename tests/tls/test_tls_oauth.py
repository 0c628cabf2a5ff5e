"""TLS to the authorization server through the public API (docs/tls.md): the test
authorization server on 127.0.0.1 with certificates of a private CA made at test time.

``Http(verify=...)`` or ``Http(ssl=...)`` serves the OAuth calls too (a private CA, a client
certificate); an authorization server whose certificate the client cannot verify fails the
client at once with ``auth``/``tls_failed`` naming its origin and the check that failed,
instead of backing off as if it were unreachable until every call's deadline passed."""

from __future__ import annotations

import ssl
import time
from typing import Any

import orjson
import pytest

import conduit_mcp as mcp
from conduit_mcp.testing import AuthServerProcess

from .certs import Certificates

pytestmark = [pytest.mark.timeout(60), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

M2M = {
    "client_id": "m2m-tls",
    "client_secret": "s3cret-m2m-tls-77",
    "token_endpoint_auth_method": "client_secret_basic",
    "grant_types": ["client_credentials"],
}
ADD = {"a": 1, "b": 2}


def m2m() -> mcp.OAuth:
    return mcp.OAuth(
        client_id=M2M["client_id"], client_secret=M2M["client_secret"], grant="client_credentials"
    )


@pytest.fixture
def auth_server(tmp_path: Any) -> Any:
    started: list[AuthServerProcess] = []

    def start(pair: Any, **options: Any) -> AuthServerProcess:
        server = AuthServerProcess(
            tmp_path / f"as{len(started)}",
            scopes="mcp",
            client=[orjson.dumps(M2M).decode()],
            **pair.server_options(),
            **options,
        )
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def test_a_server_and_its_authorization_server_on_a_private_ca(
    certs: Certificates, auth_server, make_server, start_client
):
    auth = auth_server(certs.good)
    assert auth.issuer.startswith("https://127.0.0.1:")
    server = make_server()
    # The MCP server checks tokens at the authorization server (introspection): it trusts
    # the private CA through its own environment.
    with server.http_server(
        require_oauth=auth.issuer, **certs.good.server_options(), env={"SSL_CERT_FILE": certs.ca}
    ) as srv:
        client = start_client(mcp.Http(srv.url, verify=certs.ca, auth=m2m()), request_timeout=10)
        assert client.call_tool("add", ADD).text == "3"
    assert [e["grant"] for e in auth.events("token")] == ["client_credentials"]


def test_an_authorization_server_that_requires_a_client_certificate(
    certs: Certificates, auth_server, make_server, start_client
):
    auth = auth_server(certs.good, tls_client_ca=certs.ca)
    server = make_server()
    with server.http_server(
        require_oauth=auth.issuer,
        introspection_cert=certs.client.cert,
        introspection_key=certs.client.key,
        env={"SSL_CERT_FILE": certs.ca},
    ) as srv:
        context = ssl.create_default_context(cafile=certs.ca)
        context.load_cert_chain(certs.client.cert, certs.client.key)
        client = start_client(mcp.Http(srv.url, ssl=context, auth=m2m()), request_timeout=10)
        assert client.call_tool("add", ADD).text == "3"
        # Without a client certificate the authorization server refuses the handshake.
        bare = ssl.create_default_context(cafile=certs.ca)
        other = start_client(mcp.Http(srv.url, ssl=bare, auth=m2m()), request_timeout=5)
        started = time.monotonic()
        with pytest.raises(mcp.Error) as err:
            other.call_tool("add", ADD, timeout=20)
        elapsed = time.monotonic() - started
    assert (err.value.kind, err.value.reason) == ("auth", "tls_failed"), err.value
    assert f"the authorization server https://127.0.0.1:{auth.port} " in err.value.message
    assert "requires a client certificate" in err.value.message
    assert elapsed < 5, f"took {elapsed:.1f} s: backed off instead of failing at once"
    assert [e["grant"] for e in auth.events("token")] == ["client_credentials"]


@pytest.mark.parametrize(
    ("which", "trusted", "problem"),
    [
        ("good", False, "untrusted"),
        ("wrong_name", True, "hostname_mismatch"),
        ("expired", True, "expired"),
        ("self_signed", True, "self_signed"),
    ],
)
def test_an_authorization_server_the_client_cannot_verify_fails_at_once_naming_it(
    certs: Certificates, auth_server, make_server, start_client, which, trusted, problem
):
    auth = auth_server(getattr(certs, which))
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        spec = mcp.Http(srv.url, auth=m2m(), verify=certs.ca if trusted else None)
        started = time.monotonic()
        client = start_client(spec, request_timeout=10)
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD, timeout=20)
        elapsed = time.monotonic() - started
    e = err.value
    assert (e.kind, e.reason) == ("auth", "tls_failed"), e
    assert elapsed < 5, f"took {elapsed:.1f} s: backed off instead of failing at once"
    origin = f"https://127.0.0.1:{auth.port}"
    assert f"the authorization server {origin} failed TLS verification ({problem}: " in e.message
    assert "oauth_unreachable" not in e.message
    assert client.status().state == "closed"
    assert auth.events("token") == []
