"""The process timer service: order, cancellation, error isolation, many users, compaction."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

import pytest

from conduit_mcp.otp import timers
from conduit_mcp.otp.timers import TimerService

if TYPE_CHECKING:
    from conftest import Events

pytestmark = pytest.mark.timeout(20)


def test_callbacks_run_in_deadline_order(events: Events) -> None:
    now = time.monotonic()
    for delay, name in [(0.06, "c"), (0.02, "a"), (0.04, "b")]:
        timers.schedule(now + delay, lambda name=name: events.put(name))
    assert events.wait_for(3) == ["a", "b", "c"]


def test_same_deadline_runs_in_schedule_order(events: Events) -> None:
    when = time.monotonic() + 0.02
    for i in range(20):
        timers.schedule(when, lambda i=i: events.put(i))
    assert events.wait_for(20) == list(range(20))


def test_past_deadline_fires_at_once(events: Events) -> None:
    timers.schedule(time.monotonic() - 10, lambda: events.put("late"))
    assert events.wait_for(1, timeout=2) == ["late"]


def test_cancelled_callback_never_runs(events: Events) -> None:
    now = time.monotonic()
    handle = timers.schedule(now + 0.02, lambda: events.put("cancelled"))
    handle.cancel()
    handle.cancel()  # idempotent
    assert handle.cancelled
    timers.schedule(now + 0.08, lambda: events.put("marker"))
    # The marker is due after the cancelled one: had it run, it would be logged first.
    assert events.wait_for(1) == ["marker"]


def test_a_failing_callback_is_logged_and_the_thread_survives(events: Events, caplog) -> None:
    def boom() -> None:
        raise KeyboardInterrupt

    now = time.monotonic()
    timers.schedule(now + 0.01, boom)
    timers.schedule(now + 0.03, lambda: events.put("after"))
    assert events.wait_for(1) == ["after"]
    assert "timer callback" in caplog.text


def test_one_thread_for_many_users(events: Events) -> None:
    start = threading.Barrier(10)

    def user(u: int) -> None:
        start.wait()
        now = time.monotonic()
        for i in range(100):
            timers.schedule(now + 0.001 * (i % 20), lambda u=u, i=i: events.put((u, i)))

    threads = [threading.Thread(target=user, args=(u,)) for u in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert len(set(events.wait_for(1000))) == 1000
    timer_threads = [t for t in threading.enumerate() if t.name == "conduit-timers"]
    assert len(timer_threads) == 1
    assert timer_threads[0].daemon


def test_cancelled_entries_are_compacted() -> None:
    service = TimerService(name="test-timers")
    far = time.monotonic() + 3600
    handles = [service.schedule(far + i, lambda: None) for i in range(2000)]
    for handle in handles:
        handle.cancel()
    # Lazy cancellation must not keep every cancelled entry: the heap is rebuilt.
    assert service.pending() < 1000


def test_cancel_after_fire_is_harmless(events: Events) -> None:
    handle = timers.schedule(time.monotonic(), lambda: events.put("fired"))
    events.wait_for(1)
    handle.cancel()
    assert not handle.cancelled
