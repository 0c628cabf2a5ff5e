"""Parsing ``WWW-Authenticate``: several challenges, quoted commas and escapes, hostile text."""

from __future__ import annotations

import time

from conduit_mcp.oauth.challenge import Challenge, bearer_challenge, parse_challenges


def test_the_bearer_challenge_of_a_401_gives_its_metadata_url_and_scope():
    c = bearer_challenge(
        [
            'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", '
            'scope="files:read files:write"'
        ]
    )
    assert c == Challenge(
        "bearer",
        resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource",
        scope="files:read files:write",
    )
    assert c.scopes == ("files:read", "files:write")
    assert not c.insufficient_scope


def test_several_challenges_in_one_header_with_quoted_commas():
    challenges = parse_challenges(
        [
            'Basic realm="a, b, c", Bearer realm="x", error="insufficient_scope", '
            'scope="a,b", error_description="needs, more"'
        ]
    )
    assert [c.scheme for c in challenges] == ["basic", "bearer"]
    bearer = challenges[1]
    assert bearer.insufficient_scope
    assert bearer.scope == "a,b"
    assert bearer.error_description == "needs, more"


def test_several_headers_and_the_first_bearer_wins():
    c = bearer_challenge(["Negotiate abc123==", 'Bearer scope="one"', 'Bearer scope="two"'])
    assert c is not None and c.scope == "one"


def test_names_are_case_insensitive_and_values_may_be_unquoted_or_escaped():
    c = bearer_challenge(['BEARER Scope=read, ERROR=invalid_token, error_description="a \\"q\\""'])
    assert c is not None
    assert (c.scope, c.error, c.error_description) == ("read", "invalid_token", 'a "q"')


def test_no_bearer_challenge_and_empty_or_junk_headers():
    assert bearer_challenge([]) is None
    assert bearer_challenge(['Basic realm="x"']) is None
    assert bearer_challenge(["", ",,, ;;", '="x"']) is None
    assert bearer_challenge(["Bearer"]) == Challenge("bearer")
    assert bearer_challenge(['Bearer scope=""']) == Challenge("bearer")


def test_an_unterminated_quote_ends_the_value():
    c = bearer_challenge(['Bearer scope="a b'])
    assert c is not None and c.scopes == ("a", "b")


def test_a_hostile_header_parses_in_linear_time():
    header = "Bearer " + ", ".join(f'p{i}="{"x," * 20}"' for i in range(5000)) + " " + '"' * 50000
    started = time.perf_counter()
    c = bearer_challenge([header])
    assert c is not None
    assert time.perf_counter() - started < 2.0
