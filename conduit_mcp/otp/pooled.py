"""Actors that borrow a thread: a :class:`SafeActor` whose mailbox a shared pool serves.

A Pykka ``ThreadingActor`` owns a thread for its whole life, and most of that life it waits.
A client's supervisor is the clearest case: it handles a message when a child starts, exits or
is stopped, and nothing else (measured, ``benchmarks/many_clients.py``: of 20,002 threads for
10,000 idle clients, 10,000 were supervisors waiting on an empty mailbox). A
:class:`PooledActor` takes a thread only while it has messages: a message told to an idle one
hands it to the process's actor pool, whose worker handles what is in its mailbox, then
leaves it. Everything else is Pykka's and unchanged: the ref, ``tell``/``ask``/``stop``, the
futures, the registry, the order of messages (one actor is never on two workers at once, and
it handles its mailbox in order), the ``init``/``receive``/``terminate`` hooks and the
:class:`~conduit_mcp.otp.base.Link`.

The pool is *cached*: a job that finds no idle worker gets a new one at once, and a worker
idle for :data:`IDLE_SECONDS` exits. So an actor that blocks (a supervisor waiting for a
child's stop) holds one worker, as it held its own thread before, and never delays another
actor: no deadlock a thread per actor would not have. A burst costs as many threads as there
are actors busy at once, and they go away when the burst is over.

Two starts: :meth:`PooledActor.start` (Pykka's: ``init`` runs on a worker, the call returns at
once) and :meth:`PooledActor.start_here`, which runs ``init`` in the calling thread and returns
once it ran, for a caller that would wait for it anyway (OTP's ``start_link`` is synchronous;
``Client.start`` waits for its tree): no hand-off to a worker and back. :func:`stop_here` is
the same for a stop: when the actor is idle the stopping thread runs the stop itself.
:func:`tell_here` is the same for messages the actor accepts to have handled by the telling
thread (:meth:`PooledActor.may_run_here`; the connection: a request in ``ready``): when the
actor is idle and its mailbox empty, the caller handles them instead of waking a worker.
In each of them the calling thread holds the actor exactly as a worker would, so the
guarantees above hold.
"""

from __future__ import annotations

import logging
import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any, Final, Self, cast

import pykka

from conduit_mcp.otp._pykka import (
    actor_loop_setup,
    actor_loop_teardown,
    envelope_parts,
    handle_failure,
)
from conduit_mcp.otp.base import SafeActor
from conduit_mcp.otp.signals import hold_signals, in_main_thread, replay_signals, restore_signals

__all__ = ["IDLE_SECONDS", "PooledActor", "init_ran", "pool_threads", "stop_here", "tell_here"]

logger = logging.getLogger("conduit_mcp.actors")

#: A pool worker with nothing to do for this long exits.
IDLE_SECONDS: Final = 5.0

#: Messages one turn handles before the actor goes to the back of the pool's line (so an
#: actor flooded with messages cannot keep a worker to itself).
_TURN: Final = 64


class _Worker:
    __slots__ = ("jobs",)

    def __init__(self) -> None:
        self.jobs: queue.SimpleQueue[Callable[[], None]] = queue.SimpleQueue()


class _Pool:
    """A cached thread pool: every job starts at once, on an idle worker or a new one."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._idle: list[_Worker] = []  # a stack: the most recently idle worker is reused
        self._count = 0
        self._made = 0

    def threads(self) -> int:
        with self._lock:
            return self._count

    def submit(self, job: Callable[[], None]) -> None:
        with self._lock:
            if self._idle:
                worker = self._idle.pop()
            else:
                self._count += 1
                self._made += 1
                worker, made = None, self._made
        if worker is not None:
            worker.jobs.put(job)
            return
        thread = threading.Thread(
            target=self._work, args=(job,), name=f"conduit-mcp-actor-{made}", daemon=True
        )
        thread.start()

    def _work(self, job: Callable[[], None]) -> None:
        me = _Worker()
        next_job: Callable[[], None] | None = job
        while next_job is not None:
            try:
                next_job()
            except BaseException:  # a turn catches its actor's errors; this is a bug guard
                logger.exception("actor pool job failed")
            next_job = None
            with self._lock:
                self._idle.append(me)
            try:
                next_job = me.jobs.get(timeout=IDLE_SECONDS)
            except queue.Empty:
                with self._lock:
                    if me in self._idle:  # nobody took it: retire
                        self._idle.remove(me)
                        self._count -= 1
                        return
                next_job = me.jobs.get()  # taken just as the wait ran out: the job is coming

    def forget(self) -> None:
        """In a forked child: the parent's workers do not exist here."""
        self._lock = threading.Lock()
        self._idle = []
        self._count = 0


