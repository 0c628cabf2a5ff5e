"""The test authorization server and the OAuth-protected scripted MCP server, over raw HTTP.

Every exchange is a real request to a real subprocess on loopback: the authorization server
through :meth:`AuthServerProcess.request` (plain HTTP, redirects not followed), the MCP server
through :class:`RawHttpPeer` (aiohttp). The person is played by :meth:`AuthServerProcess.approve`.
"""

from __future__ import annotations

import asyncio
import base64
import secrets
import time
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import orjson
import pytest
from authlib.oauth2.rfc7523 import private_key_jwt_sign
from authlib.oauth2.rfc7636 import create_s256_code_challenge
from joserfc.jwk import RSAKey

from conduit_mcp.testing import AuthServerProcess, ScriptedServer
from conduit_mcp.testing.raw.http import RawHttpPeer

pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::Warning")

REDIRECT = "http://127.0.0.1:9/callback"
RESOURCE = "http://127.0.0.1:1/mcp"
KEY = RSAKey.generate_key(2048)
PRIVATE_PEM = KEY.as_pem(private=True).decode()
PUBLIC_PEM = KEY.as_pem(private=False).decode()
CLIENTS = [
    {
        "client_id": "m2m-basic",
        "client_secret": "s3cret basic",
        "token_endpoint_auth_method": "client_secret_basic",
        "grant_types": ["client_credentials"],
    },
    {
        "client_id": "m2m-post",
        "client_secret": "s3cret-post",
        "token_endpoint_auth_method": "client_secret_post",
        "grant_types": ["client_credentials"],
    },
    {"client_id": "m2m-jwt", "public_key": PUBLIC_PEM, "grant_types": ["client_credentials"]},
    {"client_id": "pre-public", "redirect_uris": [REDIRECT]},
]


def run(coro: Any) -> Any:
    return asyncio.run(coro)


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    return verifier, create_s256_code_challenge(verifier)


def post_form(
    auth: AuthServerProcess, name: str, form: dict[str, str], headers: dict[str, str] | None = None
) -> tuple[int, Any]:
    hdrs = {"Content-Type": "application/x-www-form-urlencoded", **(headers or {})}
    status, _, body = auth.request("POST", auth.endpoint(name), urlencode(form).encode(), hdrs)
    return status, (orjson.loads(body) if body else None)


def basic(client_id: str, secret: str) -> dict[str, str]:
    from urllib.parse import quote

    raw = f"{quote(client_id, safe='')}:{quote(secret, safe='')}".encode()
    return {"Authorization": "Basic " + base64.b64encode(raw).decode()}


def register(auth: AuthServerProcess, **meta: Any) -> dict[str, Any]:
    body = {"redirect_uris": [REDIRECT], "token_endpoint_auth_method": "none", **meta}
    status, _, data = auth.request(
        "POST", auth.endpoint("register"), orjson.dumps(body), {"Content-Type": "application/json"}
    )
    assert status == 201, data
    result: dict[str, Any] = orjson.loads(data)
    return result


def authorize_url(
    auth: AuthServerProcess,
    client_id: str,
    challenge: str | None,
    *,
    scope: str | None = "mcp offline_access",
    resource: str | None = RESOURCE,
    redirect: str = REDIRECT,
    state: str = "st-1",
) -> str:
    q = {"response_type": "code", "client_id": client_id, "redirect_uri": redirect, "state": state}
    if challenge is not None:
        q |= {"code_challenge": challenge, "code_challenge_method": "S256"}
    if scope is not None:
        q["scope"] = scope
    if resource is not None:
        q["resource"] = resource
    return auth.endpoint("authorize") + "?" + urlencode(q)


