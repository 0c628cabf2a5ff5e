"""The authorization request and its redirect (pure): scopes, PKCE S256, state, RFC 9207."""

from __future__ import annotations

import base64
import hashlib
from urllib.parse import parse_qs, urlsplit

import pytest

from conduit_mcp import Error
from conduit_mcp.oauth.discovery import Discovered
from conduit_mcp.oauth.flow import (
    MAX_REDIRECT,
    begin_authorization,
    check_iss,
    finish_authorization,
    select_scopes,
)
from conduit_mcp.oauth.records import ClientCredentials

ISSUER = "https://as.example.com"
REDIRECT = "http://127.0.0.1:8765/callback"


def discovered(**extra):
    metadata = {
        "issuer": ISSUER,
        "authorization_endpoint": f"{ISSUER}/authorize",
        "token_endpoint": f"{ISSUER}/token",
        "code_challenge_methods_supported": ["S256"],
        **extra,
    }
    return Discovered("https://mcp.example.com/mcp", {"resource": "x"}, ISSUER, metadata)


CLIENT = ClientCredentials("app", issuer=ISSUER)


# scopes -------------------------------------------------------------------------------------
def test_scope_from_the_challenge_first():
    assert select_scopes(challenged=["a"], resource_scopes=["b", "c"]) == ("a",)


def test_scope_from_the_resource_when_the_challenge_has_none():
    assert select_scopes(resource_scopes=["b", "c"]) == ("b", "c")


def test_no_scope_at_all_omits_it():
    assert select_scopes() == ()
    assert select_scopes(resource_scopes=None, server_scopes=["offline_access"]) == ()
    pending = begin_authorization(discovered(), CLIENT, REDIRECT, ())
    assert "scope" not in parse_qs(urlsplit(pending.url).query)


def test_configured_scopes_win_but_a_challenge_adds_to_them():
    assert select_scopes(configured=["x"], resource_scopes=["b"]) == ("x",)
    assert select_scopes(configured=["x"], challenged=["y"]) == ("x", "y")


def test_step_up_asks_for_the_union_of_held_and_challenged():
    assert select_scopes(held=["a", "b"], challenged=["b", "c"]) == ("a", "b", "c")
    # nothing challenged: not a step-up, the held scopes are not re-asked for by themselves
    assert select_scopes(held=["a"], resource_scopes=["r"]) == ("r",)


def test_offline_access_when_the_server_lists_it_and_the_grant_refreshes():
    got = select_scopes(challenged=["a"], server_scopes=["a", "offline_access"])
    assert got == ("a", "offline_access")
    assert select_scopes(challenged=["a"], server_scopes=["offline_access"], offline=False) == (
        "a",
    )
    assert select_scopes(challenged=["a", "offline_access"], server_scopes=["offline_access"]) == (
        "a",
        "offline_access",
    )


# the authorization URL ----------------------------------------------------------------------
def test_the_authorization_url_carries_pkce_s256_state_resource_and_scope():
    pending = begin_authorization(discovered(), CLIENT, REDIRECT, ("a", "b"))
    parts = urlsplit(pending.url)
    assert f"{parts.scheme}://{parts.netloc}{parts.path}" == f"{ISSUER}/authorize"
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    digest = hashlib.sha256(pending.verifier.encode()).digest()
    assert query == {
        "response_type": "code",
        "client_id": "app",
        "redirect_uri": REDIRECT,
        "scope": "a b",
        "state": pending.state,
        "code_challenge": base64.urlsafe_b64encode(digest).rstrip(b"=").decode(),
        "code_challenge_method": "S256",
        "resource": "https://mcp.example.com/mcp",
    }
    assert 43 <= len(pending.verifier) <= 128
    assert len(pending.state) >= 32
    assert pending.issuer == ISSUER and pending.scopes == ("a", "b")


def test_offline_access_asks_for_consent_as_openid_connect_requires():
    # OpenID Connect Core 1.0, section 11: without prompt=consent an OpenID provider ignores
    # offline_access (and issues no refresh token).
    offline = begin_authorization(discovered(), CLIENT, REDIRECT, ("a", "offline_access"))
    query = parse_qs(urlsplit(offline.url).query)
    assert query["prompt"] == ["consent"] and query["scope"] == ["a offline_access"]
    online = begin_authorization(discovered(), CLIENT, REDIRECT, ("a",))
    assert "prompt" not in parse_qs(urlsplit(online.url).query)


def test_each_authorization_has_its_own_state_and_verifier():
    one = begin_authorization(discovered(), CLIENT, REDIRECT, ())
    two = begin_authorization(discovered(), CLIENT, REDIRECT, ())
    assert one.state != two.state and one.verifier != two.verifier


def test_no_authorization_endpoint_is_a_discovery_failure():
    d = Discovered("r", None, ISSUER, {"issuer": ISSUER, "token_endpoint": f"{ISSUER}/t"})
    with pytest.raises(Error) as e:
        begin_authorization(d, CLIENT, REDIRECT, ())
    assert (e.value.kind, e.value.reason) == ("auth", "discovery_failed")


# the redirect -------------------------------------------------------------------------------
def redirect(pending, **params):
    query = "&".join(f"{k}={v}" for k, v in params.items())
    return f"{REDIRECT}?{query}"