_pool = _Pool()


def pool_threads() -> int:
    """How many threads the actor pool has now (busy and idle).

    >>> pool_threads() >= 0
    True
    """
    return _pool.threads()


class _Inbox:
    """A C-level queue, its actor, and whether the actor is on a worker (or being run by a
    caller). Calling the inbox runs one turn of its actor: the pool's job for the actor is
    the inbox itself, so an activation makes no object (a bound method of the actor per
    activation, and two kept per actor, were objects for the cyclic collector to walk)."""

    __slots__ = ("_busy", "_lock", "_queue", "actor", "init_ran")

    def __init__(self) -> None:
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._busy = True  # until the actor is started: messages told before wait
        self.actor: PooledActor | None = None
        self.init_ran = False  # set once init returned (or raised)

    def __call__(self) -> None:
        """One turn of the actor (:meth:`PooledActor._turn`)."""
        actor = self.actor
        assert actor is not None
        actor._turn()

    def put(self, envelope: Any) -> None:
        self._queue.put(envelope)
        with self._lock:
            if self._busy:
                return
            self._busy = True
        _pool.submit(self)

    def get(self) -> Any:
        return self._queue.get()

    def get_nowait(self) -> Any:
        return self._queue.get_nowait()

    def empty(self) -> bool:
        return self._queue.empty()

    def qsize(self) -> int:
        """Messages waiting (as Pykka's inbox has it: replies.py reads it to batch)."""
        return self._queue.qsize()

    def claim(self) -> bool:
        """Take the actor for the calling thread if it is idle."""
        with self._lock:
            if self._busy:
                return False
            self._busy = True
            return True

    def claim_empty(self) -> bool:
        """Take the actor for the calling thread if it is idle and nothing waits in its
        mailbox (so a message handled now keeps the mailbox's order)."""
        with self._lock:
            if self._busy or not self._queue.empty():
                return False
            self._busy = True
            return True

    def release(self) -> bool:
        """End a turn: the actor is idle again, unless messages wait (False: go on)."""
        with self._lock:
            if not self._queue.empty():
                return False
            self._busy = False
            return True


