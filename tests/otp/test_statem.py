"""Statem: every gen_statem rule the engine promises, one test (or more) per rule.

A test fills the mailbox deterministically by first telling a ``Block`` that holds the actor
until the test releases it; every later message is then queued before the engine sees it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pytest

from conduit_mcp.otp import (
    Link,
    NextEvent,
    Postpone,
    Statem,
    StateTimeout,
    Step,
    Stop,
    Timeout,
    timers,
)
from conduit_mcp.otp import statem as statem_module

if TYPE_CHECKING:
    from conftest import Events

pytestmark = pytest.mark.timeout(20)


class Block:
    def __init__(self) -> None:
        self.gate = threading.Event()


Rule = Any  # a handler result, or a callable (actor, kind, event) -> result


class Rec(Statem):
    """Logs every event and enter call; ``rules[(state, event)]`` decides the transition."""

    def __init__(
        self,
        log: Events,
        *,
        initial: str = "idle",
        init_actions: Sequence[Any] = (),
        rules: dict[tuple[str, Any], Rule] | None = None,
        enters: dict[str, Any] | None = None,
        link: Link | None = None,
    ) -> None:
        super().__init__(link=link)
        self.log = log
        self.initial = initial
        self.init_actions = list(init_actions)
        self.rules = rules or {}
        self.enters = enters or {}

    def init_state(self) -> tuple[str, list[Any]]:
        return self.initial, self.init_actions

    def enter(self, old_state: str) -> Any:
        self.log.put(("enter", self.state, old_state))
        return self.enters.get(self.state)

    def handle_event(self, kind: str, event: Any) -> Any:
        if isinstance(event, Block):
            assert event.gate.wait(10)
            return None
        self.log.put((self.state, kind, event))
        rule = self.rules.get((self.state, event))
        return rule(self, kind, event) if callable(rule) else rule

    def terminate(self, reason: BaseException | None) -> None:
        self.log.put(("terminate", reason, list(self.postponed())))


def start(log: Events, **kw: Any) -> Any:
    return Rec.start(log, **kw)


def told(ref: Any, *messages: Any) -> None:
    """Tell ``messages`` so that all of them are queued before the first is handled."""
    block = Block()
    ref.tell(block)
    for message in messages:
        ref.tell(message)
    block.gate.set()


def only(items: list[Any], kinds: set[str]) -> list[Any]:
    return [e for e in items if isinstance(e, tuple) and len(e) == 3 and str(e[1]) in kinds]


# -- start, dispatch, enter -------------------------------------------------------------------


def test_initial_enter_then_inserted_events_then_mailbox(events: Events) -> None:
    ref = start(events, init_actions=[NextEvent("boot")])
    ref.tell("m1")
    assert events.wait_for(3) == [
        ("enter", "idle", "idle"),
        ("idle", "internal", "boot"),
        ("idle", "cast", "m1"),
    ]


class WithStateFunctions(Statem):
    def __init__(self, log: Events) -> None:
        super().__init__()
        self.log = log

    def init_state(self) -> tuple[str, list[Any]]:
        return "idle", []

    def on_idle(self, kind: str, event: Any) -> Any:
        self.log.put(("on_idle", event))
        return "busy"

    def enter_busy(self, old_state: str) -> None:
        self.log.put(("enter_busy", old_state))

    def handle_event(self, kind: str, event: Any) -> Any:
        self.log.put(("handle_event", self.state, event))
        return None


def test_state_functions_are_preferred_to_handle_event(events: Events) -> None:
    ref = WithStateFunctions.start(events)
    ref.tell("a")
    ref.tell("b")
    assert events.wait_for(3) == [
        ("on_idle", "a"),
        ("enter_busy", "idle"),
        ("handle_event", "busy", "b"),
    ]


def test_reserved_state_name_is_rejected(events: Events, exits: Events, link: Link) -> None:
    start(events, initial="stop", link=link)
    assert isinstance(exits.wait_for(1)[0][1], RuntimeError)


# -- postpone, keep_state, inserted events ----------------------------------------------------


def test_postponed_events_replay_oldest_first_before_later_mailbox(events: Events) -> None:
    ref = start(
        events,
        rules={
            ("idle", "a"): Step(None, [Postpone()]),
            ("idle", "b"): Step(None, [Postpone()]),
            ("idle", "go"): "ready",
        },
    )
    told(ref, "a", "b", "go", "c")
    assert events.wait_for(8)[1:] == [
        ("idle", "cast", "a"),
        ("idle", "cast", "b"),
        ("idle", "cast", "go"),
        ("enter", "ready", "idle"),
        ("ready", "cast", "a"),
        ("ready", "cast", "b"),
        ("ready", "cast", "c"),
    ]


def test_same_state_is_keep_state_no_replay_no_enter(events: Events) -> None:
    ref = start(
        events,
        rules={
            ("idle", "a"): Step(None, [Postpone()]),
            ("idle", "same"): "idle",
            ("idle", "go"): "ready",
        },
        enters={"idle": [StateTimeout(0.05, "st")]},
    )
    told(ref, "a", "same", "m")
    # The state timeout armed by the initial enter survives the "same state" transition.
    got = events.wait_item(("idle", "state_timeout", "st"))
    assert got.count(("enter", "idle", "idle")) == 1
    assert ("ready", "cast", "a") not in got
    ref.tell("go")
    events.wait_item(("ready", "cast", "a"))


def test_inserted_events_run_before_replayed_postponed_and_mailbox(events: Events) -> None:
    ref = start(
        events,
        rules={
            ("idle", "a"): Step(None, [Postpone()]),
            ("idle", "go"): Step("ready", [NextEvent("i1"), NextEvent("i2")]),
        },
    )
    told(ref, "a", "go", "c")
    assert events.wait_for(8)[3:] == [
        ("enter", "ready", "idle"),
        ("ready", "internal", "i1"),
        ("ready", "internal", "i2"),
        ("ready", "cast", "a"),
        ("ready", "cast", "c"),
    ]


def test_state_change_mid_queue_replays_postponed_before_the_rest_of_the_queue(
    events: Events,
) -> None:
    """OTP: after a state change the queue is [postponed] + [what was still queued]."""
    ref = start(
        events,
        rules={
            ("idle", "p"): Step(None, [Postpone()]),
            ("idle", "go"): Step(None, [NextEvent("i1"), NextEvent("i2")]),
            ("idle", "i1"): "ready",
        },
    )
    told(ref, "p", "go")
    assert events.wait_for(7)[2:] == [
        ("idle", "cast", "go"),
        ("idle", "internal", "i1"),
        ("enter", "ready", "idle"),
        ("ready", "cast", "p"),
        ("ready", "internal", "i2"),
    ]


def test_postponed_and_remove_postponed(events: Events) -> None:
    def remove(actor: Rec, kind: str, event: Any) -> None:
        removed = actor.remove_postponed(lambda e: e == "p2")
        actor.log.put(("removed", removed, list(actor.postponed())))

    postpone = Step(None, [Postpone()])
    ref = start(
        events,
        rules={
            ("idle", "p1"): postpone,
            ("idle", "p2"): postpone,
            ("idle", "p3"): postpone,
            ("idle", "remove"): remove,
            ("idle", "go"): "ready",
        },
    )
    told(ref, "p1", "p2", "p3", "remove", "go")
    got = events.wait_item(("ready", "cast", "p3"))
    assert ("removed", ["p2"], ["p1", "p3"]) in got
    assert only(got, {"cast"})[-2:] == [("ready", "cast", "p1"), ("ready", "cast", "p3")]


# -- state timeout ----------------------------------------------------------------------------


def test_state_timeout_fires(events: Events) -> None:
    ref = start(events, rules={("idle", "arm"): Step(None, [StateTimeout(0.02, "st")])})
    ref.tell("arm")
    events.wait_item(("idle", "state_timeout", "st"))


def test_state_timeout_is_cancelled_by_a_state_change(events: Events) -> None:
    ref = start(
        events,
        rules={
            ("idle", "arm"): Step(None, [StateTimeout(0.03, "st"), Timeout("m", 0.15, "marker")]),
            ("idle", "leave"): "other",
        },
    )
    told(ref, "arm", "leave")
    got = events.wait_item(("other", "timeout", "marker"))
    assert only(got, {"state_timeout"}) == []


def test_state_timeout_set_with_a_state_change_belongs_to_the_new_state(events: Events) -> None:
    ref = start(events, rules={("idle", "go"): Step("other", [StateTimeout(0.02, "new")])})
    ref.tell("go")
    events.wait_item(("other", "state_timeout", "new"))


def test_state_timeout_replaced(events: Events) -> None:
    ref = start(
        events,
        rules={
            ("idle", "arm"): Step(None, [StateTimeout(0.03, "old")]),
            ("idle", "rearm"): Step(None, [StateTimeout(0.08, "new")]),
        },
    )
    told(ref, "arm", "rearm")
    got = events.wait_item(("idle", "state_timeout", "new"))
    assert only(got, {"state_timeout"}) == [("idle", "state_timeout", "new")]


# -- named timeouts ---------------------------------------------------------------------------


def test_cancelled_named_timer_is_never_delivered(events: Events) -> None:
    ref = start(
        events,
        rules={
            ("idle", "arm"): Step(None, [Timeout("x", 0.05, "X")]),
            ("idle", "cancel"): Step(None, [Timeout("x", None, None), Timeout("y", 0.2, "Y")]),
        },
    )
    told(ref, "arm", "cancel")
    got = events.wait_item(("idle", "timeout", "Y"))
    assert only(got, {"timeout"}) == [("idle", "timeout", "Y")]


def test_replaced_named_timer_delivers_only_the_new_one(events: Events) -> None:
    ref = start(
        events,
        rules={
            ("idle", "arm1"): Step(None, [Timeout("x", 0.03, "X1")]),
            ("idle", "arm2"): Step(None, [Timeout("x", 0.1, "X2")]),
        },
    )
    told(ref, "arm1", "arm2")
    got = events.wait_item(("idle", "timeout", "X2"))
    assert only(got, {"timeout"}) == [("idle", "timeout", "X2")]


def test_a_fired_then_cancelled_timer_is_dropped(events: Events) -> None:
    """The wake is already in the mailbox when the handler cancels: its stale token is dropped."""

    def arm_block_cancel(actor: Rec, kind: str, event: Any) -> None:
        actor.set_timeout("x", 0.01, "X")
        gate = threading.Event()
        # The same timer thread runs x's wake first, then this: the wake is surely queued.
        timers.schedule(time.monotonic() + 0.1, gate.set)
        assert gate.wait(5)
        actor.set_timeout("x", None, None)
        actor.set_timeout("y", 0.05, "Y")

    ref = start(events, rules={("idle", "go"): arm_block_cancel})
    ref.tell("go")
    got = events.wait_item(("idle", "timeout", "Y"))
    assert only(got, {"timeout"}) == [("idle", "timeout", "Y")]


def test_timer_replaced_by_an_earlier_due_timer_in_the_same_wake_is_not_delivered_early(
    events: Events,
) -> None:
    """a and b are due in the same wake; a's handler re-arms b: the old b must be dropped."""

    def arm_both_and_block(actor: Rec, kind: str, event: Any) -> None:
        actor.set_timeout("a", 0.01, "A")
        actor.set_timeout("b", 0.02, "B")
        gate = threading.Event()
        timers.schedule(time.monotonic() + 0.1, gate.set)
        assert gate.wait(5)

    ref = start(
        events,
        rules={
            ("idle", "go"): arm_both_and_block,
            ("idle", "A"): Step(None, [Timeout("b", 0.2, "B2"), Timeout("m", 0.05, "M")]),
        },
    )
    ref.tell("go")
    got = events.wait_item(("idle", "timeout", "B2"))
    assert [e[2] for e in only(got, {"timeout"})] == ["A", "M", "B2"]


