"""``Registry.tell``: the one way a sibling tells a peer that may be restarting."""

from __future__ import annotations

import queue
from typing import Any

import pykka

from conduit_mcp.otp.registry import Registry


class _Echo(pykka.ThreadingActor):
    def __init__(self, seen: queue.Queue[Any]) -> None:
        super().__init__()
        self._seen = seen

    def on_receive(self, message: Any) -> None:
        self._seen.put(message)


def test_tell_reaches_the_registered_actor_and_returns_its_ref() -> None:
    seen: queue.Queue[Any] = queue.Queue()
    ref = _Echo.start(seen)
    try:
        registry = Registry()
        registry.set("connection", ref)
        assert registry.tell("connection", "hello") is ref
        assert seen.get(timeout=5) == "hello"
    finally:
        ref.stop()


def test_tell_to_no_one_or_a_dead_actor_is_none_not_an_error() -> None:
    registry = Registry()
    assert registry.tell("connection", "hello") is None  # none registered (starting)
    ref = _Echo.start(queue.Queue())
    registry.set("connection", ref)
    ref.stop()  # died, not yet replaced (restarting)
    assert registry.tell("connection", "hello") is None
