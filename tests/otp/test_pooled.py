"""PooledActor: a SafeActor that takes a thread of the shared pool only while it has messages.

What a user of the runtime observes: an idle actor holds no thread; one actor's messages are
handled in order and never on two threads at once; a blocked actor delays no other; the
lifecycle (init in the caller's thread for ``start_here``, the link, stop, ActorDeadError for
what is left behind a stop) is a SafeActor's."""

from __future__ import annotations

import queue
import threading
import time
from typing import Any

import pykka
import pytest

from conduit_mcp.otp import Link, Supervisor, WhichChildren, child_spec_for, pooled
from conduit_mcp.otp.pooled import PooledActor, pool_threads, stop_here

pytestmark = pytest.mark.timeout(20)


class Recorder(PooledActor):
    """Records what it receives and the threads it ran on; overlap is counted."""

    def __init__(self, *, link: Link | None = None, fail_init: bool = False) -> None:
        super().__init__(link=link)
        self.fail_init = fail_init
        self.seen: list[Any] = []
        self.inside = 0
        self.overlaps = 0
        self.init_thread: threading.Thread | None = None
        self.stop_thread: threading.Thread | None = None

    def init(self) -> None:
        self.init_thread = threading.current_thread()
        if self.fail_init:
            raise OSError("cannot open")

    def receive(self, message: Any) -> Any:
        self.inside += 1
        if self.inside > 1:
            self.overlaps += 1
        try:
            if isinstance(message, threading.Event):
                message.wait(10)
                return None
            if message == "crash":
                raise ValueError("told to crash")
            if message == "report":
                return (list(self.seen), self.overlaps, self.init_thread)
            self.seen.append(message)
            return None
        finally:
            self.inside -= 1

    def terminate(self, reason: BaseException | None) -> None:
        self.stop_thread = threading.current_thread()


def test_idle_pooled_actors_hold_no_thread() -> None:
    before = threading.active_count()
    refs = [Recorder.start() for _ in range(200)]
    try:
        for ref in refs:  # one after another: a worker or two serve them all
            assert ref.ask("report")[0] == []
        assert threading.active_count() - before < 20
    finally:
        for ref in refs:
            ref.stop()


def test_messages_are_handled_in_order_and_never_on_two_threads_at_once() -> None:
    ref = Recorder.start()
    try:

        def send(sender: int) -> None:
            for i in range(300):
                ref.tell((sender, i))

        senders = [threading.Thread(target=send, args=(s,)) for s in range(6)]
        for t in senders:
            t.start()
        for t in senders:
            t.join(10)
        seen, overlaps, _ = ref.ask("report", timeout=10)
        assert overlaps == 0
        assert len(seen) == 6 * 300
        for s in range(6):  # each sender's messages in the order it told them
            assert [i for (sender, i) in seen if sender == s] == list(range(300))
    finally:
        ref.stop()


def test_a_blocked_actor_does_not_delay_another() -> None:
    blocked, other = Recorder.start(), Recorder.start()
    release = threading.Event()
    try:
        blocked.tell(release)
        assert other.ask("report", timeout=5)[1] == 0
    finally:
        release.set()
        blocked.stop()
        other.stop()


def test_start_here_runs_init_in_the_callers_thread() -> None:
    ref = Recorder.start_here()
    try:
        assert ref.is_alive()
        assert ref.ask("report", timeout=5)[2] is threading.current_thread()
    finally:
        ref.stop()


def test_a_failed_init_kills_the_actor_and_tells_the_link() -> None:
    exits: queue.Queue[BaseException | None] = queue.Queue()
    ref = Recorder.start_here(link=Link(lambda urn, reason: exits.put(reason)), fail_init=True)
    assert not ref.is_alive()
    assert isinstance(exits.get(timeout=5), OSError)
    with pytest.raises(pykka.ActorDeadError):
        ref.ask("report", timeout=5)
    ref = Recorder.start(link=Link(lambda urn, reason: exits.put(reason)), fail_init=True)
    assert isinstance(exits.get(timeout=5), OSError)


def test_a_told_message_that_raises_fails_the_actor() -> None:
    exits: queue.Queue[BaseException | None] = queue.Queue()
    ref = Recorder.start(link=Link(lambda urn, reason: exits.put(reason)))
    with pytest.raises(ValueError):  # an ask gets the error; the actor goes on
        ref.ask("crash", timeout=5)
    assert ref.is_alive()
    ref.tell("crash")
    assert isinstance(exits.get(timeout=5), ValueError)
    assert not ref.is_alive()


def test_stop_here_stops_an_idle_actor_in_the_callers_thread() -> None:
    exits: queue.Queue[BaseException | None] = queue.Queue()
    ref = Recorder.start(link=Link(lambda urn, reason: exits.put(reason)))
    ref.tell("before the stop")
    assert ref.ask("report", timeout=5)[0] == ["before the stop"]
    actor = ref._actor_weakref()
    assert stop_here(ref, timeout=5) is True
    assert exits.get(timeout=5) is None
    assert actor is not None and actor.stop_thread is threading.current_thread()
    assert stop_here(ref, timeout=5) is False  # already dead


