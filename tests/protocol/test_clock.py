"""A call's clock (protocol/clock.py): the deadline rules, tested without a thread.

The rules: the time the handler works for a call is not counted against its ``timeout``;
``max_total_timeout`` bounds the whole call, never cutting the timeout short; pauses nest.
Times here are plain numbers (the clock never reads one).
"""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from conduit_mcp.protocol.clock import CallClock, total_bound

START = 1000.0
seconds_ = st.floats(min_value=0.001, max_value=1e4, allow_nan=False)
steps = st.lists(
    st.tuples(st.floats(min_value=0.0, max_value=1e3), st.sampled_from(["pause", "resume"])),
    max_size=30,
)


def test_total_bound_is_max_total_from_now_never_before_the_deadline() -> None:
    assert total_bound(130.0, 100.0, 600.0) == 700.0
    assert total_bound(130.0, 100.0, 30.0) == 130.0  # equal: either reading
    assert total_bound(130.0, 100.0, 10.0) == 130.0  # shorter: the timeout stands


def test_a_clock_never_paused_keeps_its_deadline() -> None:
    clock = CallClock(START + 30.0, None)
    assert clock.until == START + 30.0
    assert clock.left(START) == 30.0
    assert clock.left(START + 31.0) == 0.0  # never negative


def test_resume_without_a_pause_changes_nothing() -> None:
    clock = CallClock(START + 30.0, START + 600.0)
    assert clock.resume(START + 5.0) is None
    assert (clock.deadline, clock.pauses) == (START + 30.0, 0)


def test_the_first_pause_sets_the_unknown_bound_from_the_option() -> None:
    clock = CallClock(START + 30.0, None)
    assert clock.pause(START + 10.0, 600.0) == 600.0  # the timer: the bound, from now
    assert clock.total == START + 610.0
    assert clock.until == START + 610.0


def test_a_bound_known_at_the_start_is_kept() -> None:
    clock = CallClock(START + 30.0, START + 50.0)
    assert clock.pause(START + 10.0, 600.0) == 40.0
    assert clock.total == START + 50.0


def test_nested_pauses_arm_the_timer_once_and_run_again_after_the_last() -> None:
    clock = CallClock(START + 30.0, START + 600.0)
    assert clock.pause(START + 10.0, 600.0) == 590.0
    assert clock.pause(START + 20.0, 600.0) is None  # already stopped: the timer stands
    assert clock.resume(START + 100.0) is None  # one work goes on
    assert clock.deadline == START + 30.0  # not moved while stopped
    assert clock.resume(START + 200.0) == 20.0  # the 20 s left at the first pause
    assert clock.deadline == START + 220.0
    assert clock.pauses == 0


def test_a_pause_at_the_deadline_leaves_nothing() -> None:
    clock = CallClock(START + 30.0, START + 600.0)
    clock.pause(START + 30.0, 600.0)
    assert clock.resume(START + 40.0) == 0.0  # fires at once
    assert clock.deadline == START + 40.0


def test_a_resume_past_the_bound_fires_at_once() -> None:
    clock = CallClock(START + 30.0, START + 50.0)
    clock.pause(START + 10.0, 600.0)
    assert clock.resume(START + 60.0) == -10.0  # the bound passed 10 s ago
    assert clock.deadline == START + 50.0


def test_a_max_total_shorter_than_the_timeout_never_cuts_it_short() -> None:
    clock = CallClock(START + 30.0, None)
    assert clock.pause(START, 5.0) == 30.0  # the bound is the deadline itself
    assert clock.resume(START + 10.0) == 20.0
    assert clock.deadline == START + 30.0


def test_repr_shows_times_only() -> None:
    assert repr(CallClock(START, None)) == "<CallClock deadline=1000.000 total=None pauses=0>"


@given(seconds=seconds_, max_total=seconds_, steps=steps)
def test_the_clock_counts_only_the_time_it_runs(
    seconds: float, max_total: float, steps: list[tuple[float, str]]
) -> None:
    """Against a model that adds up the time the clock ran: while it runs, the deadline is
    what is left of the timeout from now, never past the bound; the timer is re-armed exactly
    when the clock stops and starts."""
    clock = CallClock(START + seconds, None)
    now, ran, depth, bound = START, 0.0, 0, None
    for dt, op in steps:
        if depth == 0:
            ran += dt
        now += dt
        if op == "pause":
            fired = depth == 0 and ran >= seconds
            armed = clock.pause(now, max_total)
            if bound is None:
                bound = max(START + seconds, now + max_total)
            assert clock.total == bound == clock.until
            assert (armed is None) == (depth > 0)
            if armed is not None:
                assert armed == bound - now
            if fired:  # the deadline had passed: nothing of the timeout is kept
                ran = seconds
            depth += 1
        else:
            armed = clock.resume(now)
            assert (armed is None) == (depth != 1)
            if depth == 1:
                assert bound is not None
                want = min(now + max(0.0, seconds - ran), bound)
                assert abs(clock.deadline - want) < 1e-6 * max(1.0, abs(want))
                assert armed == clock.deadline - now
            depth = max(0, depth - 1)
        assert clock.pauses == depth
        if bound is not None:
            assert clock.deadline <= bound  # the caller's wait covers every deadline
    if bound is None:  # never paused: the deadline never moved
        assert clock.deadline == START + seconds