def test_named_timer_survives_state_change(events: Events) -> None:
    ref = start(events, rules={("idle", "go"): Step("other", [Timeout("t", 0.03, "T")])})
    ref.tell("go")
    events.wait_item(("other", "timeout", "T"))


def test_timers_fire_in_deadline_order_with_one_service_arm_per_earlier_deadline(
    events: Events, monkeypatch: pytest.MonkeyPatch
) -> None:
    arms: list[float] = []
    real = timers.schedule

    def counting(when: float, callback: Callable[[], None]) -> Any:
        arms.append(when)
        return real(when, callback)

    monkeypatch.setattr(statem_module.timers, "schedule", counting)

    def count(actor: Rec, kind: str, event: Any) -> None:
        actor.log.put(("arms", len(arms)))

    ref = start(
        events,
        rules={
            ("idle", "arm"): Step(
                None,
                [
                    Timeout("c", 0.09, "C"),
                    Timeout("b", 0.06, "B"),
                    Timeout("a", 0.03, "A"),
                    Timeout("d", 0.12, "D"),
                    Timeout("e", 0.15, "E"),
                ],
            ),
            ("idle", "count"): count,
        },
    )
    told(ref, "arm", "count")
    got = events.wait_item(("idle", "timeout", "E"))
    # c, then b and a (each earlier); d and e are later and do not touch the service.
    assert ("arms", 3) in got
    assert [e[2] for e in only(got, {"timeout"})] == ["A", "B", "C", "D", "E"]


