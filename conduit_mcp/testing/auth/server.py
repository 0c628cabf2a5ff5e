"""A real OAuth 2.1 authorization server for tests, on aiohttp.web, run as a subprocess.

``python -m conduit_mcp.testing.auth.server --port 0 [options]`` prints ``listening <port>
<issuer>`` once it accepts connections. It serves RFC 8414 and OpenID discovery metadata,
dynamic registration (RFC 7591), client ID metadata documents (it fetches them), an
authorization endpoint that approves at once (or, with ``--require-person``, answers a login
page a test submits), the token endpoint (authorization_code with PKCE, refresh_token with
rotation and reuse detection, client_credentials with client_secret_basic/post and
private_key_jwt), revocation (RFC 7009), introspection (RFC 7662) for the protected MCP server,
and ``/admin/*`` endpoints that let a test revoke, expire, change the issuer or host a client
metadata document. Every request is logged (``--log``). authlib computes the PKCE challenge,
joserfc verifies client assertions; the rest is plain code. The manual is docs/testing.md,
"The test authorization server"; the rules live in :mod:`.state`, the command line in
:mod:`.options`.
"""

from __future__ import annotations

import asyncio
import html
import secrets
import signal
import sys
from typing import Any
from urllib.parse import urlsplit

import orjson
from aiohttp import web

from ..common.dpop_proofs import ProofRefused
from ..common.event_log import EventLog
from ..common.split_body import write_split
from ..common.tls import server_context
from .assertions import JWT_BEARER_GRANT, TOKEN_EXCHANGE, Assertions
from .base import NO_STORE, json_answer, with_query
from .clients import ClientsMixin
from .options import BAD_TOKEN_CHARS, AuthOptions, check_hostile, options_from_args
from .state import OAuthFailure, client_from_metadata, redirect_uri_matches

__all__ = ["AuthServer", "main"]


