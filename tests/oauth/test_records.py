"""Token sets and client registrations: expiry math, the token response rules, records."""

from __future__ import annotations

import pytest

from conduit_mcp import Error, TokenSet
from conduit_mcp.oauth.records import (
    MAX_LIFETIME,
    REFRESH_LEEWAY,
    ClientCredentials,
    identity,
)


def test_a_token_response_becomes_a_token_set():
    t = TokenSet.from_response(
        {
            "access_token": "A",
            "refresh_token": "R",
            "expires_in": 3600,
            "scope": "a b a",
            "token_type": "bearer",
        },
        now=1000.0,
        requested=("x",),
    )
    assert (t.access_token, t.refresh_token, t.expires_at, t.scope, t.token_type) == (
        "A",
        "R",
        4600.0,
        ("a", "b"),
        "Bearer",
    )
    assert t.authorization() == "Bearer A"


def test_no_scope_in_the_answer_means_the_requested_scope():
    t = TokenSet.from_response({"access_token": "A"}, now=0.0, requested=("x", "y"))
    assert t.scope == ("x", "y") and t.expires_at is None and t.refresh_token is None


def test_a_refresh_without_a_new_refresh_token_keeps_the_old_one():
    t = TokenSet.from_response({"access_token": "A2"}, now=0.0, previous_refresh="R1")
    assert t.refresh_token == "R1"
    t = TokenSet.from_response(
        {"access_token": "A2", "refresh_token": "R2"}, now=0.0, previous_refresh="R1"
    )
    assert t.refresh_token == "R2"


@pytest.mark.parametrize("expires_in", [0, -5, "3600", None, True, MAX_LIFETIME + 1, float("nan")])
def test_an_unbelievable_expires_in_is_no_expiry(expires_in):
    t = TokenSet.from_response({"access_token": "A", "expires_in": expires_in}, now=0.0)
    assert t.expires_at is None


def test_the_longest_believed_lifetime_at_its_edge():
    t = TokenSet.from_response({"access_token": "A", "expires_in": MAX_LIFETIME}, now=0.0)
    assert t.expires_at == MAX_LIFETIME


@pytest.mark.parametrize(
    "body",
    [
        {},
        {"access_token": ""},
        {"access_token": 5},
        {"access_token": "A", "token_type": "DPoP"},
        {"access_token": "A", "token_type": 7},
        {"access_token": "A\r\nX-Evil: 1"},
        {"access_token": "A\nB"},
        {"access_token": "A\x00B"},
        {"access_token": "A B"},
        {"access_token": "caf\u00e9"},
    ],
)
def test_a_bad_token_response_is_refused(body):
    with pytest.raises(Error) as e:
        TokenSet.from_response(body, now=0.0, reason="refresh_failed")
    assert (e.value.kind, e.value.reason) == ("auth", "refresh_failed")


def test_expiry_and_the_refresh_time():
    t = TokenSet("A", expires_at=1000.0 + 3600, issued_at=1000.0)
    assert t.refresh_at() == 1000.0 + 3600 - REFRESH_LEEWAY
    assert not t.expired(4599.9) and t.expired(4600.0)
    assert t.expired(4590.0, leeway=10.0)
    # a lifetime shorter than twice the leeway refreshes halfway
    short = TokenSet("A", expires_at=110.0, issued_at=100.0)
    assert short.refresh_at() == 105.0
    edge = TokenSet("A", expires_at=100.0 + 2 * REFRESH_LEEWAY, issued_at=100.0)
    assert edge.refresh_at() == 100.0 + REFRESH_LEEWAY
    assert TokenSet("A").refresh_at() is None and not TokenSet("A").expired(1e12)
    # no issue time (an old record): the full leeway
    assert TokenSet("A", expires_at=500.0).refresh_at() == 500.0 - REFRESH_LEEWAY


def test_token_set_records_round_trip_and_damaged_ones_are_absent():
    t = TokenSet("A", "R", expires_at=5.0, scope=("a",), issued_at=1.0)
    assert TokenSet.from_record(t.to_record()) == t
    assert TokenSet.from_record({}) is None
    assert TokenSet.from_record({"access_token": "A\r\nB"}) is None  # never sent as a header
    assert TokenSet.from_record(
        {"access_token": "A", "scope": "nope", "expires_at": "x"}
    ) == TokenSet("A")


def test_client_records_round_trip_and_pre_registered_ones_are_never_loaded():
    c = ClientCredentials(
        "id", "sec", "client_secret_post", "https://as", "dcr", ("http://127.0.0.1/cb",), 99.0
    )
    assert ClientCredentials.from_record(c.to_record()) == c
    pre = ClientCredentials("id", "sec", issuer="https://as")
    assert ClientCredentials.from_record(pre.to_record()) is None
    assert ClientCredentials.from_record({"client_id": "x"}) is None


def test_a_kept_registration_serves_only_its_issuer_redirect_and_lifetime():
    c = ClientCredentials(
        "id",
        "s",
        "client_secret_basic",
        "https://as",
        "dcr",
        ("http://127.0.0.1:1/cb",),
        client_secret_expires_at=100.0,
    )
    assert c.usable("https://as", "http://127.0.0.1:1/cb", 99.9)
    assert not c.usable("https://as", "http://127.0.0.1:1/cb", 100.0)
    assert not c.usable("https://as", "http://127.0.0.1:2/cb", 0.0)
    assert not c.usable("https://other-as", "http://127.0.0.1:1/cb", 0.0)
    never = ClientCredentials("id", issuer="https://as", registration="cimd")
    assert never.usable("https://as", "http://anything/cb", 1e12)


def test_the_cache_identity_depends_on_principal_issuer_and_resource_only():
    base = identity("alice", "https://as", "https://mcp/x")
    assert base == identity("alice", "https://as", "https://mcp/x")
    others = {
        identity("bob", "https://as", "https://mcp/x"),
        identity("alice", "https://as2", "https://mcp/x"),
        identity("alice", "https://as", "https://mcp/y"),
        identity("alice\nhttps://as", "", "https://mcp/x"),
        identity("a", "lice", "https://as"),
    }
    assert base not in others and len(others) == 5