def params(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def code_flow(
    auth: AuthServerProcess, client_id: str, scope: str = "mcp offline_access", **kw: Any
) -> dict[str, Any]:
    verifier, challenge = pkce()
    redirect = params(auth.approve(authorize_url(auth, client_id, challenge, scope=scope, **kw)))
    form = {
        "grant_type": "authorization_code",
        "code": redirect["code"],
        "redirect_uri": kw.get("redirect", REDIRECT),
        "code_verifier": verifier,
        "client_id": client_id,
        "resource": kw.get("resource", RESOURCE),
    }
    status, tokens = post_form(auth, "token", form)
    assert status == 200, tokens
    result: dict[str, Any] = tokens
    return result


def introspect(auth: AuthServerProcess, token: str) -> dict[str, Any]:
    status, answer = post_form(auth, "introspect", {"token": token})
    assert status == 200
    result: dict[str, Any] = answer
    return result


@pytest.fixture(scope="module")
def auth(tmp_path_factory: pytest.TempPathFactory) -> Any:
    with AuthServerProcess(
        tmp_path_factory.mktemp("as"),
        scopes="mcp,read,write,offline_access",
        client=[orjson.dumps(c).decode() for c in CLIENTS],
    ) as server:
        yield server


# ---- metadata ---------------------------------------------------------------------------------


def test_metadata_at_the_rfc8414_and_openid_urls(auth):
    docs = []
    for path in ("/.well-known/oauth-authorization-server", "/.well-known/openid-configuration"):
        status, _, body = auth.request("GET", auth.base + path)
        assert status == 200
        docs.append(orjson.loads(body))
    oauth, oidc = docs
    assert oauth["issuer"] == oidc["issuer"] == auth.issuer == auth.base
    assert oauth["code_challenge_methods_supported"] == ["S256"]
    assert oauth["authorization_response_iss_parameter_supported"] is True
    assert oauth["client_id_metadata_document_supported"] is True
    assert oauth["registration_endpoint"] == auth.issuer + "/register"
    assert oauth["scopes_supported"] == ["mcp", "read", "write", "offline_access"]
    assert oidc["jwks_uri"] == auth.issuer + "/jwks" and "jwks_uri" not in oauth


def test_metadata_options_path_issuer_and_omissions(tmp_path):
    with AuthServerProcess(
        tmp_path,
        issuer_path="/tenant1",
        metadata="oidc",
        code_challenge_methods="",
        no_iss_supported=True,
        no_cimd=True,
        no_dcr=True,
    ) as auth:
        assert auth.issuer == auth.base + "/tenant1"
        got = {}
        for path in (
            "/.well-known/oauth-authorization-server/tenant1",
            "/.well-known/openid-configuration/tenant1",
            "/tenant1/.well-known/openid-configuration",
            "/.well-known/openid-configuration",
        ):
            status, _, body = auth.request("GET", auth.base + path)
            got[path] = status
            if status == 200:
                doc = orjson.loads(body)
                assert doc["issuer"] == auth.issuer
                assert doc["token_endpoint"] == auth.issuer + "/token"
                for absent in (
                    "code_challenge_methods_supported",
                    "authorization_response_iss_parameter_supported",
                    "client_id_metadata_document_supported",
                    "registration_endpoint",
                ):
                    assert absent not in doc
        assert list(got.values()) == [404, 200, 200, 404]
        status, _, _ = auth.request("POST", auth.endpoint("register"), b"{}")
        assert status == 404


# ---- authorization code, PKCE, iss, resource ----------------------------------------------------


def test_dcr_then_code_flow_with_pkce_iss_and_resource(auth):
    reg = register(auth, application_type="native", client_name="t")
    assert reg["client_id"].startswith("dcr-") and "client_secret" not in reg
    verifier, challenge = pkce()
    url = authorize_url(auth, reg["client_id"], challenge)
    redirect = auth.approve(url)
    assert redirect.startswith(REDIRECT + "?")
    got = params(redirect)
    assert got["state"] == "st-1" and got["iss"] == auth.issuer
    form = {
        "grant_type": "authorization_code",
        "code": got["code"],
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
        "client_id": reg["client_id"],
        "resource": RESOURCE,
    }
    status, tokens = post_form(auth, "token", form)
    assert status == 200, tokens
    assert tokens["token_type"] == "Bearer" and tokens["scope"] == "mcp offline_access"
    assert tokens["expires_in"] == 3600 and tokens["refresh_token"]
    info = introspect(auth, tokens["access_token"])
    assert info["active"] and info["aud"] == RESOURCE and info["sub"] == "alice"
    assert info["client_id"] == reg["client_id"] and info["iss"] == auth.issuer
    # the code is spent; a second use revokes what it gave
    status, err = post_form(auth, "token", form)
    assert (status, err["error"]) == (400, "invalid_grant")
    assert introspect(auth, tokens["access_token"]) == {"active": False}
    # what the client sent and how it registered are in the log
    (registered,) = [e for e in auth.events("registered") if e["client_id"] == reg["client_id"]]
    assert registered["application_type"] == "native" and registered["kind"] == "dcr"
    assert auth.requests("/token")[-2]["form"]["code_verifier"] == verifier


@pytest.mark.parametrize(
    ("change", "error"),
    [
        ({"code_verifier": "x" * 43}, "invalid_grant"),
        ({"code_verifier": None}, "invalid_grant"),
        ({"redirect_uri": "http://127.0.0.1:9/other"}, "invalid_grant"),
        ({"resource": None}, "invalid_target"),
        ({"resource": "http://127.0.0.1:2/mcp"}, "invalid_target"),
        ({"client_id": "pre-public", "code": None}, "invalid_grant"),
    ],
)
def test_token_request_checks(auth, change, error):
    client = register(auth)["client_id"]
    verifier, challenge = pkce()
    code = params(auth.approve(authorize_url(auth, client, challenge)))["code"]
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
        "client_id": client,
        "resource": RESOURCE,
    }
    for key, value in change.items():
        if value is None:
            form.pop(key)
        else:
            form[key] = value
    status, err = post_form(auth, "token", form)
    assert (status, err["error"]) == (400, error), err


