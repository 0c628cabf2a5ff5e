"""``OAuth`` checks its arguments; ``Http(auth=OAuth(...))`` accepts it and refuses mixes."""

from __future__ import annotations

import pytest

import conduit_mcp as mcp
from conduit_mcp import Error, FileTokenStore, MemoryTokenStore, OAuth

LOOP = {"loopback": True}


def reason(**kwargs):
    with pytest.raises(Error) as e:
        OAuth(**kwargs)
    assert e.value.kind == "config"
    return e.value.reason


def test_defaults_for_a_desktop_app():
    auth = OAuth(loopback=True)
    assert auth.grant == "authorization_code" and auth.principal == "default"
    assert isinstance(auth.store, MemoryTokenStore)
    assert OAuth(loopback=True).store is not auth.store  # a store per OAuth, never shared


def test_paste_back_needs_a_redirect_uri_or_loopback():
    assert reason() == "oauth.redirect_uri"
    assert OAuth(redirect_uri="https://app.example.com/cb").redirect_uri
    assert OAuth(redirect_uri="http://localhost:8765/callback").redirect_uri


XAA = {
    "grant": "identity_assertion",
    "identity_token": "eyJ.id.token",
    "idp_token_endpoint": "https://idp.example.com/oauth2/token",
    "idp_client_id": "idp-app",
    "client_id": "mcp-app",
    "client_secret": "s",
}
#: Each mistake in configuring the assertion grants, and the option the error names.
ASSERTION_GRANT_MISTAKES = [
    ({**XAA, "identity_token": None}, "oauth.identity_token"),
    ({**XAA, "identity_token": ""}, "oauth.identity_token"),
    ({**XAA, "identity_token": 42}, "oauth.identity_token"),
    ({**XAA, "idp_token_endpoint": None}, "oauth.idp_token_endpoint"),
    ({**XAA, "idp_token_endpoint": "http://idp.example.com/token"}, "oauth.idp_token_endpoint"),
    ({**XAA, "idp_client_id": None}, "oauth.idp_client_id"),
    ({**XAA, "client_id": None, "client_secret": None}, "oauth.grant"),
    ({**XAA, "assertion": "eyJ.x.y"}, "oauth.assertion"),
    ({**XAA, **LOOP}, "oauth.grant"),
    ({"grant": "jwt_bearer", "client_id": "ci"}, "oauth.assertion"),
    (
        {"grant": "jwt_bearer", "client_id": "ci", "assertion": "a", "assertion_file": "f"},
        "oauth.assertion",
    ),
    ({"grant": "jwt_bearer", "assertion": "eyJ.x.y"}, "oauth.grant"),
    ({"grant": "jwt_bearer", "client_id": "ci", "assertion_file": 3}, "oauth.assertion_file"),
    (
        {"grant": "jwt_bearer", "client_id": "ci", "assertion": "a", "idp_client_id": "x"},
        "oauth.idp_client_id",
    ),
    ({"assertion_file": "/var/run/token", **LOOP}, "oauth.assertion_file"),
]


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"redirect_uri": "http://app.example.com/cb"}, "oauth.redirect_uri"),
        ({"redirect_uri": "myapp:/cb"}, "oauth.redirect_uri"),
        ({"redirect_uri": "https://a/cb#x"}, "oauth.redirect_uri"),
        ({"redirect_uri": "https://a/cb", "loopback": True}, "oauth.redirect_uri"),
        ({"loopback": "yes"}, "oauth.loopback"),
        ({"client_secret": "s", **LOOP}, "oauth.client_secret"),
        ({"client_id": "", **LOOP}, "oauth.client_id"),
        (
            {"client_id": "a", "client_metadata_url": "https://a/c.json", **LOOP},
            "oauth.client_metadata_url",
        ),
        ({"client_metadata_url": "http://a/c.json", **LOOP}, "oauth.client_metadata_url"),
        ({"client_metadata_url": "https://a/", **LOOP}, "oauth.client_metadata_url"),
        ({"client_id": "a", "private_key": "not a key", **LOOP}, "oauth.private_key"),
        ({"signing_alg": "none", **LOOP}, "oauth.signing_alg"),
        ({"token_endpoint_auth": "magic", **LOOP}, "oauth.token_endpoint_auth"),
        (
            {"client_id": "a", "token_endpoint_auth": "client_secret_basic", **LOOP},
            "oauth.token_endpoint_auth",
        ),
        (
            {"client_id": "a", "token_endpoint_auth": "private_key_jwt", **LOOP},
            "oauth.token_endpoint_auth",
        ),
        ({"grant": "password", **LOOP}, "oauth.grant"),
        ({"grant": "client_credentials"}, "oauth.grant"),
        ({"grant": "client_credentials", "client_id": "a"}, "oauth.grant"),
        (
            {"grant": "client_credentials", "client_id": "a", "client_secret": "s", **LOOP},
            "oauth.grant",
        ),
        *[(bad, reason) for bad, reason in ASSERTION_GRANT_MISTAKES],
        ({"scopes": "a b", **LOOP}, "oauth.scopes"),
        ({"scopes": ["a b"], **LOOP}, "oauth.scopes"),
        ({"scopes": [""], **LOOP}, "oauth.scopes"),
        ({"on_authorize": "print", **LOOP}, "oauth.on_authorize"),
        ({"store": object(), **LOOP}, "oauth.store"),
        ({"principal": "", **LOOP}, "oauth.principal"),
        ({"client_name": "", **LOOP}, "oauth.client_name"),
        ({"application_type": "desktop", **LOOP}, "oauth.application_type"),
        ({"issuer": "http://as.example.com", **LOOP}, "oauth.issuer"),
        ({"issuer": "https://as.example.com/?x=1", **LOOP}, "oauth.issuer"),
        ({"issuer": "https://as.example.com#f", **LOOP}, "oauth.issuer"),
        ({"issuer": "as.example.com", **LOOP}, "oauth.issuer"),
        ({"issuer": 5, **LOOP}, "oauth.issuer"),
    ],
)
def test_bad_arguments_name_the_field(kwargs, why):
    assert reason(**kwargs) == why