class AuthServer(ClientsMixin, Assertions):
    """The aiohttp application: the endpoints."""

    def app(self) -> web.Application:
        app = web.Application(middlewares=[self._middleware])
        p = self.opt.issuer_path
        kinds = {"oauth": ["oauth-authorization-server"], "oidc": ["openid-configuration"]}
        kinds["both"] = kinds["oauth"] + kinds["oidc"]
        for suffix in kinds.get(self.opt.metadata, []):
            paths = {f"/.well-known/{suffix}{p}"}
            if suffix == "openid-configuration" and p:
                paths.add(f"{p}/.well-known/{suffix}")
            if self.opt.root_metadata:
                paths.add(f"/.well-known/{suffix}")
            for path in sorted(paths):
                app.router.add_get(path, self.metadata)
        app.router.add_get(f"{p}/authorize", self.authorize)
        app.router.add_post(f"{p}/login", self.login)
        app.router.add_post(f"{p}/token", self.token)
        if self.opt.dcr:
            app.router.add_post(f"{p}/register", self.register)
        app.router.add_post(f"{p}/revoke", self.revoke)
        app.router.add_post(f"{p}/introspect", self.introspect)
        app.router.add_get(f"{p}/jwks", self.jwks)
        app.router.add_post("/admin/{action}", self.admin)
        app.router.add_get("/admin/clients", self.admin_clients)
        app.router.add_put("/admin/client-docs/{name}", self.put_client_doc)
        app.router.add_get("/client-docs/{name}", self.get_client_doc)
        app.on_cleanup.append(self._close_session)
        return app

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Any) -> web.StreamResponse:
        error: str | None = None
        try:
            response: web.StreamResponse = await handler(request)
        except OAuthFailure as e:
            error = e.error
            headers = {**NO_STORE, **e.headers}
            if e.status == 401 and request.headers.get("Authorization", "").startswith("Basic"):
                headers["WWW-Authenticate"] = 'Basic realm="test-as"'
            body = {"error": e.error, "error_description": e.description}
            response = json_answer(body, e.status, headers)
        except web.HTTPException as e:
            response = e
        except Exception as e:  # a bug of this server: logged, answered 500
            error = f"server_error: {type(e).__name__}"  # the type only: a message may hold a token
            print(f"auth_server: {request.method} {request.path}: {error}", file=sys.stderr)
            body = {"error": "server_error", "error_description": type(e).__name__}
            response = json_answer(body, 500, dict(NO_STORE))
        record: dict[str, Any] = {
            "verb": request.method,
            "path": request.path,
            "query": dict(request.query),
            "headers": {k.lower(): v for k, v in request.headers.items()},
            "status": response.status,
        }
        for key in ("form", "json"):
            if key in request:
                record[key] = request[key]
        if error is not None:
            record["error"] = error
        if "location" in response.headers:
            record["location"] = response.headers["Location"]
        self.event("http", **record)
        delay = self.split_bodies
        if (
            delay is not None
            and isinstance(response, web.Response)
            and "/admin/" not in request.path
        ):
            return await write_split(request, response, delay)
        return response

    # ---- metadata ---------------------------------------------------------------------------

    def metadata_document(self, oidc: bool) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": self.endpoint("authorize"),
            "token_endpoint": self.endpoint("token"),
            "revocation_endpoint": self.endpoint("revoke"),
            "introspection_endpoint": self.endpoint("introspect"),
            "response_types_supported": ["code"],
            "grant_types_supported": [
                "authorization_code",
                "refresh_token",
                "client_credentials",
                JWT_BEARER_GRANT,
                TOKEN_EXCHANGE,
            ],
            "token_endpoint_auth_methods_supported": list(self.opt.auth_methods),
            "token_endpoint_auth_signing_alg_values_supported": ["RS256", "ES256"],
            "revocation_endpoint_auth_methods_supported": list(self.opt.auth_methods),
        }
        if self.opt.dcr:
            doc["registration_endpoint"] = self.endpoint("register")
        if self.opt.scopes:
            doc["scopes_supported"] = list(self.opt.scopes)
        if self.opt.code_challenge_methods:
            doc["code_challenge_methods_supported"] = list(self.opt.code_challenge_methods)
        if self.opt.iss_supported:
            doc["authorization_response_iss_parameter_supported"] = True
        if self.opt.cimd:
            doc["client_id_metadata_document_supported"] = True
        if self.opt.dpop:
            doc["dpop_signing_alg_values_supported"] = ["ES256", "ES384", "ES512"]
        if oidc:
            doc["jwks_uri"] = self.endpoint("jwks")
            doc["subject_types_supported"] = ["public"]
            doc["id_token_signing_alg_values_supported"] = ["RS256"]
        return doc

    async def metadata(self, request: web.Request) -> web.Response:
        if self.metadata_status is not None:
            return web.Response(status=self.metadata_status, text="metadata unavailable")
        return json_answer(self.metadata_document("openid-configuration" in request.path))

    async def jwks(self, request: web.Request) -> web.Response:
        return json_answer(self.public_jwks())

    # ---- authorization ----------------------------------------------------------------------

    def _scopes(self, requested: str | None, default: list[str]) -> list[str]:
        scopes = (requested or "").split()
        if not scopes:
            return list(default)
        unknown = [s for s in scopes if self.opt.scopes and s not in self.opt.scopes]
        if unknown:
            raise OAuthFailure("invalid_scope", f"unknown scope {' '.join(unknown)!r}")
        return list(dict.fromkeys(scopes))

    def _check_resource(self, resource: str | None, required: bool) -> None:
        if resource is None:
            if required:
                raise OAuthFailure("invalid_target", "resource is required")
            return
        parts = urlsplit(resource)
        if parts.scheme not in ("http", "https") or not parts.netloc or parts.fragment:
            raise OAuthFailure("invalid_target", "resource must be an absolute URI, no fragment")
        if self.opt.resources and resource not in self.opt.resources:
            raise OAuthFailure("invalid_target", "this server issues no tokens for that resource")

    def _redirect(self, redirect_uri: str, params: dict[str, str]) -> web.Response:
        if self.iss_mode == "correct":
            params["iss"] = self.issuer
        elif self.iss_mode == "wrong":
            params["iss"] = self.issuer + "/wrong"
        return web.Response(status=302, headers={"Location": with_query(redirect_uri, params)})

    def _page(self, status: int, title: str, body: str) -> web.Response:
        text = (
            f"<!doctype html><title>{html.escape(title)}</title><h1>{html.escape(title)}</h1>{body}"
        )
        return web.Response(status=status, text=text, content_type="text/html")

    async def authorize(self, request: web.Request) -> web.Response:
        q = dict(request.query)
        try:
            client = await self._client(q.get("client_id"))
        except OAuthFailure as e:
            return self._page(400, "Unknown client", f"<p>{html.escape(e.description)}</p>")
        redirect_uri = q.get("redirect_uri")
        if not redirect_uri or not redirect_uri_matches(client.redirect_uris, redirect_uri):
            return self._page(400, "Bad redirect_uri", "<p>not registered for this client</p>")
        state = {"state": q["state"]} if "state" in q else {}
        try:
            if q.get("response_type") != "code":
                raise OAuthFailure("unsupported_response_type", "only response_type=code")
            challenge, method = q.get("code_challenge"), q.get("code_challenge_method", "plain")
            if challenge is None and self.opt.code_challenge_methods:
                raise OAuthFailure("invalid_request", "code_challenge is required (PKCE)")
            if challenge is not None and method not in self.opt.code_challenge_methods:
                raise OAuthFailure("invalid_request", f"code_challenge_method {method} unsupported")
            self._check_resource(q.get("resource"), required=True)
            scope = self._scopes(q.get("scope"), self.opt.default_scopes)
        except OAuthFailure as e:
            self.event("authorize_refused", client_id=client.client_id, error=e.error)
            return self._redirect(
                redirect_uri, {"error": e.error, "error_description": e.description, **state}
            )
        grant = {
            "client_id": client.client_id,
            "redirect_uri": redirect_uri,
            "challenge": challenge or "",
            "method": method if challenge is not None else "",
            "scope": " ".join(scope),
            "resource": q["resource"],
            **state,
        }
        if self.opt.require_person:
            request_id = secrets.token_urlsafe(16)
            self.pending[request_id] = grant
            form = (
                f'<form method="post" action="{html.escape(self.endpoint("login"))}">'
                f'<input type="hidden" name="request_id" value="{request_id}">'
                f'<input name="subject" value="{html.escape(self.opt.subject)}">'
                '<button name="decision" value="approve">Approve</button>'
                '<button name="decision" value="deny">Deny</button></form>'
            )
            return self._page(200, f"Authorize {client.client_id}", form)
        return self._approve(grant, self.opt.subject)

    def _approve(self, grant: dict[str, str], subject: str) -> web.Response:
        scope = grant["scope"].split()
        code = self.state.new_code(
            client_id=grant["client_id"],
            redirect_uri=grant["redirect_uri"],
            challenge=grant["challenge"] or None,
            method=grant["method"] or None,
            scope=scope,
            resource=grant["resource"],
            sub=subject,
        )
        self.event(
            "authorized",
            client_id=grant["client_id"],
            sub=subject,
            scope=scope,
            resource=grant["resource"],
            redirect_uri=grant["redirect_uri"],
        )
        params = {"code": code}
        if "state" in grant:
            params["state"] = grant["state"]
        return self._redirect(grant["redirect_uri"], params)

    async def login(self, request: web.Request) -> web.Response:
        form = await self._form(request)
        grant = self.pending.pop(form.get("request_id", ""), None)
        if grant is None:
            return self._page(400, "Unknown or spent authorization request", "")
        if form.get("decision", "approve") != "approve":
            params = {"error": "access_denied", "error_description": "the person said no"}
            if "state" in grant:
                params["state"] = grant["state"]
            return self._redirect(grant["redirect_uri"], params)
        return self._approve(grant, form.get("subject") or self.opt.subject)

    # ---- tokens -----------------------------------------------------------------------------

    async def token(self, request: web.Request) -> web.Response:
        form = await self._form(request)
        if self.opt.token_error is not None:  # hostile: refuses everything
            raise OAuthFailure(self.opt.token_error, "refused by --token-error")
        grant_type = form.get("grant_type")
        grants = ("authorization_code", "refresh_token", "client_credentials", JWT_BEARER_GRANT)
        if grant_type not in (*grants, TOKEN_EXCHANGE):
            raise OAuthFailure("unsupported_grant_type", f"grant_type {grant_type!r} unsupported")
        client, method = await self._authenticate(request, form)
        if grant_type == TOKEN_EXCHANGE:
            return json_answer(self.token_exchange(client, form), 200, NO_STORE)
        jkt = self._dpop(request)
        resource = form.get("resource")
        refresh = not self.opt.no_refresh
        kind = grant_type
        if grant_type == JWT_BEARER_GRANT:
            self._check_resource(resource, required=False)
            sub, assertion = self.jwt_bearer(client, form, resource)
            kind = f"jwt-bearer:{assertion}"
            scope = self._scopes(form.get("scope"), self.opt.default_scopes)
            # No refresh token: the assertion is the grant to repeat (the extensions' examples).
            family, refresh = secrets.token_hex(8), False
        elif grant_type == "authorization_code":
            code = self.state.redeem_code(
                client,
                form.get("code"),
                form.get("redirect_uri"),
                form.get("code_verifier"),
                resource,
            )
            sub, scope, family = code.sub, code.scope, code.family
        elif grant_type == "refresh_token":
            try:
                old = self.state.spend_refresh(client, form.get("refresh_token"))
            except OAuthFailure as e:
                if "reused" in e.description:
                    self.event("refresh_reuse", client_id=client.client_id)
                raise
            self._check_resource(resource, required=False)
            if resource is not None and resource != old.resource:
                raise OAuthFailure("invalid_target", "resource differs from the grant's")
            scope = self._scopes(form.get("scope"), old.scope)
            if not set(scope) <= set(old.scope):
                raise OAuthFailure("invalid_scope", "a refresh cannot widen the scope")
            sub, family, resource = old.sub, old.family, old.resource
            if old.jkt is not None and jkt != old.jkt:  # RFC 9449 section 5
                raise OAuthFailure("invalid_grant", "the refresh token is bound to another key")
            if not self.state.rotate:
                refresh = False  # the client keeps its refresh token
        else:
            if method == "none":
                raise OAuthFailure("unauthorized_client", "a public client has no credentials")
            if client.grant_types is not None and "client_credentials" not in client.grant_types:
                raise OAuthFailure("unauthorized_client", "client_credentials not registered")
            self._check_resource(resource, required=False)
            scope = self._scopes(form.get("scope"), self.opt.default_scopes)
            sub, family, refresh = client.client_id, secrets.token_hex(8), False
        answer = self.state.issue(
            client_id=client.client_id,
            sub=sub,
            scope=scope,
            resource=resource,
            family=family,
            grant=kind,
            refresh=refresh,
            jkt=jkt,
        )
        self._hostile_token(answer)
        self.event(
            "token",
            grant=kind,
            client_id=client.client_id,
            auth_method=method,
            sub=sub,
            scope=scope,
            resource=resource,
            family=family,
            refresh="refresh_token" in answer,
            dpop=jkt is not None,
        )
        return json_answer(answer, 200, NO_STORE)

    def _dpop(self, request: web.Request) -> str | None:
        """With ``--dpop``: the thumbprint of the key the token request proved (None: no
        proof, a Bearer token); a bad or replayed proof, or one without the nonce asked
        for (``--dpop-nonce``), is refused (RFC 9449 sections 4.3, 5 and 8)."""
        proofs = request.headers.getall("DPoP", [])
        if not self.opt.dpop or not proofs:
            return None
        try:
            return self.proofs.check(proofs, "POST", self.endpoint("token"))
        except ProofRefused as e:
            self.event("dpop_refused", error=e.error, why=e.description)
            headers = {"DPoP-Nonce": self.proofs.nonce} if self.proofs.require_nonce else {}
            raise OAuthFailure(e.error, e.description, 400, headers) from None

    def _hostile_token(self, answer: dict[str, Any]) -> None:
        """``--expires-in`` and ``--bad-access-token``: what the answer says, not what the
        token is (the server still knows the real token under its real lifetime)."""
        if self.opt.expires_in is not None:
            answer["expires_in"] = self.opt.expires_in
        if self.opt.bad_access_token is not None:
            token = answer["access_token"]
            bad = BAD_TOKEN_CHARS[self.opt.bad_access_token]
            answer["access_token"] = token[:8] + bad + token[8:]

    async def revoke(self, request: web.Request) -> web.Response:
        form = await self._form(request)
        client, _ = await self._authenticate(request, form)
        token = form.get("token", "")
        entry = self.state.tokens.get(token)
        n = 0
        if entry is not None and entry.client_id == client.client_id:
            n = self.state.revoke(token)
        self.event("revoked", by="client", client_id=client.client_id, count=n)
        return web.Response(status=200, headers=NO_STORE)

    async def introspect(self, request: web.Request) -> web.Response:
        form = await self._form(request)
        answer = self.state.introspect(form.get("token"), self.issuer)
        self.event("introspected", active=answer["active"], sub=answer.get("sub"))
        return json_answer(answer, 200, NO_STORE)

    # ---- admin (the test's levers) ----------------------------------------------------------

    async def admin(self, request: web.Request) -> web.Response:
        action = request.match_info["action"]
        body = await self._body_json(request) if request.can_read_body else {}
        if not isinstance(body, dict):
            raise OAuthFailure("invalid_request", "the body must be a JSON object")
        answer: dict[str, Any] = {}
        if action == "revoke":
            if body.get("all"):
                answer["revoked"] = sum(
                    self.state.revoke_family(f) for f in list(self.state.families)
                )
            elif body.get("client_id") is not None or body.get("sub") is not None:
                families = {
                    t.family
                    for t in self.state.tokens.values()
                    if body.get("client_id") in (None, t.client_id)
                    and body.get("sub") in (None, t.sub)
                }
                answer["revoked"] = sum(self.state.revoke_family(f) for f in families)
            else:
                answer["revoked"] = self.state.revoke(str(body.get("token", "")))
        elif action == "expire":
            answer["expired"] = self.state.expire_access()
        elif action == "dpop-nonce":  # a new nonce: the one clients hold is stale
            answer["rotated"] = bool(self.proofs.rotate_nonce())
        elif action == "issuer":
            self.issuer_override = body.get("issuer")
            answer["issuer"] = self.issuer
        elif action == "iss":
            mode = body.get("mode")
            if mode not in ("correct", "wrong", "none"):
                raise OAuthFailure("invalid_request", "mode must be correct, wrong or none")
            self.iss_mode = mode
        elif action == "clients":
            client_id = body.get("client_id")
            if not isinstance(client_id, str):
                raise OAuthFailure("invalid_request", "client_id is required")
            self._register(client_from_metadata(body, "pre", client_id))
        elif action == "hostile":
            levers = {
                "split_bodies": self.split_bodies,
                "registration_padding": self.registration_padding,
                "metadata_status": self.metadata_status,
                **body,
            }
            try:
                check_hostile(
                    levers["split_bodies"],
                    levers["registration_padding"],
                    levers["metadata_status"],
                )
            except ValueError as e:
                raise OAuthFailure("invalid_request", str(e)) from None
            self.split_bodies = levers["split_bodies"]
            self.registration_padding = levers["registration_padding"]
            self.metadata_status = levers["metadata_status"]
            answer = {
                k: levers[k] for k in ("split_bodies", "registration_padding", "metadata_status")
            }
        elif action == "reset":
            if body.get("clients", True):
                self.state.clients = {
                    k: c for k, c in self.state.clients.items() if c.kind == "pre"
                }
            if body.get("tokens", True):
                answer["revoked"] = sum(
                    self.state.revoke_family(f) for f in list(self.state.families)
                )
        else:
            raise web.HTTPNotFound()
        self.event("admin", action=action)
        return json_answer(answer)

    async def admin_clients(self, request: web.Request) -> web.Response:
        return json_answer([c.summary() for c in self.state.clients.values()])

    async def put_client_doc(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        body = await request.read()
        self.client_docs[name] = body
        try:
            client_id = orjson.loads(body).get("client_id")
        except (orjson.JSONDecodeError, AttributeError):
            client_id = None
        if isinstance(client_id, str):
            self.hosted_by_id[client_id] = name
        return json_answer({"url": f"{self.base}/client-docs/{name}"})

    async def get_client_doc(self, request: web.Request) -> web.Response:
        body = self.client_docs.get(request.match_info["name"])
        if body is None:
            raise web.HTTPNotFound()
        return web.Response(body=body, content_type="application/json")


async def serve(options: AuthOptions) -> int:
    log = EventLog(options.log_path) if options.log_path else None
    server = AuthServer(options, log)
    stop = asyncio.get_running_loop().create_future()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set_result, None)
    runner = web.AppRunner(server.app(), access_log=None)
    await runner.setup()
    tls = server_context(options.tls_cert, options.tls_key, options.tls_client_ca)
    site = web.TCPSite(runner, "127.0.0.1", options.port, reuse_address=True, ssl_context=tls)
    await site.start()
    server.port = runner.addresses[0][1]
    server.event("started", argv=sys.argv[1:], issuer=server.issuer, port=server.port)
    print(f"listening {server.port} {server.real_issuer}", flush=True)
    await stop
    server.event("exit", reason="sigterm")
    await runner.cleanup()
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        options = options_from_args(argv)
    except ValueError as e:
        print(f"auth_server: {e}", file=sys.stderr)
        return 2
    return asyncio.run(serve(options))


if __name__ == "__main__":
    sys.exit(main())
