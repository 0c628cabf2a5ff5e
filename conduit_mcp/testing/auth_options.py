"""The command line of the test authorization server (:mod:`.auth_server`).

Kept apart so the server's whole configuration surface reads in one place; docs/testing.md,
"The test authorization server", documents each option.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from .auth_state import AUTH_METHODS
from .tls import add_tls_arguments, check_tls_arguments

__all__ = ["AuthOptions", "build_parser", "options_from_args"]


def _csv(value: str) -> list[str]:
    return [v.strip() for v in value.split(",") if v.strip()]


@dataclass(slots=True)
class AuthOptions:
    port: int = 0
    issuer_path: str = ""
    issuer: str | None = None
    metadata: str = "both"
    root_metadata: bool = False
    code_challenge_methods: list[str] = field(default_factory=lambda: ["S256"])
    iss: str = "correct"
    iss_supported: bool = True
    cimd: bool = True
    dcr: bool = True
    clients: list[dict[str, Any]] = field(default_factory=list)
    require_person: bool = False
    subject: str = "alice"
    token_ttl: float = 3600.0
    refresh_ttl: float | None = None
    no_rotation: bool = False
    no_refresh: bool = False
    scopes: list[str] = field(default_factory=list)
    default_scopes: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    auth_methods: list[str] = field(default_factory=lambda: list(AUTH_METHODS))
    log_path: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m conduit_mcp.testing.auth_server",
        description="An OAuth 2.1 authorization server for tests (loopback only).",
        epilog="The manual is docs/testing.md, 'The test authorization server'.",
    )
    p.add_argument("--port", type=int, default=0, help="0: pick a free port")
    p.add_argument("--issuer-path", default="", help="a path for the issuer, e.g. /tenant1")
    p.add_argument("--issuer", help="advertise this issuer instead of the real URL (a wrong one)")
    p.add_argument(
        "--metadata",
        choices=("both", "oauth", "oidc", "none"),
        default="both",
        help="which discovery documents to serve (RFC 8414, OpenID, both, none)",
    )
    p.add_argument(
        "--root-metadata", action="store_true", help="also serve them at the root well-known URLs"
    )
    p.add_argument(
        "--code-challenge-methods",
        default="S256",
        help="code_challenge_methods_supported, comma-separated; empty: omitted (no PKCE)",
    )
    p.add_argument(
        "--iss",
        choices=("correct", "wrong", "none"),
        default="correct",
        help="the iss parameter on authorization redirects",
    )
    p.add_argument(
        "--no-iss-supported",
        action="store_true",
        help="omit authorization_response_iss_parameter_supported",
    )
    p.add_argument("--no-cimd", action="store_true", help="no client ID metadata documents")
    p.add_argument("--no-dcr", action="store_true", help="no registration endpoint")
    p.add_argument(
        "--client",
        action="append",
        default=[],
        metavar="JSON",
        help='a pre-registered client: {"client_id", "client_secret"?, "redirect_uris"?, '
        '"token_endpoint_auth_method"?, "grant_types"?, "jwks"?, "public_key"? (PEM)}',
    )
    p.add_argument("--clients-file", help="a JSON list of pre-registered clients")
    p.add_argument(
        "--require-person",
        action="store_true",
        help="the authorization endpoint answers a login page; approval is a POST to /login",
    )
    p.add_argument("--subject", default="alice", help="the subject auto-approval grants")
    p.add_argument("--token-ttl", type=float, default=3600.0, help="access token lifetime (s)")
    p.add_argument("--refresh-ttl", type=float, help="refresh token lifetime (s); default none")
    p.add_argument("--no-rotation", action="store_true", help="refresh tokens are not rotated")
    p.add_argument("--no-refresh", action="store_true", help="issue no refresh tokens")
    p.add_argument("--scopes", default="", help="scopes_supported, comma-separated")
    p.add_argument("--default-scopes", default="", help="granted when none is requested")
    p.add_argument(
        "--resource",
        action="append",
        default=[],
        help="a resource tokens may be issued for (repeatable; default: any)",
    )
    p.add_argument(
        "--auth-methods",
        default=",".join(AUTH_METHODS),
        help="token_endpoint_auth_methods_supported, comma-separated",
    )
    p.add_argument("--log", help="append one JSON line per request and event")
    add_tls_arguments(p)
    return p


def _client(value: Any, where: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not isinstance(value.get("client_id"), str):
        raise ValueError(f"{where}: a client is a JSON object with a string client_id")
    return value


def options_from_args(argv: Iterable[str] | None = None) -> AuthOptions:
    ns = build_parser().parse_args(None if argv is None else list(argv))
    clients: list[dict[str, Any]] = []
    for spec in ns.client:
        try:
            clients.append(_client(orjson.loads(spec), "--client"))
        except orjson.JSONDecodeError as e:
            raise ValueError(f"--client is not JSON: {e}") from None
    if ns.clients_file:
        try:
            with open(ns.clients_file, "rb") as f:
                listed = orjson.loads(f.read())
        except (OSError, orjson.JSONDecodeError) as e:
            raise ValueError(f"cannot read --clients-file: {e}") from None
        if not isinstance(listed, list):
            raise ValueError("--clients-file must hold a JSON list")
        clients += [_client(c, "--clients-file") for c in listed]
    path = ns.issuer_path.rstrip("/")
    if path and not path.startswith("/"):
        raise ValueError("--issuer-path must start with /")
    methods = _csv(ns.auth_methods)
    if any(m not in AUTH_METHODS for m in methods):
        raise ValueError(f"--auth-methods: each one of {', '.join(AUTH_METHODS)}")
    if ns.token_ttl <= 0 or (ns.refresh_ttl is not None and ns.refresh_ttl <= 0):
        raise ValueError("--token-ttl and --refresh-ttl must be > 0")
    tls_problem = check_tls_arguments(ns.tls_cert, ns.tls_key, ns.tls_client_ca)
    if tls_problem is not None:
        raise ValueError(tls_problem)
    return AuthOptions(
        port=ns.port,
        issuer_path=path,
        issuer=ns.issuer,
        metadata=ns.metadata,
        root_metadata=ns.root_metadata,
        code_challenge_methods=_csv(ns.code_challenge_methods),
        iss=ns.iss,
        iss_supported=not ns.no_iss_supported,
        cimd=not ns.no_cimd,
        dcr=not ns.no_dcr,
        clients=clients,
        require_person=ns.require_person,
        subject=ns.subject,
        token_ttl=ns.token_ttl,
        refresh_ttl=ns.refresh_ttl,
        no_rotation=ns.no_rotation,
        no_refresh=ns.no_refresh,
        scopes=_csv(ns.scopes),
        default_scopes=_csv(ns.default_scopes),
        resources=list(ns.resource),
        auth_methods=methods,
        log_path=ns.log,
        tls_cert=ns.tls_cert,
        tls_key=ns.tls_key,
        tls_client_ca=ns.tls_client_ca,
    )
