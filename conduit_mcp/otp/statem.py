"""The gen_statem idiom on Pykka: state functions, state enter, postpone, inserted events, timers.

The vocabulary and the rules are OTP's (``gen_statem``, callback mode ``state_functions`` with
``state_enter``; docs/porting.md), so a reader who knows OTP knows this engine:

* **Dispatch.** Each event goes to ``self.on_<state>(kind, event)`` if that method exists, else
  to :meth:`Statem.handle_event`. ``kind`` is ``"cast"`` (a message told to the actor),
  ``"internal"`` (a :class:`NextEvent`), ``"state_timeout"`` or ``"timeout"``. A handler returns
  ``None`` (keep the state, no actions), a state name, or a :class:`Step`.
* **State enter.** When the state changes, and for the initial state (with ``old_state ==
  state``), ``self.enter_<state>(old_state)`` (else :meth:`Statem.enter`) is called. It may set
  timeouts or :class:`Stop`, but may not change state, postpone or insert events.
* **Same state = keep_state.** Returning the current state's name is OTP's ``next_state`` to
  the same state: no enter call, no replay of postponed events, the state timeout keeps
  running. (There is no ``repeat_state``.)
* **Postpone.** The event is saved; when the state *changes*, the saved events are replayed,
  oldest first, before any mailbox message.
* **Event order.** After a transition the internal queue is ``inserted events`` (in the order
  given) + ``postponed events`` (on a state change) + ``what was queued``; then zero-time
  timeouts; only then the next mailbox message. That is why inserted events are never told to
  self: a tell lands behind the mailbox.
* **Timers.** At most one state timeout, cancelled by a state change; any number of named
  timeouts, which survive state changes. Setting again replaces, ``None`` cancels. Each arm gets
  a token, and an event whose token is no longer current is dropped, so a cancelled or replaced
  timeout is never delivered, even if it had already fired.

Timer cost (one named timer per request is the connection's hot path): each Statem keeps a
:class:`~conduit_mcp.otp.timers.TimerTable`, its own heap with at most one entry in the
process timer service, for its earliest deadline; arming a later timer does not touch the
service, and cancelling is lazy. The service ``safe_tell``-s a private wake message; the statem
then delivers every due, current timer in deadline order, each as if it were a mailbox message
(fully handled before the next), and re-arms for the next deadline.

**Closed states.** A subclass may declare ``STATES``, the tuple of its state names. The class
is then checked when it is created: every ``on_<name>`` and ``enter_<name>`` must name a
declared state and every declared state must have an ``on_<name>``, so a misspelt ``on_redy``
is a ``TypeError`` at import, not an event silently sent to :meth:`Statem.handle_event`; and
a transition to an undeclared state raises. A class that declares no ``STATES`` (and inherits
none) is not checked.

A handler that raises fails the actor (its supervisor restarts it): that is intended.
"""

from __future__ import annotations

import difflib
import logging
import queue
from abc import ABCMeta
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from types import FunctionType
from typing import Any, ClassVar, Final

from pykka import messages as pykka_messages

from conduit_mcp.otp import timers
from conduit_mcp.otp._pykka import ACTOR_STOP, envelope_parts, take_nowait
from conduit_mcp.otp.base import Link, SafeActor, safe_tell

__all__ = [
    "Action",
    "NextEvent",
    "Postpone",
    "StateTimeout",
    "Statem",
    "Step",
    "Stop",
    "Timeout",
]


@dataclass(frozen=True, slots=True)
class Postpone:
    """Save the current event; it is replayed after the next state change (see
    :class:`Statem`'s example).

    >>> Step(None, [Postpone()])
    Step(state=None, actions=[Postpone()])
    """


@dataclass(frozen=True, slots=True)
class NextEvent:
    """Insert ``event`` to be handled before every queued, postponed and mailbox event.

    >>> Step("checking", [NextEvent("check now")])
    Step(state='checking', actions=[NextEvent(event='check now', kind='internal')])
    """

    event: Any
    kind: str = "internal"


