"""Client registration and authentication of the test authorization server.

Dynamic registration (RFC 7591), client ID metadata documents (fetched from the client's URL),
and the client authentication of the token and revocation endpoints (``none``,
``client_secret_basic``, ``client_secret_post``, ``private_key_jwt`` verified with joserfc).
docs/testing.md, "The test authorization server", is the manual.
"""

from __future__ import annotations

import base64
import secrets
import time
from urllib.parse import unquote, urlsplit

import aiohttp
import orjson
from aiohttp import web

from .base import JWT_BEARER, NO_STORE, AuthBase, json_answer
from .state import Client, OAuthFailure, client_from_metadata

__all__ = ["ClientsMixin"]


class ClientsMixin(AuthBase):
    """The registration endpoint and the client checks."""

    # ---- clients ----------------------------------------------------------------------------

    async def register(self, request: web.Request) -> web.Response:
        meta = await self._body_json(request)
        if not isinstance(meta, dict):
            raise OAuthFailure("invalid_client_metadata", "the body must be a JSON object")
        meta = dict(meta)
        method = meta.setdefault("token_endpoint_auth_method", "client_secret_basic")
        grants = meta.setdefault("grant_types", ["authorization_code"])
        if "authorization_code" in grants and not meta.get("redirect_uris"):
            raise OAuthFailure("invalid_redirect_uri", "redirect_uris is required")
        if method in ("client_secret_basic", "client_secret_post"):
            meta["client_secret"] = secrets.token_urlsafe(24)
        if method == "private_key_jwt" and not (meta.get("jwks") or meta.get("jwks_uri")):
            raise OAuthFailure("invalid_client_metadata", "private_key_jwt needs jwks or jwks_uri")
        client_id = "dcr-" + secrets.token_hex(8)
        client = client_from_metadata(meta, "dcr", client_id)
        self._register(client)
        answer = {
            **client.metadata,
            "client_id": client_id,
            "client_id_issued_at": int(time.time()),
        }
        if client.secret is not None:
            answer["client_secret"] = client.secret
            answer["client_secret_expires_at"] = 0
        if self.registration_padding:  # a large (valid) answer: the client must read it all
            answer["x_padding"] = "p" * self.registration_padding
        for name, value in self.opt.register_answer.items():  # hostile: the answer lies
            if value is None:
                answer.pop(name, None)
            else:
                answer[name] = value
        return json_answer(answer, 201, NO_STORE)

    def _is_cimd_id(self, client_id: str) -> bool:
        parts = urlsplit(client_id)
        if parts.scheme == "https":
            return parts.path not in ("", "/")
        return parts.scheme == "http" and parts.hostname in ("127.0.0.1", "localhost", "::1")

    async def _cimd(self, client_id: str) -> Client:
        """Fetch a client ID metadata document and register its client (kind ``cimd``).

        A document hosted here (``PUT /admin/client-docs/<name>``) whose ``client_id`` is
        this URL is read from memory instead: an ``https`` client id needs no TLS server.
        """
        hosted = self.hosted_by_id.get(client_id)
        if hosted is not None:
            async with self._session_get().get(f"{self.base}/client-docs/{hosted}") as resp:
                status, body = resp.status, await resp.read()
            return self._cimd_check(client_id, status, body, local=True)
        try:
            async with self._session_get().get(client_id) as resp:
                status = resp.status
                body = await resp.read()
        except (aiohttp.ClientError, TimeoutError) as e:
            self.event("cimd_fetched", url=client_id, ok=False, reason=type(e).__name__)
            raise OAuthFailure(
                "invalid_client", "the client metadata document is unreadable"
            ) from None
        return self._cimd_check(client_id, status, body, local=False)

    def _cimd_check(self, client_id: str, status: int, body: bytes, local: bool) -> Client:
        try:
            doc = orjson.loads(body) if status == 200 else None
        except orjson.JSONDecodeError:
            doc = None
        why = None
        if not isinstance(doc, dict):
            why = f"fetching it answered {status}, not a JSON object"
        elif doc.get("client_id") != client_id:
            why = "its client_id is not its URL"
        elif not doc.get("redirect_uris"):
            why = "it has no redirect_uris"
        elif doc.get("token_endpoint_auth_method", "none") in (
            "client_secret_basic",
            "client_secret_post",
        ):
            why = "a metadata document client cannot use a client secret"
        self.event("cimd_fetched", url=client_id, ok=why is None, reason=why, local=local)
        if why is not None:
            raise OAuthFailure("invalid_client", f"client metadata document refused: {why}")
        assert isinstance(doc, dict)
        client = client_from_metadata(
            {**doc, "token_endpoint_auth_method": doc.get("token_endpoint_auth_method", "none")},
            "cimd",
            client_id,
        )
        self._register(client)
        return client

    async def _client(self, client_id: str | None) -> Client:
        if not client_id:
            raise OAuthFailure("invalid_client", "client_id is missing", 401)
        if self.opt.cimd and self._is_cimd_id(client_id):
            return await self._cimd(client_id)
        client = self.state.clients.get(client_id)
        if client is None:
            raise OAuthFailure("invalid_client", "unknown client", 401)
        return client

    async def _authenticate(self, request: web.Request, form: dict[str, str]) -> tuple[Client, str]:
        """The calling client and how it authenticated (token and revocation endpoints)."""
        header = request.headers.get("Authorization", "")
        if header.startswith("Basic "):
            try:
                raw = base64.b64decode(header[6:], validate=True).decode()
                cid, _, secret = raw.partition(":")
                cid, secret = unquote(cid.replace("+", " ")), unquote(secret.replace("+", " "))
            except (ValueError, UnicodeDecodeError):
                raise OAuthFailure("invalid_client", "malformed Basic credentials", 401) from None
            method = "client_secret_basic"
            if form.get("client_id") not in (None, cid):
                raise OAuthFailure("invalid_request", "client_id differs from the Basic user")
        elif form.get("client_assertion_type") == JWT_BEARER:
            return await self._assertion(form)
        elif "client_secret" in form:
            method, cid, secret = (
                "client_secret_post",
                form.get("client_id", ""),
                form["client_secret"],
            )
        else:
            client = await self._client(form.get("client_id"))
            if not client.allows("none"):
                raise OAuthFailure("invalid_client", "this client must authenticate", 401)
            return client, "none"
        client = await self._client(cid)
        if not client.allows(method) or client.secret is None:
            raise OAuthFailure("invalid_client", f"{method} is not this client's method", 401)
        if not secrets.compare_digest(client.secret.encode(), secret.encode()):
            raise OAuthFailure("invalid_client", "wrong client secret", 401)
        return client, method

    async def _assertion(self, form: dict[str, str]) -> tuple[Client, str]:
        from joserfc import jwt
        from joserfc.errors import JoseError
        from joserfc.jwk import KeySet

        assertion = form.get("client_assertion", "")
        try:  # an unverified look at the claims, to find the client and its keys
            payload = assertion.split(".")[1]
            claims = orjson.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
        except (IndexError, ValueError, orjson.JSONDecodeError):
            raise OAuthFailure("invalid_client", "client_assertion is not a JWT", 401) from None
        cid = form.get("client_id") or (claims.get("iss") if isinstance(claims, dict) else None)
        client = await self._client(cid if isinstance(cid, str) else None)
        if not client.allows("private_key_jwt"):
            raise OAuthFailure("invalid_client", "private_key_jwt is not this client's method", 401)
        jwks = client.jwks
        if jwks is None and client.jwks_uri:
            async with self._session_get().get(client.jwks_uri) as resp:
                jwks = orjson.loads(await resp.read())
        try:
            keys = KeySet.import_key_set(jwks or {"keys": []})  # type: ignore[arg-type]
            token = jwt.decode(assertion, keys, algorithms=["RS256", "ES256", "PS256"])
            registry = jwt.JWTClaimsRegistry(
                iss={"essential": True, "value": client.client_id},
                sub={"essential": True, "value": client.client_id},
                aud={"essential": True, "values": [self.endpoint("token"), self.issuer]},
                exp={"essential": True},
                jti={"essential": True},
            )
            registry.validate(token.claims)
        except (JoseError, ValueError) as e:
            raise OAuthFailure("invalid_client", f"client_assertion refused: {e}", 401) from None
        jti = str(token.claims["jti"])
        if jti in self.state.seen_jti:
            raise OAuthFailure("invalid_client", "client_assertion replayed (jti seen)", 401)
        self.state.seen_jti.add(jti)
        return client, "private_key_jwt"
