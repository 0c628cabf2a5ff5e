"""Siblings keep the order of the messages one sender tells a lazy child, even when one of
them waits in the supervisor's mailbox behind the (slow) start of another child."""

from __future__ import annotations

import queue
import time
from typing import Any

import pytest

from conduit_mcp.otp.base import Link, SafeActor
from conduit_mcp.otp.registry import Registry
from conduit_mcp.otp.siblings import Siblings
from conduit_mcp.otp.supervisor import ChildSpec, Supervisor

pytestmark = pytest.mark.timeout(20)


class Recorder(SafeActor):
    def __init__(self, out: queue.Queue[Any], *, link: Link | None = None) -> None:
        super().__init__(link=link)
        self._out = out

    def receive(self, message: Any) -> Any:
        self._out.put(message)
        return None


def slow_spec(child_id: str, out: queue.Queue[Any]) -> ChildSpec:
    def start(link: Link) -> Any:
        time.sleep(0.3)  # a start that keeps the supervisor busy
        return Recorder.start(out, link=link)

    return ChildSpec(child_id, start, "permanent", 5.0, True, False, 5.0)


def test_a_message_queued_behind_another_childs_start_is_not_overtaken() -> None:
    out: queue.Queue[Any] = queue.Queue()
    ignored: queue.Queue[Any] = queue.Queue()
    registry = Registry()
    rec = ChildSpec("rec", lambda link: Recorder.start(out, link=link), "permanent", 5.0, True)
    sup = Supervisor.start(
        [slow_spec("slow0", ignored), rec, slow_spec("slow1", ignored)],
        strategy="one_for_one",
        registry=registry,
    )
    try:
        siblings = Siblings(registry, lambda: sup)
        siblings.tell("slow0", "x")  # the supervisor is busy for 0.3 s
        siblings.tell("rec", 1)  # queued: starts rec
        siblings.tell("slow1", "x")  # queued: busy again for 0.3 s
        siblings.tell("rec", 2)  # queued behind slow1's start
        deadline = time.monotonic() + 5
        while registry.get("rec") is None:  # rec runs, 2 is still queued
            assert time.monotonic() < deadline
            time.sleep(0.005)
        siblings.tell("rec", 3)  # must not overtake 2
        assert [out.get(timeout=5) for _ in range(3)] == [1, 2, 3]
    finally:
        sup.stop()
