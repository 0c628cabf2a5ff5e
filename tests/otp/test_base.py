"""SafeActor: a BaseException fails one actor only; every exit reaches the link exactly once."""

from __future__ import annotations

import asyncio
import logging
import threading
from typing import TYPE_CHECKING, Any

import pykka
import pytest

from conduit_mcp.otp import ActorCrashed, Link, SafeActor, safe_tell
from conduit_mcp.otp.base import PING

if TYPE_CHECKING:
    from conftest import Events

pytestmark = pytest.mark.timeout(20)


class _Blocker:
    """Blocks the actor until ``gate`` is set, so later messages queue up behind it."""

    def __init__(self, gate: threading.Event) -> None:
        self.gate = gate


class _Call:
    """Runs ``fn`` in the actor's thread."""

    def __init__(self, fn: Any) -> None:
        self.fn = fn


class Probe(SafeActor):
    """Raises what it is told to raise; logs its lifecycle."""

    def __init__(
        self, log: Events, *, fail_init: BaseException | None = None, link: Link | None = None
    ) -> None:
        super().__init__(link=link)
        self.log = log
        self.fail_init = fail_init

    def init(self) -> None:
        if self.fail_init is not None:
            raise self.fail_init
        self.log.put("init")

    def receive(self, message: Any) -> Any:
        if isinstance(message, BaseException):
            raise message
        if isinstance(message, _Blocker):
            assert message.gate.wait(10)
            return None
        if isinstance(message, _Call):
            return message.fn()
        if message == "stop-normal":
            self.stop_self()
            return "stopping"
        if isinstance(message, tuple) and message[0] == "stop-with":
            self.stop_self(message[1])
            return "stopping"
        return ("echo", message)

    def raise_in_proxy(self, exc: BaseException) -> None:
        raise exc

    def terminate(self, reason: BaseException | None) -> None:
        self.log.put(("terminate", reason))


class BadTerminate(Probe):
    def terminate(self, reason: BaseException | None) -> None:
        raise RuntimeError("terminate broke")


@pytest.mark.parametrize(
    "exc", [KeyboardInterrupt(), asyncio.CancelledError(), SystemExit(3), GeneratorExit()]
)
def test_base_exception_in_tell_fails_only_that_actor(
    events: Events, exits: Events, link: Link, exc: BaseException
) -> None:
    victim = Probe.start(events, link=link)
    bystander = Probe.start(events)
    victim.tell(exc)
    assert victim.actor_stopped.wait(5)
    urn, reason = exits.wait_for(1)[0]
    assert urn == victim.actor_urn
    assert isinstance(reason, ActorCrashed) and reason.original is exc
    assert ("terminate", reason) in events.items
    # Without the guard Pykka would have run ActorRegistry.stop_all().
    assert bystander.is_alive()
    assert bystander.ask("hello", timeout=5) == ("echo", "hello")


def test_base_exception_in_proxy_call_fails_only_that_actor(
    events: Events, exits: Events, link: Link
) -> None:
    victim = Probe.start(events, link=link)
    bystander = Probe.start(events)
    victim.proxy().raise_in_proxy.defer(asyncio.CancelledError())
    assert victim.actor_stopped.wait(5)
    assert isinstance(exits.wait_for(1)[0][1], ActorCrashed)
    assert bystander.ask("still", timeout=5) == ("echo", "still")


def test_base_exception_in_ask_goes_to_the_caller_and_actor_survives(events: Events) -> None:
    ref = Probe.start(events)
    with pytest.raises(ActorCrashed) as info:
        ref.ask(KeyboardInterrupt(), timeout=5)
    assert isinstance(info.value.original, KeyboardInterrupt)
    assert ref.ask("after", timeout=5) == ("echo", "after")


def test_on_receive_itself_converts_base_exceptions(events: Events) -> None:
    # Proxy calls bypass on_receive (the dispatcher is wrapped too); this checks on_receive's
    # own guard, called directly on an actor that was never started.
    try:
        Probe(events).on_receive(KeyboardInterrupt())
    except BaseException as exc:  # a regression must fail this test, not end the session
        assert isinstance(exc, ActorCrashed)
    else:
        pytest.fail("nothing raised")


