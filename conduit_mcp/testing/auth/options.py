"""The command line of the test authorization server (:mod:`.server`).

Kept apart so the server's whole configuration surface reads in one place; docs/testing.md,
"The test authorization server", documents each option.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import orjson

from ..common.tls import add_tls_arguments, check_tls_arguments
from .state import AUTH_METHODS

#: ``--bad-access-token``: the character put in the middle of every access token issued.
BAD_TOKEN_CHARS = {"cr": "\r", "lf": "\n", "nul": "\x00"}

__all__ = ["BAD_TOKEN_CHARS", "AuthOptions", "build_parser", "check_hostile", "options_from_args"]


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
    dpop: bool = False
    dpop_nonce: bool = False
    scopes: list[str] = field(default_factory=list)
    default_scopes: list[str] = field(default_factory=list)
    resources: list[str] = field(default_factory=list)
    auth_methods: list[str] = field(default_factory=lambda: list(AUTH_METHODS))
    split_bodies: float | None = None
    registration_padding: int = 0
    metadata_status: int | None = None
    log_path: str | None = None
    # hostile answers (docs/testing.md, "The test authorization server")
    expires_in: float | None = None
    bad_access_token: str | None = None
    register_answer: dict[str, Any] = field(default_factory=dict)
    token_error: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    tls_client_ca: str | None = None
    # the assertion grants (testing/auth/assertions.py)
    trust: dict[str, str] = field(default_factory=dict)
    signing_key: str | None = None
    jag_client_id: str | None = None


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m conduit_mcp.testing.auth.server",
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
    p.add_argument(
        "--dpop",
        action="store_true",
        help="DPoP (RFC 9449): advertise it, check proofs, bind tokens to the proof's key",
    )
    p.add_argument(
        "--dpop-nonce", action="store_true", help="with --dpop: token requests need a DPoP nonce"
    )
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
    hostile = p.add_argument_group("hostile answers (a test's levers; POST /admin/hostile)")
    hostile.add_argument(
        "--split-bodies",
        type=float,
        metavar="DELAY",
        help="write every answer's body in two segments, DELAY seconds apart",
    )
    hostile.add_argument(
        "--registration-padding",
        type=int,
        default=0,
        metavar="BYTES",
        help="pad every registration answer with this many bytes (an x_padding field)",
    )
    hostile.add_argument(
        "--metadata-status",
        type=int,
        metavar="STATUS",
        help="answer every metadata request with this HTTP status (503: unavailable)",
    )
    p.add_argument("--log", help="append one JSON line per request and event")
    p.add_argument(
        "--expires-in",
        type=float,
        help="hostile: advertise this expires_in (may be fractional) whatever --token-ttl is",
    )
    p.add_argument(
        "--bad-access-token",
        choices=tuple(BAD_TOKEN_CHARS),
        help="hostile: every access token issued has a CR, LF or NUL in its middle",
    )
    p.add_argument(
        "--register-answer",
        metavar="JSON",
        help="hostile: members merged over every registration answer (null removes one)",
    )
    p.add_argument(
        "--token-error",
        metavar="CODE",
        help="hostile: the token endpoint refuses every request with this OAuth error code",
    )
    grants = p.add_argument_group("assertion grants (jwt-bearer, token exchange)")
    grants.add_argument(
        "--trust",
        action="append",
        default=[],
        metavar="ISSUER=JWKS_FILE",
        help="accept JWTs of ISSUER, verified with the JWKS in the file (read at each use)",
    )
    grants.add_argument(
        "--signing-key",
        metavar="PEM_FILE",
        help="act as an identity provider: sign ID-JAGs (token exchange) with this key",
    )
    grants.add_argument(
        "--jag-client-id",
        help="the client_id the ID-JAGs name (default: the exchanging client's)",
    )
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
    check_hostile(ns.split_bodies, ns.registration_padding, ns.metadata_status)
    register_answer: dict[str, Any] = {}
    if ns.register_answer:
        try:
            register_answer = orjson.loads(ns.register_answer)
        except orjson.JSONDecodeError as e:
            raise ValueError(f"--register-answer is not JSON: {e}") from None
        if not isinstance(register_answer, dict):
            raise ValueError("--register-answer must be a JSON object")
    trust: dict[str, str] = {}
    for item in ns.trust:
        issuer, sep, jwks_path = item.rpartition("=")
        if not sep or not issuer or not jwks_path:
            raise ValueError("--trust takes ISSUER=JWKS_FILE")
        trust[issuer] = jwks_path
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
        dpop=ns.dpop or ns.dpop_nonce,
        dpop_nonce=ns.dpop_nonce,
        scopes=_csv(ns.scopes),
        default_scopes=_csv(ns.default_scopes),
        resources=list(ns.resource),
        auth_methods=methods,
        split_bodies=ns.split_bodies,
        registration_padding=ns.registration_padding,
        metadata_status=ns.metadata_status,
        log_path=ns.log,
        expires_in=ns.expires_in,
        bad_access_token=ns.bad_access_token,
        register_answer=register_answer,
        token_error=ns.token_error,
        tls_cert=ns.tls_cert,
        tls_key=ns.tls_key,
        tls_client_ca=ns.tls_client_ca,
        trust=trust,
        signing_key=ns.signing_key,
        jag_client_id=ns.jag_client_id,
    )


def check_hostile(split: Any, padding: Any, status: Any) -> None:
    """The hostile levers' values (the command line's and ``POST /admin/hostile``'s)."""
    if split is not None and (not isinstance(split, (int, float)) or not 0 <= split <= 60):
        raise ValueError("split_bodies: a delay in seconds, 0 to 60")
    if not isinstance(padding, int) or not 0 <= padding <= 64 << 20:
        raise ValueError("registration_padding: a byte count, 0 to 64 MiB")
    if status is not None and (not isinstance(status, int) or not 100 <= status <= 599):
        raise ValueError("metadata_status: an HTTP status, 100 to 599")