@dataclass(frozen=True, slots=True)
class StateTimeout:
    """Deliver ``event`` as ``"state_timeout"`` after ``seconds`` unless the state changes.

    ``None`` cancels; setting it again replaces the previous one.

    >>> Step("waiting", [StateTimeout(5.0, "gave up")])  # 5 s in "waiting", then the event
    Step(state='waiting', actions=[StateTimeout(seconds=5.0, event='gave up')])
    """

    seconds: float | None
    event: Any = None


@dataclass(frozen=True, slots=True)
class Timeout:
    """Deliver ``event`` as ``"timeout"`` after ``seconds``; one timer per ``name``.

    Survives state changes. ``None`` cancels; setting the same name again replaces it.

    >>> Step(None, [Timeout(("request", 7), 30.0, "deadline"), Timeout("health", None)])
    Step(state=None, actions=[Timeout(name=('request', 7), seconds=30.0, event='deadline'), Timeout(name='health', seconds=None, event=None)])
    """

    name: Hashable
    seconds: float | None
    event: Any = None


@dataclass(frozen=True, slots=True)
class Stop:
    """Stop the actor after this event (normal with ``None``), through ``stop_self``.

    The state does not change and no enter call runs (OTP's ``{stop, Reason}``). Casts not yet
    handled stay in :meth:`Statem.postponed` for ``terminate`` to answer; nothing else runs.

    >>> Step(None, [Stop()]), Stop(RuntimeError("lost")).reason
    (Step(state=None, actions=[Stop(reason=None)]), RuntimeError('lost'))
    """

    reason: BaseException | None = None


Action = Postpone | NextEvent | StateTimeout | Timeout | Stop
"""What a handler's :class:`Step` (and ``init_state``) may carry, in order.

>>> from conduit_mcp.otp import Postpone, Step, Timeout
>>> Step(None, [Postpone(), Timeout("retry", 1.0, "again")]).actions[1].name
'retry'
"""


@dataclass(frozen=True, slots=True)
class Step:
    """A handler's transition: the next state (``None`` keeps it) and actions, in order.
    A handler may also return a state name alone (``"open"``), or ``None`` (no change).

    >>> Step("open", [StateTimeout(10.0, "relock")]).state
    'open'
    """

    state: str | None
    actions: Sequence[Action] = ()


logger = logging.getLogger("conduit_mcp.otp.statem")

#: The key of the single state timeout in the timer table; no user name can equal it.
_STATE_TIMEOUT: Final = object()

#: ``on_<state>`` would call a Pykka/SafeActor hook for these names.
_RESERVED_STATES: Final = frozenset({"start", "stop", "failure", "receive"})


def _check_declared_states(cls: type, states: Any) -> frozenset[str]:
    """The declared ``states`` of ``cls`` as a set; TypeError if they are not a tuple of
    distinct state names, or if a handler names no declared state, or a state has none."""
    name = cls.__name__
    if type(states) is not tuple or not states:
        raise TypeError(f"{name}.STATES must be a non-empty tuple of state names")
    for state in states:
        if type(state) is not str or not state.isidentifier():
            raise TypeError(f"{name}.STATES: {state!r} is not a state name (an identifier)")
        if state in _RESERVED_STATES:
            raise TypeError(f"{name}.STATES: {state!r} is reserved (on_{state} is a Pykka hook)")
    declared = frozenset(states)
    if len(declared) != len(states):
        raise TypeError(f"{name}.STATES names a state twice: {states!r}")
    for attr in sorted(dir(cls)):
        for prefix in ("on_", "enter_"):
            if not attr.startswith(prefix) or not callable(getattr(cls, attr, None)):
                continue
            state = attr[len(prefix) :]
            if prefix == "on_" and state in _RESERVED_STATES:
                continue  # Pykka's own hooks (on_start, on_receive, ...)
            if state not in declared:
                close = difflib.get_close_matches(state, sorted(declared), n=1)
                hint = f"; did you mean {prefix}{close[0]}?" if close else ""
                msg = (
                    f"{name}.{attr} names no declared state (STATES is {states!r}){hint} "
                    f"Add the state to STATES or rename the method."
                )
                raise TypeError(msg)
    missing = [state for state in states if not callable(getattr(cls, "on_" + state, None))]
    if missing:
        msg = (
            f"{name} declares the state(s) {missing!r} in STATES but has no "
            f"{', '.join('on_' + m for m in missing)}; every declared state needs its handler"
        )
        raise TypeError(msg)
    return declared


