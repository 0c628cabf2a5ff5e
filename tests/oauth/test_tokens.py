"""The token endpoint over real HTTP: what the server received for every client
authentication method and grant, refresh and rotation, and the limits."""

from __future__ import annotations

import base64
import time

import pytest
from aiohttp import web
from joserfc import jwt
from joserfc.jwk import KeySet

from conduit_mcp import Error, OAuth, TokenSet
from conduit_mcp.oauth._http import is_unreachable
from conduit_mcp.oauth.discovery import Discovered
from conduit_mcp.oauth.flow import begin_authorization
from conduit_mcp.oauth.records import ClientCredentials
from conduit_mcp.oauth.tokens import (
    ASSERTION_TYPE,
    choose_auth_method,
    client_credentials,
    exchange_code,
    refresh,
)

from .conftest import as_metadata, pem, run

REDIRECT = "http://127.0.0.1:8765/callback"


def discovered(server):
    return Discovered(f"{server.url}/mcp", {}, server.url, as_metadata(server.url))


def token_answer(server, body=None, status=200):
    body = (
        body
        if body is not None
        else {
            "access_token": "AT-1",
            "refresh_token": "RT-1",
            "expires_in": 600,
            "token_type": "Bearer",
        }
    )
    server.json("/token", body, status=status, method="POST")


def exchange(server, client, oauth, code="the-code"):
    d = discovered(server)
    pending = begin_authorization(d, client, REDIRECT, ("a",))
    tokens = run(exchange_code, d, client, oauth, pending, code)
    (seen,) = server.requests("POST", "/token")
    return pending, tokens, seen


def test_a_public_client_sends_its_client_id_the_verifier_and_the_resource(server):
    token_answer(server)
    client = ClientCredentials("pub", None, "none", server.url)
    before = time.time()
    pending, tokens, seen = exchange(server, client, OAuth(redirect_uri=REDIRECT))
    assert seen.form == {
        "grant_type": "authorization_code",
        "code": "the-code",
        "redirect_uri": REDIRECT,
        "code_verifier": pending.verifier,
        "client_id": "pub",
        "resource": f"{server.url}/mcp",
    }
    assert "Authorization" not in seen.headers
    assert seen.headers["Content-Type"] == "application/x-www-form-urlencoded"
    assert tokens.access_token == "AT-1" and tokens.refresh_token == "RT-1"
    assert tokens.scope == ("a",)
    assert before + 600 <= tokens.expires_at <= time.time() + 600


def test_client_secret_basic_uses_the_header_and_no_client_id_in_the_body(server):
    token_answer(server)
    oauth = OAuth(client_id="app", client_secret="s3cret", redirect_uri=REDIRECT)
    client = ClientCredentials("app", "s3cret", "client_secret_basic", server.url)
    _, _, seen = exchange(server, client, oauth)
    scheme, value = seen.headers["Authorization"].split(" ", 1)
    assert scheme == "Basic" and base64.b64decode(value) == b"app:s3cret"
    assert "client_id" not in seen.form and "client_secret" not in seen.form


def test_client_secret_post_puts_both_in_the_body(server):
    token_answer(server)
    oauth = OAuth(client_id="app", client_secret="s3cret", redirect_uri=REDIRECT)
    client = ClientCredentials("app", "s3cret", "client_secret_post", server.url)
    _, _, seen = exchange(server, client, oauth)
    assert seen.form["client_id"] == "app" and seen.form["client_secret"] == "s3cret"
    assert "Authorization" not in seen.headers


@pytest.mark.parametrize(("key_fixture", "alg"), [("rsa_key", "RS256"), ("ec_key", "ES256")])
def test_private_key_jwt_sends_an_assertion_the_public_key_verifies(
    server, request, key_fixture, alg
):
    key = request.getfixturevalue(key_fixture)
    token_answer(server)
    oauth = OAuth(client_id="app", private_key=pem(key), signing_alg=alg, redirect_uri=REDIRECT)
    client = ClientCredentials("app", None, "private_key_jwt", server.url)
    _, _, seen = exchange(server, client, oauth)
    assert seen.form["client_assertion_type"] == ASSERTION_TYPE
    public = KeySet.import_key_set({"keys": [key.as_dict(private=False)]})
    token = jwt.decode(seen.form["client_assertion"], public, algorithms=[alg])
    claims = token.claims
    assert token.header["alg"] == alg
    assert claims["iss"] == claims["sub"] == "app"
    assert claims["aud"] == server.url  # the issuer identifier
    assert claims["jti"] and claims["exp"] > time.time() > claims["iat"] - 5
    jwt.JWTClaimsRegistry(aud={"essential": True, "value": server.url}).validate(claims)
    assert "client_secret" not in seen.form and "Authorization" not in seen.headers


