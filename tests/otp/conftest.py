"""Fixtures for the actor tests (runtime and client actors): real threads, no sleeps, deadlines on every wait."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pykka
import pytest

from conduit_mcp.otp import Link


class Events:
    """A thread-safe log: actors ``put`` from their threads, the test waits with a deadline."""

    def __init__(self) -> None:
        self._items: list[Any] = []
        self._cond = threading.Condition()

    def put(self, item: Any) -> None:
        with self._cond:
            self._items.append(item)
            self._cond.notify_all()

    @property
    def items(self) -> list[Any]:
        with self._cond:
            return list(self._items)

    def wait_until(self, pred: Callable[[list[Any]], bool], timeout: float = 5.0) -> list[Any]:
        """Wait until ``pred(items)`` holds; fail the test at the deadline."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while not pred(self._items):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"timed out; events so far: {self._items!r}")
                self._cond.wait(remaining)
            return list(self._items)

    def wait_for(self, n: int, timeout: float = 5.0) -> list[Any]:
        """Wait until at least ``n`` events were logged."""
        return self.wait_until(lambda items: len(items) >= n, timeout)

    def wait_item(self, item: Any, timeout: float = 5.0) -> list[Any]:
        """Wait until ``item`` was logged."""
        return self.wait_until(lambda items: item in items, timeout)


@pytest.fixture
def events() -> Events:
    return Events()


@pytest.fixture
def exits() -> Events:
    """The log of a test link: ``(urn, reason)`` per exit."""
    return Events()


@pytest.fixture
def link(exits: Events) -> Link:
    return Link(lambda urn, reason: exits.put((urn, reason)))


@pytest.fixture(autouse=True)
def _stop_all_actors() -> Iterator[None]:
    yield
    # Non-blocking, then bounded waits: a test's deliberately stuck actor must not hang teardown.
    for future in pykka.ActorRegistry.stop_all(block=False):
        try:
            future.get(timeout=2)
        except pykka.Timeout:
            pass
