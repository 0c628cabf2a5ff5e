"""The handler actor, driven directly: a recording actor stands in for the connection (the
registry's ``"connection"``) and hears every ``Served``. Real threads and a real event loop;
every wait is on an event, a queue or an ask, with a deadline (docs/connection.md,
"Server-to-client requests").

An ``ask`` of the handler actor (``Stats``) is a barrier: it is handled after every message
told before it, including the ``_Done`` a finished method told it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import pykka
import pytest

from conduit_mcp.actors.events import (
    HandlerNotification,
    Serve,
    ServeContext,
    Served,
    ServeError,
    Unserve,
)
from conduit_mcp.actors.handler import HandlerActor, HandlerStats, Stats, child_spec
from conduit_mcp.config import build_config
from conduit_mcp.handler import Declined, Handler, HandlerContext
from conduit_mcp.handler_types import (
    ElicitRequest,
    ElicitResult,
    Root,
    SamplingRequest,
    SamplingResult,
)
from conduit_mcp.otp import Link, Registry, SafeActor, Supervisor, WhichChildren
from conduit_mcp.protocol.results import parse_server_info
from conduit_mcp.published import Published
from conduit_mcp.status import Status

if TYPE_CHECKING:
    from conftest import Events

pytestmark = pytest.mark.timeout(30)

SECRET = "planted-secret-9c41"
ANSWER = "user-answer-secret-5d2e"
SAMPLE = "sampled-text-secret-77af"
WAIT = 5.0

SAMPLING = "sampling/createMessage"
ELICIT = "elicitation/create"
ROOTS = "roots/list"

SAMPLING_PARAMS = {
    "messages": [{"role": "user", "content": {"type": "text", "text": SECRET}}],
    "maxTokens": 10,
}
FORM_PARAMS = {
    "message": SECRET,
    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
}
URL_PARAMS = {"mode": "url", "message": SECRET, "url": "https://x/" + SECRET, "elicitationId": "e"}


class Connection(SafeActor):
    """Stands in for the connection: logs every Served it is told."""

    def __init__(self, log: Events, *, link: Link | None = None) -> None:
        super().__init__(link=link)
        self.log = log

    def receive(self, message: Any) -> Any:
        self.log.put(message)


class Rig:
    """A handler actor with a recording connection in its registry."""

    def __init__(self, events: Events, handler: Handler, **options: Any) -> None:
        self.events = events
        self.registry = Registry()
        self.registry.set("connection", Connection.start(events))
        self.shared = Published()
        self.shared.server_info = {"name": "srv", "version": "1.0"}  # as the handshake publishes it
        self.shared.status = Status("ready", era="legacy")
        self.config = build_config({"handler": handler, **options})
        self.halt = threading.Event()
        self.drops: list[tuple[str, int]] = []
        self.ref = HandlerActor.start(
            "c1",
            self.registry,
            self.shared,
            self.config,
            halt=self.halt,
            on_dropped=lambda kind, n: self.drops.append((kind, n)),
        )
        self._n = 0

    def serve(self, method: str, params: Any = None, key: Any = None) -> Any:
        self._n += 1
        key = self._n if key is None else key
        ctx = ServeContext("legacy", f"srv-{key}", "tools/call", 41)
        self.ref.tell(Serve(key, method, params, ctx))
        return key

    def served(self, key: Any, timeout: float = WAIT) -> Served:
        def found(items: list[Any]) -> bool:
            return any(isinstance(m, Served) and m.key == key for m in items)

        items = self.events.wait_until(found, timeout)
        (answer,) = [m for m in items if isinstance(m, Served) and m.key == key]
        return answer

    def answers(self) -> list[Served]:
        return [m for m in self.events.items if isinstance(m, Served)]

    def stats(self) -> HandlerStats:
        result: HandlerStats = self.ref.ask(Stats(), timeout=WAIT)
        return result

    def until(self, pred: Callable[[HandlerStats], bool]) -> HandlerStats:
        deadline = time.monotonic() + WAIT
        while True:
            s = self.stats()
            if pred(s):
                return s
            assert time.monotonic() < deadline, s
            threading.Event().wait(0.005)  # polls the actor's own counters, bounded


class WatchedRegistry(Registry):
    """A registry that tells the test each time the supervisor (re)registers a child."""

    def __init__(self, sets: Events) -> None:
        super().__init__()
        self.sets = sets

    def set(self, name: str, ref: pykka.ActorRef[Any]) -> None:
        super().set(name, ref)
        self.sets.put((name, ref))

    def next_set(self, name: str, *, after: Any) -> pykka.ActorRef[Any]:
        items = self.sets.wait_until(lambda got: any(n == name and r is not after for n, r in got))
        refs = [r for n, r in items if n == name and r is not after]
        return refs[-1]  # type: ignore[no-any-return]


def wait(event: threading.Event) -> None:
    assert event.wait(WAIT), "timed out"


# -- handlers ------------------------------------------------------------------------------


class Plain(Handler):
    """Every serving method, plain."""

    elicitation_modes = ("form", "url")

    def __init__(self) -> None:
        self.contexts: list[HandlerContext] = []
        self.threads: list[str] = []

    def create_message(self, request: SamplingRequest, ctx: HandlerContext) -> Any:
        self.contexts.append(ctx)
        self.threads.append(threading.current_thread().name)
        assert request.messages == SAMPLING_PARAMS["messages"]
        return SamplingResult(SAMPLE, model="m-1")

    def elicit(self, request: ElicitRequest, ctx: HandlerContext) -> Any:
        return (
            ElicitResult.accept({"name": ANSWER})
            if request.mode == "form"
            else {"action": "accept"}
        )

    def list_roots(self, ctx: HandlerContext) -> Any:
        return [Root("file:///srv", "srv"), "file:///tmp"]


class Async(Handler):
    """Every serving method, async."""

    def __init__(self) -> None:
        self.loops: list[int] = []

    async def create_message(self, request: SamplingRequest, ctx: HandlerContext) -> Any:
        await asyncio.sleep(0)
        self.loops.append(id(asyncio.get_running_loop()))
        return {"role": "assistant", "content": {"type": "text", "text": SAMPLE}, "model": "a"}

    async def elicit(self, request: ElicitRequest, ctx: HandlerContext) -> Any:
        return ElicitResult.accept({"name": ANSWER})

    async def list_roots(self, ctx: HandlerContext) -> Any:
        return ["file:///a"]


class Gated(Handler):
    """create_message (plain) and elicit (async) wait for ``gate``; ``started`` counts."""

    def __init__(self, *, honour_cancel: bool = False) -> None:
        self.gate = threading.Event()
        self.started = threading.Semaphore(0)
        self.cancelled_seen: list[str] = []
        self.returned = threading.Event()
        self.contexts: list[HandlerContext] = []
        self.honour_cancel = honour_cancel
        self._async_gate: asyncio.Event | None = None

    def create_message(self, request: SamplingRequest, ctx: HandlerContext) -> Any:
        self.contexts.append(ctx)
        self.started.release()
        if self.honour_cancel:
            while not self.gate.is_set() and not ctx.cancelled.wait(0.01):
                pass
            if ctx.cancelled.is_set():
                self.cancelled_seen.append("sync")
        else:
            self.gate.wait(WAIT * 2)
        self.returned.set()
        return SamplingResult("x", model="m")

    async def elicit(self, request: ElicitRequest, ctx: HandlerContext) -> Any:
        self.contexts.append(ctx)
        self.started.release()
        try:
            while not self.gate.is_set():
                await asyncio.sleep(0.005)
        except asyncio.CancelledError:
            self.cancelled_seen.append("async")
            self.returned.set()
            raise
        return ElicitResult.decline()

    def wait_started(self, n: int) -> None:
        for _ in range(n):
            assert self.started.acquire(timeout=WAIT), "the method did not start"


# -- serving -------------------------------------------------------------------------------


def test_plain_methods_are_served_with_their_context(events: Events) -> None:
    handler = Plain()
    rig = Rig(events, handler)
    k1 = rig.serve(SAMPLING, SAMPLING_PARAMS)
    k2 = rig.serve(ELICIT, FORM_PARAMS)
    k3 = rig.serve(ROOTS)
    k4 = rig.serve(ELICIT, URL_PARAMS)
    assert rig.served(k1) == Served(
        k1,
        {
            "role": "assistant",
            "content": {"type": "text", "text": SAMPLE},
            "model": "m-1",
            "stopReason": "endTurn",
        },
        None,
    )
    assert rig.served(k2).result == {"action": "accept", "content": {"name": ANSWER}}
    assert rig.served(k3).result == {
        "roots": [{"uri": "file:///srv", "name": "srv"}, {"uri": "file:///tmp"}]
    }
    assert rig.served(k4).result == {"action": "accept"}
    (ctx,) = handler.contexts
    assert (ctx.client_name, ctx.era, ctx.request_id) == ("c1", "legacy", f"srv-{k1}")
    assert (ctx.related_method, ctx.related_id) == ("tools/call", 41)
    assert ctx.server_info == parse_server_info({"name": "srv", "version": "1.0"})
    assert not ctx.cancelled.is_set()
    assert handler.threads[0] != threading.current_thread().name
    assert rig.stats() == HandlerStats(0, 0, 4, 0, 0, 0)


def test_async_methods_run_on_one_loop_the_handler_owns(events: Events) -> None:
    handler = Async()
    rig = Rig(events, handler)
    keys = [rig.serve(SAMPLING, SAMPLING_PARAMS) for _ in range(3)]
    k_elicit = rig.serve(ELICIT, FORM_PARAMS)
    k_roots = rig.serve(ROOTS)
    for key in keys:
        assert rig.served(key).result["model"] == "a"  # type: ignore[index]
    assert rig.served(k_elicit).result == {"action": "accept", "content": {"name": ANSWER}}
    assert rig.served(k_roots).result == {"roots": [{"uri": "file:///a"}]}
    assert len(set(handler.loops)) == 1


def test_up_to_max_server_requests_run_at_once_and_one_more_is_busy(events: Events) -> None:
    handler = Gated()
    rig = Rig(events, handler, max_server_requests=3)
    running = [rig.serve(SAMPLING, SAMPLING_PARAMS), rig.serve(SAMPLING, SAMPLING_PARAMS)]
    running.append(rig.serve(ELICIT, FORM_PARAMS))  # a coroutine takes a slot too
    handler.wait_started(3)
    extra = rig.serve(SAMPLING, SAMPLING_PARAMS)
    busy = rig.served(extra)
    assert busy.result is None and busy.error is not None
    assert (busy.error.reason, busy.error.code) == ("busy", -32603)
    assert "max_server_requests" in busy.error.message
    assert rig.stats().running == 3 and not any(m.key in running for m in rig.answers())
    handler.gate.set()
    for key in running:
        assert rig.served(key).error is None
    rig.until(lambda s: s.occupied == 0)
    again = rig.serve(SAMPLING, SAMPLING_PARAMS)
    assert rig.served(again).error is None


def test_a_plain_method_past_its_timeout_is_answered_and_keeps_its_slot(
    events: Events,
) -> None:
    handler = Gated()
    rig = Rig(events, handler, handler_timeout=0.2, max_server_requests=1)
    key = rig.serve(SAMPLING, SAMPLING_PARAMS)
    answer = rig.served(key)
    assert answer.error is not None
    assert (answer.error.reason, answer.error.code) == ("timeout", -32603)
    assert "handler_timeout" in answer.error.message
    (ctx,) = handler.contexts
    assert ctx.cancelled.is_set()
    # The thread cannot be stopped: it still holds the only slot.
    assert rig.stats()[:2] == (0, 1)
    blocked = rig.serve(SAMPLING, SAMPLING_PARAMS)
    assert rig.served(blocked).error.reason == "busy"  # type: ignore[union-attr]
    handler.gate.set()
    wait(handler.returned)
    rig.until(lambda s: s.occupied == 0)
    assert [m.key for m in rig.answers()].count(key) == 1  # its late result is not sent
    handler.gate.clear()
    handler.honour_cancel = True
    handler.gate.set()
    assert rig.served(rig.serve(SAMPLING, SAMPLING_PARAMS)).error is None


def test_a_coroutine_past_its_timeout_is_cancelled(events: Events) -> None:
    handler = Gated()
    rig = Rig(events, handler, handler_timeout=0.2, max_server_requests=1)
    key = rig.serve(ELICIT, FORM_PARAMS)
    assert rig.served(key).error.reason == "timeout"  # type: ignore[union-attr]
    wait(handler.returned)
    assert handler.cancelled_seen == ["async"]
    assert handler.contexts[0].cancelled.is_set()
    rig.until(lambda s: s.occupied == 0)  # a cancelled coroutine frees its slot


def test_a_coroutine_that_swallows_its_cancellation_keeps_its_slot(events: Events) -> None:
    gate = threading.Event()
    swallowed = threading.Event()

    class Stubborn(Handler):
        async def list_roots(self, ctx: HandlerContext) -> Any:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                swallowed.set()
            while not gate.is_set():
                await asyncio.sleep(0.005)
            return []

    rig = Rig(events, Stubborn(), handler_timeout=0.2, max_server_requests=1)
    key = rig.serve(ROOTS)
    assert rig.served(key).error.reason == "timeout"  # type: ignore[union-attr]
    wait(swallowed)
    assert rig.stats()[:2] == (0, 1)
    assert rig.served(rig.serve(ROOTS)).error.reason == "busy"  # type: ignore[union-attr]
    gate.set()
    rig.until(lambda s: s.occupied == 0)
    assert [m.key for m in rig.answers()].count(key) == 1


def test_a_raising_method_is_answered_logged_by_type_and_the_actor_lives_on(
    events: Events, caplog: pytest.LogCaptureFixture
) -> None:
    class Raising(Handler):
        def create_message(self, request: SamplingRequest, ctx: HandlerContext) -> Any:
            raise ValueError(f"cannot sample {SECRET}")

        async def elicit(self, request: ElicitRequest, ctx: HandlerContext) -> Any:
            raise KeyError(ANSWER)

        def list_roots(self, ctx: HandlerContext) -> Any:
            raise SystemExit(SECRET)

    caplog.set_level(logging.DEBUG)
    rig = Rig(events, Raising())
    for method, params, exc in [
        (SAMPLING, SAMPLING_PARAMS, "ValueError"),
        (ELICIT, FORM_PARAMS, "KeyError"),
        (ROOTS, None, "SystemExit"),
    ]:
        answer = rig.served(rig.serve(method, params))
        assert answer.error is not None
        assert (answer.error.reason, answer.error.code) == ("raised", -32603)
        assert exc in answer.error.message and SECRET not in answer.error.message
    records = [r for r in caplog.records if r.name == "conduit_mcp.handler"]
    assert [r.levelno for r in records] == [logging.WARNING] * 3
    assert "ValueError" in records[0].getMessage()
    assert "create_message" in records[0].getMessage()
    assert rig.ref.is_alive()
    assert rig.stats().refused == 3
    assert SECRET not in caplog.text and ANSWER not in caplog.text


def test_declined_sampling_is_minus_one_and_a_declined_elicit_is_an_answer(
    events: Events,
) -> None:
    class Declining(Handler):
        def create_message(self, request: SamplingRequest, ctx: HandlerContext) -> Any:
            raise Declined(SECRET)

        async def elicit(self, request: ElicitRequest, ctx: HandlerContext) -> Any:
            raise Declined

    rig = Rig(events, Declining())
    answer = rig.served(rig.serve(SAMPLING, SAMPLING_PARAMS))
    assert answer.error is not None
    assert answer.error == ServeError(-1, "User rejected sampling request", "declined")
    assert rig.served(rig.serve(ELICIT, FORM_PARAMS)) == Served(2, {"action": "decline"})


def test_unserve_cancels_and_nothing_is_answered(events: Events) -> None:
    handler = Gated(honour_cancel=True)
    rig = Rig(events, handler, max_server_requests=2)
    plain = rig.serve(SAMPLING, SAMPLING_PARAMS)
    coro = rig.serve(ELICIT, FORM_PARAMS)
    handler.wait_started(2)
    rig.ref.tell(Unserve(plain))
    rig.ref.tell(Unserve(coro))
    rig.ref.tell(Unserve("never-served"))
    rig.until(lambda s: s.occupied == 0)
    assert sorted(handler.cancelled_seen) == ["async", "sync"]
    assert all(ctx.cancelled.is_set() for ctx in handler.contexts)
    assert rig.answers() == []
    assert rig.stats() == HandlerStats(0, 0, 0, 0, 0, 0)


def test_bad_results_are_refused_without_quoting_them(events: Events) -> None:
    class Bad(Handler):
        elicitation_modes = ("form",)

        def create_message(self, request: SamplingRequest, ctx: HandlerContext) -> Any:
            return {"role": "assistant", "content": SAMPLE, "model": "m"}

        def elicit(self, request: ElicitRequest, ctx: HandlerContext) -> Any:
            return {"action": "decline", "content": {"name": ANSWER}}

        def list_roots(self, ctx: HandlerContext) -> Any:
            return [{"uri": "/home/" + SECRET}]

    rig = Rig(events, Bad())
    for method, params in [(SAMPLING, SAMPLING_PARAMS), (ELICIT, FORM_PARAMS), (ROOTS, None)]:
        answer = rig.served(rig.serve(method, params))
        assert answer.error is not None
        assert (answer.error.reason, answer.error.code) == ("bad_result", -32603)
        for secret in (SECRET, ANSWER, SAMPLE):
            assert secret not in answer.error.message


def test_a_plain_def_returning_a_coroutine_is_a_bad_result(events: Events) -> None:
    class Confused(Handler):
        def list_roots(self, ctx: HandlerContext) -> Any:
            async def roots() -> list[str]:
                return []

            return roots()

    rig = Rig(events, Confused())
    answer = rig.served(rig.serve(ROOTS))
    assert answer.error is not None and answer.error.reason == "bad_result"
    assert "async def" in answer.error.message


def test_an_undeclared_mode_a_missing_method_and_bad_params_are_refused(events: Events) -> None:
    class FormOnly(Handler):
        def elicit(self, request: ElicitRequest, ctx: HandlerContext) -> Any:
            raise AssertionError("never called")

    rig = Rig(events, FormOnly())
    cases = [
        (ELICIT, URL_PARAMS, (-32602, "bad_mode")),
        (SAMPLING, SAMPLING_PARAMS, (-32601, "no_method")),
        (ROOTS, None, (-32601, "no_method")),
        ("tools/call", {}, (-32601, "no_method")),
        (ELICIT, {"message": SECRET}, (-32602, "bad_params")),
    ]
    for method, params, (code, reason) in cases:
        answer = rig.served(rig.serve(method, params))
        assert answer.error is not None
        assert (answer.error.code, answer.error.reason) == (code, reason), method
        assert SECRET not in answer.error.message
    assert rig.stats().refused == len(cases)


def test_a_key_served_again_replaces_the_older_request(events: Events) -> None:
    handler = Gated(honour_cancel=True)
    rig = Rig(events, handler, max_server_requests=2)
    rig.serve(SAMPLING, SAMPLING_PARAMS, key="k")
    handler.wait_started(1)
    rig.serve(ELICIT, FORM_PARAMS, key="k")
    handler.wait_started(1)
    handler.gate.set()
    assert rig.served("k").result == {"action": "decline"}
    rig.until(lambda s: s.occupied == 0)
    assert len(rig.answers()) == 1


# -- notifications -------------------------------------------------------------------------


class Listener(Handler):
    def __init__(self, gate: threading.Event | None = None) -> None:
        self.seen: list[Any] = []
        self.done = threading.Event()
        self.entered = threading.Event()
        self.gate = gate
        self.expect = 0
        self.contexts: list[HandlerContext] = []

    def create_message(self, request: SamplingRequest, ctx: HandlerContext) -> Any:
        return SamplingResult("x", model="m")

    def handle_notification(self, method: str, params: Any, ctx: HandlerContext) -> None:
        self.contexts.append(ctx)
        if params and params.get("raise"):
            raise RuntimeError(SECRET)
        self._seen(("n", method, params))

    async def handle_log(
        self, level: str, data: Any, logger: str | None, ctx: HandlerContext
    ) -> None:
        await asyncio.sleep(0)
        self._seen(("log", level, data, logger))

    def _seen(self, item: Any) -> None:
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(WAIT)
        self.seen.append(item)
        if len(self.seen) >= self.expect:
            self.done.set()


def test_notifications_run_in_arrival_order_while_a_serve_runs(
    events: Events, caplog: pytest.LogCaptureFixture
) -> None:
    gated = Gated()

    class Both(Listener):
        def create_message(self, request: SamplingRequest, ctx: HandlerContext) -> Any:
            return gated.create_message(request, ctx)

    handler = Both()
    handler.expect = 40
    rig = Rig(events, handler)
    key = rig.serve(SAMPLING, SAMPLING_PARAMS)
    gated.wait_started(1)
    expected = []
    for i in range(40):
        if i % 3 == 0:
            rig.ref.tell(
                HandlerNotification(
                    "notifications/message", {"level": "info", "data": i, "logger": "l"}
                )
            )
            expected.append(("log", "info", i, "l"))
        else:
            rig.ref.tell(HandlerNotification(f"notifications/x{i}", {"i": i}))
            expected.append(("n", f"notifications/x{i}", {"i": i}))
        if i == 20:
            rig.ref.tell(HandlerNotification("notifications/boom", {"raise": True}))
    wait(handler.done)
    assert handler.seen == expected
    assert rig.stats().running == 1  # the Serve is still waiting
    assert "RuntimeError" in caplog.text and SECRET not in caplog.text
    ctx = handler.contexts[0]
    assert (ctx.client_name, ctx.era, ctx.server_info) == (
        "c1",
        "legacy",
        parse_server_info({"name": "srv", "version": "1.0"}),
    )
    gated.gate.set()
    assert rig.served(key).error is None


def test_a_slow_notification_never_holds_back_a_serve(events: Events) -> None:
    gate = threading.Event()
    handler = Listener(gate)
    rig = Rig(events, handler)
    rig.ref.tell(HandlerNotification("notifications/slow", None))
    wait(handler.entered)
    assert rig.served(rig.serve(SAMPLING, SAMPLING_PARAMS)).error is None
    gate.set()


def test_a_full_notification_backlog_drops_and_counts(
    events: Events, caplog: pytest.LogCaptureFixture
) -> None:
    gate = threading.Event()
    handler = Listener(gate)
    handler.expect = 3
    rig = Rig(events, handler, max_subscriber_backlog=3)
    rig.ref.tell(HandlerNotification("notifications/a", None))
    wait(handler.entered)  # it runs (and counts in the backlog) until the gate opens
    for name in ("b", "c", "d", "e"):
        rig.ref.tell(HandlerNotification(f"notifications/{name}", None))
    assert rig.stats().dropped == 2
    assert rig.drops == [("notification", 1), ("notification", 1)]
    assert "backlog is full" in caplog.text
    gate.set()
    wait(handler.done)
    assert [m for _, m, _ in handler.seen] == [
        "notifications/a",
        "notifications/b",
        "notifications/c",
    ]


def test_notifications_without_their_method_are_ignored(events: Events) -> None:
    rig = Rig(events, Plain())
    rig.ref.tell(HandlerNotification("notifications/message", {"level": "info", "data": 1}))
    rig.ref.tell(HandlerNotification("notifications/x", None))
    assert rig.stats().notifications == 0


# -- life cycle, supervision and secrets -------------------------------------------------------


def test_stop_cancels_everything_answers_what_was_running_and_never_waits(
    events: Events,
) -> None:
    handler = Gated()
    rig = Rig(events, handler, max_server_requests=2)
    plain = rig.serve(SAMPLING, SAMPLING_PARAMS)
    coro = rig.serve(ELICIT, FORM_PARAMS)
    handler.wait_started(2)
    started = time.monotonic()
    rig.ref.stop(timeout=WAIT)
    assert time.monotonic() - started < 2.0  # the blocked thread is not waited for
    for key in (plain, coro):
        answer = rig.served(key)
        assert answer.error is not None and answer.error.reason == "stopped"
    assert all(ctx.cancelled.is_set() for ctx in handler.contexts)
    wait(handler.returned)  # the coroutine was cancelled
    assert handler.cancelled_seen == ["async"]
    handler.gate.set()


def test_once_the_client_halts_no_method_runs(events: Events) -> None:
    handler = Plain()
    rig = Rig(events, handler)
    rig.halt.set()
    rig.serve(SAMPLING, SAMPLING_PARAMS)
    rig.stats()
    assert handler.contexts == [] and rig.answers() == []


def test_a_crashed_handler_actor_is_restarted_and_serves_again(
    events: Events, exits: Events, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    caplog.set_level(logging.DEBUG)
    handler = Gated()
    handler.honour_cancel = True
    registry = WatchedRegistry(exits)
    registry.set("connection", Connection.start(events))
    shared = Published()
    config = build_config({"handler": handler})
    spec = child_spec("c1", registry, shared, config)
    assert (spec.id, spec.restart, spec.lazy) == ("handler", "permanent", False)
    sup = Supervisor.start([spec], registry=registry)
    first = dict(sup.ask(WhichChildren(), timeout=WAIT))["handler"]
    assert first is not None and registry.get("handler") == first
    first.tell(Serve("in-flight", SAMPLING, SAMPLING_PARAMS, ServeContext("legacy", 1)))
    handler.wait_started(1)

    original = HandlerActor._on_notification

    def crash(self: HandlerActor, n: HandlerNotification) -> None:
        raise RuntimeError("the handler actor broke")

    monkeypatch.setattr(HandlerActor, "_on_notification", crash)
    first.tell(HandlerNotification("notifications/x", {"secret": SECRET}))
    answers = events.wait_until(lambda items: any(m.key == "in-flight" for m in items))
    (answer,) = answers
    assert answer.error is not None and answer.error.reason == "stopped"
    assert handler.contexts[0].cancelled.is_set()
    second = registry.next_set("handler", after=first)
    assert second is not None and second is not first and not first.is_alive()
    monkeypatch.setattr(HandlerActor, "_on_notification", original)
    second.tell(Serve("after", ROOTS, None, ServeContext("legacy", 2)))
    second.tell(Serve("again", SAMPLING, SAMPLING_PARAMS, ServeContext("legacy", 3)))
    handler.gate.set()
    assert events.wait_until(lambda items: any(m.key == "again" for m in items))
    (again,) = [m for m in events.items if m.key == "again"]
    assert again.error is None
    (after,) = [m for m in events.items if m.key == "after"]
    assert after.error is not None and after.error.reason == "no_method"
    assert "Unhandled exception" in caplog.text  # the crash report
    assert SECRET not in caplog.text
    sup.stop(timeout=WAIT)


def test_no_secret_in_any_repr_log_or_crash_report(
    events: Events, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)

    class Leaky(Handler):
        elicitation_modes = ("form", "url")

        def create_message(self, request: SamplingRequest, ctx: HandlerContext) -> Any:
            return SamplingResult(SAMPLE, model="m")

        async def elicit(self, request: ElicitRequest, ctx: HandlerContext) -> Any:
            if request.mode == "url":
                raise RuntimeError(f"leaking {SECRET} {ANSWER}")
            return ElicitResult.accept({"name": ANSWER})

        def list_roots(self, ctx: HandlerContext) -> Any:
            return [{"uri": 3, "name": SECRET}]

    rig = Rig(events, Leaky())
    messages: list[Any] = []
    for method, params in [
        (SAMPLING, SAMPLING_PARAMS),
        (ELICIT, FORM_PARAMS),
        (ELICIT, URL_PARAMS),
        (ROOTS, None),
        (SAMPLING, {"messages": SECRET, "maxTokens": 1}),
    ]:
        key = rig.serve(method, params)
        messages.append(Serve(key, method, params, ServeContext("legacy", 1)))
        messages.append(rig.served(key))
    messages.append(HandlerNotification("notifications/x", {"s": SECRET}))
    messages.append(Unserve(1))
    actor = rig.ref._actor_weakref()
    texts = [repr(m) for m in messages] + [str(m) for m in messages] + [repr(actor), caplog.text]
    texts += [repr(s.error) for s in rig.answers()]
    for text in texts:
        for secret in (SECRET, ANSWER, SAMPLE):
            assert secret not in text, text
    # The answers themselves do carry the user's data: that is what the server gets.
    assert ANSWER in str(rig.answers()[1].result)


def test_a_handler_that_is_not_a_handler_fails_the_start(link: Link, exits: Events) -> None:
    # build_config refuses it (config/handler); a Config made by hand reaches the actor
    config = dataclasses.replace(build_config({}), handler=object())
    ref = HandlerActor.start("c1", Registry(), Published(), config, link=link)
    ((_, reason),) = exits.wait_for(1)
    assert isinstance(reason, TypeError) and "conduit_mcp.Handler" in str(reason)
    assert not ref.is_alive()


def test_the_client_tree_starts_the_handler_child_only_with_a_handler() -> None:
    import sys

    import conduit_mcp as mcp
    from conduit_mcp import tree

    server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    with mcp.Client.start(server, name="with-handler", handler=Plain()):
        runtime = tree.lookup("with-handler")
        assert runtime is not None and runtime.supervisor is not None
        children = dict(runtime.supervisor.ask(WhichChildren(), timeout=WAIT))
        assert children["handler"] is not None
        assert runtime.registry.get("handler") == children["handler"]
    with mcp.Client.start(server, name="without-handler"):
        runtime = tree.lookup("without-handler")
        assert runtime is not None and runtime.supervisor is not None
        assert "handler" not in dict(runtime.supervisor.ask(WhichChildren(), timeout=WAIT))