def test_the_code_comes_back_when_state_matches():
    pending = begin_authorization(discovered(), CLIENT, REDIRECT, ())
    assert (
        finish_authorization(pending, redirect(pending, code="c0de", state=pending.state)) == "c0de"
    )
    # a paste-back of the query alone works too
    assert finish_authorization(pending, f"?code=c0de&state={pending.state}") == "c0de"
    assert finish_authorization(pending, f"code=c0de&state={pending.state}") == "c0de"


@pytest.mark.parametrize("state", [None, "forged", ""])
def test_a_wrong_or_missing_state_is_refused(state):
    pending = begin_authorization(discovered(), CLIENT, REDIRECT, ())
    params = {"code": "c"} if state is None else {"code": "c", "state": state}
    with pytest.raises(Error) as e:
        finish_authorization(pending, redirect(pending, **params))
    assert (e.value.kind, e.value.reason) == ("auth", "state_mismatch")


@pytest.mark.parametrize(
    ("advertised", "iss", "ok"),
    [
        (True, ISSUER, True),
        (True, None, False),
        (False, ISSUER, True),
        (False, None, True),
        (True, ISSUER + "/", False),  # no normalization
        (False, "https://evil.example.com", False),
    ],
)
def test_the_rfc9207_iss_table(advertised, iss, ok):
    extra = {"authorization_response_iss_parameter_supported": True} if advertised else {}
    pending = begin_authorization(discovered(**extra), CLIENT, REDIRECT, ())
    params = {"code": "c", "state": pending.state}
    if iss is not None:
        params["iss"] = iss
    url = f"{REDIRECT}?" + "&".join(f"{k}={v}" for k, v in params.items())
    if ok:
        assert finish_authorization(pending, url) == "c"
    else:
        with pytest.raises(Error) as e:
            finish_authorization(pending, url)
        assert e.value.reason == "issuer_mismatch"


def test_on_an_iss_mismatch_the_error_is_not_acted_on():
    pending = begin_authorization(discovered(), CLIENT, REDIRECT, ())
    url = redirect(pending, error="access_denied", state=pending.state, iss="https://evil")
    with pytest.raises(Error) as e:
        finish_authorization(pending, url)
    assert e.value.reason == "issuer_mismatch"


def test_the_servers_error_is_authorization_denied_with_its_code_only():
    pending = begin_authorization(discovered(), CLIENT, REDIRECT, ())
    url = redirect(
        pending, error="access_denied", error_description="secret%20text", state=pending.state
    )
    with pytest.raises(Error) as e:
        finish_authorization(pending, url)
    assert (e.value.kind, e.value.reason) == ("auth", "authorization_denied")
    assert "access_denied" in str(e.value) and "secret" not in str(e.value)


def test_malformed_redirects_are_argument_errors():
    pending = begin_authorization(discovered(), CLIENT, REDIRECT, ())
    for bad in ("", "   ", 42):
        with pytest.raises(Error) as e:
            finish_authorization(pending, bad)
        assert (e.value.kind, e.value.reason) == ("argument", "redirect_url")
    with pytest.raises(Error) as e:
        finish_authorization(pending, f"?code=a&code=b&state={pending.state}")
    assert e.value.reason == "redirect_url"
    with pytest.raises(Error) as e:
        finish_authorization(pending, f"?state={pending.state}")
    assert e.value.reason == "redirect_url"


@pytest.mark.parametrize(
    "text",
    [
        "javascript:alert(document.cookie)",
        "JavaScript:void(0)?code=c&state=s",
        "data:text/html,<script>x</script>",
        "file:///etc/passwd?code=c&state=s",
        "ftp://127.0.0.1/callback?code=c&state=s",
        "http:/callback?code=c&state=s",
        "localhost:9/callback?code=c&state=s",
        "mailto:a@b?code=c",
    ],
)
def test_text_that_is_no_http_redirect_is_an_argument_error(text):
    # Before anything is read from it: never "issuer_mismatch", "state_mismatch" or a code.
    pending = begin_authorization(
        discovered(authorization_response_iss_parameter_supported=True), CLIENT, REDIRECT, ()
    )
    with pytest.raises(Error) as e:
        finish_authorization(pending, text.replace("state=s", f"state={pending.state}"))
    assert (e.value.kind, e.value.reason) == ("argument", "redirect_url")
    assert "http(s)" in e.value.message


def test_an_https_redirect_and_a_bare_query_still_work():
    pending = begin_authorization(discovered(), CLIENT, REDIRECT, ())
    assert finish_authorization(pending, f"HTTPS://app.example/cb?code=c&state={pending.state}")
    assert finish_authorization(pending, f"code=c&state={pending.state}") == "c"


def test_the_redirect_length_limit_at_its_edge():
    pending = begin_authorization(discovered(), CLIENT, REDIRECT, ())
    head = f"?state={pending.state}&code="
    exact = head + "c" * (MAX_REDIRECT - len(head))
    assert finish_authorization(pending, exact) == "c" * (MAX_REDIRECT - len(head))
    with pytest.raises(Error) as e:
        finish_authorization(pending, exact + "c")
    assert e.value.reason == "redirect_url"


def test_check_iss_directly():
    check_iss(False, None, ISSUER)
    check_iss(True, ISSUER, ISSUER)
    with pytest.raises(Error):
        check_iss(True, None, ISSUER)