def test_a_key_of_the_wrong_type_for_the_algorithm_is_a_config_error(rsa_key, ec_key):
    for key, alg in ((rsa_key, "ES256"), (ec_key, "RS256"), (ec_key, "EdDSA")):
        with pytest.raises(Error) as e:
            OAuth(client_id="app", private_key=pem(key), signing_alg=alg, redirect_uri=REDIRECT)
        assert (e.value.kind, e.value.reason) == ("config", "oauth.private_key")
    public = rsa_key.as_pem(private=False).decode().replace("PUBLIC KEY", "PRIVATE KEY")
    with pytest.raises(Error) as e:
        OAuth(client_id="app", private_key=public, redirect_uri=REDIRECT)
    assert e.value.reason == "oauth.private_key"


def test_refresh_sends_the_refresh_token_and_resource_and_keeps_the_rotated_one(server):
    token_answer(server, {"access_token": "AT-2", "refresh_token": "RT-2", "expires_in": 60})
    client = ClientCredentials("pub", None, "none", server.url)
    old = TokenSet("AT-1", "RT-1", scope=("a", "b"))
    new = run(refresh, discovered(server), client, OAuth(redirect_uri=REDIRECT), old)
    (seen,) = server.requests("POST", "/token")
    assert seen.form == {
        "grant_type": "refresh_token",
        "refresh_token": "RT-1",
        "client_id": "pub",
        "resource": f"{server.url}/mcp",
    }
    assert (new.access_token, new.refresh_token, new.scope) == ("AT-2", "RT-2", ("a", "b"))


def test_a_refresh_without_rotation_keeps_the_refresh_token(server):
    token_answer(server, {"access_token": "AT-2"})
    client = ClientCredentials("pub", None, "none", server.url)
    new = run(
        refresh, discovered(server), client, OAuth(redirect_uri=REDIRECT), TokenSet("A", "RT-1")
    )
    assert new.refresh_token == "RT-1"


def test_a_revoked_refresh_token_is_refresh_failed(server):
    token_answer(
        server, {"error": "invalid_grant", "error_description": "revoked RT-1"}, status=400
    )
    client = ClientCredentials("pub", None, "none", server.url)
    with pytest.raises(Error) as e:
        run(
            refresh, discovered(server), client, OAuth(redirect_uri=REDIRECT), TokenSet("A", "RT-1")
        )
    assert (e.value.kind, e.value.reason) == ("auth", "refresh_failed")
    assert "invalid_grant" in e.value.message and "RT-1" not in str(e.value)
    assert e.value.data == {"oauth_error": "invalid_grant"}  # the registered code, for the actor


@pytest.mark.parametrize(
    ("code", "data"), [("invalid_client", {"oauth_error": "invalid_client"}), ("RT-1-echo", None)]
)
def test_a_refusal_carries_only_a_registered_code_in_its_data(server, code, data):
    token_answer(server, {"error": code}, status=401)
    client = ClientCredentials("pub", None, "none", server.url)
    with pytest.raises(Error) as e:
        run(
            refresh, discovered(server), client, OAuth(redirect_uri=REDIRECT), TokenSet("A", "RT-1")
        )
    assert e.value.data == data and "RT-1" not in str(e.value)


@pytest.mark.parametrize("status", [500, 502, 503])
def test_a_refresh_answered_5xx_is_unreachable_not_refused(server, status):
    # The server's trouble, not its word on the refresh token: the caller keeps the tokens.
    token_answer(server, {"error": "temporarily_unavailable"}, status=status)
    client = ClientCredentials("pub", None, "none", server.url)
    with pytest.raises(Error) as e:
        run(
            refresh, discovered(server), client, OAuth(redirect_uri=REDIRECT), TokenSet("A", "RT-1")
        )
    assert (e.value.kind, e.value.reason) == ("auth", "refresh_failed")
    assert is_unreachable(e.value.data) and e.value.data["detail"] == f"HTTP {status}"
    assert e.value.data["origin"] == server.url and "RT-1" not in str(e.value)


def test_an_exchange_answered_5xx_is_still_refused(server):
    # Only a refresh holds something worth waiting for (its tokens): an exchange closes.
    token_answer(server, {}, status=503)
    client = ClientCredentials("pub", None, "none", server.url)
    with pytest.raises(Error) as e:
        exchange(server, client, OAuth(redirect_uri=REDIRECT))
    assert e.value.reason == "token_failed" and not is_unreachable(e.value.data)


def test_no_refresh_token_is_refresh_failed_without_a_request(server):
    client = ClientCredentials("pub", None, "none", server.url)
    with pytest.raises(Error) as e:
        run(refresh, discovered(server), client, OAuth(redirect_uri=REDIRECT), TokenSet("A"))
    assert e.value.reason == "refresh_failed" and server.seen == []


def test_client_credentials_with_a_secret(server):
    token_answer(server, {"access_token": "M2M", "expires_in": 300})
    oauth = OAuth(grant="client_credentials", client_id="svc", client_secret="sec")
    client = ClientCredentials("svc", "sec", "client_secret_basic", server.url)
    tokens = run(client_credentials, discovered(server), client, oauth, ("a", "b"))
    (seen,) = server.requests("POST", "/token")
    assert seen.form == {
        "grant_type": "client_credentials",
        "scope": "a b",
        "resource": f"{server.url}/mcp",
    }
    assert base64.b64decode(seen.headers["Authorization"][6:]) == b"svc:sec"
    assert tokens.access_token == "M2M" and tokens.scope == ("a", "b")


