"""Whatever a server or a pasted URL holds, the pure parsers answer or raise a conduit_mcp
Error: never another exception (property tests)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from conduit_mcp import Error, TokenSet
from conduit_mcp.oauth.challenge import parse_challenges
from conduit_mcp.oauth.discovery import Discovered
from conduit_mcp.oauth.flow import begin_authorization, finish_authorization
from conduit_mcp.oauth.records import ClientCredentials

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
token_fields = st.sampled_from(
    ["access_token", "refresh_token", "expires_in", "scope", "token_type", "extra"]
)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=200), max_size=3))
def test_any_www_authenticate_text_parses(headers):
    for challenge in parse_challenges(headers):
        assert challenge.scheme and challenge.scheme == challenge.scheme.lower()


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(token_fields, json_values, max_size=6), st.floats(0, 2e9))
def test_any_token_answer_is_a_token_set_or_an_error(body, now):
    try:
        tokens = TokenSet.from_response(body, now=now)
    except Error as e:
        assert e.kind == "auth"
        return
    assert isinstance(tokens.access_token, str) and tokens.access_token
    assert TokenSet.from_record(tokens.to_record()) == tokens


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.text(max_size=30), json_values, max_size=8))
def test_any_stored_record_loads_or_is_absent(record):
    TokenSet.from_record(record)
    ClientCredentials.from_record(record)


ISSUER = "https://as.example.com"
PENDING = begin_authorization(
    Discovered(
        "https://mcp/x",
        None,
        ISSUER,
        {
            "issuer": ISSUER,
            "authorization_endpoint": f"{ISSUER}/a",
            "token_endpoint": f"{ISSUER}/t",
        },
    ),
    ClientCredentials("app", issuer=ISSUER),
    "http://127.0.0.1:1/cb",
    (),
)


@settings(max_examples=300, deadline=None)
@given(
    st.text(max_size=300) | st.builds(lambda q: f"http://127.0.0.1:1/cb?{q}", st.text(max_size=200))
)
def test_any_pasted_redirect_gives_a_code_or_an_error(text):
    try:
        finish_authorization(PENDING, text)
    except Error as e:
        assert e.kind in ("auth", "argument")