@pytest.mark.parametrize(
    ("kw", "error"),
    [
        ({"challenge": None}, "invalid_request"),
        ({"resource": None}, "invalid_target"),
        ({"scope": "mcp admin"}, "invalid_scope"),
    ],
)
def test_authorization_errors_come_back_on_the_redirect(auth, kw, error):
    client = register(auth)["client_id"]
    challenge = kw.pop("challenge", pkce()[1])
    got = params(auth.approve(authorize_url(auth, client, challenge, **kw)))
    assert got["error"] == error and got["state"] == "st-1" and got["iss"] == auth.issuer
    assert "code" not in got


def test_unknown_client_or_redirect_is_a_page_not_a_redirect(auth):
    client = register(auth)["client_id"]
    challenge = pkce()[1]
    for url in (
        authorize_url(auth, "nobody", challenge),
        authorize_url(auth, client, challenge, redirect="http://evil.example/cb"),
    ):
        status, headers, _ = auth.request("GET", url)
        assert status == 400 and "location" not in headers
    # a loopback redirect may use any port (RFC 8252)
    got = params(
        auth.approve(
            authorize_url(auth, client, challenge, redirect="http://127.0.0.1:4711/callback")
        )
    )
    assert "code" in got


def test_iss_modes_and_a_changed_issuer(auth):
    client = register(auth)["client_id"]
    challenge = pkce()[1]
    try:
        auth.set_iss("wrong")
        assert params(auth.approve(authorize_url(auth, client, challenge)))["iss"] != auth.issuer
        auth.set_iss("none")
        assert "iss" not in params(auth.approve(authorize_url(auth, client, challenge)))
        auth.set_iss("correct")
        auth.set_issuer("http://127.0.0.1:1/elsewhere")
        _, _, body = auth.request("GET", auth.base + "/.well-known/oauth-authorization-server")
        assert orjson.loads(body)["issuer"] == "http://127.0.0.1:1/elsewhere"
        got = params(auth.approve(authorize_url(auth, client, challenge)))
        assert got["iss"] == "http://127.0.0.1:1/elsewhere"
    finally:
        auth.set_iss("correct")
        auth.set_issuer(None)


# ---- refresh: rotation, reuse detection, revocation --------------------------------------------


def test_refresh_rotates_and_a_reused_refresh_token_revokes_the_family(auth):
    client = register(auth)["client_id"]
    first = code_flow(auth, client)
    status, second = post_form(
        auth,
        "token",
        {
            "grant_type": "refresh_token",
            "refresh_token": first["refresh_token"],
            "client_id": client,
        },
    )
    assert status == 200 and second["refresh_token"] != first["refresh_token"]
    assert introspect(auth, second["access_token"])["active"]
    # narrowing is allowed, widening is not
    status, err = post_form(
        auth,
        "token",
        {
            "grant_type": "refresh_token",
            "refresh_token": second["refresh_token"],
            "client_id": client,
            "scope": "mcp write",
        },
    )
    assert (status, err["error"]) == (400, "invalid_scope")
    # the first refresh token again: reuse, the whole family goes
    status, err = post_form(
        auth,
        "token",
        {
            "grant_type": "refresh_token",
            "refresh_token": first["refresh_token"],
            "client_id": client,
        },
    )
    assert (status, err["error"]) == (400, "invalid_grant")
    assert not introspect(auth, second["access_token"])["active"]
    status, err = post_form(
        auth,
        "token",
        {
            "grant_type": "refresh_token",
            "refresh_token": second["refresh_token"],
            "client_id": client,
        },
    )
    assert (status, err["error"]) == (400, "invalid_grant")
    assert auth.wait_for({"event": "refresh_reuse", "client_id": client}, timeout=1)
    refreshes = auth.find(lambda r: r.get("grant") == "refresh_token" and r["client_id"] == client)
    assert len(refreshes) == 1  # the one that succeeded
    with pytest.raises(TimeoutError, match="0 match"):
        auth.wait_for({"event": "token", "client_id": "nobody"}, timeout=0.05)