class PooledActor(SafeActor):
    """A :class:`SafeActor` that takes a thread of the shared actor pool only while it has
    messages (see the module docstring). Subclass it exactly as a ``SafeActor``.

    >>> class Echo(PooledActor):
    ...     def receive(self, message):
    ...         return message
    >>> ref = Echo.start()
    >>> ref.ask("hello"), ref.stop()
    ('hello', True)
    >>> ref = Echo.start_here()          # init ran in this thread
    >>> ref.ask("again"), stop_here(ref, timeout=5)
    ('again', True)
    """

    @staticmethod
    def _create_actor_inbox() -> Any:
        return _Inbox()

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._inbox: _Inbox = cast(_Inbox, self.actor_inbox)
        self._inbox.actor = self
        #: While :func:`tell_here` runs messages in the telling thread: how many of them
        #: are still to come after the one being handled; -1 otherwise.
        self.here_left = -1

    def may_run_here(self, message: Any) -> bool:
        """Whether :func:`tell_here` may handle ``message`` in the telling thread (the actor
        is idle and its mailbox empty when this is asked, and the caller holds it). The
        default, False: every message goes through the mailbox. Override it only for
        messages whose handling is short, never blocks and runs no user code.

        >>> import threading
        >>> class Counter(PooledActor):
        ...     def may_run_here(self, message):
        ...         return message == "count"
        ...     def receive(self, message):
        ...         self.where = threading.current_thread().name
        >>> ref = Counter.start()
        >>> ref.ask("ping") is None  # idle after its start
        True
        >>> tell_here(ref, ["count"], lambda rest: [ref.tell(m) for m in rest])
        >>> ref.proxy().where.get(timeout=5) == threading.current_thread().name
        True
        >>> ref.stop()
        True
        """
        return False

    def _handle_here(self, message: Any) -> None:
        """Handle ``message`` of :func:`tell_here`'s batch (one :meth:`may_run_here`
        accepted), as a pool worker would. A subclass may handle the messages it accepts more
        directly, with the same effect (what they raise must fail the actor as it would on
        a worker: ``_failed_here``)."""
        self._handle_message(message, None)

    def _run_here(self, messages: list[Any], rest: Callable[[list[Any]], None]) -> None:
        """:func:`tell_here`'s work."""
        inbox = self._inbox
        if not inbox.claim_empty():
            rest(messages)
            return
        signals = None
        main = in_main_thread()
        if main:
            # No Python signal handler (Ctrl-C's KeyboardInterrupt) may run inside the
            # actor: they are held until it is left.
            signals = hold_signals()
        done = 0
        if signals is not None or not main:
            try:
                left = len(messages)
                for message in messages:
                    if self.actor_stopped.is_set() or not self.may_run_here(message):
                        break
                    left -= 1
                    self.here_left = left
                    self._handle_here(message)
                    done += 1
            finally:
                self.here_left = -1
                if signals is not None:
                    restore_signals(signals[0])
        if self.actor_stopped.is_set():
            _pool.submit(inbox)  # the turn answers what is left (teardown)
        else:
            self._end_turn()
        try:
            if done < len(messages):
                rest(messages[done:])
        finally:
            if signals is not None and signals[1]:
                replay_signals(signals[1], signals[0])

    @classmethod
    def start_here(cls, *args: Any, **kwargs: Any) -> pykka.ActorRef[Self]:
        """Start the actor and run its ``init`` in the calling thread; return once it ran
        (it succeeded if ``ref.is_alive()``). Messages told meanwhile are handled after it,
        on the pool.

        >>> import threading
        >>> class Where(PooledActor):
        ...     def init(self):
        ...         self.started_on = threading.current_thread().name
        ...     def receive(self, message):
        ...         return self.started_on
        >>> ref = Where.start_here()
        >>> ref.ask("where") == threading.current_thread().name, ref.stop()
        (True, True)
        """
        obj = cls(*args, **kwargs)
        pykka.ActorRegistry.register(obj.actor_ref)
        obj._setup()
        obj._end_turn()
        return obj.actor_ref

    def _start_actor_loop(self) -> None:
        # Pykka's hook: instead of a thread of its own, the first turn runs init.
        _pool.submit(self._first_turn)

    def _first_turn(self) -> None:
        self._setup()
        self._turn()

    def _setup(self) -> None:
        actor_loop_setup(self)
        self._inbox.init_ran = True

    def _end_turn(self) -> None:
        if not self._inbox.release():
            _pool.submit(self._inbox)

    def _turn(self) -> None:
        """Handle what the mailbox holds (at most ``_TURN`` messages), as Pykka's loop does."""
        inbox = self._inbox
        for _ in range(_TURN):
            if self.actor_stopped.is_set():
                # Dead: what is left gets ActorDeadError (a stop's ask gets its answer).
                actor_loop_teardown(self)
                if inbox.release():
                    return
                continue
            try:
                envelope = inbox.get_nowait()
            except queue.Empty:
                if inbox.release():
                    return
                continue
            self._handle(envelope)
        _pool.submit(inbox)

    def _handle(self, envelope: Any) -> None:
        message, reply_to = envelope_parts(envelope)
        self._handle_message(message, reply_to)

    def _handle_message(self, message: Any, reply_to: Any) -> None:
        try:
            response = self._handle_receive(message)
            if reply_to is not None:
                reply_to.set(response)
        except BaseException:
            # SafeActor turns a BaseException into ActorCrashed before it gets here.
            if reply_to is not None:
                logger.info("exception returned from %s to caller", self, exc_info=True)
                reply_to.set_exception()
                return
            self._failed_here(sys.exc_info())

    def _failed_here(self, info: Any) -> None:
        """A told message's handler raised (``info``, as ``sys.exc_info()``): the actor
        fails as Pykka's loop would make it."""
        handle_failure(self, info)
        try:
            self.on_failure(*info)
        except BaseException:
            handle_failure(self, sys.exc_info())


