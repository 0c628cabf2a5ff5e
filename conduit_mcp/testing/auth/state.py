"""The test authorization server's memory: clients, authorization codes and token families.

Plain data and checks, no HTTP, so the rules (PKCE, redirect URIs, rotation, reuse detection,
revocation) read in one place; :mod:`.server` puts them on aiohttp. Tokens are opaque
random strings; a *family* is everything one authorization grant produced (the code, every
access token, every rotated refresh token), so spending an old refresh token twice, or a code
twice, revokes the whole family, as OAuth 2.1 asks of a server that rotates refresh tokens.
See docs/testing.md, "The test authorization server".
"""

from __future__ import annotations

import ipaddress
import secrets
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

__all__ = [
    "AuthState",
    "Client",
    "Code",
    "OAuthFailure",
    "Token",
    "client_from_metadata",
    "redirect_uri_matches",
]

SECRET_METHODS = ("client_secret_basic", "client_secret_post")
AUTH_METHODS = ("none", *SECRET_METHODS, "private_key_jwt")


class OAuthFailure(Exception):
    """An OAuth error answer: ``error`` (RFC 6749 code), a description, the HTTP status."""

    def __init__(
        self,
        error: str,
        description: str,
        status: int = 400,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description
        self.status = status
        self.headers = headers or {}  # a DPoP-Nonce, say


@dataclass(slots=True)
class Client:
    """A registered client (pre-registered, by DCR, or from a client ID metadata document).

    ``auth_method`` None (pre-registered without one) accepts any method its credentials
    allow; otherwise the token and revocation endpoints insist on exactly that method.
    """

    client_id: str
    kind: str  # "pre" | "dcr" | "cimd"
    secret: str | None = None
    redirect_uris: list[str] = field(default_factory=list)
    auth_method: str | None = None
    grant_types: list[str] | None = None
    jwks: dict[str, Any] | None = None
    jwks_uri: str | None = None
    application_type: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    def allows(self, method: str) -> bool:
        if self.auth_method is not None:
            return method == self.auth_method
        if method in SECRET_METHODS:
            return self.secret is not None
        if method == "private_key_jwt":
            return self.jwks is not None or self.jwks_uri is not None
        return self.secret is None and self.jwks is None and self.jwks_uri is None

    def summary(self) -> dict[str, Any]:
        """What a test may read back (``GET /admin/clients``): no secret."""
        return {
            "client_id": self.client_id,
            "kind": self.kind,
            "has_secret": self.secret is not None,
            "redirect_uris": self.redirect_uris,
            "token_endpoint_auth_method": self.auth_method,
            "grant_types": self.grant_types,
            "application_type": self.application_type,
            "metadata": self.metadata,
        }


def client_from_metadata(meta: dict[str, Any], kind: str, client_id: str) -> Client:
    """A :class:`Client` from RFC 7591 metadata (DCR body, CIMD document, ``--client``)."""
    redirect_uris = meta.get("redirect_uris", [])
    if not isinstance(redirect_uris, list) or not all(isinstance(u, str) for u in redirect_uris):
        raise OAuthFailure("invalid_redirect_uri", "redirect_uris must be a list of strings")
    for uri in redirect_uris:
        parts = urlsplit(uri)
        if not parts.scheme or parts.fragment:
            raise OAuthFailure("invalid_redirect_uri", f"not an absolute URI: {uri!r}")
    method = meta.get("token_endpoint_auth_method")
    if method is not None and method not in AUTH_METHODS:
        raise OAuthFailure(
            "invalid_client_metadata", f"unsupported token_endpoint_auth_method {method!r}"
        )
    grants = meta.get("grant_types")
    if grants is not None and (
        not isinstance(grants, list) or not all(isinstance(g, str) for g in grants)
    ):
        raise OAuthFailure("invalid_client_metadata", "grant_types must be a list of strings")
    jwks = meta.get("jwks")
    if jwks is not None and not (isinstance(jwks, dict) and isinstance(jwks.get("keys"), list)):
        raise OAuthFailure("invalid_client_metadata", 'jwks must be {"keys": [...]}')
    public_key = meta.get("public_key")  # a convenience of --client: one PEM public key
    if isinstance(public_key, str):
        from joserfc.jwk import ECKey, RSAKey

        try:
            key: RSAKey | ECKey = RSAKey.import_key(public_key)
        except (ValueError, TypeError):
            key = ECKey.import_key(public_key)
        jwks = {"keys": [key.as_dict(private=False)]}
    app_type = meta.get("application_type")
    if app_type is not None and app_type not in ("native", "web"):
        raise OAuthFailure("invalid_client_metadata", "application_type must be native or web")
    public = {k: v for k, v in meta.items() if k not in ("client_secret", "public_key")}
    return Client(
        client_id=client_id,
        kind=kind,
        secret=meta.get("client_secret"),
        redirect_uris=list(redirect_uris),
        auth_method=method,
        grant_types=list(grants) if grants is not None else None,
        jwks=jwks,
        jwks_uri=meta.get("jwks_uri"),
        application_type=app_type,
        metadata=public,
    )


def _loopback(host: str | None) -> bool:
    if host == "localhost":
        return True
    try:
        return host is not None and ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def redirect_uri_matches(registered: list[str], given: str) -> bool:
    """Exact match, except that a loopback ``http`` redirect may use any port (RFC 8252 7.3)."""
    if given in registered:
        return True
    g = urlsplit(given)
    if g.scheme != "http" or not _loopback(g.hostname):
        return False
    for uri in registered:
        r = urlsplit(uri)
        if (r.scheme, r.hostname, r.path, r.query) == (g.scheme, g.hostname, g.path, g.query):
            return True
    return False


@dataclass(slots=True)
class Code:
    client_id: str
    redirect_uri: str
    challenge: str | None
    method: str | None
    scope: list[str]
    resource: str | None
    sub: str
    expires: float
    family: str
    used: bool = False


@dataclass(slots=True)
class Token:
    kind: str  # "access" | "refresh"
    client_id: str
    sub: str
    scope: list[str]
    resource: str | None
    family: str
    issued: float
    expires: float | None
    grant: str
    used: bool = False
    revoked: bool = False
    jkt: str | None = None  # DPoP: the thumbprint of the key the token is bound to

    def active(self, now: float) -> bool:
        return not self.revoked and (self.expires is None or now < self.expires)


@dataclass
class AuthState:
    """Clients, codes and tokens, with the grant rules. Times are wall-clock seconds."""

    token_ttl: float = 3600.0
    refresh_ttl: float | None = None
    code_ttl: float = 60.0
    rotate: bool = True
    clients: dict[str, Client] = field(default_factory=dict)
    codes: dict[str, Code] = field(default_factory=dict)
    tokens: dict[str, Token] = field(default_factory=dict)
    families: dict[str, set[str]] = field(default_factory=dict)
    seen_jti: set[str] = field(default_factory=set)

    # ---- codes ------------------------------------------------------------------------------

    def new_code(self, **fields: Any) -> str:
        code = secrets.token_urlsafe(24)
        family = secrets.token_hex(8)
        self.codes[code] = Code(expires=time.time() + self.code_ttl, family=family, **fields)
        self.families[family] = set()
        return code

    def redeem_code(
        self,
        client: Client,
        code: str | None,
        redirect_uri: str | None,
        verifier: str | None,
        resource: str | None,
    ) -> Code:
        """The code's grant, after every check; a second use revokes what the first gave."""
        entry = self.codes.get(code or "")
        if entry is None or entry.client_id != client.client_id:
            raise OAuthFailure("invalid_grant", "unknown authorization code")
        if entry.used:
            self.revoke_family(entry.family)
            raise OAuthFailure("invalid_grant", "authorization code already used")
        entry.used = True
        if time.time() >= entry.expires:
            raise OAuthFailure("invalid_grant", "authorization code expired")
        if redirect_uri != entry.redirect_uri:
            raise OAuthFailure("invalid_grant", "redirect_uri differs from the authorization's")
        if entry.challenge is not None:
            # authlib (the oauth extra) is imported here, so the package imports without it
            from authlib.oauth2.rfc7636 import (  # type: ignore[import-untyped, unused-ignore]
                create_s256_code_challenge,
            )

            if not verifier:
                raise OAuthFailure("invalid_grant", "code_verifier is missing")
            computed = create_s256_code_challenge(verifier) if entry.method == "S256" else verifier
            if not secrets.compare_digest(computed, entry.challenge):
                raise OAuthFailure("invalid_grant", "code_verifier does not match the challenge")
        elif verifier:
            raise OAuthFailure("invalid_grant", "code_verifier sent but no challenge was")
        if not resource:
            raise OAuthFailure("invalid_target", "resource is required")
        if resource != entry.resource:
            raise OAuthFailure("invalid_target", "resource differs from the authorization's")
        return entry

    # ---- tokens -----------------------------------------------------------------------------

    def issue(
        self,
        *,
        client_id: str,
        sub: str,
        scope: list[str],
        resource: str | None,
        family: str,
        grant: str,
        refresh: bool,
        jkt: str | None = None,
    ) -> dict[str, Any]:
        now = time.time()
        access = secrets.token_urlsafe(32)
        self.tokens[access] = Token(
            "access",
            client_id,
            sub,
            scope,
            resource,
            family,
            now,
            now + self.token_ttl,
            grant,
            jkt=jkt,
        )
        self.families.setdefault(family, set()).add(access)
        answer: dict[str, Any] = {
            "access_token": access,
            "token_type": "DPoP" if jkt is not None else "Bearer",
            "expires_in": max(1, int(-(-self.token_ttl // 1))),
            "scope": " ".join(scope),
        }
        if refresh:
            token = secrets.token_urlsafe(32)
            expires = None if self.refresh_ttl is None else now + self.refresh_ttl
            self.tokens[token] = Token(
                "refresh", client_id, sub, scope, resource, family, now, expires, grant, jkt=jkt
            )
            self.families[family].add(token)
            answer["refresh_token"] = token
        return answer

    def spend_refresh(self, client: Client, token: str | None) -> Token:
        """The refresh token's grant; spending a rotated-out one revokes its family."""
        entry = self.tokens.get(token or "")
        if entry is None or entry.kind != "refresh" or entry.client_id != client.client_id:
            raise OAuthFailure("invalid_grant", "unknown refresh token")
        if entry.used:
            self.revoke_family(entry.family)
            raise OAuthFailure("invalid_grant", "refresh token reused: its family is revoked")
        if not entry.active(time.time()):
            raise OAuthFailure("invalid_grant", "refresh token revoked or expired")
        if self.rotate:
            entry.used = True
        return entry

    def revoke_family(self, family: str) -> int:
        n = 0
        for token in self.families.get(family, ()):
            entry = self.tokens.get(token)
            if entry is not None and not entry.revoked:
                entry.revoked = True
                n += 1
        return n

    def revoke(self, token: str) -> int:
        """Revoke one token (an access token), or a refresh token with its family."""
        entry = self.tokens.get(token)
        if entry is None:
            return 0
        if entry.kind == "refresh":
            return self.revoke_family(entry.family)
        was = not entry.revoked
        entry.revoked = True
        return int(was)

    def expire_access(self) -> int:
        now = time.time()
        n = 0
        for entry in self.tokens.values():
            if entry.kind == "access" and entry.active(now):
                entry.expires = now
                n += 1
        return n

    def introspect(self, token: str | None, issuer: str) -> dict[str, Any]:
        entry = self.tokens.get(token or "")
        if (
            entry is None
            or not entry.active(time.time())
            or (entry.kind == "refresh" and entry.used)
        ):
            return {"active": False}
        answer: dict[str, Any] = {
            "active": True,
            "token_type": "Bearer" if entry.kind == "access" else "refresh_token",
            "client_id": entry.client_id,
            "sub": entry.sub,
            "scope": " ".join(entry.scope),
            "iat": int(entry.issued),
            "iss": issuer,
        }
        if entry.expires is not None:
            answer["exp"] = entry.expires
        if entry.resource is not None:
            answer["aud"] = entry.resource
        if entry.jkt is not None:  # RFC 9449 section 6.2
            answer["cnf"] = {"jkt": entry.jkt}
            if entry.kind == "access":
                answer["token_type"] = "DPoP"
        return answer