def test_revocation_endpoint_and_admin_revocation(auth):
    client = register(auth)["client_id"]
    tokens = code_flow(auth, client)
    status, _ = post_form(auth, "revoke", {"token": tokens["access_token"], "client_id": client})
    assert status == 200
    assert not introspect(auth, tokens["access_token"])["active"]
    status, fresh = post_form(
        auth,
        "token",
        {
            "grant_type": "refresh_token",
            "refresh_token": tokens["refresh_token"],
            "client_id": client,
        },
    )
    assert status == 200  # revoking an access token leaves the refresh token
    assert auth.revoke(fresh["refresh_token"]) >= 2  # the refresh token and its family
    assert not introspect(auth, fresh["access_token"])["active"]
    status, err = post_form(
        auth,
        "token",
        {
            "grant_type": "refresh_token",
            "refresh_token": fresh["refresh_token"],
            "client_id": client,
        },
    )
    assert (status, err["error"]) == (400, "invalid_grant")


def test_expiry_by_ttl_and_by_the_admin_lever(tmp_path):
    with AuthServerProcess(
        tmp_path, token_ttl=0.3, client=[orjson.dumps(CLIENTS[3]).decode()]
    ) as auth:
        tokens = code_flow(auth, "pre-public", scope=None)
        assert tokens["expires_in"] == 1 and tokens["scope"] == ""
        assert introspect(auth, tokens["access_token"])["active"]
        deadline = time.monotonic() + 5
        while introspect(auth, tokens["access_token"])["active"]:
            assert time.monotonic() < deadline, "the token never expired"
        status, fresh = post_form(
            auth,
            "token",
            {
                "grant_type": "refresh_token",
                "refresh_token": tokens["refresh_token"],
                "client_id": "pre-public",
            },
        )
        assert status == 200 and introspect(auth, fresh["access_token"])["active"]
        assert auth.expire_access_tokens() >= 1
        assert not introspect(auth, fresh["access_token"])["active"]


# ---- client credentials and client authentication ------------------------------------------------


def test_client_credentials_with_each_client_authentication(auth):
    base = {"grant_type": "client_credentials", "scope": "read", "resource": RESOURCE}
    status, a = post_form(auth, "token", base, basic("m2m-basic", "s3cret basic"))
    assert status == 200 and a["scope"] == "read" and "refresh_token" not in a
    status, b = post_form(
        auth, "token", {**base, "client_id": "m2m-post", "client_secret": "s3cret-post"}
    )
    assert status == 200 and introspect(auth, b["access_token"])["client_id"] == "m2m-post"
    assertion = private_key_jwt_sign(PRIVATE_PEM, "m2m-jwt", auth.endpoint("token"))
    jwt_form = {
        **base,
        "client_assertion_type": "urn:ietf:params:oauth:client-assertion-type:jwt-bearer",
        "client_assertion": assertion,
    }
    status, c = post_form(auth, "token", jwt_form)
    assert status == 200, c
    assert introspect(auth, c["access_token"])["sub"] == "m2m-jwt"
    # replayed assertion, wrong secret, wrong method, a public client: refused
    status, err = post_form(auth, "token", jwt_form)
    assert (status, err["error"]) == (401, "invalid_client")
    status, err = post_form(auth, "token", base, basic("m2m-basic", "wrong"))
    assert (status, err["error"]) == (401, "invalid_client")
    status, err = post_form(
        auth, "token", {**base, "client_id": "m2m-basic", "client_secret": "s3cret basic"}
    )
    assert (status, err["error"]) == (401, "invalid_client")
    status, err = post_form(auth, "token", {**base, "client_id": "pre-public"})
    assert (status, err["error"]) == (400, "unauthorized_client")
    events = [e for e in auth.events("token") if e["grant"] == "client_credentials"]
    assert [e["auth_method"] for e in events[-3:]] == [
        "client_secret_basic",
        "client_secret_post",
        "private_key_jwt",
    ]


