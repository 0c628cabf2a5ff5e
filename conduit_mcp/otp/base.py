"""The base of every conduit actor: a Pykka actor that fails alone and always tells its link.

Two facts of Pykka 4.5 shape this class:

* A ``BaseException`` that is not an ``Exception`` (``KeyboardInterrupt``, ``SystemExit``,
  ``asyncio.CancelledError``, ``GeneratorExit``) escaping a handler makes Pykka call
  ``ActorRegistry.stop_all()``: every actor of the process dies, the host application's too.
  :class:`SafeActor` converts such an exception into :class:`ActorCrashed`, an ordinary
  ``Exception``, so only the actor that raised it fails.
* Pykka calls neither ``on_failure`` nor ``on_stop`` when ``on_start`` raises. A supervisor
  would never hear of that death, so :class:`SafeActor` reports it to its :class:`Link` itself.

The Pykka hooks (``on_start``, ``on_receive``, ``on_stop``, ``on_failure``) are final; a subclass
overrides :meth:`SafeActor.init`, :meth:`SafeActor.receive` and :meth:`SafeActor.terminate`,
which have one meaning each, as OTP's ``init``/``handle_*``/``terminate`` do.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Final, final

import pykka

from conduit_mcp.otp._pykka import HANDLE_RECEIVE, forget_refs_in_child, new_inbox
from conduit_mcp.otp.flag import Flag

if TYPE_CHECKING:
    from types import TracebackType

__all__ = ["ActorCrashed", "Link", "SafeActor", "safe_tell"]

logger = logging.getLogger("conduit_mcp.actors")


class ActorCrashed(Exception):
    """A non-``Exception`` ``BaseException`` raised inside one actor, made harmless.

    ``original`` is the exception that was raised (e.g. ``KeyboardInterrupt``). Raising this
    instead lets Pykka treat the failure like any other: only this actor fails (or, for an ask,
    the caller gets this exception), and no ``ActorRegistry.stop_all()`` cascade happens.

    >>> crash = ActorCrashed(KeyboardInterrupt())
    >>> type(crash.original).__name__, str(crash)
    ('KeyboardInterrupt', 'KeyboardInterrupt raised inside an actor: KeyboardInterrupt()')
    """

    def __init__(self, original: BaseException) -> None:
        self.original = original
        super().__init__(f"{type(original).__name__} raised inside an actor: {original!r}")


class Link:
    """The channel through which one actor incarnation reports its exit to its supervisor.

    ``notify(urn, reason)`` is called exactly once per incarnation, from the actor's own thread,
    after the actor is already dead (its ref no longer accepts messages): ``reason`` is ``None``
    for a normal exit and the exception otherwise. The supervisor creates one Link per
    incarnation, and its ``notify`` only ``tell``s (a child never asks its supervisor).

    >>> import queue
    >>> exits = queue.Queue()
    >>> ref = SafeActor.start(link=Link(lambda urn, reason: exits.put(reason)))
    >>> ref.stop()
    True
    >>> exits.get(timeout=5) is None      # a normal exit
    True
    """

    __slots__ = ("_notify",)

    def __init__(self, notify: Callable[[str, BaseException | None], None]) -> None:
        self._notify = notify

    def exited(self, urn: str, reason: BaseException | None) -> None:
        """Report the exit; never raises, because it runs inside Pykka's failure path.

        Even a ``BaseException`` is swallowed (and logged): one escaping from ``on_stop`` would
        trigger the ``stop_all()`` cascade this module exists to prevent.

        >>> def broken(urn, reason):
        ...     raise SystemExit
        >>> Link(broken).exited("urn:x", None)   # logged, not raised
        """
        try:
            self._send(urn, reason)
        except BaseException:
            logger.exception("link notification for %s failed", urn)

    def _send(self, urn: str, reason: BaseException | None) -> None:
        """The notification itself: ``notify(urn, reason)``. A subclass may carry what it
        tells in slots and override this instead (the supervisor's links do)."""
        self._notify(urn, reason)


def safe_tell(ref: pykka.ActorRef[Any], message: Any) -> bool:
    """Tell ``message`` to ``ref``; ``False`` instead of ``ActorDeadError`` if it is dead.

    Timer callbacks, link notifications and I/O callbacks run outside the target actor and
    must not fail because the target has just stopped or been restarted.

    >>> ref = SafeActor.start()
    >>> safe_tell(ref, "hello"), ref.stop(), safe_tell(ref, "hello")
    (True, True, False)
    """
    try:
        ref.tell(message)
    except pykka.ActorDeadError:
        return False
    return True


@final
class _Ping:
    """The start handshake: answered by every SafeActor once its ``init`` has succeeded."""

    __slots__ = ()


#: Sent with ``ask`` right after ``start``; the answer proves ``init`` returned (Pykka's
#: ``start`` returns before ``on_start`` has run).
PING: Final = _Ping()

_FINAL_HOOKS: Final = ("on_start", "on_receive", "on_stop", "on_failure", HANDLE_RECEIVE)


class SafeActor(pykka.ThreadingActor):
    """Base of every conduit actor: fails alone, and always tells its :class:`Link` it exited.

    Lifecycle, with one hook per meaning:

    * :meth:`init` runs in the actor's thread before any message. If it raises, the link hears
      the exception (:class:`ActorCrashed` for a non-``Exception``) and the actor is dead, with
      no :meth:`terminate` call (as in OTP).
    * :meth:`receive` handles each message (``tell`` or ``ask``; its return value is the reply).
      An exception from a told message fails the actor; from an ask it goes to the caller and
      the actor keeps running (Pykka's rule, also for a converted :class:`ActorCrashed`).
    * :meth:`terminate` runs once when the actor exits for any reason after a successful init;
      then the link hears ``reason``: ``None`` for a normal stop, the exception otherwise.

    Actor threads are daemons: a client that is never closed must not keep the host's
    interpreter alive at exit (Pykka's threads are not daemons by default).

    >>> class Counter(SafeActor):
    ...     def init(self):
    ...         self.count = 0
    ...     def receive(self, message):
    ...         self.count += message
    ...         return self.count
    >>> ref = Counter.start()
    >>> ref.tell(2)
    >>> ref.ask(3)
    5
    >>> ref.stop()
    True
    """

    use_daemon_thread: ClassVar[bool] = True

    @staticmethod
    def _create_actor_inbox() -> Any:
        # Pykka's inbox hook (otp/_pykka.py). Measured: queue.Queue's Python-level Condition
        # was the largest single cost of a round trip (two puts and two gets per request).
        return new_inbox()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # The guarantees above hold only if the Pykka hooks are ours; fail at class creation
        # rather than silently lose the BaseException guard or the link notification.
        super().__init_subclass__(**kwargs)
        for name in _FINAL_HOOKS:
            if name in cls.__dict__:
                msg = f"{cls.__name__} overrides {name}; override init/receive/terminate instead"
                raise TypeError(msg)

    def __init__(self, *, link: Link | None = None) -> None:
        super().__init__()
        # Pykka's stopped event, as a Flag: the same interface without a Condition made
        # before anyone waits (otp/flag.py; ~1.2 KiB an actor). The ref reads the same one.
        stopped = Flag()
        self.actor_stopped = stopped  # type: ignore[assignment]
        self.actor_ref.actor_stopped = stopped  # type: ignore[assignment]
        self._link = link
        self._exited = False

    # -- hooks for subclasses ----------------------------------------------------------------

    def init(self) -> None:
        """Set up the actor, in its own thread, before it handles any message. If it raises,
        the actor is dead and its link hears the exception (a supervisor's start fails).

        >>> import queue
        >>> exits = queue.Queue()
        >>> class Broken(SafeActor):
        ...     def init(self):
        ...         raise OSError("no such file")
        >>> _ = Broken.start(link=Link(lambda urn, reason: exits.put(reason)))
        >>> exits.get(timeout=5)
        OSError('no such file')
        """

    def receive(self, message: Any) -> Any:
        """Handle one message; the return value is the reply to an ``ask``.

        The default logs and ignores the message, like Pykka's ``on_receive``.

        >>> class Echo(SafeActor):
        ...     def receive(self, message):
        ...         return message
        >>> ref = Echo.start()
        >>> ref.ask("ping"), ref.stop()
        ('ping', True)
        """
        logger.warning("unexpected message received by %s: %r", self, message)
        return None

    def terminate(self, reason: BaseException | None) -> None:
        """Release what the actor holds; ``reason`` is ``None`` for a normal stop.

        Errors raised here are logged and never propagated: the exit must still be reported.

        >>> import threading
        >>> closed = threading.Event()
        >>> class Holder(SafeActor):
        ...     def terminate(self, reason):
        ...         closed.set()
        >>> Holder.start().stop(), closed.is_set()
        (True, True)
        """

    def stop_self(self, reason: BaseException | None = None) -> None:
        """Stop this actor from inside it (a handler, ``init``, or a proxy call).

        The exit is immediate and the same for both kinds: the actor is marked dead now,
        :meth:`terminate` runs now, the link hears ``reason`` now, and no later mailbox message
        is handled (Pykka fails queued asks with ``ActorDeadError``). The current handler still
        returns normally. With ``None`` the exit is normal; with an exception it is abnormal and
        the link sees that exception, without it being raised or logged as a crash.

        This does not use ``actor_ref.stop()`` (which would let earlier queued messages run
        first) nor raise from the handler (which would not stop an actor inside an ``ask``).
        Call it only from the actor's own thread.

        >>> class Once(SafeActor):
        ...     def receive(self, message):
        ...         self.stop_self()
        ...         return "bye"
        >>> ref = Once.start()
        >>> ref.ask("anything"), ref.is_alive()
        ('bye', False)
        """
        self._finish(reason)

    # -- Pykka hooks (final) -----------------------------------------------------------------

    def on_start(self) -> None:
        try:
            self.init()
        except Exception as exc:
            # Pykka calls no on_failure for an on_start error: report it ourselves.
            self._finish(exc, run_terminate=False)
            raise
        except BaseException as exc:
            crashed = ActorCrashed(exc)
            self._finish(crashed, run_terminate=False)
            raise crashed from exc

    def on_receive(self, message: Any) -> Any:
        if message is PING:
            return True
        try:
            return self.receive(message)
        except Exception:
            raise
        except BaseException as exc:
            raise ActorCrashed(exc) from exc

    def _handle_receive(self, message: Any) -> Any:
        # Pykka's dispatcher (a private name, pinned by pykka 4.5): wrapping it also covers
        # proxy calls, which never reach on_receive.
        try:
            return super()._handle_receive(message)
        except Exception:
            raise
        except BaseException as exc:
            raise ActorCrashed(exc) from exc

    def on_stop(self) -> None:
        self._finish(None)

    def on_failure(
        self,
        exception_type: type[BaseException] | None,
        exception_value: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        reason = exception_value
        if reason is None and exception_type is not None:
            reason = exception_type()
        self._finish(reason)

    # -- internals ---------------------------------------------------------------------------

    def _collect_unhandled(self) -> None:
        """Framework hook, run once the ref is dead and before :meth:`terminate`.

        Statem moves the casts still in the mailbox to its postponed events here, so that
        ``terminate`` can answer them instead of Pykka dropping them silently.
        """

    def _release(self) -> None:
        """Framework cleanup after :meth:`terminate` (Statem cancels its armed timer here)."""

    def _finish(self, reason: BaseException | None, *, run_terminate: bool = True) -> None:
        """Run the exit sequence once: mark dead, terminate, release, tell the link.

        The ref is dead before the link is told, so a supervisor that hears of the exit never
        sees the old incarnation accept a message.
        """
        if self._exited:
            return
        self._exited = True
        if not self.actor_stopped.is_set():
            # Pykka sets actor_stopped right after it unregisters the ref (its stop and its
            # failure path both come here after that): unregistering again would scan its
            # whole list of refs for nothing, O(actors) per stop (~20,000 refs at 10,000
            # clients: seconds of a stop_all with the GIL held).
            pykka.ActorRegistry.unregister(self.actor_ref)
        self.actor_stopped.set()
        if run_terminate:
            try:
                self._collect_unhandled()
            except BaseException:
                logger.exception("collecting unhandled messages of %s failed", self)
            try:
                self.terminate(reason)
            except BaseException:
                logger.exception("terminate of %s failed", self)
        try:
            self._release()
        except BaseException:
            logger.exception("release of %s failed", self)
        if self._link is not None:
            self._link.exited(self.actor_urn, reason)


def _forget_actors_in_child() -> None:
    # fork copies only the calling thread: in the child every SafeActor of the parent is a
    # ref with no thread behind it. Unregistered, so that pykka.ActorRegistry.stop_all() in
    # the child does not wait for actors that can never answer.
    forget_refs_in_child(lambda ref: not issubclass(ref.actor_class, SafeActor))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_actors_in_child)
