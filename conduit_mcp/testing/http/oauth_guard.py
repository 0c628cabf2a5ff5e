"""The OAuth-protected side of the scripted MCP server's HTTP mode (``--require-oauth AS``).

An RFC 9728 resource server: it serves protected resource metadata at both well-known paths,
answers ``401`` with a ``WWW-Authenticate: Bearer resource_metadata=..., scope=...``
challenge to a request without a valid token, validates bearer tokens by RFC 7662
introspection at the authorization server (the token's ``aud`` must be this server's
canonical URL), and answers ``403 insufficient_scope`` when the token lacks the scope of the
operation (``--oauth-scope`` for every request, ``--tool-scope TOOL=SCOPE`` for one tool).
What it decided is recorded on each ``http`` log event (``oauth``: subject, client, scopes;
or ``oauth_refused``). ``POST /admin/oauth`` moves it to another authorization server at run
time. The manual is docs/testing.md, "The protected MCP server".
"""

from __future__ import annotations

import ssl
import time
from collections.abc import Callable
from typing import Any

import aiohttp
import orjson
from aiohttp import web

from ..common.dpop_proofs import ProofChecker, ProofRefused
from ..common.split_body import write_split
from ..scripted.options import Config

__all__ = ["METADATA_FAULTS", "OAuthGuard"]

#: What ``metadata_fault`` may be set to.
METADATA_FAULTS = (None, "unavailable", "split")
#: The pause between the two segments of a split metadata answer (seconds).
SPLIT_DELAY = 0.2


def _quote(value: str) -> str:
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