def test_client_credentials_with_a_private_key_and_no_scope(server, ec_key):
    token_answer(server, {"access_token": "M2M"})
    oauth = OAuth(
        grant="client_credentials", client_id="svc", private_key=pem(ec_key), signing_alg="ES256"
    )
    client = ClientCredentials("svc", None, "private_key_jwt", server.url)
    run(client_credentials, discovered(server), client, oauth)
    (seen,) = server.requests("POST", "/token")
    assert "scope" not in seen.form and seen.form["grant_type"] == "client_credentials"
    public = KeySet.import_key_set({"keys": [ec_key.as_dict(private=False)]})
    assert jwt.decode(seen.form["client_assertion"], public).claims["sub"] == "svc"


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, {"error": "invalid_client"}),
        (200, {"token_type": "Bearer"}),
        (200, [1]),
        (200, {"access_token": "x", "token_type": "DPoP"}),
        (500, {}),
    ],
)
def test_a_refused_or_malformed_token_answer_is_token_failed(server, status, body):
    token_answer(server, body, status)
    client = ClientCredentials("pub", None, "none", server.url)
    with pytest.raises(Error) as e:
        exchange(server, client, OAuth(redirect_uri=REDIRECT))
    assert (e.value.kind, e.value.reason) == ("auth", "token_failed")


def test_a_redirect_from_the_token_endpoint_is_not_followed(server):
    server.handle(
        "POST", "/token", lambda _: web.Response(status=307, headers={"Location": "/stolen"})
    )
    client = ClientCredentials("pub", None, "none", server.url)
    with pytest.raises(Error) as e:
        exchange(server, client, OAuth(redirect_uri=REDIRECT))
    assert e.value.reason == "token_failed" and "/stolen" not in server.paths()


def test_a_stalled_token_endpoint_fails_within_the_timeout(server):
    async def stall(_seen):
        await server.release.wait()
        return web.json_response({})

    server.handle("POST", "/token", stall)
    client = ClientCredentials("pub", None, "none", server.url)
    d = discovered(server)
    started = time.monotonic()
    with pytest.raises(Error) as e:
        run(
            client_credentials,
            d,
            client,
            OAuth(grant="client_credentials", client_id="p", client_secret="s"),
            timeout=0.3,
        )
    assert e.value.reason == "token_failed" and "0.3" in e.value.message
    assert time.monotonic() - started < 5


def test_a_token_answer_over_the_size_limit(server):
    body = {"access_token": "x" * 1000}
    token_answer(server, body)
    size = len(web.json_response(body).body)
    client = ClientCredentials("pub", None, "none", server.url)
    oauth = OAuth(grant="client_credentials", client_id="p", client_secret="s")
    assert run(client_credentials, discovered(server), client, oauth, limit=size).access_token
    with pytest.raises(Error) as e:
        run(client_credentials, discovered(server), client, oauth, limit=size - 1)
    assert e.value.reason == "token_failed" and str(size - 1) in e.value.message


def test_an_insecure_token_endpoint_is_refused_before_anything_is_sent():
    d = Discovered(
        "https://mcp/x",
        {},
        "https://as",
        {"issuer": "https://as", "token_endpoint": "http://as.example/t"},
    )
    client = ClientCredentials("svc", "sec", "client_secret_basic", "https://as")
    oauth = OAuth(grant="client_credentials", client_id="svc", client_secret="sec")
    with pytest.raises(Error) as e:
        run(client_credentials, d, client, oauth)
    assert e.value.reason == "token_failed"


def test_choose_auth_method():
    assert (
        choose_auth_method("client_secret_post", has_secret=True, has_key=False, supported=None)
        == "client_secret_post"
    )
    assert (
        choose_auth_method(None, has_secret=True, has_key=True, supported=None) == "private_key_jwt"
    )
    assert (
        choose_auth_method(
            None,
            has_secret=True,
            has_key=False,
            supported=["client_secret_basic", "client_secret_post"],
        )
        == "client_secret_basic"
    )
    assert (
        choose_auth_method(None, has_secret=True, has_key=False, supported=["private_key_jwt"])
        == "client_secret_basic"
    )


def test_a_sessions_middleware_never_touches_a_token_request(server):
    import asyncio

    import aiohttp

    async def stamp(request, handler):
        request.headers["Authorization"] = "Bearer mcp-server-token"
        return await handler(request)

    token_answer(server)
    client = ClientCredentials("pub", None, "none", server.url)
    d = discovered(server)
    pending = begin_authorization(d, client, REDIRECT, ())

    async def main():
        async with aiohttp.ClientSession(middlewares=(stamp,)) as session:
            return await exchange_code(
                session, d, client, OAuth(redirect_uri=REDIRECT), pending, "c"
            )

    assert asyncio.run(main()).access_token == "AT-1"
    assert "Authorization" not in server.requests("POST", "/token")[0].headers
