"""A real protected MCP server: the official ``mcp`` 2.3.0 ``MCPServer`` on uvicorn, behind
the authorization server of ``oidc_provider.mjs`` (npm ``oidc-provider``).

Not a test module (pytest does not enter ``peers`` folders). Run it with the dev venv's python:

    .venv/bin/python tests/interop/peers/protected_peer.py --port M --issuer http://127.0.0.1:N

It serves ``http://127.0.0.1:M/mcp`` with the SDK's own resource-server side of OAuth:
``AuthSettings(required_scopes=["mcp"], validate_token_resource=True)``, so a request without
a valid token is answered 401 with ``WWW-Authenticate: Bearer ... resource_metadata=...`` and
the RFC 9728 document is at ``/.well-known/oauth-protected-resource/mcp``. The token verifier
checks each JWT access token (RFC 9068) against the provider's JWKS with joserfc (authlib's
JOSE library): the signature, ``iss`` = the issuer, ``aud`` = this resource, ``exp``. It fetches
the JWKS for every token (a few milliseconds on loopback), so a restarted provider's new keys
count at once and the tokens it signed before its restart are refused at once.

uvicorn runs with its defaults, ``timeout_keep_alive`` = 5 s included: an idle connection is
closed after 5 s, which the keep-alive interop test relies on.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import urllib.request
import warnings
from typing import Any

import uvicorn
from joserfc import jwt
from joserfc.errors import JoseError
from joserfc.jwk import KeySet
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer

warnings.filterwarnings("ignore", message=".*SEP-2577.*")

SCOPE = "mcp"


class JwksVerifier:
    """``TokenVerifier`` for the provider's JWT access tokens (the SDK calls ``verify_token``
    for every request; ``None`` means 401)."""

    def __init__(self, issuer: str, resource: str) -> None:
        self.issuer = issuer
        self.resource = resource
        self._jwks_uri: str | None = None
        self._claims = jwt.JWTClaimsRegistry(
            iss={"essential": True, "value": issuer},
            aud={"essential": True, "value": resource},
            exp={"essential": True},
        )

    def _fetch_keys(self) -> KeySet:
        if self._jwks_uri is None:
            discovery = f"{self.issuer}/.well-known/openid-configuration"
            with urllib.request.urlopen(discovery, timeout=5) as r:
                self._jwks_uri = str(json.load(r)["jwks_uri"])
        with urllib.request.urlopen(self._jwks_uri, timeout=5) as r:
            return KeySet.import_key_set(json.load(r))

    def _decode(self, token: str, keys: KeySet) -> jwt.Token | None:
        try:
            decoded = jwt.decode(token, keys, algorithms=["RS256"])
            self._claims.validate(decoded.claims)
        except (JoseError, ValueError):
            return None
        return decoded

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            keys = await asyncio.to_thread(self._fetch_keys)
        except (OSError, ValueError, KeyError):
            return None
        decoded = self._decode(token, keys)
        if decoded is None:
            return None
        claims: dict[str, Any] = decoded.claims
        aud = claims["aud"]
        return AccessToken(
            token=token,
            client_id=str(claims.get("client_id", "")),
            scopes=str(claims.get("scope", "")).split(),
            expires_at=int(claims["exp"]),
            resource=aud if isinstance(aud, str) else self.resource,
            subject=claims.get("sub"),
            claims={"iss": claims["iss"]},
        )


def build(issuer: str, port: int) -> MCPServer:
    resource = f"http://127.0.0.1:{port}/mcp"
    server = MCPServer(
        "conduit-protected-peer",
        version="1.0.0",
        log_level="WARNING",
        token_verifier=JwksVerifier(issuer, resource),
        auth=AuthSettings(
            issuer_url=issuer,
            resource_server_url=resource,
            required_scopes=[SCOPE],
            validate_token_resource=True,
        ),
    )

    @server.tool()
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    @server.tool()
    def echo(text: str) -> str:
        """Return the text unchanged."""
        return text

    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--issuer", required=True)
    args = parser.parse_args()
    app = build(args.issuer, args.port).streamable_http_app(streamable_http_path="/mcp")
    # uvicorn's defaults otherwise (timeout_keep_alive=5); it prints nothing at warning.
    uvicorn.run(app, host="127.0.0.1", port=args.port, log_level="warning")


if __name__ == "__main__":
    main()