def test_dcr_confidential_client_gets_a_secret_and_must_use_its_method(auth):
    reg = register(
        auth,
        token_endpoint_auth_method="client_secret_post",
        grant_types=["authorization_code", "refresh_token"],
    )
    assert reg["client_secret"] and reg["client_secret_expires_at"] == 0
    verifier, challenge = pkce()
    code = params(auth.approve(authorize_url(auth, reg["client_id"], challenge)))["code"]
    form = {
        "grant_type": "authorization_code",
        "code": code,
        "redirect_uri": REDIRECT,
        "code_verifier": verifier,
        "resource": RESOURCE,
    }
    status, err = post_form(auth, "token", form, basic(reg["client_id"], reg["client_secret"]))
    assert (status, err["error"]) == (401, "invalid_client")
    status, tokens = post_form(
        auth,
        "token",
        {**form, "client_id": reg["client_id"], "client_secret": reg["client_secret"]},
    )
    assert status == 200, tokens
    assert all(c.get("client_secret") is None for c in auth.clients())


# ---- CIMD ------------------------------------------------------------------------------------


def test_client_id_metadata_document(auth):
    url = auth.host_client_document("app", {"client_name": "App", "redirect_uris": [REDIRECT]})
    tokens = code_flow(auth, url)
    assert introspect(auth, tokens["access_token"])["client_id"] == url
    fetched = auth.events("cimd_fetched")[-1]
    assert fetched["url"] == url and fetched["ok"]
    auth.host_client_document(
        "liar", {"client_id": "http://127.0.0.1:1/other", "redirect_uris": [REDIRECT]}
    )
    bad = f"{auth.base}/client-docs/liar"  # its document names another client id
    status, _, _ = auth.request("GET", authorize_url(auth, bad, pkce()[1]))
    assert status == 400
    assert auth.events("cimd_fetched")[-1]["reason"] == "its client_id is not its URL"
    # an https client id whose document this server hosts: read from memory
    https_id = "https://app.example.com/oauth/client.json"
    assert (
        auth.host_client_document("https-app", {"client_id": https_id, "redirect_uris": [REDIRECT]})
        == https_id
    )
    tokens = code_flow(auth, https_id)
    assert introspect(auth, tokens["access_token"])["client_id"] == https_id
    fetched = auth.events("cimd_fetched")[-1]
    assert fetched["url"] == https_id and fetched["ok"] and fetched["local"]


# ---- a person --------------------------------------------------------------------------------


def test_require_person_login_page(tmp_path):
    with AuthServerProcess(
        tmp_path, require_person=True, client=[orjson.dumps(CLIENTS[3]).decode()]
    ) as auth:
        verifier, challenge = pkce()
        url = authorize_url(auth, "pre-public", challenge, scope=None)
        status, headers, body = auth.request("GET", url)
        assert status == 200 and b'name="request_id"' in body and "location" not in headers
        got = params(auth.approve(url, subject="bob"))
        status, tokens = post_form(
            auth,
            "token",
            {
                "grant_type": "authorization_code",
                "code": got["code"],
                "redirect_uri": REDIRECT,
                "code_verifier": verifier,
                "client_id": "pre-public",
                "resource": RESOURCE,
            },
        )
        assert status == 200 and introspect(auth, tokens["access_token"])["sub"] == "bob"
        denied = params(auth.approve(url, deny=True))
        assert denied["error"] == "access_denied" and denied["state"] == "st-1"


# ---- the protected MCP server ------------------------------------------------------------------


ADD = {"name": "add", "arguments": {"a": 1, "b": 2}}