def test_plain_exception_in_tell_reaches_terminate_and_link(
    events: Events, exits: Events, link: Link
) -> None:
    boom = ValueError("boom")
    ref = Probe.start(events, link=link)
    ref.tell(boom)
    assert exits.wait_for(1) == [(ref.actor_urn, boom)]
    assert events.wait_item(("terminate", boom))


@pytest.mark.parametrize("exc", [ValueError("bad init"), KeyboardInterrupt()])
def test_init_failure_reaches_link(
    events: Events, exits: Events, link: Link, exc: BaseException
) -> None:
    ref = Probe.start(events, fail_init=exc, link=link)
    urn, reason = exits.wait_for(1)[0]
    assert urn == ref.actor_urn
    if isinstance(exc, Exception):
        assert reason is exc
    else:
        assert isinstance(reason, ActorCrashed) and reason.original is exc
    # The synchronous-start handshake sees the death; no terminate for a failed init (OTP).
    with pytest.raises(pykka.ActorDeadError):
        ref.ask(PING, timeout=5)
    assert not any(isinstance(e, tuple) and e[0] == "terminate" for e in events.items)


def test_ping_is_answered_after_init(events: Events) -> None:
    ref = Probe.start(events)
    assert ref.ask(PING, timeout=5) is True
    assert events.items == ["init"]


def test_normal_stop_reports_none_once(events: Events, exits: Events, link: Link) -> None:
    ref = Probe.start(events, link=link)
    assert ref.stop(timeout=5) is True
    assert exits.wait_for(1) == [(ref.actor_urn, None)]
    assert ("terminate", None) in events.items
    assert ref.stop(timeout=5) is False
    assert len(exits.items) == 1


def test_stop_self_normal_is_immediate(events: Events, exits: Events, link: Link) -> None:
    ref = Probe.start(events, link=link)
    gate = threading.Event()
    ref.tell(_Blocker(gate))
    reply = ref.ask("stop-normal", block=False)
    queued = ref.ask("never handled", block=False)
    gate.set()
    assert reply.get(timeout=5) == "stopping"
    with pytest.raises(pykka.ActorDeadError):
        queued.get(timeout=5)
    assert exits.wait_for(1) == [(ref.actor_urn, None)]
    assert not safe_tell(ref, "late")


def test_stop_self_with_reason_is_abnormal_without_raising(
    events: Events, exits: Events, link: Link, caplog
) -> None:
    why = RuntimeError("gave up")
    ref = Probe.start(events, link=link)
    assert ref.ask(("stop-with", why), timeout=5) == "stopping"
    assert exits.wait_for(1) == [(ref.actor_urn, why)]
    assert ("terminate", why) in events.items
    assert "Unhandled exception" not in caplog.text


def test_terminate_errors_are_logged_and_link_still_hears(
    events: Events, exits: Events, link: Link, caplog
) -> None:
    caplog.set_level(logging.ERROR, logger="conduit_mcp.actors")
    ref = BadTerminate.start(events, link=link)
    ref.stop(timeout=5)
    assert exits.wait_for(1) == [(ref.actor_urn, None)]
    assert "terminate of" in caplog.text


def test_link_never_raises(caplog) -> None:
    def notify(urn: str, reason: BaseException | None) -> None:
        raise KeyboardInterrupt

    Link(notify).exited("urn:x", None)
    assert "link notification" in caplog.text


def test_safe_tell_on_a_dead_actor_returns_false(events: Events) -> None:
    ref = Probe.start(events)
    assert safe_tell(ref, "x") is True
    ref.stop(timeout=5)
    assert safe_tell(ref, "x") is False


def test_pykka_hooks_are_final() -> None:
    with pytest.raises(TypeError, match="on_receive"):

        class Bad(SafeActor):
            def on_receive(self, message: Any) -> Any:
                return None


def test_actor_threads_are_daemons(events: Events) -> None:
    seen: list[bool] = []
    ref = Probe.start(events)
    ref.ask(_Call(lambda: seen.append(threading.current_thread().daemon)), timeout=5)
    assert seen == [True]
