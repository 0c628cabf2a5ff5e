"""Registration over real HTTP: pre-registered, a kept registration, CIMD, dynamic
registration with application_type, per issuer."""

from __future__ import annotations

import pytest
from aiohttp import web

from conduit_mcp import Error, OAuth
from conduit_mcp.oauth.discovery import Discovered
from conduit_mcp.oauth.records import ClientCredentials
from conduit_mcp.oauth.registration import register

from .conftest import as_metadata, pem, run

REDIRECT = "http://127.0.0.1:8765/callback"


def discovered(server, **extra):
    return Discovered(f"{server.url}/mcp", {}, server.url, as_metadata(server.url, **extra))


def test_pre_registered_credentials_need_no_request(server):
    auth = OAuth(client_id="app", client_secret="s", redirect_uri=REDIRECT)
    client = run(register, discovered(server), auth, redirect_uri=REDIRECT)
    assert client == ClientCredentials("app", "s", "client_secret_basic", server.url)
    assert server.seen == []


def test_pre_registered_auth_method_follows_the_servers_list(server):
    auth = OAuth(client_id="app", client_secret="s", redirect_uri=REDIRECT)
    d = discovered(server, token_endpoint_auth_methods_supported=["client_secret_post"])
    assert run(register, d, auth).token_endpoint_auth_method == "client_secret_post"
    public = OAuth(client_id="app", redirect_uri=REDIRECT)
    assert run(register, d, public).token_endpoint_auth_method == "none"


def test_dynamic_registration_sends_application_type_and_the_refresh_grant(server):
    server.json(
        "/register",
        {
            "client_id": "dyn-1",
            "client_secret": "dyn-secret",
            "client_secret_expires_at": 0,
            "redirect_uris": [REDIRECT],
        },
        status=201,
        method="POST",
    )
    auth = OAuth(redirect_uri=REDIRECT, client_name="My App")
    client = run(register, discovered(server), auth, redirect_uri=REDIRECT)
    (seen,) = server.requests("POST", "/register")
    assert seen.json == {
        "client_name": "My App",
        "application_type": "native",
        "redirect_uris": [REDIRECT],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": "none",
    }
    assert client == ClientCredentials(
        "dyn-1", "dyn-secret", "client_secret_basic", server.url, "dcr", (REDIRECT,), None
    )


def test_a_web_application_registers_as_web(server):
    server.json("/register", {"client_id": "w"}, status=201, method="POST")
    auth = OAuth(redirect_uri="https://app.example.com/cb", application_type="web")
    client = run(register, discovered(server), auth, redirect_uri="https://app.example.com/cb")
    assert server.requests("POST", "/register")[0].json["application_type"] == "web"
    assert client.token_endpoint_auth_method == "none"


def test_a_private_key_registers_its_public_jwk_only(server, rsa_key):
    server.json(
        "/register",
        {"client_id": "k", "token_endpoint_auth_method": "private_key_jwt"},
        status=201,
        method="POST",
    )
    auth = OAuth(redirect_uri=REDIRECT, private_key=pem(rsa_key))
    client = run(register, discovered(server), auth, redirect_uri=REDIRECT)
    sent = server.requests("POST", "/register")[0].json
    assert sent["token_endpoint_auth_method"] == "private_key_jwt"
    (jwk,) = sent["jwks"]["keys"]
    assert jwk["n"] == rsa_key.as_dict(private=False)["n"] and "d" not in jwk
    assert client.token_endpoint_auth_method == "private_key_jwt"


def test_a_kept_registration_for_this_issuer_is_reused(server):
    kept = ClientCredentials("kept", None, "none", server.url, "dcr", (REDIRECT,))
    auth = OAuth(redirect_uri=REDIRECT)
    assert run(register, discovered(server), auth, kept, redirect_uri=REDIRECT) is kept
    assert server.seen == []


def test_a_server_that_moved_gets_a_new_registration(server):
    server.json("/register", {"client_id": "new"}, status=201, method="POST")
    old = ClientCredentials(
        "old", "old-secret", "client_secret_basic", "https://old-as.example", "dcr", (REDIRECT,)
    )
    client = run(
        register, discovered(server), OAuth(redirect_uri=REDIRECT), old, redirect_uri=REDIRECT
    )
    assert client.client_id == "new" and client.issuer == server.url
    assert "old-secret" not in server.seen[0].body.decode()


