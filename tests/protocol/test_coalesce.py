"""protocol.coalesce: list_changed coalescing and the cache refresh gate (docs/connection.md,
"Notifications"), as unit tests and as properties over arbitrary arrival sequences.

Times are multiples of 1/64 s, so every sum the classes compute is exact and the spacing
properties are checked without a tolerance.
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conduit_mcp.errors import Error
from conduit_mcp.protocol.coalesce import Coalescer, RefreshGate, is_list_changed

pytestmark = pytest.mark.timeout(60)

TOOLS = "notifications/tools/list_changed"
PROMPTS = "notifications/prompts/list_changed"
METHODS = [TOOLS, PROMPTS, "notifications/resources/list_changed"]
TICK = 1 / 64


# -- Coalescer: examples ------------------------------------------------------------------------


def test_lone_notification_is_delivered_at_once_and_needs_no_timer() -> None:
    c = Coalescer()
    assert c.offer(TOOLS, 1.0) is True
    assert c.next_deadline() is None
    assert c.due(100.0) == []


def test_burst_gives_leading_and_one_trailing() -> None:
    c = Coalescer(0.25)
    assert c.offer(TOOLS, 1.0)
    assert [c.offer(TOOLS, 1.0 + i * 0.01) for i in range(1, 10)] == [False] * 9
    assert c.held() == {TOOLS}
    assert c.next_deadline() == 1.25
    assert c.due(1.2) == []
    assert c.due(1.25) == [TOOLS]
    assert c.next_deadline() is None
    assert c.held() == frozenset()


def test_trailing_delivery_opens_a_window_so_a_flood_gives_one_per_window() -> None:
    c = Coalescer(0.25)
    delivered = []
    t = 0.0
    while t < 2.0:
        deadline = c.next_deadline()
        if deadline is not None and deadline <= t:
            delivered += [deadline for _ in c.due(deadline)]
        if c.offer(TOOLS, t):
            delivered.append(t)
        t += TICK
    assert delivered == [0.0, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 1.75]


def test_arrival_after_a_trailing_delivery_waits_for_its_window() -> None:
    c = Coalescer(0.25)
    c.offer(TOOLS, 0.0)
    c.offer(TOOLS, 0.1)
    assert c.due(0.25) == [TOOLS]
    assert c.offer(TOOLS, 0.3) is False
    assert c.next_deadline() == 0.5


def test_window_with_nothing_held_closes_and_the_next_arrival_leads() -> None:
    c = Coalescer(0.25)
    c.offer(TOOLS, 0.0)
    assert c.offer(TOOLS, 0.25) is True  # the window [0, 0.25) is over
    assert c.offer(TOOLS, 0.49) is False


def test_late_owner_arrival_after_window_end_covers_the_held_one() -> None:
    c = Coalescer(0.25)
    c.offer(TOOLS, 0.0)
    c.offer(TOOLS, 0.1)  # held, due at 0.25
    assert c.offer(TOOLS, 0.3) is True  # the owner's timer has not fired yet: deliver this now
    assert c.next_deadline() is None
    assert c.due(0.3) == []


def test_methods_are_independent() -> None:
    c = Coalescer(0.25)
    assert c.offer(TOOLS, 0.0)
    assert c.offer(PROMPTS, 0.1)
    assert not c.offer(TOOLS, 0.1)
    assert not c.offer(PROMPTS, 0.2)
    assert c.next_deadline() == 0.25
    assert c.due(0.3) == [TOOLS]
    assert c.due(0.35) == [PROMPTS]


def test_many_distinct_methods_do_not_grow_the_table_without_bound() -> None:
    c = Coalescer(0.25)
    for i in range(10_000):
        assert c.offer(f"notifications/x{i}/list_changed", i * 1.0)
    assert len(c._open) <= 130


@pytest.mark.parametrize("bad", [0, -1, float("nan"), "0.25", True])
def test_bad_window_or_interval_is_refused(bad: object) -> None:
    with pytest.raises(Error) as err:
        Coalescer(bad)  # type: ignore[arg-type]
    assert (err.value.kind, err.value.reason) == ("argument", "window")
    with pytest.raises(Error) as err:
        RefreshGate(bad)  # type: ignore[arg-type]
    assert (err.value.kind, err.value.reason) == ("argument", "min_interval")


def test_is_list_changed() -> None:
    assert is_list_changed(TOOLS)
    assert is_list_changed("notifications/resources/list_changed")
    assert not is_list_changed("notifications//list_changed")
    assert not is_list_changed("notifications/list_changed")
    assert not is_list_changed("notifications/message")
    assert not is_list_changed("tools/list_changed")


# -- Coalescer: properties ----------------------------------------------------------------------

arrivals = st.lists(
    st.tuples(st.integers(0, 40), st.sampled_from(METHODS)),  # (gap in ticks, method)
    min_size=1,
    max_size=60,
)


@settings(max_examples=300, deadline=None)
@given(arrivals, st.integers(0, 20), st.integers(4, 32))
def test_coalescer_properties(
    gaps: list[tuple[int, str]], lag_ticks: int, window_ticks: int
) -> None:
    """For any arrivals and any owner timer lag: per method, deliveries at least a window
    apart (so at most two in any window-length interval starting at a delivery); every
    arrival followed by a delivery at or after it within window + lag; a notification with
    nothing pending and no delivery in the last window is delivered at once."""
    window, lag = window_ticks * TICK, lag_ticks * TICK
    c = Coalescer(window)
    timeline: list[tuple[float, str]] = []
    t = 0.0
    for gap, method in gaps:
        t += gap * TICK
        timeline.append((t, method))

    delivered: dict[str, list[float]] = defaultdict(list)
    undelivered: dict[str, list[float]] = defaultdict(list)
    covered: list[tuple[float, float]] = []  # (arrival, delivery)

    def deliver(method: str, now: float) -> None:
        delivered[method].append(now)
        covered.extend((a, now) for a in undelivered.pop(method, []))

    def run_timers(until: float | None) -> None:
        while (deadline := c.next_deadline()) is not None:
            fire = deadline + lag
            if until is not None and fire > until:
                return
            due = c.due(fire)
            assert due, "next_deadline promised something due"
            for method in due:
                deliver(method, fire)

    for now, method in timeline:
        run_timers(now)
        quiet = not undelivered.get(method) and (
            not delivered[method] or now >= delivered[method][-1] + window
        )
        undelivered[method].append(now)
        if c.offer(method, now):
            deliver(method, now)
        else:
            assert not quiet, "a lone notification must be delivered at once"
    run_timers(None)

    assert not undelivered or not any(undelivered.values()), "an arrival was lost"
    assert len(covered) == len(timeline)
    for arrival, delivery in covered:
        assert arrival <= delivery <= arrival + window + lag
    for method, times in delivered.items():
        assert times == sorted(times)
        for a, b in pairwise(times):
            assert b - a >= window
        for i, start in enumerate(times):
            assert sum(1 for x in times[i:] if x <= start + window) <= 2
        last_arrival = max(a for a, m in timeline if m == method)
        assert times[-1] >= last_arrival


# -- RefreshGate: examples ----------------------------------------------------------------------


def test_first_request_starts_at_once() -> None:
    g = RefreshGate(1.0)
    assert g.request("tools", 10.0) == 10.0
    assert g.due(10.0) == ["tools"]
    g.started("tools", 10.0)
    assert g.running("tools")
    assert g.next_deadline() is None
    assert g.finished("tools", 10.2) is None
    assert not g.running("tools")


def test_requests_while_running_owe_one_follow_up_rate_limited() -> None:
    g = RefreshGate(1.0)
    g.started("tools", 10.0)
    assert [g.request("tools", 10.0 + i / 10) for i in range(1, 5)] == [None] * 4
    assert g.finished("tools", 10.5) == 11.0
    assert g.next_deadline() == 11.0
    assert g.due(10.9) == []
    assert g.request("tools", 10.9) is None  # already scheduled: coalesced
    assert g.due(11.0) == ["tools"]
    g.started("tools", 11.0)
    assert g.finished("tools", 11.1) is None


def test_follow_up_after_a_slow_refresh_starts_when_it_finishes() -> None:
    g = RefreshGate(1.0)
    g.started("tools", 0.0)
    g.request("tools", 0.5)
    assert g.finished("tools", 3.0) == 3.0


def test_request_within_interval_of_last_start_is_delayed() -> None:
    g = RefreshGate(1.0)
    g.started("tools", 0.0)
    g.finished("tools", 0.1)
    assert g.request("tools", 0.4) == 1.0
    assert g.request("tools", 0.6) is None
    assert g.request("tools", 2.0) is None  # still scheduled (the owner is late)
    assert g.due(2.0) == ["tools"]


def test_kinds_are_independent_and_cancel_drops_a_schedule() -> None:
    g = RefreshGate(1.0)
    g.started("tools", 0.0)
    g.finished("tools", 0.1)
    assert g.request("tools", 0.2) == 1.0
    assert g.request("prompts", 0.2) == 0.2
    assert g.next_deadline() == 0.2
    g.cancel("prompts")
    assert g.next_deadline() == 1.0
    g.cancel("tools")
    assert g.next_deadline() is None
    assert g.request("tools", 0.5) == 1.0  # the rate limit is kept
    g.cancel("never-seen")


def test_cancel_drops_an_owed_follow_up() -> None:
    g = RefreshGate(1.0)
    g.started("tools", 0.0)
    g.request("tools", 0.1)
    g.cancel("tools")
    assert g.finished("tools", 0.2) is None


# -- RefreshGate: properties --------------------------------------------------------------------

requests = st.lists(
    st.tuples(st.integers(0, 100), st.sampled_from(["tools", "prompts"])),
    min_size=1,
    max_size=50,
)


@settings(max_examples=300, deadline=None)
@given(
    requests,
    st.lists(st.integers(1, 200), min_size=1, max_size=20),  # refresh durations, cycled
    st.integers(0, 20),  # the owner's timer lag
    st.permutations(["finish", "start", "request"]),  # which happens first at equal times
)
def test_refresh_gate_properties(
    gaps: list[tuple[int, str]], durations: list[int], lag_ticks: int, order: list[str]
) -> None:
    """For any requests, refresh durations, timer lag and tie order: per kind, starts at least
    min_interval apart, never two refreshes at once, a request while one runs costs at most
    one follow-up, and after the last request a refresh starts at or after it."""
    g = RefreshGate(1.0)
    lag = lag_ticks * TICK
    rank = {name: i for i, name in enumerate(order)}
    events: list[tuple[float, int, int, str, str]] = []  # (time, rank, seq, what, kind)
    seq = 0

    def push(when: float, what: str, kind: str) -> None:
        nonlocal seq
        seq += 1
        heapq.heappush(events, (when, rank[what], seq, what, kind))

    t = 0.0
    last_request: dict[str, float] = {}
    for gap, kind in gaps:
        t += gap * TICK
        push(t, "request", kind)
        last_request[kind] = t

    starts: dict[str, list[float]] = defaultdict(list)
    running: dict[str, bool] = defaultdict(bool)
    n_done = 0

    def schedule(kind: str, at: float | None, now: float) -> None:
        if at is None:
            return
        assert at >= now
        # Starting now happens at once; a later start waits for the owner's (late) timer.
        push(at if at == now else at + lag, "start", kind)

    while events:
        now, _, _, what, kind = heapq.heappop(events)
        if what == "request":
            schedule(kind, g.request(kind, now), now)
        elif what == "start":
            assert kind in g.due(now)
            assert not running[kind]
            g.started(kind, now)
            running[kind] = True
            starts[kind].append(now)
            push(now + durations[n_done % len(durations)] * TICK, "finish", kind)
            n_done += 1
        else:
            running[kind] = False
            schedule(kind, g.finished(kind, now), now)
        assert len([e for e in events if e[3] == "start" and e[4] == kind]) <= 1

    assert g.next_deadline() is None
    for kind, times in starts.items():
        for a, b in pairwise(times):
            assert b - a >= 1.0
        assert times[-1] >= last_request[kind]
    assert set(starts) == set(last_request)


def test_a_burst_costs_at_most_two_refreshes() -> None:
    g = RefreshGate(1.0)
    starts = []
    at = g.request("tools", 0.0)
    assert at == 0.0
    g.started("tools", 0.0)
    starts.append(0.0)
    for i in range(1, 50):
        assert g.request("tools", i / 100) is None
    follow = g.finished("tools", 0.6)
    assert follow == 1.0
    g.started("tools", follow)
    starts.append(follow)
    assert g.finished("tools", 1.2) is None
    assert starts == [0.0, 1.0]
