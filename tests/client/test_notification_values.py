"""conduit_mcp.notifications: the ServerNotification value and subscriber validation."""

from __future__ import annotations

import asyncio
import dataclasses
import queue
from typing import Any

import pykka
import pytest

from conduit_mcp.errors import Error
from conduit_mcp.notifications import ServerNotification, Subscriber, subscriber_key

pytestmark = pytest.mark.timeout(20)

SECRET = "tok-very-secret"


def note(params: Any = None) -> ServerNotification:
    return ServerNotification("weather", "notifications/message", params)


# -- ServerNotification -------------------------------------------------------------------------


def test_repr_and_str_show_client_and_method_never_params() -> None:
    n = note({"data": {"password": SECRET}})
    assert repr(n) == "ServerNotification(client='weather', method='notifications/message')"
    assert SECRET not in repr(n) and SECRET not in str(n)
    assert SECRET not in repr([n]) and SECRET not in f"{n!r}"


def test_params_are_read_only_and_frozen() -> None:
    n = note({"level": "info"})
    assert n.params["level"] == "info"
    with pytest.raises(TypeError):
        n.params["level"] = "debug"  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        n.method = "x"  # type: ignore[misc]
    assert not hasattr(n, "__dict__")  # slotted


def test_missing_params_are_an_empty_mapping() -> None:
    n = note(None)
    assert dict(n.params) == {}
    with pytest.raises(TypeError):
        n.params["x"] = 1  # type: ignore[index]


def test_params_must_be_a_mapping() -> None:
    with pytest.raises(Error) as err:
        note([1, 2])
    assert (err.value.kind, err.value.reason) == ("argument", "params")


def test_equality_by_value() -> None:
    assert note({"a": 1}) == note({"a": 1})
    assert note({"a": 1}) != note({"a": 2})
    assert note({"a": 1}) != ServerNotification("other", "notifications/message", {"a": 1})


# -- subscribers --------------------------------------------------------------------------------


class _Sink(pykka.ThreadingActor):
    pass


def test_kinds_are_recognised() -> None:
    ref = _Sink.start()
    try:
        assert Subscriber.of(ref).kind == "actor"
    finally:
        ref.stop()
    assert Subscriber.of(queue.Queue()).kind == "queue"
    assert Subscriber.of(queue.SimpleQueue()).kind == "queue"
    assert Subscriber.of(print).kind == "callable"
    assert Subscriber.of(lambda n: None).kind == "callable"


@pytest.mark.parametrize("bad", [42, "queue", None, object(), queue.Queue, dict])
def test_anything_else_is_refused(bad: object) -> None:
    with pytest.raises(Error) as err:
        Subscriber.of(bad)
    assert (err.value.kind, err.value.reason) == ("argument", "subscriber")
    with pytest.raises(Error) as err:
        subscriber_key(bad)
    assert (err.value.kind, err.value.reason) == ("argument", "subscriber")


def test_asyncio_queue_captures_the_running_loop() -> None:
    async def main() -> Subscriber:
        return Subscriber.of(asyncio.Queue())

    sub = asyncio.run(main())
    assert sub.kind == "asyncio"
    assert sub.loop is not None and sub.loop.is_closed()


def test_asyncio_queue_needs_a_loop() -> None:
    with pytest.raises(Error) as err:
        Subscriber.of(asyncio.Queue())
    assert (err.value.kind, err.value.reason) == ("argument", "subscriber")
    loop = asyncio.new_event_loop()
    try:
        assert Subscriber.of(asyncio.Queue(), loop=loop).loop is loop
    finally:
        loop.close()


def test_loop_applies_to_asyncio_queues_only() -> None:
    loop = asyncio.new_event_loop()
    try:
        with pytest.raises(Error) as err:
            Subscriber.of(queue.Queue(), loop=loop)
        assert (err.value.kind, err.value.reason) == ("argument", "loop")
    finally:
        loop.close()


@pytest.mark.parametrize("bad", ["notifications/message", [], [1], [""], 5])
def test_method_filter_is_validated(bad: object) -> None:
    with pytest.raises(Error) as err:
        Subscriber.of(print, bad)  # type: ignore[arg-type]
    assert (err.value.kind, err.value.reason) == ("argument", "methods")


def test_method_filter() -> None:
    every = Subscriber.of(print)
    some = Subscriber.of(print, ["notifications/message"])
    assert every.methods is None and every.wants("anything")
    assert some.methods == frozenset({"notifications/message"})
    assert some.wants("notifications/message") and not some.wants("notifications/x")


def test_keys() -> None:
    q = queue.Queue()
    assert subscriber_key(q) == subscriber_key(q)
    assert subscriber_key(q) != subscriber_key(queue.Queue())

    class Handler:
        def on(self, n: ServerNotification) -> None:
            pass

    h = Handler()
    assert subscriber_key(h.on) == subscriber_key(h.on)  # a fresh bound method each time

    class Unhashable:
        __hash__ = None  # type: ignore[assignment]

        def __call__(self, n: ServerNotification) -> None:
            pass

    u = Unhashable()
    assert subscriber_key(u) == ("id", id(u))

    ref = _Sink.start()
    try:
        same = pykka.ActorRegistry.get_by_urn(ref.actor_urn)
        assert same is not None and subscriber_key(same) == subscriber_key(ref)
    finally:
        ref.stop()


def test_subscriber_repr_shows_no_target_repr() -> None:
    class Leaky:
        def __repr__(self) -> str:
            return SECRET

        def __call__(self, n: ServerNotification) -> None:
            pass

    assert SECRET not in repr(Subscriber.of(Leaky()))
    assert Subscriber.of(Leaky()).name.endswith("Leaky")