class _Wake:
    """Told by the timer service: some deadline of this statem may be due."""

    __slots__ = ("arm",)

    def __init__(self, arm: int) -> None:
        self.arm = arm


def _kind_of(key: Hashable) -> str:
    return "state_timeout" if key is _STATE_TIMEOUT else "timeout"


#: Mailbox messages that are not casts: Pykka's own (stop, proxy calls) and our wake-ups.
_NOT_CASTS: Final = (
    _Wake,
    ACTOR_STOP,
    pykka_messages.ProxyCall,
    pykka_messages.ProxyGetAttr,
    pykka_messages.ProxySetAttr,
)


#: A cache entry for a handler that is not a plain function on the class (a staticmethod, a
#: callable object): looked up on the instance at each call, as before the cache.
_LOOK_UP: Final[Any] = object()

#: Per Statem class: ``(on_<state> handlers, enter_<state> calls)`` by state, each the class's
#: plain function (called with the instance), ``None`` (no handler: ``handle_event``) or
#: :data:`_LOOK_UP`. Filled as states are first reached, shared by every instance of the class.
_by_class: dict[type, tuple[dict[str, Any], dict[str, Any]]] = {}


def _handlers_of(cls: type) -> tuple[dict[str, Any], dict[str, Any]]:
    caches = _by_class.get(cls)
    if caches is None:
        caches = _by_class.setdefault(cls, ({}, {}))
    return caches


def _class_function(cls: type, name: str, default: Any = None) -> Any:
    """What ``getattr(instance, name)`` would call, as a function taking the instance, or
    ``default`` when the class has no such attribute; :data:`_LOOK_UP` for anything that is
    not a plain function."""
    for klass in cls.__mro__:
        if name in klass.__dict__:
            attr = klass.__dict__[name]
            return attr if isinstance(attr, FunctionType) else _LOOK_UP
    return default


class _StatemType(ABCMeta):
    """Statem's metaclass (Pykka's actors' ``ABCMeta``, plus one rule): setting or deleting an
    ``on_*``/``enter*`` attribute of a class (a test's ``monkeypatch.setattr(Connection,
    "on_ready", ...)``) forgets the handlers cached for it and its subclasses, so every
    instance, running or not, calls the new one from its next event, as ``getattr`` on the
    instance would."""

    def __setattr__(cls, name: str, value: Any) -> None:
        super().__setattr__(name, value)
        if name.startswith(("on_", "enter")):
            _forget_handlers(cls)

    def __delattr__(cls, name: str) -> None:
        super().__delattr__(name)
        if name.startswith(("on_", "enter")):
            _forget_handlers(cls)


def _forget_handlers(cls: type) -> None:
    # Cleared in place: each instance holds its class's two dicts.
    todo = [cls]
    while todo:
        klass = todo.pop()
        caches = _by_class.get(klass)
        if caches is not None:
            caches[0].clear()
            caches[1].clear()
        todo.extend(klass.__subclasses__())


