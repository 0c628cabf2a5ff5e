"""conduit_mcp.cache: the per-connection store (docs/cache.md), single-threaded behaviour."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conduit_mcp.cache import CURRENT, PUBLIC, UNIDENTIFIED, Cache, CachedList, Private, PutResult
from conduit_mcp.errors import Error
from conduit_mcp.protocol import cache_rules as rules
from conduit_mcp.protocol.results import parse_page
from conduit_mcp.protocol.skills import Skill
from conduit_mcp.types import Prompt, Resource, ResourceTemplate, Tool

pytestmark = pytest.mark.timeout(20)

ALICE = "a" * 64
BOB = "b" * 64


def tool(name: str, **raw: Any) -> Tool:
    return Tool(name, raw.get("description"), {}, raw={"name": name, **raw})


def put(
    cache: Cache,
    items: Sequence[Any],
    *,
    kind: str = "tools",
    scope: str = "public",
    ttl_ms: int = 60_000,
    fetched_at: float = 100.0,
    max_ttl: float | None = None,
    credential: Any = CURRENT,
) -> PutResult:
    return cache.put(
        kind,  # type: ignore[arg-type]
        items,
        fetched_at=fetched_at,
        ttl_ms=ttl_ms,
        scope=scope,  # type: ignore[arg-type]
        max_ttl=max_ttl,
        credential=credential,
    )


# -- storing and reading ----------------------------------------------------------------


def test_an_empty_cache_has_nothing() -> None:
    cache = Cache()
    assert cache.version == 0 and cache.credential is None and not cache.closed
    for kind in rules.KINDS:
        assert cache.entry(kind) is None
        assert cache.fresh(kind, 0.0) is None
        assert cache.items(kind) is None
        assert cache.lookup(kind, "x") is None


def test_put_stores_one_whole_list_with_its_point_index() -> None:
    cache = Cache()
    tools = [tool("a"), tool("b"), tool("c")]
    result = put(cache, tools, ttl_ms=2000, fetched_at=10.0)
    entry = result.entry
    assert result.stored and result.reason is None and result.changed == ()
    assert isinstance(entry, CachedList)
    assert entry.kind == "tools" and entry.version == 1 == cache.version
    assert entry.items == tuple(tools)
    assert dict(entry.by_key) == {"a": tools[0], "b": tools[1], "c": tools[2]}
    assert (entry.fetched_at, entry.expires_at, entry.stale, entry.owner) == (
        10.0,
        12.0,
        False,
        PUBLIC,
    )
    assert cache.entry("tools") is entry
    assert cache.items("tools") == tuple(tools)
    assert cache.lookup("tools", "b") is tools[1]
    assert cache.lookup("tools", "zz") is None
    assert cache.lookup("prompts", "a") is None


def test_each_kind_is_keyed_by_its_own_field() -> None:
    cache = Cache()
    items = {
        "tools": ([tool("t")], "t"),
        "prompts": ([Prompt("p")], "p"),
        "resources": ([Resource("file:///r", "r")], "file:///r"),
        "resource_templates": ([ResourceTemplate("file:///{x}", "rt")], "file:///{x}"),
    }
    for kind, (values, _key) in items.items():
        put(cache, values, kind=kind)
    for kind, (values, key) in items.items():
        assert cache.lookup(kind, key) is values[0]  # type: ignore[arg-type]
    assert cache.version == 4


def test_items_are_stored_from_parsed_pages() -> None:
    cache = Cache()
    pages = [
        parse_page("tools", {"tools": [{"name": "a"}], "nextCursor": "1", "ttlMs": 5000}),
        parse_page("tools", {"tools": [{"name": "b"}], "ttlMs": 3000}),
    ]
    raws = [p.raw for p in pages]
    result = put(
        cache,
        [t for p in pages for t in p.items],
        ttl_ms=rules.ttl_ms(raws),
        scope=rules.scope(raws),
        fetched_at=1.0,
    )
    assert result.entry is not None
    assert [t.name for t in result.entry.items] == ["a", "b"]
    assert result.entry.expires_at == 4.0
    assert result.entry.owner == Private(None)  # no cacheScope: private, no credentials


def test_entries_are_immutable_and_by_key_is_read_only() -> None:
    cache = Cache()
    entry = put(cache, [tool("a")]).entry
    assert entry is not None
    with pytest.raises(dataclasses.FrozenInstanceError):
        entry.stale = True  # type: ignore[misc]
    with pytest.raises(TypeError):
        entry.by_key["b"] = tool("b")  # type: ignore[index]


def test_every_write_takes_a_new_version() -> None:
    cache = Cache()
    versions = [put(cache, [], kind=k).entry.version for k in rules.KINDS]  # type: ignore[union-attr]
    versions.append(put(cache, [tool("a")]).entry.version)  # type: ignore[union-attr]
    assert versions == list(range(1, len(rules.KINDS) + 2))
    assert cache.version == len(rules.KINDS) + 1


def test_an_unknown_kind_is_an_argument_error_for_every_method() -> None:
    cache = Cache()
    calls: list[Callable[[], Any]] = [
        lambda: cache.lookup("tool", "a"),  # type: ignore[arg-type]
        lambda: cache.entry("tool"),  # type: ignore[arg-type]
        lambda: cache.fresh("tool", 0.0),  # type: ignore[arg-type]
        lambda: cache.items("tool"),  # type: ignore[arg-type]
        lambda: put(cache, [], kind="tool"),
        lambda: cache.mark_stale("tool"),  # type: ignore[arg-type]
    ]
    for call in calls:
        with pytest.raises(Error) as e:
            call()
        assert (e.value.kind, e.value.reason) == ("argument", "kind")


def test_an_unhashable_key_is_an_argument_error() -> None:
    cache = Cache()
    with pytest.raises(Error) as e:
        cache.lookup("tools", ["a"])  # type: ignore[arg-type]
    assert (e.value.kind, e.value.reason) == ("argument", "key")


# -- freshness --------------------------------------------------------------------------


def test_fresh_until_it_expires() -> None:
    cache = Cache()
    entry = put(cache, [tool("a")], ttl_ms=1500, fetched_at=10.0).entry
    assert cache.fresh("tools", 10.0) is entry
    assert cache.fresh("tools", 11.4) is entry
    assert cache.fresh("tools", 11.5) is None
    # Expired is not gone: items and lookups still answer (cached_tools never fetches).
    assert cache.items("tools") == (tool("a"),)
    assert cache.lookup("tools", "a") == tool("a")


@pytest.mark.parametrize("ttl", [0, -5])
def test_a_list_with_ttl_0_is_never_fresh(ttl: int) -> None:
    cache = Cache()
    put(cache, [tool("a")], ttl_ms=ttl, fetched_at=10.0)
    for now in (9.0, 10.0, 10.0001):
        assert cache.fresh("tools", now) is None
    assert cache.entry("tools") is not None


def test_ttl_clamped_to_max_cache_ttl() -> None:
    cache = Cache()
    entry = put(cache, [tool("a")], ttl_ms=3_600_000, fetched_at=0.0, max_ttl=5.0).entry
    assert entry is not None and entry.expires_at == 5.0
    assert cache.fresh("tools", 4.9) is entry
    assert cache.fresh("tools", 5.0) is None


@settings(max_examples=60, deadline=None)
@given(
    ttl=st.integers(0, 10**7),
    cap=st.one_of(st.none(), st.floats(0, 1e4)),
    fetched=st.floats(0, 1e6),
    delta=st.floats(-10, 1e5),
)
def test_fresh_matches_the_rules(ttl: int, cap: float | None, fetched: float, delta: float) -> None:
    cache = Cache()
    put(cache, [tool("a")], ttl_ms=ttl, fetched_at=fetched, max_ttl=cap)
    now = fetched + delta
    expected = now < rules.expires_at(fetched, ttl, cap)
    assert (cache.fresh("tools", now) is not None) is expected
    if ttl == 0:
        assert cache.fresh("tools", now) is None


# -- stale marking ----------------------------------------------------------------------


def test_mark_stale_one_kind() -> None:
    cache = Cache()
    tools = put(cache, [tool("a")], kind="tools").entry
    prompts = put(cache, [Prompt("p")], kind="prompts").entry
    assert cache.mark_stale("tools") == ("tools",)
    stale = cache.entry("tools")
    assert stale is not None and stale.stale and stale is not tools
    assert (stale.version, stale.items, stale.expires_at) == (
        tools.version,  # type: ignore[union-attr]
        tools.items,  # type: ignore[union-attr]
        tools.expires_at,  # type: ignore[union-attr]
    )
    assert not tools.stale  # type: ignore[union-attr]  # the published value never changes
    assert cache.fresh("tools", 100.0) is None
    assert cache.fresh("prompts", 100.0) is prompts
    assert cache.lookup("tools", "a") == tool("a")  # stale items are still readable
    assert cache.mark_stale("resources") == ()  # nothing cached: nothing marked


def test_mark_stale_all_on_connection_loss() -> None:
    cache = Cache()
    put(cache, [tool("a")], kind="tools")
    put(cache, [Resource("file:///r", "r")], kind="resources")
    assert cache.mark_stale() == ("tools", "resources")
    for kind in ("tools", "resources"):
        entry = cache.entry(kind)  # type: ignore[arg-type]
        assert entry is not None and entry.stale
        assert cache.fresh(kind, 100.0) is None  # type: ignore[arg-type]
    assert cache.mark_stale() == ("tools", "resources")  # idempotent


def test_a_new_put_clears_stale() -> None:
    cache = Cache()
    put(cache, [tool("a")])
    cache.mark_stale()
    entry = put(cache, [tool("a")], fetched_at=200.0).entry
    assert entry is not None and not entry.stale
    assert cache.fresh("tools", 200.0) is entry


# -- private results --------------------------------------------------------------------


def test_private_stored_with_the_credential_identity() -> None:
    cache = Cache(ALICE)
    entry = put(cache, [tool("a")], scope="private").entry
    assert entry is not None and entry.owner == Private(ALICE)
    assert cache.fresh("tools", 100.0) is entry


def test_private_list_is_invisible_and_deleted_under_another_credential() -> None:
    cache = Cache(ALICE)
    put(cache, [tool("a")], scope="private")
    assert cache.set_credential(BOB) is True
    assert cache.credential == BOB
    assert cache.entry("tools") is None
    assert cache.fresh("tools", 100.0) is None
    assert cache.items("tools") is None
    assert cache.lookup("tools", "a") is None
    # Going back does not resurrect it: it was deleted, not hidden.
    assert cache.set_credential(ALICE) is True
    assert cache.entry("tools") is None and cache.lookup("tools", "a") is None


def test_credential_change_deletes_every_private_list_at_once_public_survive() -> None:
    cache = Cache(ALICE)
    put(cache, [tool("t")], kind="tools", scope="private")
    put(cache, [Prompt("p")], kind="prompts", scope="private")
    resources = put(cache, [Resource("file:///r", "r")], kind="resources").entry
    templates = put(cache, [ResourceTemplate("u/{x}", "x")], kind="resource_templates").entry
    before = cache._snapshot  # one swap: the old snapshot is left whole for its readers
    assert cache.set_credential(BOB)
    assert cache.entry("tools") is None and cache.entry("prompts") is None
    assert cache.lookup("tools", "t") is None and cache.lookup("prompts", "p") is None
    assert cache.entry("resources") is resources
    assert cache.entry("resource_templates") is templates
    assert cache.lookup("resources", "file:///r") is resources.items[0]  # type: ignore[union-attr]
    assert sorted(before.lists) == ["prompts", "resource_templates", "resources", "tools"]  # type: ignore[union-attr]


def test_same_credential_is_not_a_change() -> None:
    cache = Cache(ALICE)
    entry = put(cache, [tool("a")], scope="private").entry
    assert cache.set_credential(ALICE) is False
    assert cache.entry("tools") is entry


def test_no_credentials_is_an_identity_too() -> None:
    cache = Cache()
    put(cache, [tool("a")], scope="private")
    assert cache.lookup("tools", "a") is not None
    assert cache.set_credential(ALICE)
    assert cache.lookup("tools", "a") is None


def test_unidentified_auth_callable_private_results_are_never_stored() -> None:
    cache = Cache(UNIDENTIFIED)
    result = put(cache, [tool("a")], scope="private")
    assert not result.stored and result.entry is None and result.reason == "unidentified"
    assert cache.entry("tools") is None and cache.lookup("tools", "a") is None
    assert cache.version == 0
    # Public results of the same connection are stored as usual.
    assert put(cache, [tool("a")], scope="public").stored
    assert cache.lookup("tools", "a") is not None


def test_an_unstorable_private_answer_drops_the_older_list() -> None:
    cache = Cache(UNIDENTIFIED)
    put(cache, [tool("old")], scope="public")
    result = put(cache, [tool("new")], scope="private")
    assert not result.stored
    assert cache.entry("tools") is None and cache.lookup("tools", "old") is None


def test_private_result_fetched_with_old_credentials_is_not_stored() -> None:
    cache = Cache(ALICE)
    cache.set_credential(BOB)  # the refresh below was fetched before this
    result = put(cache, [tool("a")], scope="private", credential=ALICE)
    assert not result.stored and result.reason == "credential_changed"
    assert cache.lookup("tools", "a") is None
    # A public answer is everyone's, whoever fetched it.
    assert put(cache, [tool("a")], scope="public", credential=ALICE).stored
    # And one fetched with the current credentials is stored.
    entry = put(cache, [tool("a")], scope="private", credential=BOB).entry
    assert entry is not None and entry.owner == Private(BOB)


# -- changed definitions ----------------------------------------------------------------


def test_put_reports_changed_definitions_against_the_previous_list() -> None:
    cache = Cache()
    put(cache, [tool("a", description="1"), tool("b", description="1"), tool("gone")])
    result = put(cache, [tool("b", description="2"), tool("a", description="1"), tool("new")])
    assert result.changed == ("b",)
    assert put(cache, result.entry.items).changed == ()  # type: ignore[union-attr]


def test_changed_is_only_against_the_same_owner() -> None:
    cache = Cache(ALICE)
    put(cache, [tool("a", description="1")], scope="public")
    assert put(cache, [tool("a", description="2")], scope="private").changed == ()
    assert put(cache, [tool("a", description="3")], scope="private").changed == ("a",)


def test_changed_is_per_kind() -> None:
    cache = Cache()
    put(cache, [tool("x", description="1")], kind="tools")
    result = put(cache, [Prompt("x", "2", raw={"name": "x"})], kind="prompts")
    assert result.changed == ()


# -- close ------------------------------------------------------------------------------

READERS: list[tuple[str, Callable[[Cache], Any]]] = [
    ("lookup", lambda c: c.lookup("tools", "a")),
    ("lookup_unknown_kind", lambda c: c.lookup("nope", "a")),
    ("entry", lambda c: c.entry("tools")),
    ("fresh", lambda c: c.fresh("tools", 100.0)),
    ("items", lambda c: c.items("tools")),
    ("credential", lambda c: c.credential),
    ("version", lambda c: c.version),
]


@pytest.mark.parametrize(("name", "read"), READERS, ids=[n for n, _ in READERS])
def test_every_read_after_close_is_cache_gone(name: str, read: Callable[[Cache], Any]) -> None:
    cache = Cache(ALICE)
    put(cache, [tool("a")])
    cache.close()
    with pytest.raises(Error) as e:
        read(cache)
    assert (e.value.kind, e.value.reason) == ("unavailable", "cache_gone")


def test_close_is_idempotent_and_writes_after_it_are_ignored() -> None:
    cache = Cache()
    cache.close()
    cache.close()
    assert cache.closed
    result = put(cache, [tool("a")])
    assert not result.stored and result.reason == "closed"
    assert cache.mark_stale() == ()
    assert cache.set_credential(ALICE) is False
    assert repr(cache) == "<Cache closed>"


def test_a_reader_holding_an_entry_keeps_it_after_close() -> None:
    cache = Cache()
    entry = put(cache, [tool("a")]).entry
    cache.close()
    assert entry is not None and entry.by_key["a"] == tool("a")


def test_repr_shows_no_credential() -> None:
    cache = Cache(ALICE)
    put(cache, [tool("a")], scope="private")
    assert ALICE not in repr(cache)
    assert repr(cache) == "<Cache version=1 lists=['tools']>"


# -- a model-based check ----------------------------------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("put"),
            st.sampled_from(rules.KINDS),
            st.sampled_from(["public", "private"]),
            st.lists(st.sampled_from("abc"), max_size=3),
        ),
        st.tuples(st.just("stale"), st.one_of(st.none(), st.sampled_from(rules.KINDS))),
        st.tuples(st.just("cred"), st.sampled_from([None, ALICE, BOB, UNIDENTIFIED])),
    ),
    max_size=25,
)


@settings(max_examples=80, deadline=None)
@given(ops)
def test_the_cache_agrees_with_a_simple_model(operations: list[tuple[Any, ...]]) -> None:
    """Every visible list belongs to the current identity (or is public), and lookups agree
    with the entry of the same kind."""
    make = {
        "tools": lambda k: Tool(k, None, {}, raw={"name": k}),
        "prompts": lambda k: Prompt(k, raw={"name": k}),
        "resources": lambda k: Resource(k, k, raw={"uri": k}),
        "resource_templates": lambda k: ResourceTemplate(k, k, raw={"uriTemplate": k}),
        "skills": lambda k: Skill(k, k, "d", {}, None, {"uri": k}),
    }
    cache = Cache()
    model: dict[str, tuple[Any, tuple[str, ...], bool]] = {}  # kind -> (owner, keys, stale)
    for op in operations:
        if op[0] == "put":
            _, kind, scope, keys = op
            owner = rules.owner(scope, cache.credential)
            put(cache, [make[kind](k) for k in keys], kind=kind, scope=scope)
            if owner is None:
                model.pop(kind, None)
            else:
                model[kind] = (owner, tuple(dict.fromkeys(keys)), False)
        elif op[0] == "stale":
            cache.mark_stale(op[1])
            for kind in model if op[1] is None else [op[1]]:
                if kind in model:
                    model[kind] = (*model[kind][:2], True)
        else:
            if cache.set_credential(op[1]):
                model = {k: v for k, v in model.items() if v[0] == PUBLIC}
        for kind in rules.KINDS:
            entry = cache.entry(kind)
            if kind not in model:
                assert entry is None
                assert all(cache.lookup(kind, k) is None for k in "abc")
                continue
            owner, keys, stale = model[kind]
            assert entry is not None
            assert (entry.owner, tuple(entry.by_key), entry.stale) == (owner, keys, stale)
            assert rules.visible(entry.owner, cache.credential)
            for k in "abc":
                assert cache.lookup(kind, k) is entry.by_key.get(k)
