"""protocol.http_status: Retry-After and WWW-Authenticate parsing."""

from __future__ import annotations

import time
from email.utils import formatdate

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conduit_mcp.protocol.http_status import Challenge, parse_challenges, parse_retry_after

pytestmark = pytest.mark.timeout(20)

# 2015-10-21 07:28:00 UTC
T = 1445412480.0


# -- Retry-After ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("120", 120.0),
        (" 5 ", 5.0),
        ("0", 0.0),
        ("007", 7.0),
        ("1.5", 1.5),
        ("-3", 0.0),
        ("-0.5", 0.0),
    ],
)
def test_delta_seconds(value: str, seconds: float) -> None:
    assert parse_retry_after(value) == seconds


@pytest.mark.parametrize(
    "value",
    [
        None,
        "",
        "   ",
        "soon",
        "1e3",
        "inf",
        "nan",
        "+5",
        "5s",
        "1.",
        ".5",
        "Wed, 99 Foo 2015",
        "١٢",
    ],
)
def test_garbage_is_none(value: str | None) -> None:
    assert parse_retry_after(value) is None


@pytest.mark.parametrize(
    "value",
    [
        "Wed, 21 Oct 2015 07:28:30 GMT",  # IMF-fixdate
        "Wednesday, 21-Oct-15 07:28:30 GMT",  # obsolete RFC 850
        "Wed Oct 21 07:28:30 2015",  # obsolete asctime (no zone: GMT)
    ],
)
def test_http_date_is_relative_to_now(value: str) -> None:
    assert parse_retry_after(value, now=T) == pytest.approx(30.0)


def test_date_in_the_past_is_zero() -> None:
    assert parse_retry_after("Wed, 21 Oct 2015 07:27:00 GMT", now=T) == 0.0


def test_now_defaults_to_the_clock() -> None:
    value = formatdate(time.time() + 100, usegmt=True)
    assert 95.0 <= parse_retry_after(value) <= 101.0  # type: ignore[operator]


def test_large_delta_is_not_capped() -> None:
    assert parse_retry_after("86400000") == 86400000.0
    assert parse_retry_after("9" * 400) is None  # beyond a float: garbage, not 0


@settings(max_examples=300)
@given(st.text(max_size=40))
def test_never_raises(value: str) -> None:
    result = parse_retry_after(value, now=T)
    assert result is None or result >= 0.0


# -- WWW-Authenticate ----------------------------------------------------------------------


def test_bearer_with_mcp_params() -> None:
    value = (
        'Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", '
        'scope="files:read files:write", error="insufficient_scope", '
        'error_description="The token lacks, as they say, a scope"'
    )
    assert parse_challenges([value]) == [
        Challenge(
            "bearer",
            {
                "resource_metadata": "https://mcp.example.com/.well-known/oauth-protected-resource",
                "scope": "files:read files:write",
                "error": "insufficient_scope",
                "error_description": "The token lacks, as they say, a scope",
            },
        )
    ]


def test_several_challenges_in_one_value() -> None:
    value = 'Basic realm="simple, really", Bearer realm="mcp", error=invalid_token, Negotiate'
    challenges = parse_challenges([value])
    assert [c.scheme for c in challenges] == ["basic", "bearer", "negotiate"]
    assert challenges[0].params == {"realm": "simple, really"}
    assert challenges[1].params == {"realm": "mcp", "error": "invalid_token"}
    assert challenges[2].params == {}


def test_a_bare_string_is_one_value() -> None:
    assert parse_challenges('Bearer scope="s"') == [Challenge("bearer", {"scope": "s"})]


def test_several_header_values() -> None:
    challenges = parse_challenges(['Basic realm="a"', 'Bearer scope="s"'])
    assert [(c.scheme, c.params) for c in challenges] == [
        ("basic", {"realm": "a"}),
        ("bearer", {"scope": "s"}),
    ]


def test_scheme_and_param_names_are_case_insensitive() -> None:
    assert parse_challenges(['BEARER Error="x", SCOPE="Y"']) == [
        Challenge("bearer", {"error": "x", "scope": "Y"})
    ]


def test_quoted_pairs_and_whitespace() -> None:
    (challenge,) = parse_challenges(['Bearer  realm = "say \\"hi\\"" ,  scope="a\\\\b"'])
    assert challenge.params == {"realm": 'say "hi"', "scope": "a\\b"}


def test_token68_is_not_a_param() -> None:
    challenges = parse_challenges(["Negotiate YIIC5gYGKwYBBQUCoIIC2jCC==, Bearer scope=x"])
    assert [(c.scheme, c.params) for c in challenges] == [
        ("negotiate", {}),
        ("bearer", {"scope": "x"}),
    ]


def test_first_duplicate_param_wins() -> None:
    assert parse_challenges(["Bearer scope=a, scope=b"])[0].params == {"scope": "a"}


def test_empty_and_odd_input() -> None:
    assert parse_challenges([]) == []
    assert parse_challenges(["", " , ,"]) == []
    assert parse_challenges(['realm="orphan", Bearer']) == [Challenge("bearer", {})]
    # a bare token is a scheme without params (RFC 9110 §11.3); "=v" has no name: dropped
    assert parse_challenges(["Bearer ,, scope=x, =novalue, Other"]) == [
        Challenge("bearer", {"scope": "x"}),
        Challenge("other", {}),
    ]
    assert parse_challenges(['Bearer error=""']) == [Challenge("bearer", {"error": ""})]


def test_repr_hides_values() -> None:
    (challenge,) = parse_challenges(['Bearer error_description="secret-ish text", scope="s"'])
    assert repr(challenge) == "Challenge(scheme='bearer', params=['error_description', 'scope'])"
    assert "secret" not in repr([challenge])
    scheme, params = challenge  # still a plain NamedTuple
    assert scheme == "bearer" and params["scope"] == "s"


@settings(max_examples=300)
@given(st.lists(st.text(max_size=60), max_size=3))
def test_parse_challenges_never_raises(values: list[str]) -> None:
    for challenge in parse_challenges(values):
        assert challenge.scheme == challenge.scheme.lower()
        assert all(name == name.lower() for name in challenge.params)