def test_protected_mcp_server_prm_401_403_and_subject(auth, tmp_path):
    server = ScriptedServer(tmp_path)
    with server.http_server(require_oauth=auth.issuer, tool_scope=["add=write"]) as mcp:
        status, _, body = auth.request(
            "GET", f"http://127.0.0.1:{mcp.port}/.well-known/oauth-protected-resource/mcp"
        )
        prm = orjson.loads(body)
        assert status == 200 and prm["resource"] == mcp.url
        assert prm["authorization_servers"] == [auth.issuer]
        assert prm["scopes_supported"] == ["mcp", "write"]
        client = register(auth)["client_id"]
        narrow = code_flow(auth, client, scope="mcp", resource=mcp.url)["access_token"]
        wide = code_flow(auth, client, scope="mcp write", resource=mcp.url)["access_token"]
        other = code_flow(auth, client, scope="mcp write")["access_token"]  # for RESOURCE

        async def body_():
            out = {}
            for name, token in (
                ("none", None),
                ("narrow", narrow),
                ("wide", wide),
                ("other", other),
                ("junk", "junk"),
            ):
                headers = {"Authorization": f"Bearer {token}"} if token else {}
                async with RawHttpPeer(mcp.url, headers=headers) as peer:
                    out[name] = (
                        await peer.modern("tools/call", ADD),
                        await peer.modern("tools/list"),
                    )
            return out

        out = run(body_())
        none_call, _ = out["none"]
        assert none_call.status == 401
        assert none_call.headers["WWW-Authenticate"] == (
            f'Bearer resource_metadata="http://127.0.0.1:{mcp.port}/.well-known/'
            'oauth-protected-resource/mcp", scope="mcp"'
        )
        call, listed = out["narrow"]
        assert call.status == 403 and listed.status == 200
        challenge = call.headers["WWW-Authenticate"]
        assert (
            challenge.startswith('Bearer error="insufficient_scope"')
            and 'scope="mcp write"' in challenge
        )
        call, _ = out["wide"]
        assert call.status == 200 and call.json["result"]["structuredContent"] == {"sum": 3}
        for name in ("other", "junk"):
            call, _ = out[name]
            assert (
                call.status == 401 and 'error="invalid_token"' in call.headers["WWW-Authenticate"]
            )
        http = [e for e in server.events("http") if e["path"] == "/mcp"]
        assert [e.get("oauth_refused") for e in http] == [
            "no_token",
            "no_token",
            "insufficient_scope",
            None,
            None,
            None,
            "wrong_audience",
            "wrong_audience",
            "invalid_token",
            "invalid_token",
        ]
        assert http[3]["oauth"]["scopes"] == ["mcp"]
        assert http[4]["oauth"] == {"sub": "alice", "client_id": client, "scopes": ["mcp", "write"]}


def test_protected_mcp_server_moves_and_lies_about_its_resource(auth, tmp_path):
    server = ScriptedServer(tmp_path)
    with server.http_server(
        require_oauth=auth.issuer, prm_resource="http://127.0.0.1:1/elsewhere", oauth_scope=""
    ) as mcp:
        prm_url = f"http://127.0.0.1:{mcp.port}/.well-known/oauth-protected-resource"
        assert (
            orjson.loads(auth.request("GET", prm_url)[2])["resource"]
            == "http://127.0.0.1:1/elsewhere"
        )
        client = register(auth)["client_id"]
        token = code_flow(auth, client, scope=None, resource=mcp.url)["access_token"]
        with AuthServerProcess(tmp_path / "as2") as other:
            moved = mcp.set_oauth(authorization_server=other.issuer, prm_resource=None)
            assert moved["authorization_servers"] == [other.issuer] and moved["resource"] == mcp.url

            async def call():
                async with RawHttpPeer(
                    mcp.url, headers={"Authorization": f"Bearer {token}"}
                ) as peer:
                    return await peer.modern("tools/list")

            reply = run(call())
            assert reply.status == 401  # the new authorization server never issued it
            assert reply.headers["WWW-Authenticate"].startswith('Bearer error="invalid_token"')
            assert "scope=" not in reply.headers["WWW-Authenticate"]


def test_admin_revocation_by_client_and_subject(auth):
    one, two = register(auth)["client_id"], register(auth)["client_id"]
    a, b = code_flow(auth, one), code_flow(auth, two)
    assert auth.revoke(client_id=one) == 2  # its access and refresh token
    assert not introspect(auth, a["access_token"])["active"]
    assert introspect(auth, b["access_token"])["active"]
    assert auth.revoke(client_id=two, sub="bob") == 0
    assert auth.revoke(client_id=two, sub="alice") == 2


