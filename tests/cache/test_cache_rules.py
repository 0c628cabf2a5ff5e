"""protocol.cache_rules: the freshness and private-result rules (docs/cache.md) as pure
functions."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from conduit_mcp.errors import Error
from conduit_mcp.protocol import cache_rules as rules
from conduit_mcp.protocol.cache_rules import PUBLIC, UNIDENTIFIED, Private
from conduit_mcp.protocol.results import parse_page
from conduit_mcp.types import Prompt, Resource, ResourceTemplate, Tool

pytestmark = pytest.mark.timeout(20)

# Values that are not a JSON integer of ms: "a missing, negative or non-integer ttlMs means 0"
# (docs/cache.md, "Freshness") (a bool is not an integer; a float is refused even when integral).
NOT_TTLS = [None, -1, -1000, 0, 5.0, 1.5, True, False, "1000", [1000], {"ms": 1}]

ttls = st.integers(min_value=0, max_value=10**12)
bad_ttls = st.one_of(
    st.integers(max_value=-1),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(),
    st.none(),
)
page_hint = st.one_of(st.just({}), ttls.map(lambda t: {"ttlMs": t}))


def tool(name: str, **raw: object) -> Tool:
    return Tool(name, None, {}, raw={"name": name, **raw})


# -- ttl_ms -----------------------------------------------------------------------------


def test_ttl_is_the_minimum_over_pages() -> None:
    assert rules.ttl_ms([{"ttlMs": 3000}, {"ttlMs": 1000}, {"ttlMs": 2000}]) == 1000
    assert rules.ttl_ms([{"ttlMs": 60_000}]) == 60_000


@pytest.mark.parametrize("value", NOT_TTLS)
def test_a_missing_negative_or_non_integer_ttl_on_any_page_means_0(value: object) -> None:
    assert rules.ttl_ms([{"ttlMs": value}]) == 0
    assert rules.ttl_ms([{"ttlMs": 5000}, {"ttlMs": value}, {"ttlMs": 7000}]) == 0


def test_missing_ttl_and_no_pages_mean_0() -> None:
    assert rules.ttl_ms([{"ttlMs": 5000}, {}]) == 0
    assert rules.ttl_ms([]) == 0


@given(st.lists(ttls, min_size=1, max_size=8))
def test_ttl_of_integer_pages_is_their_min(values: list[int]) -> None:
    assert rules.ttl_ms([{"ttlMs": v} for v in values]) == min(values)


@given(st.lists(ttls, max_size=6), bad_ttls, st.lists(ttls, max_size=6))
def test_one_bad_page_anywhere_gives_0(before: list[int], bad: object, after: list[int]) -> None:
    pages = [{"ttlMs": v} for v in before] + [{"ttlMs": bad}] + [{"ttlMs": v} for v in after]
    assert rules.ttl_ms(pages) == 0


def test_ttl_is_read_from_parsed_pages_raw() -> None:
    page = parse_page("tools", {"tools": [], "ttlMs": 1234, "cacheScope": "public"})
    assert rules.ttl_ms([page.raw]) == 1234
    assert rules.scope([page.raw]) == "public"


# -- scope ------------------------------------------------------------------------------


def test_public_only_when_every_page_said_so() -> None:
    public = {"cacheScope": "public"}
    assert rules.scope([public]) == "public"
    assert rules.scope([public, public, public]) == "public"
    assert rules.scope([public, {"cacheScope": "private"}]) == "private"
    assert rules.scope([public, {}]) == "private"


@pytest.mark.parametrize("value", [None, "private", "PUBLIC", "Public", " public", True, 1])
def test_anything_but_public_is_private(value: object) -> None:
    assert rules.scope([{"cacheScope": value}]) == "private"


def test_legacy_results_without_scope_and_no_pages_are_private() -> None:
    assert rules.scope([{}]) == "private"
    assert rules.scope([{"tools": []}, {"tools": []}]) == "private"
    assert rules.scope([]) == "private"


@given(st.lists(st.sampled_from(["public", "private", None, "x"]), min_size=1, max_size=8))
def test_scope_property(scopes: list[str | None]) -> None:
    pages = [{} if s is None else {"cacheScope": s} for s in scopes]
    expected = "public" if all(s == "public" for s in scopes) else "private"
    assert rules.scope(pages) == expected


# -- expires_at and freshness -----------------------------------------------------------


def test_expires_at_is_fetched_at_plus_ttl() -> None:
    assert rules.expires_at(100.0, 2500, None) == 102.5


def test_ttl_is_clamped_to_max_cache_ttl() -> None:
    assert rules.expires_at(100.0, 3_600_000, 30.0) == 130.0
    assert rules.expires_at(100.0, 1000, 30.0) == 101.0  # below the clamp: unchanged
    assert rules.expires_at(100.0, 1000, 0) == -math.inf  # clamped to 0: never fresh


@given(st.floats(0, 1e9), ttls, st.one_of(st.none(), st.floats(0, 1e6)))
def test_expires_at_never_exceeds_the_clamp(fetched: float, ttl: int, cap: float | None) -> None:
    at = rules.expires_at(fetched, ttl, cap)
    if ttl == 0 or cap == 0:
        assert at == -math.inf
    else:
        assert at > fetched or at == fetched  # tiny ttls may round away on huge clocks
        if cap is not None:
            assert at <= fetched + cap


@given(st.floats(-1e9, 1e9), st.floats(-1e9, 1e9), st.one_of(st.none(), st.floats(0, 1e6)))
def test_a_list_with_ttl_0_is_never_fresh(fetched: float, now: float, cap: float | None) -> None:
    at = rules.expires_at(fetched, 0, cap)
    assert not rules.servable(PUBLIC, at, False, None, now)


@pytest.mark.parametrize("value", NOT_TTLS)
def test_a_bad_ttl_is_never_fresh_even_right_away(value: object) -> None:
    at = rules.expires_at(50.0, rules.ttl_ms([{"ttlMs": value}]), None)
    for now in (49.0, 50.0, 50.001):
        assert not rules.servable(PUBLIC, at, False, None, now)


def test_fresh_until_expiry_then_not() -> None:
    at = rules.expires_at(10.0, 1000, None)
    assert rules.servable(PUBLIC, at, False, None, 10.0)
    assert rules.servable(PUBLIC, at, False, None, 10.999)
    assert not rules.servable(PUBLIC, at, False, None, 11.0)
    assert not rules.servable(PUBLIC, at, False, None, 12.0)


def test_a_stale_list_is_never_servable() -> None:
    at = rules.expires_at(10.0, 60_000, None)
    assert not rules.servable(PUBLIC, at, True, None, 10.0)


# -- owner and visibility ---------------------------------------------------------------


def test_owner_public_and_private() -> None:
    assert rules.owner("public", None) == PUBLIC
    assert rules.owner("public", "abc") == PUBLIC
    assert rules.owner("public", UNIDENTIFIED) == PUBLIC  # public results are shareable
    assert rules.owner("private", "abc") == Private("abc")
    assert rules.owner("private", None) == Private(None)  # no credentials is an identity


def test_unidentified_auth_callable_private_results_are_never_stored() -> None:
    assert rules.owner("private", UNIDENTIFIED) is None


def test_private_visible_only_under_the_same_identity() -> None:
    assert rules.visible(Private("a"), "a")
    assert not rules.visible(Private("a"), "b")
    assert not rules.visible(Private("a"), None)
    assert not rules.visible(Private(None), "a")
    assert rules.visible(Private(None), None)
    assert not rules.visible(Private(UNIDENTIFIED), UNIDENTIFIED)  # identifies nobody


@given(st.one_of(st.none(), st.text(max_size=8)))
def test_public_is_visible_under_any_identity(credential: str | None) -> None:
    assert rules.visible(PUBLIC, credential)


def test_servable_needs_visibility() -> None:
    at = rules.expires_at(0.0, 60_000, None)
    assert rules.servable(Private("a"), at, False, "a", 1.0)
    assert not rules.servable(Private("a"), at, False, "b", 1.0)


# -- keys and changed definitions -------------------------------------------------------


def test_keys_per_kind() -> None:
    assert rules.key_of("tools")(tool("add")) == "add"
    assert rules.key_of("prompts")(Prompt("greet")) == "greet"
    assert rules.key_of("resources")(Resource("file:///a", "a")) == "file:///a"
    assert rules.key_of("resource_templates")(ResourceTemplate("file:///{p}", "t")) == (
        "file:///{p}"
    )


@pytest.mark.parametrize("kind", ["tool", "", "Tools", None, 3])
def test_an_unknown_kind_is_an_argument_error(kind: object) -> None:
    with pytest.raises(Error) as e:
        rules.key_of(kind)  # type: ignore[arg-type]
    assert (e.value.kind, e.value.reason) == ("argument", "kind")


def test_index_first_item_wins_on_duplicate_keys() -> None:
    first, second = tool("a", n=1), tool("a", n=2)
    by_key = rules.index("tools", [first, tool("b"), second])
    assert list(by_key) == ["a", "b"]
    assert by_key["a"] is first


def test_changed_definitions_compares_the_raw_json_of_kept_names() -> None:
    old = rules.index("tools", [tool("a", d=1), tool("b", d=1), tool("gone")])
    new = rules.index("tools", [tool("new"), tool("b", d=2), tool("a", d=1)])
    assert rules.changed_definitions(old, new) == ["b"]


def test_any_raw_difference_is_a_change() -> None:
    old = rules.index("tools", [tool("a", _meta={"x": 1})])
    new = rules.index("tools", [tool("a", _meta={"x": 2})])
    assert rules.changed_definitions(old, new) == ["a"]
    assert rules.changed_definitions(old, old) == []
    assert rules.changed_definitions({}, new) == []


@given(
    st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 2)),
    st.dictionaries(st.sampled_from("abcdef"), st.integers(0, 2)),
)
def test_changed_definitions_property(old_v: dict[str, int], new_v: dict[str, int]) -> None:
    old = {k: tool(k, v=v) for k, v in old_v.items()}
    new = {k: tool(k, v=v) for k, v in new_v.items()}
    expected = [k for k in new_v if k in old_v and old_v[k] != new_v[k]]
    assert rules.changed_definitions(old, new) == expected
