"""TLS for the test servers: ``--tls-cert FILE --tls-key FILE`` serve https instead of http,
and ``--tls-client-ca FILE`` also requires a client certificate issued by that CA (mutual
TLS). Both the scripted MCP server and the test authorization server take them
(docs/testing.md, "TLS"); the certificates are the test's own (tests/tls_certs.py makes
a private CA and its certificates at test time).
"""

from __future__ import annotations

import argparse
import ssl

__all__ = ["add_tls_arguments", "check_tls_arguments", "client_context", "server_context"]


def add_tls_arguments(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    parser.add_argument("--tls-cert", metavar="FILE", help="serve https with this certificate")
    parser.add_argument("--tls-key", metavar="FILE", help="the private key of --tls-cert")
    parser.add_argument(
        "--tls-client-ca",
        metavar="FILE",
        help="require a client certificate issued by this CA (mutual TLS)",
    )


def check_tls_arguments(cert: str | None, key: str | None, client_ca: str | None) -> str | None:
    """What is wrong with the TLS options, or None."""
    if (cert is None) != (key is None):
        return "--tls-cert and --tls-key go together"
    if client_ca is not None and cert is None:
        return "--tls-client-ca needs --tls-cert and --tls-key"
    return None


def server_context(
    cert: str | None, key: str | None, client_ca: str | None = None
) -> ssl.SSLContext | None:
    """The server's TLS context (None: plain http)."""
    if cert is None or key is None:
        return None
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    if client_ca is not None:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(cafile=client_ca)
    return context


def client_context() -> ssl.SSLContext:
    """What a test harness uses for its own admin calls to its own TLS server (the levers,
    the person's browser): no verification, since the certificate may be the bad one under
    test. Never used by the client under test."""
    return ssl._create_unverified_context()