def test_approve_can_follow_the_redirect_and_the_log_keeps_each_request(auth):
    target = auth.host_client_document("landing", {"redirect_uris": []})
    client = register(auth, redirect_uris=[target])["client_id"]
    location = auth.approve(authorize_url(auth, client, pkce()[1], redirect=target), follow=True)
    assert location.startswith(target + "?code=")
    landing, authorize = auth.requests("/client-docs/landing")[-1], auth.requests("/authorize")[-1]
    assert landing["query"]["code"] == params(location)["code"]
    assert authorize["status"] == 302 and authorize["location"] == location
    assert authorize["query"]["client_id"] == client and authorize["verb"] == "GET"
    status, _ = post_form(auth, "token", {"grant_type": "password", "client_id": client})
    refused = auth.requests("/token")[-1]
    assert status == 400 and refused["error"] == "unsupported_grant_type"
    assert refused["form"] == {"grant_type": "password", "client_id": client}
    assert refused["headers"]["content-type"] == "application/x-www-form-urlencoded"


def test_protected_mcp_server_metadata_only_at_the_root_and_a_bare_challenge(auth, tmp_path):
    server = ScriptedServer(tmp_path)
    options = {"require_oauth": auth.issuer, "prm_at": "root", "no_resource_metadata_param": True}
    with server.http_server(**options) as mcp:
        root = f"http://127.0.0.1:{mcp.port}/.well-known/oauth-protected-resource"
        assert auth.request("GET", root)[0] == 200
        assert auth.request("GET", root + "/mcp")[0] == 404

        async def call():
            async with RawHttpPeer(mcp.url) as peer:
                return await peer.modern("tools/list")

        assert run(call()).headers["WWW-Authenticate"] == 'Bearer scope="mcp"'


def test_protected_mcp_server_guards_every_verb_of_a_legacy_session(auth, tmp_path):
    server = ScriptedServer(tmp_path)
    with server.http_server(require_oauth=auth.issuer, era="legacy") as srv:
        client = register(auth)["client_id"]
        token = code_flow(auth, client, scope="mcp", resource=srv.url)["access_token"]

        async def body():
            async with RawHttpPeer(srv.url, headers={"Authorization": f"Bearer {token}"}) as peer:
                init = await peer.initialize()
                listed = await peer.legacy("tools/list")
                async with peer.http.get(
                    srv.url,
                    headers={"Accept": "text/event-stream", "Mcp-Session-Id": peer.session_id},
                ) as bare_get:
                    bare = bare_get.status
                async with peer.http.delete(
                    srv.url, headers={"Mcp-Session-Id": peer.session_id}
                ) as d:
                    bare_delete = d.status
                return init.status, listed.status, bare, bare_delete, (await peer.delete()).status

        assert run(body()) == (200, 200, 401, 401, 200)
        subjects = [
            e.get("oauth", {}).get("sub") for e in server.events("http") if e["path"] == "/mcp"
        ]
        assert subjects == ["alice", "alice", "alice", None, None, "alice"]


def test_introspection_cache_keeps_a_revoked_token_until_the_server_moves(auth, tmp_path):
    server = ScriptedServer(tmp_path)
    with server.http_server(require_oauth=auth.issuer, introspection_cache=60) as srv:
        client = register(auth)["client_id"]
        token = code_flow(auth, client, scope="mcp", resource=srv.url)["access_token"]

        async def status():
            async with RawHttpPeer(srv.url, headers={"Authorization": f"Bearer {token}"}) as peer:
                return (await peer.modern("tools/list")).status

        assert run(status()) == 200
        auth.revoke(token)
        assert run(status()) == 200  # the cached answer
        srv.set_oauth(authorization_server=auth.issuer)  # clears the cache
        assert run(status()) == 401


@pytest.mark.parametrize(
    "args",
    [
        ["--require-oauth", "http://127.0.0.1:1"],
        ["--http", "--tool-scope", "add=write"],
        ["--http", "--require-oauth", "http://127.0.0.1:1", "--tool-scope", "add"],
        ["--http", "--require-oauth", "http://127.0.0.1:1", "--introspection-cache", "-1"],
    ],
)
def test_bad_oauth_options_are_refused_at_start(args):
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "conduit_mcp.testing", *args], capture_output=True, timeout=30
    )
    assert proc.returncode == 2 and proc.stderr


