"""The test authorization server's assertion grants: the JWT-bearer grant (RFC 7523 section
2.1) and token exchange (RFC 8693) acting as an enterprise identity provider that issues
identity assertion JWT authorization grants (ID-JAGs).

Trust is what a test says: ``--trust ISSUER=JWKS_FILE`` (repeatable) names an issuer whose
JWTs are accepted (a workload platform, a single sign-on, an identity provider) and the file
of its public keys, read at each verification (a test may rotate them). ``--signing-key PEM``
is this server's own key, the one its ID-JAGs are signed with, published at ``/jwks``. So a
test runs two of these servers: one as the identity provider (``--signing-key``, trusting the
single sign-on's keys), one as the MCP server's authorization server (trusting the identity
provider's). docs/testing.md, "The test authorization server", is the manual.

A JWT-bearer assertion is accepted when its signature verifies with a trusted issuer's key,
its ``aud`` is this server's issuer (with or without a trailing slash) or its token endpoint,
and it has an ``exp`` in the future; an ID-JAG (``typ`` ``oauth-id-jag+jwt``) also names the
authenticated client in ``client_id`` and the requested ``resource``. A refusal is
``invalid_grant`` with a description that says which check failed.
"""

from __future__ import annotations

import base64
import secrets
import time
from pathlib import Path
from typing import Any

import orjson

from .base import AuthBase
from .state import Client, OAuthFailure

__all__ = ["ID_JAG", "ID_JAG_TYP", "ID_TOKEN", "JWT_BEARER_GRANT", "TOKEN_EXCHANGE", "Assertions"]

JWT_BEARER_GRANT = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYP = "oauth-id-jag+jwt"
#: How long an ID-JAG this server issues is valid (seconds), as the extension's example.
ID_JAG_TTL = 300
_ALGS = ["RS256", "ES256", "PS256", "EdDSA"]


def _unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims of a compact JWT, not verified (to find the issuer's keys)."""
    try:
        head, body = token.split(".")[:2]
        parts = [
            orjson.loads(base64.urlsafe_b64decode(p + "=" * (-len(p) % 4))) for p in (head, body)
        ]
    except (ValueError, orjson.JSONDecodeError):
        raise OAuthFailure("invalid_grant", "the assertion is not a JWT") from None
    if not all(isinstance(p, dict) for p in parts):
        raise OAuthFailure("invalid_grant", "the assertion is not a JWT")
    return parts[0], parts[1]


class Assertions(AuthBase):
    """The grant handlers; :class:`~.server.AuthServer` calls them from its token endpoint."""

    def verify_jwt(self, token: str, audiences: list[str], what: str) -> dict[str, Any]:
        """The claims of ``token`` once its issuer is trusted, its signature verifies with
        that issuer's keys, its ``aud`` is one of ``audiences`` and it has not expired."""
        from joserfc import jwt
        from joserfc.errors import JoseError
        from joserfc.jwk import KeySet

        _, claims = _unverified(token)
        issuer = claims.get("iss")
        path = self.opt.trust.get(issuer) if isinstance(issuer, str) else None
        if path is None:
            raise OAuthFailure("invalid_grant", f"{what}: its issuer is not trusted")
        try:
            keys = KeySet.import_key_set(orjson.loads(Path(path).read_bytes()))
            decoded = jwt.decode(token, keys, algorithms=_ALGS)
        except (OSError, ValueError, JoseError) as e:
            raise OAuthFailure("invalid_grant", f"{what}: signature refused ({e})") from None
        now = time.time()
        exp = decoded.claims.get("exp")
        if not isinstance(exp, (int, float)) or exp <= now:
            raise OAuthFailure("invalid_grant", f"{what}: expired (or no exp)")
        aud = decoded.claims.get("aud")
        auds = aud if isinstance(aud, list) else [aud]
        if not any(a in audiences for a in auds):
            raise OAuthFailure("invalid_grant", f"{what}: wrong audience")
        return dict(decoded.claims)

    def jwt_bearer(
        self, client: Client, form: dict[str, str], resource: str | None
    ) -> tuple[str, str]:
        """The JWT-bearer grant: (subject, the grant's kind for the log: ``id-jag`` or
        ``jwt``) for a verified assertion."""
        assertion = form.get("assertion")
        if not assertion:
            raise OAuthFailure("invalid_request", "the jwt-bearer grant needs an assertion")
        header, _ = _unverified(assertion)
        issuer = self.issuer
        audiences = [issuer.rstrip("/"), issuer.rstrip("/") + "/", self.endpoint("token")]
        claims = self.verify_jwt(assertion, audiences, "the assertion")
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise OAuthFailure("invalid_grant", "the assertion has no sub")
        if header.get("typ") != ID_JAG_TYP:
            return sub, "jwt"
        if claims.get("client_id") != client.client_id:
            raise OAuthFailure("invalid_grant", "the ID-JAG names another client")
        if resource is not None and claims.get("resource") != resource:
            raise OAuthFailure("invalid_grant", "the ID-JAG names another resource")
        return sub, "id-jag"

    def token_exchange(self, client: Client, form: dict[str, str]) -> dict[str, Any]:
        """Token exchange as an identity provider: the user's identity token (from a trusted
        single sign-on, its audience the exchanging client) for an ID-JAG signed with
        ``--signing-key``, naming ``--jag-client-id`` (default: the exchanging client)."""
        from joserfc import jwt
        from joserfc.jwk import import_key

        if self.opt.signing_key is None:
            raise OAuthFailure(
                "unsupported_grant_type", "no --signing-key: not an identity provider"
            )
        if form.get("requested_token_type") != ID_JAG:
            raise OAuthFailure("invalid_request", f"requested_token_type must be {ID_JAG}")
        if form.get("subject_token_type") != ID_TOKEN:
            raise OAuthFailure("invalid_request", f"subject_token_type must be {ID_TOKEN}")
        audience, resource = form.get("audience"), form.get("resource")
        subject = form.get("subject_token")
        if not audience or not resource or not subject:
            raise OAuthFailure("invalid_request", "audience, resource and subject_token needed")
        claims = self.verify_jwt(subject, [client.client_id], "the subject token")
        sub = claims.get("sub")
        if not isinstance(sub, str) or not sub:
            raise OAuthFailure("invalid_grant", "the subject token has no sub")
        key = import_key(Path(self.opt.signing_key).read_bytes())
        alg = "ES256" if key.key_type == "EC" else "RS256"
        now = int(time.time())
        grant_claims: dict[str, Any] = {
            "iss": self.issuer,
            "sub": sub,
            "aud": audience,
            "resource": resource,
            "client_id": self.opt.jag_client_id or client.client_id,
            "jti": secrets.token_hex(12),
            "iat": now,
            "exp": now + ID_JAG_TTL,
        }
        if form.get("scope"):
            grant_claims["scope"] = form["scope"]
        grant = jwt.encode({"alg": alg, "typ": ID_JAG_TYP}, grant_claims, key)
        self.event(
            "token_exchange",
            client_id=client.client_id,
            sub=sub,
            audience=audience,
            resource=resource,
            scope=form.get("scope"),
        )
        return {
            "access_token": grant,
            "issued_token_type": ID_JAG,
            "token_type": "N_A",
            "expires_in": ID_JAG_TTL,
        }

    def public_jwks(self) -> dict[str, Any]:
        """``/jwks``: the public half of ``--signing-key`` (none without it)."""
        from joserfc.jwk import import_key

        if self.opt.signing_key is None:
            return {"keys": []}
        key = import_key(Path(self.opt.signing_key).read_bytes())
        return {"keys": [key.as_dict(private=False)]}
