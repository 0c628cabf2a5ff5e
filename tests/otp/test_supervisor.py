"""Supervisor: start/stop order, strategies, restart types, intensity, escalation, lazy and
significant children, the registry, and a child that ignores its stop.

Workers log ``("start", id, urn)`` and ``("stop", id, urn, reason)``; the tests compare those
sequences, so "which incarnation, in which order" is checked by URN.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

import pykka
import pytest

from conduit_mcp.errors import Error
from conduit_mcp.otp import (
    ChildExited,
    ChildSpec,
    Link,
    Registry,
    SafeActor,
    StartChild,
    Supervisor,
    WhichChildren,
    child_spec_for,
)

if TYPE_CHECKING:
    from conftest import Events

pytestmark = pytest.mark.timeout(20)


class Worker(SafeActor):
    """Logs ``start`` from ``__init__``: that runs in the starting thread (the supervisor's), so
    the log order is the order in which the supervisor started the incarnations."""

    def __init__(
        self,
        name: str,
        log: Events,
        *,
        fail_init: BaseException | None = None,
        link: Link | None = None,
    ) -> None:
        super().__init__(link=link)
        self.name = name
        self.log = log
        self.fail_init = fail_init
        if fail_init is None:
            log.put(("start", name, self.actor_urn))

    def init(self) -> None:
        if self.fail_init is not None:
            raise self.fail_init

    def receive(self, message: Any) -> Any:
        if message == "crash":
            raise ValueError(f"{self.name} crashed")
        if message == "exit":
            self.stop_self()
            return None
        if isinstance(message, threading.Event):
            message.wait(10)  # deliberately ignores stop until the test releases it
            return None
        return self.actor_urn

    def terminate(self, reason: BaseException | None) -> None:
        self.log.put(("stop", self.name, self.actor_urn, reason))


def spec(name: str, log: Events, **kw: Any) -> ChildSpec:
    """A Worker spec whose link also logs ``("exited", name, urn)`` once the notice is sent.

    An ask to the supervisor made after that event is handled after the notice (FIFO mailbox).
    """
    worker_kw = {k: kw.pop(k) for k in ("fail_init",) if k in kw}
    made = child_spec_for(Worker, name, log, id=name, **worker_kw, **kw)

    def start(link: Link) -> pykka.ActorRef[Any]:
        def notify(urn: str, reason: BaseException | None) -> None:
            link.exited(urn, reason)
            log.put(("exited", name, urn))

        return made.start(Link(notify))

    return dataclasses.replace(made, start=start)


def starts(items: list[Any]) -> list[str]:
    return [e[1] for e in items if e[0] == "start"]


def started(items: list[Any]) -> list[Any]:
    return [e for e in items if e[0] == "start"]


def stops(items: list[Any]) -> list[str]:
    return [e[1] for e in items if e[0] == "stop"]


def lifecycle(items: list[Any]) -> list[tuple[str, str]]:
    return [e[:2] for e in items if e[0] in ("start", "stop")]


def children(sup: pykka.ActorRef[Any]) -> dict[str, Any]:
    return dict(sup.ask(WhichChildren(), timeout=5))


def start_sup(log: Events, names: str, **kw: Any) -> pykka.ActorRef[Any]:
    sup = Supervisor.start([spec(n, log) for n in names], **kw)
    log.wait_until(lambda items: len(starts(items)) == len(names))
    children(sup)  # answered once init is done
    return sup


def crash_and_wait(sup: pykka.ActorRef[Any], log: Events, name: str, n_starts: int) -> list[Any]:
    """Crash ``name``; wait for ``n_starts`` new starts and return the new events."""
    before = len(log.items)
    target = len(starts(log.items)) + n_starts
    children(sup)[name].tell("crash")
    log.wait_until(lambda items: len(starts(items)) >= target)
    children(sup)  # the restart handler has completed
    return log.items[before:]


# -- start and shutdown -----------------------------------------------------------------------


def test_children_start_in_order_and_stop_in_reverse(events: Events) -> None:
    registry = Registry()
    sup = start_sup(events, "abc", registry=registry)
    assert starts(events.items) == ["a", "b", "c"]
    assert registry.names() == ["a", "b", "c"]
    sup.stop(timeout=5)
    assert stops(events.items) == ["c", "b", "a"]
    assert registry.names() == []


def test_child_init_failure_fails_the_supervisor_start(
    events: Events, exits: Events, link: Link
) -> None:
    bad = spec("b", events, fail_init=ValueError("no config"))
    sup = Supervisor.start([spec("a", events), bad, spec("c", events)], link=link)
    urn, reason = exits.wait_for(1)[0]
    assert urn == sup.actor_urn
    assert isinstance(reason, Error) and reason.reason == "child_start"
    assert isinstance(reason.__cause__, ValueError)
    assert starts(events.items) == ["a"] and stops(events.items) == ["a"]
    with pytest.raises(pykka.ActorDeadError):
        sup.ask(WhichChildren(), timeout=5)


def test_child_init_error_of_kind_error_propagates_unchanged(
    exits: Events, events: Events, link: Link
) -> None:
    auth = Error("auth", "refused")
    Supervisor.start([spec("a", events, fail_init=auth)], link=link)
    assert exits.wait_for(1)[0][1] is auth


def test_invalid_tree_fails_start_in_the_callers_thread(events: Events) -> None:
    with pytest.raises(Error) as info:
        Supervisor.start([spec("a", events), spec("a", events)])
    assert info.value.kind == "config"
    with pytest.raises(Error):
        Supervisor.start([spec("a", events, significant=True)])


# -- strategies -------------------------------------------------------------------------------


def test_one_for_one_restarts_only_the_failed_child(events: Events) -> None:
    sup = start_sup(events, "abc")
    before = children(sup)
    new = crash_and_wait(sup, events, "b", 1)
    assert lifecycle(new) == [("stop", "b"), ("start", "b")]
    after = children(sup)
    assert after["a"] is before["a"] and after["c"] is before["c"]
    assert after["b"].actor_urn == started(new)[-1][2] != before["b"].actor_urn


def test_rest_for_one_restarts_the_failed_child_and_younger_siblings(events: Events) -> None:
    sup = start_sup(events, "abcd", strategy="rest_for_one")
    before = children(sup)
    new = crash_and_wait(sup, events, "b", 3)
    assert lifecycle(new) == [
        ("stop", "b"),
        ("stop", "d"),
        ("stop", "c"),
        ("start", "b"),
        ("start", "c"),
        ("start", "d"),
    ]
    # Siblings stopped by the supervisor exit normally; only b crashed.
    assert [e[3] is None for e in new if e[0] == "stop"] == [False, True, True]
    after = children(sup)
    assert after["a"] is before["a"]
    assert all(after[n].actor_urn != before[n].actor_urn for n in "bcd")


def test_one_for_all_restarts_everyone_in_start_order(events: Events) -> None:
    sup = start_sup(events, "abc", strategy="one_for_all")
    before = children(sup)
    new = crash_and_wait(sup, events, "b", 3)
    assert lifecycle(new) == [
        ("stop", "b"),
        ("stop", "c"),
        ("stop", "a"),
        ("start", "a"),
        ("start", "b"),
        ("start", "c"),
    ]
    after = children(sup)
    assert all(after[n].actor_urn != before[n].actor_urn for n in "abc")


@pytest.mark.parametrize("strategy", ["rest_for_one", "one_for_all"])
def test_strategy_restart_leaves_never_started_lazy_children_down(
    events: Events, strategy: str
) -> None:
    sup = Supervisor.start(
        [spec("a", events), spec("lazy", events, lazy=True), spec("c", events)],
        strategy=strategy,
    )
    events.wait_for(2)
    new = crash_and_wait(sup, events, "a", 2)
    assert starts(new) == ["a", "c"]
    assert children(sup)["lazy"] is None


@pytest.mark.parametrize("strategy", ["rest_for_one", "one_for_all"])
def test_temporary_sibling_stopped_by_a_strategy_is_not_restarted(
    events: Events, strategy: str
) -> None:
    sup = Supervisor.start(
        [spec("a", events), spec("temp", events, restart="temporary"), spec("c", events)],
        strategy=strategy,
    )
    events.wait_for(3)
    new = crash_and_wait(sup, events, "a", 2)
    assert lifecycle(new) == [
        ("stop", "a"),
        ("stop", "c"),
        ("stop", "temp"),
        ("start", "a"),
        ("start", "c"),
    ]
    assert children(sup)["temp"] is None


# -- restart types ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("restart", "message", "restarted"),
    [
        ("permanent", "exit", True),
        ("permanent", "crash", True),
        ("transient", "exit", False),
        ("transient", "crash", True),
        ("temporary", "crash", False),
        ("temporary", "exit", False),
    ],
)
def test_restart_types(events: Events, restart: str, message: str, restarted: bool) -> None:
    registry = Registry()
    sup = Supervisor.start(
        [spec("w", events, restart=restart), spec("marker", events)], registry=registry
    )
    events.wait_for(2)
    first = children(sup)["w"]
    first.tell(message)
    events.wait_item(("exited", "w", first.actor_urn))
    # The notice was told before this ask, so it has been handled when the ask is answered.
    now = children(sup)["w"]
    if restarted:
        assert now is not None and now is not first
        assert registry.get("w") is now
        assert starts(events.items).count("w") == 2
    else:
        assert now is None
        assert registry.get("w") is None
        assert starts(events.items).count("w") == 1


def test_stale_exit_notice_is_ignored(events: Events) -> None:
    sup = start_sup(events, "a")
    sup.tell(ChildExited("a", "urn:uuid:not-the-current-one", ValueError("old")))
    assert children(sup)["a"] is not None
    assert starts(events.items) == ["a"]


# -- intensity and escalation -----------------------------------------------------------------


def test_intensity_exceeded_gives_up(events: Events, exits: Events, link: Link) -> None:
    gave_up: list[BaseException | None] = []
    sup = Supervisor.start(
        [spec("a", events), spec("b", events)],
        max_restarts=2,
        max_seconds=30,
        on_give_up=gave_up.append,
        link=link,
    )
    events.wait_for(2)
    for _ in range(2):
        crash_and_wait(sup, events, "a", 1)
    children(sup)["a"].tell("crash")
    urn, reason = exits.wait_for(1)[0]
    assert urn == sup.actor_urn
    assert isinstance(reason, Error) and (reason.kind, reason.reason) == (
        "unavailable",
        "max_restarts",
    )
    assert gave_up == [reason]
    assert stops(events.items)[-2:] == ["a", "b"]
    assert starts(events.items).count("a") == 3
    assert not sup.is_alive()


def test_escalation_to_a_parent_supervisor(events: Events, exits: Events, link: Link) -> None:
    gave_up: list[BaseException | None] = []
    registry = Registry()
    inner = child_spec_for(
        Supervisor, [spec("w", events)], id="inner", max_restarts=0, registry=registry
    )
    parent = Supervisor.start(
        [inner], max_restarts=1, max_seconds=30, on_give_up=gave_up.append, link=link
    )
    events.wait_for(1)
    first_inner = children(parent)["inner"]

    # 1st crash: inner gives up (0 restarts allowed), parent restarts inner, which restarts w.
    children(first_inner)["w"].tell("crash")
    events.wait_until(lambda items: starts(items).count("w") == 2)
    second_inner = children(parent)["inner"]
    assert second_inner is not first_inner and not first_inner.is_alive()
    assert gave_up == []
    second_w = children(second_inner)["w"]  # answered once inner's init is done
    assert registry.get("w") is second_w

    # 2nd crash: inner gives up again; the parent's second restart exceeds its intensity.
    second_w.tell("crash")
    urn, reason = exits.wait_for(1)[0]
    assert urn == parent.actor_urn
    assert isinstance(reason, Error) and reason.reason == "max_restarts"
    assert gave_up == [reason]
    assert not second_inner.is_alive()
    assert starts(events.items).count("w") == 2


# -- lazy and significant children, registry --------------------------------------------------


def test_lazy_child_starts_on_request_idempotently(events: Events) -> None:
    registry = Registry()
    sup = Supervisor.start([spec("a", events), spec("lazy", events, lazy=True)], registry=registry)
    events.wait_for(1)
    assert children(sup)["lazy"] is None and registry.get("lazy") is None
    ref = sup.ask(StartChild("lazy"), timeout=5)
    assert sup.ask(StartChild("lazy"), timeout=5) is ref
    assert registry.get("lazy") is ref
    events.wait_until(lambda items: starts(items) == ["a", "lazy"])
    with pytest.raises(Error) as info:
        sup.ask(StartChild("nope"), timeout=5)
    assert info.value.kind == "argument"


@pytest.mark.parametrize(("message", "expected"), [("exit", None), ("crash", ValueError)])
def test_significant_child_shuts_the_supervisor_down(
    events: Events, exits: Events, link: Link, message: str, expected: type | None
) -> None:
    gave_up: list[BaseException | None] = []
    sup = Supervisor.start(
        [
            spec("a", events),
            spec("job", events, restart="temporary", significant=True),
            spec("c", events),
        ],
        on_give_up=gave_up.append,
        link=link,
    )
    events.wait_for(3)
    children(sup)["job"].tell(message)
    urn, reason = exits.wait_for(1)[0]
    assert urn == sup.actor_urn
    if expected is None:
        assert reason is None
    else:
        assert isinstance(reason, expected)
    assert gave_up == [reason]
    assert stops(events.items) == ["job", "c", "a"]


def test_transient_significant_child_is_restarted_after_a_crash(events: Events) -> None:
    sup = Supervisor.start([spec("job", events, restart="transient", significant=True)])
    events.wait_for(1)
    new = crash_and_wait(sup, events, "job", 1)
    assert lifecycle(new) == [("stop", "job"), ("start", "job")]
    assert sup.is_alive()


def test_registry_follows_restarts(events: Events) -> None:
    registry = Registry()
    sup = start_sup(events, "ab", registry=registry)
    old = registry.get("a")
    new = crash_and_wait(sup, events, "a", 1)
    current = registry.get("a")
    assert current is not None and current is not old and current.actor_urn == started(new)[-1][2]
    # A late removal for the old incarnation must not erase the new one.
    assert registry.remove("a", old) is False and registry.get("a") is current


def test_failed_start_during_restart_is_retried_within_intensity(
    events: Events, exits: Events, link: Link
) -> None:
    attempts: list[int] = []

    def start(child_link: Link) -> pykka.ActorRef[Any]:
        attempts.append(1)
        if len(attempts) > 1:
            raise OSError("cannot start again")
        return Worker.start("w", events, link=child_link)

    sup = Supervisor.start([ChildSpec("w", start)], max_restarts=3, link=link)
    events.wait_for(1)
    children(sup)["w"].tell("crash")
    assert isinstance(exits.wait_for(1)[0][1], Error)
    assert len(attempts) == 1 + 3  # the first start, then the 3 restarts allowed


# -- shutdown of a child that ignores its stop ------------------------------------------------


def test_blocked_child_does_not_hang_shutdown(events: Events, caplog) -> None:
    caplog.set_level(logging.WARNING, logger="conduit_mcp.otp.supervisor")
    sup = Supervisor.start([spec("a", events), spec("stuck", events, shutdown=0.3)])
    events.wait_for(2)
    release = threading.Event()
    stuck = children(sup)["stuck"]
    stuck.tell(release)
    try:
        t0 = time.monotonic()
        assert sup.stop(timeout=5) is True
        elapsed = time.monotonic() - t0
        assert 0.3 <= elapsed < 2.0
        assert "did not stop within 0.3" in caplog.text
        assert stops(events.items) == ["a"]  # shutdown went on to the next child
    finally:
        release.set()
    assert stuck.actor_stopped.wait(5)