def test_an_issuer_is_an_https_or_loopback_url_kept_as_given():
    assert OAuth(issuer="https://as.example.com/tenant", **LOOP).issuer == (
        "https://as.example.com/tenant"
    )
    assert OAuth(issuer="http://127.0.0.1:9", **LOOP).issuer == "http://127.0.0.1:9"


def test_scopes_become_a_tuple_without_duplicates():
    assert OAuth(scopes=["a", "b", "a"], **LOOP).scopes == ("a", "b")


def test_the_assertion_grants_declare_their_extensions(tmp_path):
    cross = OAuth(**XAA)
    workload = OAuth(grant="jwt_bearer", client_id="ci", assertion_file=tmp_path / "t")
    assert cross.extensions == ("io.modelcontextprotocol/enterprise-managed-authorization",)
    assert workload.extensions == ("io.modelcontextprotocol/auth/wif",)
    assert workload.assertion_file == str(tmp_path / "t") and not workload.needs_person
    m2m = OAuth(grant="client_credentials", client_id="svc", client_secret="s")
    assert m2m.extensions == ("io.modelcontextprotocol/oauth-client-credentials",)
    assert OAuth(**LOOP).extensions == () and OAuth(**LOOP).needs_person
    assert "tok" not in repr(OAuth(**{**XAA, "identity_token": "tok-3f"}))


def test_machine_to_machine():
    auth = OAuth(grant="client_credentials", client_id="svc", client_secret="s")
    assert auth.grant == "client_credentials"


def test_a_file_store_is_accepted(tmp_path):
    store = FileTokenStore(tmp_path / "t.json")
    assert OAuth(store=store, **LOOP).store is store


# Http ---------------------------------------------------------------------------------------
def test_http_takes_an_oauth_and_says_so():
    auth = OAuth(**LOOP)
    spec = mcp.Http("http://127.0.0.1:1/mcp", auth=auth)
    assert spec.oauth is auth and spec.callback is None
    assert mcp.Http("http://127.0.0.1:1/mcp").oauth is None


def test_http_auth_callables_still_work():
    fn = lambda: {"X-Key": "k"}  # noqa: E731
    spec = mcp.Http("http://127.0.0.1:1/mcp", auth=fn, credential_id="me")
    assert spec.callback is fn and spec.oauth is None


@pytest.mark.parametrize(
    ("kwargs", "why"),
    [
        ({"bearer": "t"}, "http.auth"),
        ({"headers": {"authorization": "Bearer t"}}, "http.auth"),
        ({"credential_id": "me"}, "http.credential_id"),
    ],
)
def test_http_refuses_an_oauth_mixed_with_other_credentials(kwargs, why):
    with pytest.raises(Error) as e:
        mcp.Http("http://127.0.0.1:1/mcp", auth=OAuth(**LOOP), **kwargs)
    assert (e.value.kind, e.value.reason) == ("config", why)


def test_other_headers_go_along_with_an_oauth():
    spec = mcp.Http("http://127.0.0.1:1/mcp", auth=OAuth(**LOOP), headers={"X-Tenant": "t"})
    assert spec.static_headers() == {"X-Tenant": "t"}


def test_without_the_oauth_extra_the_error_says_how_to_install_it(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "authlib" else real(name, *a)
    )
    with pytest.raises(Error) as e:
        OAuth(**LOOP)
    assert (e.value.kind, e.value.reason) == ("config", "oauth.extra")
    assert "conduit-mcp[oauth]" in e.value.message
    assert "pip install -e '.[oauth]'" in e.value.message  # the package is not on an index yet