class OAuthGuard:
    """Bearer checks for ``/mcp``, the metadata documents and the admin lever."""

    def __init__(self, config: Config, port: Callable[[], int], event: Callable[..., None]) -> None:
        assert config.require_oauth is not None
        self.authorization_server = config.require_oauth.rstrip("/")
        self.introspection_url = config.introspection_url
        self.introspection_cert = config.introspection_cert
        self.prm_resource = config.prm_resource
        self.scope = config.oauth_scope.split()
        self.tool_scopes = {k: v.split() for k, v in config.tool_scopes.items()}
        self.prm_scopes = config.prm_scopes
        self.prm_at = config.prm_at
        self.cache_seconds = config.introspection_cache
        self.metadata_param = not config.no_resource_metadata_param
        # DPoP (RFC 9449): a bound token (introspection's cnf.jkt) is checked with its proof
        # always; --require-dpop refuses Bearer tokens, --dpop-nonce asks for a nonce.
        self.require_dpop = config.require_dpop
        self.proofs = ProofChecker(require_nonce=config.dpop_nonce)
        # A lever of POST /admin/oauth: "unavailable" (503), "split" (the document in two
        # segments), or None (the document, whole).
        self.metadata_fault: str | None = None
        self._port = port
        self._origin = "https" if config.tls_cert else "http"  # --tls-cert: https URLs
        self._event = event
        self._cache: dict[str, tuple[float, dict[str, Any]]] = {}
        self._session: aiohttp.ClientSession | None = None

    # ---- documents --------------------------------------------------------------------------

    @property
    def resource(self) -> str:
        """This server's canonical URI (what a token's audience must be)."""
        return f"{self._origin}://127.0.0.1:{self._port()}/mcp"

    def metadata_paths(self) -> list[str]:
        """Where the metadata is served (``--prm-at``): path-aware, root, both or none."""
        root = "/.well-known/oauth-protected-resource"
        return {"both": [root + "/mcp", root], "path": [root + "/mcp"], "root": [root]}.get(
            self.prm_at, []
        )

    @property
    def metadata_url(self) -> str | None:
        """The challenge's ``resource_metadata``: the first URL served, if any."""
        paths = self.metadata_paths()
        return f"{self._origin}://127.0.0.1:{self._port()}{paths[0]}" if paths else None

    def metadata(self) -> dict[str, Any]:
        scopes = self.prm_scopes
        if scopes is None:
            every = self.scope + [s for v in self.tool_scopes.values() for s in v]
            scopes = list(dict.fromkeys(every))
        doc: dict[str, Any] = {
            "resource": self.prm_resource or self.resource,
            "authorization_servers": [self.authorization_server],
            "bearer_methods_supported": ["header"],
        }
        if scopes:
            doc["scopes_supported"] = scopes
        if self.require_dpop:
            doc["dpop_bound_access_tokens_required"] = True
            doc["dpop_signing_alg_values_supported"] = ["ES256", "ES384", "ES512"]
        return doc

    async def metadata_answer(self, request: web.Request) -> web.StreamResponse:
        """The protected resource metadata, or the fault ``metadata_fault`` names."""
        if self.metadata_fault == "unavailable":
            return web.Response(status=503, text="the metadata is temporarily unavailable")
        answer = web.Response(body=orjson.dumps(self.metadata()), content_type="application/json")
        if self.metadata_fault == "split":
            return await write_split(request, answer, SPLIT_DELAY)
        return answer

    def _challenge(
        self, status: int, scope: list[str], error: str | None, why: str, dpop: bool = False
    ) -> web.Response:
        params = []
        dpop = dpop or self.require_dpop  # RFC 9449 section 7.1: the DPoP scheme
        if error is not None:
            params.append(f"error={_quote(error)}")
        if self.metadata_param and self.metadata_url is not None:
            params.append(f"resource_metadata={_quote(self.metadata_url)}")
        if scope:
            params.append(f"scope={_quote(' '.join(scope))}")
        if error is not None:
            params.append(f"error_description={_quote(why)}")
        scheme = "DPoP" if dpop else "Bearer"
        if dpop:
            params.append('algs="ES256 ES384 ES512"')
        header = f"{scheme} " + ", ".join(params) if params else scheme
        body = {"error": error or "unauthorized", "error_description": why}
        headers = {"WWW-Authenticate": header}
        if error == "use_dpop_nonce":
            headers["DPoP-Nonce"] = self.proofs.nonce
        return web.Response(
            status=status, body=orjson.dumps(body), content_type="application/json", headers=headers
        )

    # ---- the check ----------------------------------------------------------------------------

    async def _tool(self, request: web.Request) -> str | None:
        if request.method != "POST":
            return None
        try:
            msg = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            return None
        if isinstance(msg, dict) and msg.get("method") == "tools/call":
            params = msg.get("params")
            name = params.get("name") if isinstance(params, dict) else None
            return name if isinstance(name, str) else None
        return None

    async def _introspect(self, token: str) -> dict[str, Any] | None:
        now = time.monotonic()
        cached = self._cache.get(token)
        if cached is not None and cached[0] > now:
            return cached[1]
        if self._session is None:
            tls: ssl.SSLContext | bool = True
            if self.introspection_cert is not None:  # SSL_CERT_FILE names a private CA
                tls = ssl.create_default_context()
                tls.load_cert_chain(*self.introspection_cert)
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=5), connector=aiohttp.TCPConnector(ssl=tls)
            )
        url = self.introspection_url or f"{self.authorization_server}/introspect"
        try:
            async with self._session.post(url, data={"token": token}) as resp:
                if resp.status != 200:
                    return None
                answer = orjson.loads(await resp.read())
        except (aiohttp.ClientError, TimeoutError, orjson.JSONDecodeError):
            return None
        if not isinstance(answer, dict):
            return None
        if self.cache_seconds > 0:
            self._cache[token] = (now + self.cache_seconds, answer)
        return answer

    async def check(self, request: web.Request) -> web.Response | None:
        """None when the request may go on (``request["oauth"]`` set), else the refusal."""
        needed = list(self.scope)
        tool = await self._tool(request)
        if tool is not None:
            needed += [s for s in self.tool_scopes.get(tool, []) if s not in needed]
        header = request.headers.get("Authorization", "")
        scheme, _, token = header.partition(" ")
        scheme = scheme.lower()
        if scheme not in ("bearer", "dpop") or not token.strip():
            request["oauth_refused"] = "no_token"
            return self._challenge(401, self.scope, None, "a bearer token is required")
        token = token.strip()
        answer = await self._introspect(token)
        if answer is None:
            request["oauth_refused"] = "introspection_failed"
            self._event("introspection_failed", authorization_server=self.authorization_server)
            return web.Response(status=503, text="the authorization server did not answer")
        if not answer.get("active"):
            request["oauth_refused"] = "invalid_token"
            return self._challenge(401, self.scope, "invalid_token", "the token is not active")
        exp = answer.get("exp")
        if isinstance(exp, (int, float)) and exp <= time.time():
            request["oauth_refused"] = "expired"
            return self._challenge(401, self.scope, "invalid_token", "the token has expired")
        aud = answer.get("aud")
        audiences = aud if isinstance(aud, list) else [aud]
        if self.resource not in audiences:
            request["oauth_refused"] = "wrong_audience"
            return self._challenge(
                401, self.scope, "invalid_token", "the token is for another resource"
            )
        refused = self._dpop(request, scheme, token, answer)
        if refused is not None:
            return refused
        held = str(answer.get("scope", "")).split()
        identity = {"sub": answer.get("sub"), "client_id": answer.get("client_id"), "scopes": held}
        if scheme == "dpop":
            identity["dpop"] = True
        missing = [s for s in needed if s not in held]
        if missing:
            request["oauth_refused"] = "insufficient_scope"
            request["oauth"] = identity
            return self._challenge(
                403, needed, "insufficient_scope", f"this needs scope {' '.join(missing)}"
            )
        request["oauth"] = identity
        return None

    def _dpop(
        self, request: web.Request, scheme: str, token: str, answer: dict[str, Any]
    ) -> web.Response | None:
        """RFC 9449 section 7: a DPoP-bound token comes with the DPoP scheme and a proof of
        its key for this very request (never seen before); a Bearer one only where DPoP is
        not required. None when the request may go on."""
        cnf = answer.get("cnf")
        jkt = cnf.get("jkt") if isinstance(cnf, dict) else None
        if jkt is None and scheme == "bearer":
            if not self.require_dpop:
                return None
            request["oauth_refused"] = "dpop_required"
            return self._challenge(401, self.scope, "invalid_token", "a DPoP token is required")
        if jkt is None or scheme != "dpop":
            request["oauth_refused"] = "dpop_scheme"
            why = "a DPoP-bound token goes with the DPoP scheme, and only such a token does"
            return self._challenge(401, self.scope, "invalid_token", why, dpop=True)
        try:
            proved = self.proofs.check(
                request.headers.getall("DPoP", []), request.method, str(request.url), token
            )
        except ProofRefused as e:
            request["oauth_refused"] = e.error
            return self._challenge(401, self.scope, e.error, e.description, dpop=True)
        if proved != jkt:
            request["oauth_refused"] = "invalid_dpop_proof"
            why = "the proof's key is not the one the token is bound to"
            return self._challenge(401, self.scope, "invalid_dpop_proof", why, dpop=True)
        return None

    # ---- the lever ----------------------------------------------------------------------------

    async def admin(self, request: web.Request) -> web.Response:
        """``POST /admin/oauth`` ``{"authorization_server"?, "introspection_url"?,
        "prm_resource"?, "scope"?, "tool_scopes"?, "metadata_fault"?}``: change them;
        answers the metadata."""
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError:
            body = None
        if not isinstance(body, dict):
            return web.Response(status=400, text="a JSON object, please")
        if "authorization_server" in body:
            self.authorization_server = str(body["authorization_server"]).rstrip("/")
            self._cache.clear()
        if "introspection_url" in body:
            self.introspection_url = body["introspection_url"]
        if "prm_resource" in body:
            self.prm_resource = body["prm_resource"]
        if "scope" in body:
            self.scope = str(body["scope"]).split()
        if "metadata_fault" in body:
            fault = body["metadata_fault"]
            if fault not in METADATA_FAULTS:
                return web.Response(status=400, text="metadata_fault: unavailable, split or null")
            self.metadata_fault = fault
        if body.get("dpop_nonce") == "rotate":
            self.proofs.rotate_nonce()
        if "tool_scopes" in body:
            self.tool_scopes = {k: str(v).split() for k, v in dict(body["tool_scopes"]).items()}
        self._event("oauth_changed", **{k: v for k, v in body.items()})
        return web.Response(body=orjson.dumps(self.metadata()), content_type="application/json")

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
