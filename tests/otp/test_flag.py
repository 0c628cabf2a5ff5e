"""Flag: threading.Event's behaviour on a lock shared with other flags (otp/flag.py)."""

from __future__ import annotations

import threading
import time

from conduit_mcp.otp.flag import STRIPES, Flag


def _sharing_pair() -> tuple[Flag, Flag, list[Flag]]:
    """Two flags on the same stripe (and the others made to find them, kept alive)."""
    made: list[Flag] = []
    while True:
        flag = Flag()
        for other in made:
            if other._lock is flag._lock:
                return other, flag, made
        made.append(flag)
        assert len(made) <= 4 * STRIPES


def test_set_wakes_only_the_flags_own_waiters() -> None:
    a, b, _ = _sharing_pair()
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(a.wait(30)))
    waiter.start()
    b.set()  # same lock, another flag: a's waiter must keep waiting
    assert b.wait(0) and not a.is_set()
    a.set()
    waiter.join(30)
    assert woke == [True]


def test_a_wait_on_one_flag_leaves_its_stripe_free() -> None:
    a, b, _ = _sharing_pair()
    started = threading.Event()

    def wait_a() -> None:
        started.set()
        a.wait(30)

    waiter = threading.Thread(target=wait_a)
    waiter.start()
    started.wait(30)
    t0 = time.monotonic()
    b.set()  # the stripe is not held while a's waiter waits
    b.clear()
    assert time.monotonic() - t0 < 5
    a.set()
    waiter.join(30)
    assert not waiter.is_alive()


def test_wait_times_out_with_the_flag_clear() -> None:
    flag = Flag()
    t0 = time.monotonic()
    assert flag.wait(0.05) is False
    assert time.monotonic() - t0 >= 0.05
    flag.set()
    assert flag.wait(0.05) is True
    flag.clear()
    assert flag.wait(0) is False