class Statem(SafeActor, metaclass=_StatemType):
    """A gen_statem-style actor; subclasses implement :meth:`init_state` and ``on_<state>``.

    Mailbox messages are ``"cast"`` events. The engine is single-threaded (the actor's thread);
    the public methods below are for the subclass's own handlers, enter calls and ``init``.

    A door that opens with a code, relocks by itself, and keeps a push made while locked
    until it is open:

    >>> import queue
    >>> events = queue.Queue()
    >>> class Door(Statem):
    ...     STATES = ("locked", "open")
    ...     def init_state(self):
    ...         return "locked", []
    ...     def enter_open(self, old_state):
    ...         events.put(f"{old_state} -> open")
    ...         return [StateTimeout(0.05, "relock")]
    ...     def enter_locked(self, old_state):
    ...         events.put(f"{old_state} -> locked")
    ...     def on_locked(self, kind, event):
    ...         if event == "code 1234":
    ...             return "open"
    ...         if event == "push":
    ...             return Step(None, [Postpone()])   # replayed once the state changes
    ...     def on_open(self, kind, event):
    ...         if kind == "state_timeout":
    ...             return "locked"
    ...         if event == "push":
    ...             events.put("pushed")
    >>> door = Door.start()
    >>> door.tell("push")
    >>> door.tell("code 1234")
    >>> [events.get(timeout=5) for _ in range(4)]
    ['locked -> locked', 'locked -> open', 'pushed', 'open -> locked']
    >>> door.stop()
    True

    A misspelt state handler fails when the class is created:

    >>> class Typo(Statem):
    ...     STATES = ("ready",)
    ...     def on_redy(self, kind, event):
    ...         return None
    Traceback (most recent call last):
    ...
    TypeError: Typo.on_redy names no declared state (STATES is ('ready',)); did you mean on_ready? Add the state to STATES or rename the method.
    """

    #: The subclass's state names, a closed set checked at class creation (module docstring,
    #: "Closed states"); None: not declared, not checked.
    STATES: ClassVar[tuple[str, ...] | None] = None
    _declared_states: ClassVar[frozenset[str] | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        states = cls.STATES
        if states is not None:
            cls._declared_states = _check_declared_states(cls, states)

    def __init__(self, *, link: Link | None = None) -> None:
        super().__init__(link=link)
        self._state = ""
        self._queue: deque[tuple[str, Any]] = deque()
        self._postponed: list[tuple[str, Any]] = []
        # A bound method, not a partial over the ref (a partial and its args tuple): one
        # tracked object fewer per statem for the cyclic collector.
        self._timers = timers.TimerTable(self._tell_wake)
        self._stopping = False
        # The class's handler functions by state, shared by its instances (a dict and a bound
        # method per state reached were two tracked objects and more per instance for the
        # cyclic collector; measured with gc.get_objects()).
        self._handlers, self._enters = _handlers_of(type(self))

    def _tell_wake(self, arm: int) -> None:
        # Runs on the timer thread: only a tell, never a call into the actor
        # (docs/architecture.md).
        safe_tell(self.actor_ref, _Wake(arm))

    # -- the subclass's interface --------------------------------------------------------------

    @property
    def state(self) -> str:
        """The current state's name."""
        return self._state

    def init_state(self) -> tuple[str, list[Action]]:
        """Return the initial state and its actions (like OTP's ``init/1``)."""
        raise NotImplementedError

    def handle_event(self, kind: str, event: Any) -> str | Step | None:
        """Handle an event of a state that has no ``on_<state>``; the default ignores it."""
        logger.warning("%s: unhandled %s event in state %r: %r", self, kind, self._state, event)
        return None

    def enter(self, old_state: str) -> list[Action] | None:
        """State enter call of a state that has no ``enter_<state>``; the default does nothing."""
        return None

    def postponed(self) -> Sequence[Any]:
        """The postponed events' payloads, oldest first.

        Inside ``terminate`` this also holds the casts the actor never handled: those queued
        internally when it stopped and those still in its mailbox, so that a subclass can answer
        every request it was sent instead of leaving its caller waiting.
        """
        return [event for _, event in self._postponed]

    def remove_postponed(self, pred: Callable[[Any], bool]) -> list[Any]:
        """Remove and return the postponed payloads for which ``pred`` is true, oldest first.

        For instance, a request whose caller gave up while it waited for a state change.
        """
        kept: list[tuple[str, Any]] = []
        removed: list[Any] = []
        for item in self._postponed:
            if pred(item[1]):
                removed.append(item[1])
            else:
                kept.append(item)
        self._postponed = kept
        return removed

    def set_timeout(self, name: Hashable, seconds: float | None, event: Any) -> None:
        """Arm (or, with ``None``, cancel) the named timeout, as a :class:`Timeout` action would.

        For code that runs in the actor but not as a handler's return value, e.g. a helper
        called by a handler or an enter call. A zero or negative time is delivered once the
        internal queue is empty, before the next mailbox message.
        """
        self._timers.set(name, seconds, event)

    # -- SafeActor hooks -----------------------------------------------------------------------

    def init(self) -> None:
        """Enter the initial state, run its actions and inserted events, before any message."""
        state, actions = self.init_state()
        self._check_state(state)
        self._state = state
        inserts, stop = self._apply(actions, None, in_enter=False)
        if stop is not None:
            self._stop_with(stop)
            return
        if self._run_enter(state):
            return
        if inserts:
            self._queue.extendleft(reversed(inserts))
        self._drain()

    def receive(self, message: Any) -> None:
        if message.__class__ is _Wake:
            self._on_wake(message)
            return None
        if self._stopping:
            return None
        if self._queue or self._timers.has_zero:
            # Left over by a handler that raised inside an ask: keep OTP order.
            self._drain()
        self._dispatch("cast", message)
        self._drain()
        return None

    def _collect_unhandled(self) -> None:
        # The ref is already dead, so no new message can arrive (bar Pykka's own check-then-put
        # race). Tells become postponed casts; asks and Pykka's messages stay for its teardown.
        inbox = self.actor_inbox
        kept: list[Any] = []
        while True:
            try:
                envelope = take_nowait(inbox)
            except queue.Empty:
                break
            message, reply_to = envelope_parts(envelope)
            if reply_to is None and not isinstance(message, _NOT_CASTS):
                self._postponed.append(("cast", message))
            else:
                kept.append(envelope)
        for envelope in kept:
            inbox.put(envelope)
        if self._queue:
            # Stopped by an exception mid-drain: casts queued internally were not handled either.
            casts = [item for item in self._queue if item[0] == "cast"]
            self._postponed[:0] = casts
            self._queue.clear()

    def _release(self) -> None:
        self._timers.close()

    # -- the engine ----------------------------------------------------------------------------

    def _drain(self) -> None:
        """Handle internal events, then zero-time timeouts, until both queues are empty."""
        q, timers_ = self._queue, self._timers
        while not self._stopping:
            if q:
                kind, event = q.popleft()
                self._dispatch(kind, event)
            elif timers_.has_zero:
                item = timers_.pop_zero()
                if item is not None:
                    self._dispatch(_kind_of(item[0]), item[1])
            else:
                return

    def _dispatch(self, kind: str, event: Any) -> None:
        state = self._state
        try:
            handler = self._handlers[state]
        except KeyError:
            handler = self._handlers[state] = _class_function(type(self), "on_" + state)
        if handler is None:
            result = self.handle_event(kind, event)
        elif handler is _LOOK_UP:
            result = getattr(self, "on_" + state)(kind, event)
        else:
            result = handler(self, kind, event)
        if result is None:
            return
        if result.__class__ is str:
            self._transition(kind, event, result, ())
        elif isinstance(result, Step):
            self._transition(kind, event, result.state, result.actions)
        else:
            msg = f"state handler for {state!r} returned {result!r}; want None, a state or Step"
            raise TypeError(msg)

    def _transition(
        self, kind: str, event: Any, next_state: str | None, actions: Sequence[Action]
    ) -> None:
        changed = next_state is not None and next_state != self._state
        if changed:
            self._check_state(next_state)  # type: ignore[arg-type]
            # Before the actions: a StateTimeout in this step belongs to the new state.
            self._timers.cancel(_STATE_TIMEOUT)
        inserts, stop = self._apply(actions, (kind, event), in_enter=False)
        if stop is not None:
            self._stop_with(stop)
            return
        if changed:
            old, self._state = self._state, next_state  # type: ignore[assignment]
            if self._postponed:
                self._queue.extendleft(reversed(self._postponed))
                self._postponed = []
            if self._run_enter(old):
                return
        if inserts:
            self._queue.extendleft(reversed(inserts))

    def _apply(
        self, actions: Sequence[Action], current: tuple[str, Any] | None, *, in_enter: bool
    ) -> tuple[list[tuple[str, Any]] | None, Stop | None]:
        """Apply actions in order; return the inserted events and the Stop, if any."""
        inserts: list[tuple[str, Any]] | None = None
        stop: Stop | None = None
        for action in actions:
            cls = action.__class__
            if cls is Timeout:
                self._timers.set(action.name, action.seconds, action.event)  # type: ignore[union-attr]
            elif cls is StateTimeout:
                self._timers.set(_STATE_TIMEOUT, action.seconds, action.event)  # type: ignore[union-attr]
            elif cls is Stop:
                stop = action  # type: ignore[assignment]
            elif cls is Postpone or cls is NextEvent:
                if in_enter:
                    msg = f"enter of state {self._state!r} returned {action!r}, not allowed there"
                    raise RuntimeError(msg)
                if cls is NextEvent:
                    if inserts is None:
                        inserts = []
                    inserts.append((action.kind, action.event))  # type: ignore[union-attr]
                elif current is None:
                    raise RuntimeError("Postpone returned by init_state: there is no event")
                else:
                    self._postponed.append(current)
            else:
                raise TypeError(f"not a statem action: {action!r}")
        return inserts, stop

    def _run_enter(self, old_state: str) -> bool:
        """Call the state enter function; True if it stopped the actor."""
        state = self._state
        try:
            enter = self._enters[state]
        except KeyError:
            cls = type(self)
            enter = _class_function(cls, "enter_" + state) or _class_function(cls, "enter")
            self._enters[state] = enter
        if enter is _LOOK_UP:
            found = getattr(self, "enter_" + state, None)
            result = found(old_state) if found is not None else self.enter(old_state)
        else:
            result = enter(self, old_state)
        if result is None:
            return False
        if isinstance(result, str | Step):
            msg = f"enter of state {state!r} returned {result!r}: enter may not change state"
            raise RuntimeError(msg)
        _, stop = self._apply(result, None, in_enter=True)
        if stop is not None:
            self._stop_with(stop)
            return True
        return False

    def _check_state(self, state: str) -> None:
        if state.__class__ is not str or not state:
            raise TypeError(f"a state is a non-empty str, got {state!r}")
        if state in _RESERVED_STATES:
            raise RuntimeError(f"state name {state!r} is reserved (on_{state} is a Pykka hook)")
        declared = self._declared_states
        if declared is not None and state not in declared:
            msg = f"{type(self).__name__} has no state {state!r}; STATES is {self.STATES!r}"
            raise RuntimeError(msg)

    def _stop_with(self, stop: Stop) -> None:
        self._stopping = True
        # Casts not handled yet (e.g. replayed postponed requests) join the postponed ones, so
        # terminate() can still answer them through postponed()/remove_postponed().
        unhandled = [item for item in self._queue if item[0] == "cast"]
        self._postponed = unhandled + self._postponed
        self._queue.clear()
        self.stop_self(stop.reason)

    def _on_wake(self, wake: _Wake) -> None:
        timers_ = self._timers
        timers_.woke(wake.arm)
        if self._stopping:
            return
        for key, token in timers_.due():
            current, event = timers_.take(key, token)
            if not current:
                continue
            self._dispatch(_kind_of(key), event)
            self._drain()
            if self._stopping:
                return
        timers_.rearm()