def test_many_timers_half_cancelled(events: Events) -> None:
    n = 200

    def arm(actor: Rec, kind: str, event: Any) -> None:
        for i in range(n):
            actor.set_timeout(i, 0.02 + 0.0005 * i, i)
        for i in range(0, n, 2):
            actor.set_timeout(i, None, None)

    ref = start(events, rules={("idle", "arm"): arm})
    ref.tell("arm")
    got = events.wait_item(("idle", "timeout", n - 1))
    assert [e[2] for e in only(got, {"timeout"})] == list(range(1, n, 2))


# -- zero-time timeouts -----------------------------------------------------------------------


def test_zero_timeout_runs_after_inserted_events_and_before_the_mailbox(events: Events) -> None:
    ref = start(
        events,
        rules={
            ("idle", "zero"): Step(
                None, [Timeout("z", 0, "Z"), StateTimeout(-1, "S"), NextEvent("i")]
            )
        },
    )
    told(ref, "zero", "ext")
    assert events.wait_for(6)[1:] == [
        ("idle", "cast", "zero"),
        ("idle", "internal", "i"),
        ("idle", "timeout", "Z"),
        ("idle", "state_timeout", "S"),
        ("idle", "cast", "ext"),
    ]


def test_zero_timeout_cancelled_before_delivery_is_dropped(events: Events) -> None:
    ref = start(
        events,
        rules={
            ("idle", "zero"): Step(
                None, [Timeout("z", 0, "Z"), StateTimeout(0, "S"), NextEvent("cancel")]
            ),
            ("idle", "cancel"): Step("other", [Timeout("z", None, None)]),
        },
    )
    told(ref, "zero", "marker")
    got = events.wait_item(("other", "cast", "marker"))
    assert only(got, {"timeout", "state_timeout"}) == []