def test_what_is_queued_behind_a_stop_gets_actor_dead_error() -> None:
    ref = Recorder.start()
    release = threading.Event()
    ref.tell(release)  # busy: the stop and the ask queue behind it
    stopped = ref.stop(block=False)
    asked = ref.ask("report", block=False)
    release.set()
    assert stopped.get(timeout=5) is True
    with pytest.raises(pykka.ActorDeadError):
        asked.get(timeout=5)


class Blocker(PooledActor):
    """Blocks its worker on the event it is told, and says which thread that is."""

    def __init__(self, ran: queue.Queue[threading.Thread]) -> None:
        super().__init__()
        self.ran = ran

    def receive(self, message: Any) -> Any:
        self.ran.put(threading.current_thread())
        message.wait(10)
        return None


def test_idle_workers_retire(monkeypatch: pytest.MonkeyPatch) -> None:
    """The workers that ran the jobs exit once idle for IDLE_SECONDS. (Workers left idle by
    earlier tests wait out the IDLE_SECONDS of their time: the ones of this test are
    watched, not the pool's count.)"""
    monkeypatch.setattr(pooled, "IDLE_SECONDS", 0.05)
    release = threading.Event()
    ran: queue.Queue[threading.Thread] = queue.Queue()
    refs = [Blocker.start(ran) for _ in range(5)]
    workers = []
    try:
        for ref in refs:  # five blocked at once: five workers
            ref.tell(release)
        workers = [ran.get(timeout=10) for _ in refs]
        assert len(set(workers)) == 5
        assert pool_threads() >= 5
    finally:
        release.set()
        for ref in refs:
            ref.stop()
    deadline = time.monotonic() + 10
    for w in workers:
        w.join(max(0.0, deadline - time.monotonic()))
    assert not any(w.is_alive() for w in workers)


def test_a_supervisor_takes_no_thread_of_its_own_and_restarts_its_children() -> None:
    before = threading.active_count()
    sups = [Supervisor.start_here([child_spec_for(Recorder, id="worker")]) for _ in range(30)]
    try:
        # 30 supervisors, 30 pooled children: a few pool workers, not 60 threads
        assert threading.active_count() - before < 20
        ((_, child),) = sups[0].ask(WhichChildren(), timeout=5)
        child.tell("crash")
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            ((_, now),) = sups[0].ask(WhichChildren(), timeout=5)
            if now is not None and now.actor_urn != child.actor_urn:
                break
            time.sleep(0.01)
        assert now is not None and now.is_alive() and now.actor_urn != child.actor_urn
    finally:
        for sup in sups:
            assert stop_here(sup, timeout=5) is True
    assert not now.is_alive()  # stopped with its supervisor


class Here(Recorder):
    """A Recorder that lets "here ..." messages be handled by the telling thread; "signal"
    sends SIGINT to the process while it is handled (a Ctrl-C inside the actor)."""

    def __init__(self) -> None:
        super().__init__()
        self.threads: list[str] = []

    def may_run_here(self, message: Any) -> bool:
        return isinstance(message, str) and message.startswith("here")

    def receive(self, message: Any) -> Any:
        if message == "threads":
            return list(self.threads)
        if isinstance(message, str):
            self.threads.append(threading.current_thread().name)
        if message == "here signal":
            import os
            import signal

            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(1000):  # the handler would run at any of these bytecodes
                time.sleep(0)
        return super().receive(message)


def test_tell_here_runs_an_idle_actor_in_the_callers_thread_in_order() -> None:
    ref = Here.start_here()
    told: list[Any] = []
    pooled.tell_here(ref, ["here 1", "here 2", "pool 3", "here 4"], told.extend)
    assert told == ["pool 3", "here 4"]  # from the first refused: told as usual
    for message in told:
        ref.tell(message)
    seen, overlaps, _ = ref.ask("report")
    assert seen == ["here 1", "here 2", "pool 3", "here 4"] and overlaps == 0
    me = threading.current_thread().name
    threads = ref.ask("threads")
    assert threads[:2] == [me, me] and threads[2] != me
    assert stop_here(ref, timeout=5)


def test_tell_here_leaves_a_busy_actor_to_its_worker() -> None:
    ref = Here.start_here()
    gate = threading.Event()
    ref.tell(gate)  # a worker holds the actor, blocked
    told: list[Any] = []
    pooled.tell_here(ref, ["here 1"], told.extend)
    assert told == ["here 1"]  # nothing was done here
    gate.set()
    for message in told:
        ref.tell(message)
    assert ref.ask("report")[:2] == (["here 1"], 0)
    assert stop_here(ref, timeout=5)


def test_tell_here_holds_ctrl_c_until_the_actor_is_left() -> None:
    ref = Here.start_here()
    told: list[Any] = []
    with pytest.raises(KeyboardInterrupt):
        pooled.tell_here(ref, ["here signal", "here after"], told.extend)
    # The interrupt came inside the actor, but was raised only once both were handled:
    # the actor is alive, not crashed, and idle again.
    assert ref.is_alive() and told == []
    assert ref.ask("report")[:2] == (["here signal", "here after"], 0)
    assert stop_here(ref, timeout=5)
