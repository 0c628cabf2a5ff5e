"""The Pykka internals the runtime relies on (conduit_mcp/otp/_pykka.py) still exist.

A Pykka release that moves one of them fails here, by name, instead of breaking an actor at
run time."""

from __future__ import annotations

import queue

import pykka
from pykka import messages

from conduit_mcp.otp import _pykka


def test_the_dispatcher_safe_actor_wraps_exists() -> None:
    assert callable(getattr(pykka.Actor, _pykka.HANDLE_RECEIVE, None)), (
        f"pykka.Actor.{_pykka.HANDLE_RECEIVE} is gone: SafeActor can no longer guard proxy "
        "calls against BaseException"
    )


def test_the_inbox_hook_exists() -> None:
    assert callable(getattr(pykka.Actor, _pykka.CREATE_INBOX, None)), (
        f"pykka.Actor.{_pykka.CREATE_INBOX} is gone: actors would use queue.Queue"
    )


def test_pykkas_stop_message_type_exists() -> None:
    assert isinstance(getattr(messages, "_ActorStop", None), type), (
        "pykka.messages._ActorStop is gone: a statem can no longer tell Pykka's stop from a cast"
    )
    assert _pykka.ACTOR_STOP is messages._ActorStop


def test_the_registry_list_and_lock_exist() -> None:
    registry = pykka.ActorRegistry
    assert isinstance(getattr(registry, "_actor_refs", None), list), (
        "pykka.ActorRegistry._actor_refs is gone: a forked child cannot forget the parent's actors"
    )
    assert hasattr(getattr(registry, "_actor_refs_lock", None), "acquire"), (
        "pykka.ActorRegistry._actor_refs_lock is gone"
    )


def test_a_dead_actors_inbox_can_be_read_without_blocking() -> None:
    class Probe(pykka.ThreadingActor):
        pass

    ref = Probe.start()
    try:
        inbox = ref.actor_inbox
        inbox.put(pykka._envelope.Envelope("hello"))  # type: ignore[attr-defined]
        envelope = _pykka.take_nowait(inbox)
        assert _pykka.envelope_parts(envelope) == ("hello", None)
        try:
            _pykka.take_nowait(inbox)
        except queue.Empty:
            pass
    finally:
        ref.stop()


def test_the_calling_actor_is_found_from_its_thread() -> None:
    class Probe(pykka.ThreadingActor):
        def on_receive(self, message: object) -> object:
            return _pykka.calling_actor_stopped() is self.actor_stopped

    ref = Probe.start()
    try:
        assert ref.ask("who", timeout=5), (
            "a ThreadingActor's thread no longer runs actor._actor_loop as Thread._target: "
            "client.futures can no longer cancel the requests of an actor that died"
        )
    finally:
        ref.stop()
    assert _pykka.calling_actor_stopped() is None  # not an actor's thread


def test_the_actor_loop_pieces_a_pooled_actor_runs_exist() -> None:
    for name in ("_actor_loop_setup", "_actor_loop_teardown", "_handle_failure"):
        assert callable(getattr(pykka.Actor, name, None)), (
            f"pykka.Actor.{name} is gone: a PooledActor cannot run its actor on a pool worker"
        )
    assert callable(getattr(pykka.ThreadingActor, "_start_actor_loop", None)), (
        "pykka.Actor._start_actor_loop is gone: a PooledActor cannot replace its thread"
    )
