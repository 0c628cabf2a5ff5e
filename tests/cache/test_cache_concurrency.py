"""conduit_mcp.cache under concurrency: one writer, lock-free readers on 8 threads.

Acceptance: readers running during 1,000 list rewrites never see a list, or a point lookup,
from a mix of versions. Every rewrite's items carry that rewrite's version in their raw data,
so a reader can tell. The GIL switch interval is shortened meanwhile so that readers and the
writer interleave at many more points than they would by default. Nothing sleeps: threads
meet on a Barrier and stop on an Event, each wait with a deadline.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from conduit_mcp.cache import PUBLIC, Cache, Private
from conduit_mcp.errors import Error
from conduit_mcp.protocol import cache_rules as rules
from conduit_mcp.types import Tool

pytestmark = pytest.mark.timeout(60)

READERS = 8
REWRITES = 1_000
DEADLINE = 30.0


@contextmanager
def fast_switching() -> Iterator[None]:
    before = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def rewrite(version: int, credential: str | None = None) -> tuple[Tool, ...]:
    """The items of one rewrite: ``t0`` always, then a varying number of others."""
    count = 1 + (version * 7) % 23
    return tuple(
        Tool(
            f"t{i}",
            f"version {version}",
            {},
            raw={
                "name": f"t{i}",
                "description": f"version {version}",
                "v": version,
                "c": credential,
            },
        )
        for i in range(count)
    )


def run(
    readers: list[Callable[[threading.Event], None]], writer: Callable[[], None]
) -> list[BaseException]:
    """Run the readers until the writer is done; returns every exception a thread raised."""
    errors: list[BaseException] = []
    start = threading.Barrier(len(readers) + 1, timeout=DEADLINE)
    stop = threading.Event()

    def guarded(body: Callable[[], None]) -> None:
        try:
            start.wait()
            body()
        except BaseException as e:  # collected, asserted by the test thread
            errors.append(e)
            stop.set()

    threads = [
        threading.Thread(target=guarded, args=(lambda r=r: r(stop),), daemon=True) for r in readers
    ]
    with fast_switching():
        for t in threads:
            t.start()
        try:
            guarded(writer)
        finally:
            stop.set()
            for t in threads:
                t.join(DEADLINE)
    assert not any(t.is_alive() for t in threads), "a reader did not stop"
    return errors


def check_entry(entry: Any, published: dict[int, tuple[Tool, ...]]) -> int:
    """One whole version: every item carries the entry's version; index and items agree."""
    v = entry.version
    assert all(item.raw["v"] == v for item in entry.items), "a list mixing versions"
    assert entry.items == published[v] and entry.items[0] is published[v][0]
    assert len(entry.by_key) == len(entry.items)
    assert all(entry.by_key[item.name] is item for item in entry.items)
    return v


def test_readers_never_see_a_mix_of_versions_during_1000_rewrites() -> None:
    cache = Cache()
    published: dict[int, tuple[Tool, ...]] = {}
    seen: list[set[int]] = [set() for _ in range(READERS)]
    reads = [0] * READERS

    def writer() -> None:
        for _ in range(REWRITES):
            version = cache.version + 1
            items = rewrite(version)
            published[version] = items  # before the put: a reader may see it right after
            result = cache.put(
                "tools", items, fetched_at=0.0, ttl_ms=60_000, scope="public", max_ttl=None
            )
            assert result.entry is not None and result.entry.version == version
            if version % 10 == 0:
                cache.mark_stale()

    def reader(n: int) -> Callable[[threading.Event], None]:
        def body(stop: threading.Event) -> None:
            last = 0
            while not stop.is_set():
                reads[n] += 1
                entry = cache.entry("tools")
                if entry is not None:
                    v = check_entry(entry, published)
                    assert v >= last, "went back in time"
                    last = v
                    seen[n].add(v)
                fresh = cache.fresh("tools", 1.0)
                if fresh is not None:
                    assert not fresh.stale
                    last = max(last, check_entry(fresh, published))
                items = cache.items("tools")
                if items is not None:
                    assert len({item.raw["v"] for item in items}) == 1
                # t0 is in every version: once any version was seen, it is always found.
                for key in ("t0", f"t{reads[n] % 23}"):
                    item = cache.lookup("tools", key)
                    if item is None:
                        assert key != "t0" or last == 0
                        continue
                    w = item.raw["v"]
                    assert w >= last, "a lookup from an older version than a read before it"
                    assert any(p is item for p in published[w]), "not an item of version w"
                    last = w

        return body

    errors = run([reader(n) for n in range(READERS)], writer)
    assert not errors, errors[0]
    assert cache.version == REWRITES
    assert all(reads), "every reader ran"
    assert len(set().union(*seen)) > 10, "readers and the writer did not interleave"


def test_credential_changes_never_show_a_private_list_to_another_identity() -> None:
    cache = Cache("alice")
    published: dict[int, tuple[Tool, ...]] = {}
    identities = ["alice", "bob", None]

    def writer() -> None:
        for i in range(REWRITES):
            identity = identities[i % 3]
            cache.set_credential(identity)
            version = cache.version + 1
            scope = "public" if i % 5 == 0 else "private"
            items = rewrite(version, identity if scope == "private" else "public")
            published[version] = items
            cache.put("tools", items, fetched_at=0.0, ttl_ms=60_000, scope=scope, max_ttl=None)

    def reader(stop: threading.Event) -> None:
        while not stop.is_set():
            # The invariant every reader relies on, read from one snapshot.
            snap = cache._snapshot
            for entry in snap.lists.values():
                assert rules.visible(entry.owner, snap.credential)
            entry = cache.entry("tools")
            if entry is not None:
                check_entry(entry, published)
                tag = "public" if entry.owner == PUBLIC else entry.owner.credential
                assert entry.owner == PUBLIC or entry.owner == Private(tag)
                assert all(item.raw["c"] == tag for item in entry.items)
            item = cache.lookup("tools", "t0")
            if item is not None:
                assert any(p is item for p in published[item.raw["v"]])

    errors = run([reader] * READERS, writer)
    assert not errors, errors[0]


def test_close_while_reading_gives_results_or_cache_gone_only() -> None:
    cache = Cache()
    cache.put("tools", rewrite(1), fetched_at=0.0, ttl_ms=60_000, scope="public", max_ttl=None)
    gone = [0] * READERS
    before_close = threading.Barrier(READERS + 1, timeout=DEADLINE)

    def writer() -> None:
        before_close.wait()  # every reader has read the live cache at least once
        cache.close()

    def reader(n: int) -> Callable[[threading.Event], None]:
        reads: list[Callable[[], Any]] = [
            lambda: cache.lookup("tools", "t0"),
            lambda: cache.entry("tools"),
            lambda: cache.fresh("tools", 1.0),
            lambda: cache.items("tools"),
            lambda: cache.version,
            lambda: cache.credential,
        ]

        def body(stop: threading.Event) -> None:
            assert cache.lookup("tools", "t0") is not None
            before_close.wait()
            for _ in range(100_000):  # bounded: a read that never fails ends the test
                if gone[n] >= 200:
                    return
                for read in reads:
                    try:
                        read()
                    except Error as e:
                        assert (e.kind, e.reason) == ("unavailable", "cache_gone")
                        gone[n] += 1

        return body

    errors = run([reader(n) for n in range(READERS)], writer)
    assert not errors, errors[0]
    assert all(count >= 200 for count in gone)