# -- enter restrictions, stop, failure --------------------------------------------------------


@pytest.mark.parametrize(
    "returned", [[Postpone()], [NextEvent("x")], "elsewhere", Step("elsewhere", [])]
)
def test_enter_rejects_illegal_results(
    events: Events, exits: Events, link: Link, returned: Any
) -> None:
    ref = start(events, rules={("idle", "go"): "bad"}, enters={"bad": returned}, link=link)
    ref.tell("go")
    urn, reason = exits.wait_for(1)[0]
    assert urn == ref.actor_urn
    assert isinstance(reason, RuntimeError) and "enter" in str(reason)


def test_stop_normal(events: Events, exits: Events, link: Link) -> None:
    ref = start(
        events,
        rules={
            ("idle", "p"): Step(None, [Postpone()]),
            ("idle", "stop"): Step("ignored", [Stop()]),
        },
        link=link,
    )
    told(ref, "p", "stop", "c1", "c2")
    assert exits.wait_for(1) == [(ref.actor_urn, None)]
    # Casts never handled (postponed, or still in the mailbox) are left for terminate.
    assert ("terminate", None, ["p", "c1", "c2"]) in events.items
    assert ("enter", "ignored", "idle") not in events.items


def test_stop_abnormal(events: Events, exits: Events, link: Link) -> None:
    why = ValueError("done for")
    ref = start(events, rules={("idle", "stop"): Step(None, [Stop(why)])}, link=link)
    ref.tell("stop")
    assert exits.wait_for(1) == [(ref.actor_urn, why)]
    assert events.wait_item(("terminate", why, []))


def test_stop_from_enter(events: Events, exits: Events, link: Link) -> None:
    ref = start(events, rules={("idle", "go"): "ending"}, enters={"ending": [Stop()]}, link=link)
    ref.tell("go")
    assert exits.wait_for(1) == [(ref.actor_urn, None)]


def test_handler_exception_fails_the_actor(events: Events, exits: Events, link: Link) -> None:
    def boom(actor: Rec, kind: str, event: Any) -> None:
        raise KeyError("corrupt")

    ref = start(events, rules={("idle", "boom"): boom}, link=link)
    ref.tell("boom")
    urn, reason = exits.wait_for(1)[0]
    assert urn == ref.actor_urn and isinstance(reason, KeyError)


def test_bad_handler_result_fails_the_actor(events: Events, exits: Events, link: Link) -> None:
    ref = start(events, rules={("idle", "odd"): 42}, link=link)
    ref.tell("odd")
    assert isinstance(exits.wait_for(1)[0][1], TypeError)


# -- closed states: STATES checked when the class is created ----------------------------------


class Door(Statem):
    """A statem with declared states: the closed-set checks apply to it and its subclasses.
    (It inherits Pykka's ``on_start``, ``on_receive``, ... : those are not state handlers.)"""

    STATES = ("shut", "open")

    def __init__(self, log: Events, *, link: Link | None = None) -> None:
        super().__init__(link=link)
        self.log = log

    def init_state(self) -> tuple[str, list[Any]]:
        return "shut", []

    def on_shut(self, kind: str, event: Any) -> Any:
        self.log.put(("shut", event))
        return event if event != "noop" else None

    def on_open(self, kind: str, event: Any) -> Any:
        self.log.put(("open", event))
        return None

    def enter_open(self, old: str) -> None:
        self.log.put(("enter_open", old))