def init_ran(ref: pykka.ActorRef[Any]) -> bool:
    """Whether ``ref`` is a :class:`PooledActor` whose ``init`` has returned (or raised):
    after :meth:`PooledActor.start_here`, always; then no start handshake is needed (alive:
    it succeeded; dead: its link has heard why).

    >>> ref = PooledActor.start_here()
    >>> init_ran(ref), stop_here(ref)
    (True, True)
    """
    inbox = ref.actor_inbox
    return isinstance(inbox, _Inbox) and inbox.init_ran


def stop_here(ref: pykka.ActorRef[Any], timeout: float | None = None) -> bool:
    """``ref.stop(block=True, timeout=timeout)``; for an idle :class:`PooledActor`, the
    calling thread runs the stop (and what was queued before it) itself instead of waking a
    pool worker and waiting for it. ``False`` if the actor was already dead; raises
    ``pykka.Timeout`` as ``ref.stop`` does.

    >>> class Idle(PooledActor):
    ...     pass
    >>> ref = Idle.start_here()
    >>> stop_here(ref, timeout=5), stop_here(ref, timeout=5)
    (True, False)
    """
    inbox = ref.actor_inbox
    if not isinstance(inbox, _Inbox) or not inbox.claim():
        return ref.stop(block=True, timeout=timeout)
    future = ref.stop(block=False)
    inbox()
    return bool(future.get(timeout=timeout))


def tell_here(
    ref: pykka.ActorRef[Any], messages: list[Any], rest: Callable[[list[Any]], None]
) -> None:
    """Handle ``messages`` in order in the calling thread if ``ref`` is an idle
    :class:`PooledActor` with an empty mailbox, while its :meth:`~PooledActor.may_run_here`
    accepts them: what ``ref.tell`` of each would have done, without waking a pool worker
    (measured: a wake-up costs ~37 µs on a 2-core machine, a third of a sequential stdio
    call). ``rest`` is called with those not handled (from the first refused; all of them
    when the actor is busy, or not a :class:`PooledActor`) to tell them as usual. The actor's
    guarantees hold: the caller holds the actor as a worker would (no other thread runs it
    meanwhile; a message told meanwhile waits, then goes to the pool), and the mailbox's
    order is kept (only an empty one is passed by). In the main thread the Python signal
    handlers of :data:`~conduit_mcp.otp.signals.DEFERRED` (Ctrl-C's ``KeyboardInterrupt``)
    run once the actor is left and ``rest`` has run, never inside the actor (what they
    raise goes to the caller).

    >>> class Here(PooledActor):
    ...     def may_run_here(self, message):
    ...         return message.startswith("here")
    >>> ref, told = Here.start_here(), []
    >>> tell_here(ref, ["here", "here too", "pool", "here"], told.extend); told
    ['pool', 'here']
    >>> stop_here(ref, timeout=5)
    True
    """
    inbox = ref.actor_inbox
    actor = inbox.actor if isinstance(inbox, _Inbox) else None
    if actor is None:
        rest(messages)
    else:
        actor._run_here(messages, rest)


def _forget_pool_in_child() -> None:
    _pool.forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_pool_in_child)
