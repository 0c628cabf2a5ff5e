"""TLS to the MCP server through the public API (docs/tls.md): the scripted HTTP server on
127.0.0.1 with certificates of a private CA made at test time (certs.py).

Trusted through ``Http(verify=...)`` (a CA file, a CA folder) or ``Http(ssl=context)``, the
client works; a certificate it cannot verify (untrusted, wrong name, expired, self-signed)
closes it at once with ``tls_failed`` naming the check that failed, never a wait for a
deadline; a server that requires a client certificate works with one and refuses a
connection without one; a TLS handshake that never completes is a transport failure the
client reconnects after, never evidence that the server is legacy."""

from __future__ import annotations

import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import conduit_mcp as mcp

from .certs import Certificates, hashed_folder

pytestmark = pytest.mark.timeout(60)

ADD = {"a": 1, "b": 2}


def serve_tls(make_server: Any, pair: Any, **options: Any) -> Any:
    server = make_server()
    return server.http_server(**pair.server_options(), **options)


# -- trusted --------------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_a_private_ca_is_trusted_through_verify(certs, make_server, start_client, protocol):
    with serve_tls(make_server, certs.good) as srv:
        assert srv.url.startswith("https://127.0.0.1:")
        client = start_client(mcp.Http(srv.url, verify=certs.ca), protocol=protocol)
        client.await_ready(timeout=10)
        assert client.call_tool("add", ADD).text == "3"
        assert client.status().era == protocol


def test_a_ca_folder_is_trusted_through_verify(certs, make_server, start_client):
    folder = hashed_folder(certs)
    if folder is None:
        pytest.skip("no openssl command to name the CA folder's file")
    with serve_tls(make_server, certs.good) as srv:
        client = start_client(mcp.Http(srv.url, verify=folder))
        assert client.call_tool("add", ADD).text == "3"


def test_a_private_ca_is_trusted_through_an_ssl_context(certs, make_server, start_client):
    context = ssl.create_default_context(cafile=certs.ca)
    with serve_tls(make_server, certs.good) as srv:
        client = start_client(mcp.Http(srv.url, ssl=context))
        assert client.call_tool("add", ADD).text == "3"


# -- not trusted: at once, naming the failure -----------------------------------------------


@pytest.mark.parametrize(
    ("which", "trusted", "problem", "words"),
    [
        ("good", False, "untrusted", "Http(verify='ca.pem')"),
        ("wrong_name", True, "hostname_mismatch", "not valid for this host name"),
        ("expired", True, "expired", "has expired"),
        ("self_signed", True, "self_signed", "self-signed"),
    ],
)
def test_a_certificate_the_client_cannot_verify_closes_it_at_once_naming_why(
    certs: Certificates, make_server, start_client, which, trusted, problem, words
):
    pair = getattr(certs, which)
    with serve_tls(make_server, pair) as srv:
        spec = mcp.Http(srv.url, verify=certs.ca) if trusted else mcp.Http(srv.url)
        started = time.monotonic()
        client = start_client(spec, protocol="modern", request_timeout=20)
        with pytest.raises(mcp.Error) as err:
            client.await_ready(timeout=15)
        elapsed = time.monotonic() - started
    e = err.value
    assert (e.kind, e.reason) == ("closed", "tls_failed"), e
    assert elapsed < 5, f"took {elapsed:.1f} s: waited instead of failing at once"
    assert e.data["last_reason"] == "tls_failed"
    assert e.data["detail"].startswith(f"{problem}: "), e.data
    assert words in e.message and "check http:// versus https://" not in e.message
    status = client.status()
    assert (status.state, status.reason) == ("closed", "tls_failed")
    with pytest.raises(mcp.Error) as call:
        client.call_tool("add", ADD, timeout=5)
    assert (call.value.kind, call.value.reason) == ("closed", "tls_failed")


def test_https_to_a_plain_http_port_says_the_server_does_not_speak_tls(make_server, start_client):
    server = make_server()
    with server.http_server() as srv:
        url = srv.url.replace("http://", "https://")
        client = start_client(mcp.Http(url), protocol="modern")
        with pytest.raises(mcp.Error) as err:
            client.await_ready(timeout=10)
    assert (err.value.kind, err.value.reason) == ("closed", "tls_failed")
    assert err.value.data["detail"].startswith("not_tls: ")
    assert "check http:// versus https://" in err.value.message


# -- mutual TLS -----------------------------------------------------------------------------


def client_context(certs: Certificates, pair: Any | None) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=certs.ca)
    if pair is not None:
        context.load_cert_chain(pair.cert, pair.key)
    return context


def test_a_server_that_requires_a_client_certificate_works_with_one(
    certs, make_server, start_client
):
    with serve_tls(make_server, certs.good, tls_client_ca=certs.ca) as srv:
        spec = mcp.Http(srv.url, ssl=client_context(certs, certs.client))
        client = start_client(spec)
        assert client.call_tool("add", ADD).text == "3"


@pytest.mark.parametrize("which", [None, "stranger"])
def test_a_server_that_requires_a_client_certificate_refuses_a_client_without_one(
    certs, make_server, start_client, which
):
    pair = getattr(certs, which) if which else None
    with serve_tls(make_server, certs.good, tls_client_ca=certs.ca) as srv:
        spec = mcp.Http(srv.url, ssl=client_context(certs, pair))
        client = start_client(spec, protocol="modern", request_timeout=5, max_reconnects=1)
        with pytest.raises(mcp.Error) as err:
            client.await_ready(timeout=15)
    e = err.value
    assert e.kind == "closed", e
    assert "client certificate" in e.message, e.message


# -- a handshake that never completes --------------------------------------------------------


@pytest.fixture
def silent_listener() -> Iterator[int]:
    """A TCP server on 127.0.0.1 that accepts connections and never sends a byte (a TLS
    handshake there never completes); its port."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.2)
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def run() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            accepted.append(conn)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    yield listener.getsockname()[1]
    stop.set()
    thread.join(5)
    listener.close()
    for conn in accepted:
        conn.close()


@pytest.mark.parametrize("protocol", ["modern", "auto"])
def test_a_tls_handshake_that_never_completes_is_a_transport_failure_not_a_legacy_server(
    silent_listener, start_client, protocol
):
    spec = mcp.Http(f"https://127.0.0.1:{silent_listener}/mcp", connect_timeout=30)
    client = start_client(
        spec, protocol=protocol, request_timeout=1.0, probe_timeout=1.0, max_reconnects=1
    )
    with pytest.raises(mcp.Error) as err:
        client.await_ready(timeout=20)
    e = err.value
    assert e.reason != "legacy_server", e
    assert (e.kind, e.reason) == ("closed", "max_reconnects"), e
    assert e.data["last_reason"] == "connect_timeout", e.data
    assert "TLS handshake did not complete" in e.message
    assert client.status().era is None


def test_a_tls_failure_never_shows_the_urls_password_or_query(
    certs, make_server, start_client, caplog
):
    caplog.set_level("DEBUG")
    with serve_tls(make_server, certs.expired) as srv:
        url = srv.url.replace("https://", "https://user:pw-s3cret@") + "?api_key=q-s3cret"
        client = start_client(mcp.Http(url, verify=certs.ca), protocol="modern")
        with pytest.raises(mcp.Error) as err:
            client.await_ready(timeout=10)
    assert err.value.reason == "tls_failed"
    shown = [str(err.value), repr(err.value), repr(err.value.data), repr(client.status())]
    shown += [r.getMessage() for r in caplog.records]
    assert not [s for s in shown if "s3cret" in s]