@pytest.mark.parametrize(
    "args",
    [
        ["--issuer-path", "tenant"],
        ["--auth-methods", "none,magic"],
        ["--token-ttl", "0"],
        ["--client", '{"client_secret": "x"}'],
        ["--client", "not json"],
        ["--register-answer", "not json"],
        ["--register-answer", "[1]"],
        ["--bad-access-token", "tab"],
        ["--trust", "https://issuer-without-a-jwks-file"],
    ],
)
def test_bad_auth_server_options_are_refused_at_start(args):
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "conduit_mcp.testing.auth.server", *args],
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 2 and proc.stderr


# ---- the hostile levers ------------------------------------------------------------------------


def test_hostile_levers_split_bodies_pad_registrations_and_fail_metadata(tmp_path):
    with AuthServerProcess(tmp_path, split_bodies=0.3, registration_padding=1000) as auth:
        url = f"{auth.base}/.well-known/oauth-authorization-server"
        whole = orjson.loads(auth.request("GET", url)[2])  # whole, however it arrived
        assert whole["issuer"] == auth.issuer
        started = time.monotonic()
        status, headers, body = auth.request("GET", url)
        assert time.monotonic() - started >= 0.3  # the pause between the two segments
        assert status == 200 and int(headers["content-length"]) == len(body)
        assert headers["content-type"].startswith("application/json")
        assert register(auth)["x_padding"] == "p" * 1000
        assert auth.set_hostile(split_bodies=None, metadata_status=503) == {
            "split_bodies": None,
            "registration_padding": 1000,
            "metadata_status": 503,
        }
        assert auth.request("GET", url)[0] == 503
        auth.set_hostile(metadata_status=None, registration_padding=0)
        assert auth.request("GET", url)[0] == 200 and "x_padding" not in register(auth)
        with pytest.raises(RuntimeError, match="400"):
            auth.set_hostile(metadata_status=42)


@pytest.mark.parametrize(
    "args",
    [["--split-bodies", "-1"], ["--registration-padding", "-5"], ["--metadata-status", "99"]],
)
def test_bad_hostile_options_are_refused_at_start(args):
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "conduit_mcp.testing.auth.server", *args],
        capture_output=True,
        timeout=30,
    )
    assert proc.returncode == 2 and b"auth_server:" in proc.stderr


def test_protected_mcp_server_metadata_faults(auth, tmp_path):
    server = ScriptedServer(tmp_path)
    with server.http_server(require_oauth=auth.issuer) as mcp:
        prm_url = f"http://127.0.0.1:{mcp.port}/.well-known/oauth-protected-resource/mcp"
        mcp.set_oauth(metadata_fault="unavailable")
        assert auth.request("GET", prm_url)[0] == 503
        mcp.set_oauth(metadata_fault="split")
        started = time.monotonic()
        status, _, body = auth.request("GET", prm_url)
        assert time.monotonic() - started >= 0.2
        assert status == 200 and orjson.loads(body)["authorization_servers"] == [auth.issuer]
        with pytest.raises(RuntimeError, match="400"):
            mcp.set_oauth(metadata_fault="sometimes")
        mcp.set_oauth(metadata_fault=None)
        assert auth.request("GET", prm_url)[0] == 200


def test_hostile_answers_lie_as_told(tmp_path):
    """--expires-in, --bad-access-token and --register-answer change what the answers say;
    --token-error refuses every token request."""
    clients = [orjson.dumps(c).decode() for c in CLIENTS]
    with AuthServerProcess(
        tmp_path / "lies",
        client=clients,
        expires_in=0.05,
        bad_access_token="lf",
        register_answer='{"token_endpoint_auth_method": "private_key_jwt", "client_secret": null}',
    ) as liar:
        answer = register(liar, token_endpoint_auth_method="client_secret_post")
        assert answer["token_endpoint_auth_method"] == "private_key_jwt"
        assert "client_secret" not in answer
        status, token = post_form(
            liar,
            "token",
            {"grant_type": "client_credentials"},
            basic("m2m-basic", "s3cret basic"),
        )
        assert status == 200 and token["expires_in"] == 0.05 and "\n" in token["access_token"]
    with AuthServerProcess(
        tmp_path / "refuser", client=clients, token_error="invalid_client"
    ) as refuser:
        status, token = post_form(
            refuser,
            "token",
            {"grant_type": "client_credentials"},
            basic("m2m-basic", "s3cret basic"),
        )
        assert (status, token["error"]) == (400, "invalid_client")