def test_a_kept_registration_for_another_redirect_is_not_reused(server):
    server.json("/register", {"client_id": "new"}, status=201, method="POST")
    kept = ClientCredentials("kept", None, "none", server.url, "dcr", ("http://127.0.0.1:1/cb",))
    client = run(
        register, discovered(server), OAuth(redirect_uri=REDIRECT), kept, redirect_uri=REDIRECT
    )
    assert client.client_id == "new"


def test_cimd_when_the_server_supports_it(server):
    url = "https://app.example.com/client.json"
    auth = OAuth(redirect_uri=REDIRECT, client_metadata_url=url)
    d = discovered(server, client_id_metadata_document_supported=True)
    client = run(register, d, auth, redirect_uri=REDIRECT)
    assert (client.client_id, client.registration, client.token_endpoint_auth_method) == (
        url,
        "cimd",
        "none",
    )
    assert server.seen == []


def test_without_cimd_support_a_metadata_url_falls_back_to_dynamic_registration(server):
    server.json("/register", {"client_id": "dyn"}, status=201, method="POST")
    auth = OAuth(redirect_uri=REDIRECT, client_metadata_url="https://app.example.com/c.json")
    assert run(register, discovered(server), auth, redirect_uri=REDIRECT).client_id == "dyn"


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, {"error": "invalid_redirect_uri", "error_description": "no"}),
        (201, {}),
        (201, {"client_id": 5}),
        (500, None),
    ],
)
def test_a_refused_or_broken_registration(server, status, body):
    if body is None:
        server.handle("POST", "/register", lambda _: web.Response(status=status, text="oops"))
    else:
        server.json("/register", body, status=status, method="POST")
    with pytest.raises(Error) as e:
        run(register, discovered(server), OAuth(redirect_uri=REDIRECT), redirect_uri=REDIRECT)
    assert (e.value.kind, e.value.reason) == ("auth", "registration_failed")


def test_no_way_to_register_says_what_to_do(server):
    d = discovered(server, registration_endpoint=None)
    with pytest.raises(Error) as e:
        run(register, d, OAuth(redirect_uri=REDIRECT), redirect_uri=REDIRECT)
    assert e.value.reason == "registration_failed" and "client_id" in e.value.message


@pytest.mark.parametrize(
    ("answer", "usable"),
    [
        ({"token_endpoint_auth_method": "client_secret_basic"}, False),  # no secret
        ({"token_endpoint_auth_method": "client_secret_post"}, False),
        ({"token_endpoint_auth_method": "client_secret_post", "client_secret": "s"}, True),
        ({"client_secret": "s"}, True),  # a secret and no method: client_secret_basic
        ({"token_endpoint_auth_method": "private_key_jwt"}, False),  # OAuth has no key
        ({"token_endpoint_auth_method": "tls_client_auth"}, False),
        ({"token_endpoint_auth_method": "none"}, True),
        ({}, True),  # what was asked for: none
    ],
)
def test_a_registration_answer_no_token_request_can_use_is_refused(server, answer, usable):
    server.json(
        "/register",
        {"client_id": "dyn-1", "redirect_uris": [REDIRECT], **answer},
        status=201,
        method="POST",
    )
    auth = OAuth(redirect_uri=REDIRECT)
    if usable:
        assert run(register, discovered(server), auth, redirect_uri=REDIRECT).client_id == "dyn-1"
        return
    with pytest.raises(Error) as e:
        run(register, discovered(server), auth, redirect_uri=REDIRECT)
    assert (e.value.kind, e.value.reason) == ("auth", "registration_failed")
    assert "by hand" in e.value.message or "private_key" in e.value.message


def test_a_kept_registration_no_token_request_can_use_is_registered_again(server):
    server.json(
        "/register", {"client_id": "dyn-2", "redirect_uris": [REDIRECT]}, status=201, method="POST"
    )
    d = discovered(server)
    kept = ClientCredentials(
        "dyn-old", None, "client_secret_basic", server.url, "dcr", redirect_uris=(REDIRECT,)
    )
    client = run(register, d, OAuth(redirect_uri=REDIRECT), kept, redirect_uri=REDIRECT)
    assert client.client_id == "dyn-2" and len(server.requests("POST", "/register")) == 1
