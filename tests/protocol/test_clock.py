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


# -- reset_timeout_on_progress --------------------------------------------------------------


def test_progress_restarts_the_whole_timeout_from_the_report() -> None:
    clock = CallClock(START + 30.0, START + 600.0, reset=30.0)
    clock.progressed(START + 25.0)
    assert clock.left(START + 25.0) == 30.0  # the whole timeout again
    assert clock.expire(START + 30.0) == 25.0  # the timer re-arms for the rest
    assert clock.deadline == START + 55.0
    assert clock.expire(START + 55.0) is None  # silent since: run out
    assert not clock.cut_by_total()  # by its timeout, not the bound


def test_without_reset_progress_moves_nothing() -> None:
    clock = CallClock(START + 30.0, START + 600.0)
    clock.progressed(START + 25.0)
    assert clock.left(START + 25.0) == 5.0
    assert clock.expire(START + 30.0) is None


def test_a_report_older_than_the_deadline_moves_nothing() -> None:
    clock = CallClock(START + 30.0, START + 600.0, reset=10.0)
    clock.progressed(START + 5.0)  # 5 + 10 < 30: the first deadline stands
    assert clock.expire(START + 30.0) is None
    assert clock.deadline == START + 30.0


def test_progress_never_moves_the_deadline_past_the_total_bound() -> None:
    clock = CallClock(START + 30.0, START + 50.0, reset=30.0)
    clock.progressed(START + 29.0)
    assert clock.expire(START + 30.0) == 20.0  # to the bound, not START + 59
    assert clock.deadline == START + 50.0
    clock.progressed(START + 49.0)
    assert clock.expire(START + 50.0) is None
    assert clock.cut_by_total()  # progress would have kept it: the bound ended it


def test_a_timer_that_fires_early_without_progress_is_not_re_armed() -> None:
    clock = CallClock(START + 30.0, START + 600.0, reset=30.0)
    assert clock.expire(START + 30.0) is None  # no report at all: the deadline stands


def test_a_pause_keeps_what_progress_added() -> None:
    clock = CallClock(START + 30.0, START + 600.0, reset=30.0)
    clock.progressed(START + 20.0)  # the deadline is now START + 50
    assert clock.pause(START + 40.0, 600.0) == 560.0
    assert clock.resume(START + 100.0) == 10.0  # the 10 s that were left
    assert clock.expire(START + 110.0) is None


def test_progress_heard_during_a_pause_gives_the_whole_timeout_on_resume() -> None:
    clock = CallClock(START + 30.0, START + 600.0, reset=30.0)
    clock.pause(START + 28.0, 600.0)  # 2 s left
    clock.progressed(START + 100.0)  # the server still works while the person answers
    assert clock.resume(START + 200.0) == 30.0
    assert clock.deadline == START + 230.0


def test_a_paused_clock_whose_timer_fires_has_run_out_by_its_bound() -> None:
    clock = CallClock(START + 30.0, START + 600.0, reset=30.0)
    clock.pause(START + 10.0, 600.0)
    clock.progressed(START + 599.0)
    assert clock.expire(START + 600.0) is None
    assert clock.cut_by_total()


def test_repr_shows_the_reset_when_on() -> None:
    assert repr(CallClock(START, START + 600.0, reset=30.0)) == (
        "<CallClock deadline=1000.000 total=1600.0 pauses=0 reset=30.0>"
    )


events = st.lists(
    st.tuples(st.floats(min_value=0.0, max_value=100.0), st.sampled_from(["progress", "fire"])),
    max_size=40,
)


@given(seconds=seconds_, max_total=seconds_, events=events)
def test_progress_keeps_a_running_call_alive_within_its_bound(
    seconds: float, max_total: float, events: list[tuple[float, str]]
) -> None:
    """Against a model: at any moment the call is alive until ``timeout`` after its last
    report (or its first deadline), never past its total bound; the timer, when it fires,
    is re-armed exactly for what is left, and a call that ran out says which bound did it."""
    bound = total_bound(START + seconds, START, max_total)
    clock = CallClock(START + seconds, bound, reset=seconds)
    now, last, ended = START, None, False
    for dt, op in events:
        now += dt
        if ended:
            break
        if op == "progress":
            clock.progressed(now)
            last = now
            continue
        alive_until = START + seconds if last is None else max(START + seconds, last + seconds)
        want = min(alive_until, bound)
        armed = clock.expire(now)
        if now >= want:
            assert armed is None
            assert clock.cut_by_total() == (last is not None and last + seconds > bound)
            ended = True
        else:
            assert armed is not None
            assert abs(armed - (want - now)) <= 1e-6 * max(1.0, want)
            assert clock.deadline == want
        assert clock.deadline <= bound  # the caller's wait covers every deadline


@given(
    seconds=seconds_,
    max_total=seconds_,
    steps=st.lists(
        st.tuples(
            st.floats(min_value=0.0, max_value=1e3),
            st.sampled_from(["pause", "resume", "progress", "fire"]),
        ),
        max_size=40,
    ),
)
def test_no_mix_of_pauses_and_progress_passes_the_bound(
    seconds: float, max_total: float, steps: list[tuple[float, str]]
) -> None:
    """Whatever the order of pauses, progress and timer firings: no deadline and no timer
    is ever past the total bound, and a fired timer is re-armed only for a running clock."""
    bound = total_bound(START + seconds, START, max_total)
    clock = CallClock(START + seconds, bound, reset=seconds)
    now = START
    for dt, op in steps:
        now += dt
        if op == "pause":
            armed = clock.pause(now, max_total)
        elif op == "resume":
            armed = clock.resume(now)
        elif op == "progress":
            clock.progressed(now)
            armed = None
        else:
            paused = clock.pauses > 0
            armed = clock.expire(now)
            if paused:
                assert armed is None
        if armed is not None:
            assert now + armed <= bound + 1e-6 * max(1.0, bound)
        assert clock.deadline <= bound
        assert clock.left(now) <= max(0.0, bound - now) + 1e-9 * max(1.0, bound)