def test_a_misspelt_handler_fails_at_class_creation() -> None:
    with pytest.raises(TypeError) as info:

        class Misspelt(Door):
            def on_opne(self, kind: str, event: Any) -> Any:
                return None

    text = str(info.value)
    assert "Misspelt.on_opne names no declared state" in text
    assert "did you mean on_open?" in text
    assert "('shut', 'open')" in text


def test_a_misspelt_enter_fails_at_class_creation() -> None:
    with pytest.raises(TypeError, match=r"enter_shot names no declared state.*enter_shut"):

        class Misspelt(Door):
            def enter_shot(self, old: str) -> None:
                return None


def test_a_declared_state_without_its_handler_fails_at_class_creation() -> None:
    with pytest.raises(TypeError, match=r"\['locked'\].*no on_locked"):

        class Lockable(Door):
            STATES = ("shut", "open", "locked")


@pytest.mark.parametrize(
    ("states", "message"),
    [
        ((), "non-empty tuple"),
        (["shut", "open"], "non-empty tuple"),
        (("shut", "open", "shut"), "names a state twice"),
        (("shut", "open", "not a name"), "is not a state name"),
        (("shut", "open", "stop"), "is reserved"),
    ],
)
def test_bad_states_fail_at_class_creation(states: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        type("Bad", (Door,), {"STATES": states})


def test_a_statem_without_states_is_not_checked() -> None:
    class Free(Statem):
        def on_anything(self, kind: str, event: Any) -> Any:
            return None

    assert Free.STATES is None


def test_a_transition_to_an_undeclared_state_fails_the_actor(
    events: Events, exits: Events, link: Link
) -> None:
    ref = Door.start(events, link=link)
    ref.tell("open")
    assert events.wait_item(("enter_open", "shut"))
    ref2 = Door.start(events, link=link)
    ref2.tell("ajar")  # on_shut returns the event as the next state
    urn, reason = exits.wait_for(1)[0]
    assert urn == ref2.actor_urn
    assert isinstance(reason, RuntimeError)
    assert "has no state 'ajar'" in str(reason)


# -- handlers looked up once per class ---------------------------------------------------------


class _Lamp(Statem):
    STATES = ("off", "on")

    def init_state(self) -> tuple[str, list[Any]]:
        return "off", []

    def on_off(self, kind: str, event: Any) -> Any:
        return "on" if event == "flip" else None

    def on_on(self, kind: str, event: Any) -> Any:
        if event == "flip":
            return "off"
        return None

    def receive(self, message: Any) -> Any:
        if message == "state?":
            return self.state
        return super().receive(message)


class _Helper:
    """A callable object as a state handler: looked up on the instance at each call."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def __call__(self, kind: str, event: Any) -> None:
        self.seen.append(event)


def test_instances_share_their_class_handlers() -> None:
    a, b = _Lamp.start(), _Lamp.start()
    try:
        a.tell("flip")
        b.tell("flip")
        assert a.ask("state?") == b.ask("state?") == "on"
        handlers, enters = statem_module._by_class[_Lamp]
        assert handlers == {"off": _Lamp.on_off}
        assert enters == {"off": Statem.enter, "on": Statem.enter}
    finally:
        a.stop()
        b.stop()


def test_a_handler_patched_on_the_class_is_called_from_the_next_event(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class Lamp(_Lamp):
        pass

    ref = Lamp.start()
    try:
        ref.tell("flip")
        assert ref.ask("state?") == "on"  # on_on is cached now
        seen: list[Any] = []

        def on_on(self: Any, kind: str, event: Any) -> Any:
            seen.append(event)
            return None

        monkeypatch.setattr(_Lamp, "on_on", on_on)  # on a base class: the subclass follows
        ref.tell("flip")
        assert ref.ask("state?") == "on" and seen == ["flip"]
        monkeypatch.undo()
        ref.tell("flip")
        assert ref.ask("state?") == "off" and seen == ["flip"]
    finally:
        ref.stop()


def test_a_handler_that_is_not_a_function_is_called_as_an_attribute() -> None:
    helper = _Helper()

    class Lamp(_Lamp):
        on_on = staticmethod(helper)

    ref = Lamp.start()
    try:
        ref.tell("flip")
        ref.tell("hello")
        assert ref.ask("state?") == "on" and helper.seen == ["hello"]
    finally:
        ref.stop()
