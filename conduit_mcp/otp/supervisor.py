"""An OTP supervisor on Pykka: ordered children, restart types, strategies, intensity.

Pykka has no supervision. Vocabulary and rules are OTP's, with Elixir's defaults (``max_restarts=3, max_seconds=5``):

* Children start in order; shutdown is always in reverse start order.
* A child reports its exit through its :class:`~conduit_mcp.otp.base.Link`, which tells the
  supervisor a :class:`ChildExited` (an ordinary message). A notice whose ``urn`` is not the
  current incarnation's is dropped: it comes from an incarnation the supervisor stopped itself.
* Restart types: ``permanent`` always, ``transient`` only after an abnormal exit (reason not
  ``None``), ``temporary`` never.
* Strategies: ``one_for_one`` restarts the child; ``rest_for_one`` stops the younger running
  siblings (reverse order) and restarts the child and them (start order); ``one_for_all`` does
  the same with all running siblings. A sibling that was not running (lazy and never started,
  or exited and not restarted) stays down, and a ``temporary`` sibling stopped this way is not
  restarted (as in OTP).
* Intensity: more than ``max_restarts`` restarts within ``max_seconds`` -> stop every child,
  call ``on_give_up(reason)`` and exit abnormally with ``Error("unavailable", "max_restarts")``,
  so a parent supervisor hears it (escalation).
* ``significant`` children (OTP ``auto_shutdown = any_significant``): when one exits and is not
  restarted, the supervisor stops every child, calls ``on_give_up`` and exits with that child's
  reason (``None``: a normal exit).

Deadlock rule: the supervisor stops children with a blocking ``ref.stop(timeout=shutdown)`` and
waits for each child's first reply in its own ``init``, so a child must **never ``ask`` its
supervisor** (an ask cycle deadlocks; links only ``tell``). A child stuck in a blocking call
cannot be killed (Python threads cannot be): its stop times out, is logged and skipped, and its
thread leaks. That is why no actor may block.
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import pykka

from conduit_mcp.errors import Error
from conduit_mcp.otp.base import PING, Link, SafeActor, safe_tell
from conduit_mcp.otp.flag import Flag
from conduit_mcp.otp.pooled import PooledActor, init_ran, stop_here
from conduit_mcp.otp.registry import Registry

__all__ = [
    "ChildExited",
    "ChildSpec",
    "StartChild",
    "Supervisor",
    "WhichChildren",
    "child_spec_for",
]

logger = logging.getLogger("conduit_mcp.otp.supervisor")

RestartType = Literal["permanent", "transient", "temporary"]
Strategy = Literal["one_for_one", "rest_for_one", "one_for_all"]


@dataclass(frozen=True)
class ChildSpec:
    """How to start and supervise one child.

    ``start(link)`` starts one incarnation and must pass ``link`` to the SafeActor it starts.
    ``shutdown`` bounds the wait for the child's stop; ``start_timeout`` bounds the wait for its
    ``init`` during the supervisor's own start. A ``lazy`` child starts only on
    :class:`StartChild`. ``Client.child_spec`` makes one for a client:

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> spec = mcp.Client.child_spec(server, name="files", on_give_up="stop")
    >>> spec.id, spec.restart, spec.shutdown
    ('conduit_mcp:files', 'permanent', 10.0)
    """

    id: str
    start: Callable[[Link], pykka.ActorRef[Any]]
    restart: RestartType = "permanent"
    shutdown: float = 5.0
    lazy: bool = False
    significant: bool = False
    start_timeout: float = 5.0


@dataclass(frozen=True, slots=True)
class ChildExited:
    """Told by a child's link: incarnation ``urn`` of ``child_id`` exited with ``reason``.
    The supervisor's own message; a test may tell it to fake an exit.

    >>> ChildExited("worker", "urn:uuid:1", None)
    ChildExited(child_id='worker', urn='urn:uuid:1', reason=None)
    """

    child_id: str
    urn: str
    reason: BaseException | None


@dataclass(frozen=True, slots=True)
class StartChild:
    """Ask: start ``child_id`` if it is not running; the reply is its ref. Idempotent.

    ``then``, if given, is told to the child before the child is published in the registry,
    so a sibling that tells the lazy child through the supervisor (it is not running yet)
    and later straight through the registry never sees its messages reordered.
    ``forwarded``, if given, is called (on the supervisor's thread) once ``then`` was told or
    could not be: a sender with messages still queued here keeps sending through here, or a
    message told straight to the child could overtake one queued behind another child's start
    (``Siblings``, in ``conduit_mcp.otp.siblings``).

    >>> from conduit_mcp.otp import SafeActor, Supervisor, child_spec_for
    >>> app = Supervisor.start([child_spec_for(SafeActor, id="later", lazy=True)])
    >>> ref = app.ask(StartChild("later"))
    >>> ref.is_alive(), app.ask(StartChild("later")) is ref, app.stop()
    (True, True, True)
    """

    child_id: str
    then: Any = field(default=None, repr=False)
    forwarded: Callable[[], None] | None = field(default=None, repr=False)


@dataclass(frozen=True, slots=True)
class WhichChildren:
    """Ask: the reply is ``[(child_id, ref or None), ...]`` in start order.

    >>> from conduit_mcp.otp import SafeActor, Supervisor, child_spec_for
    >>> app = Supervisor.start([child_spec_for(SafeActor, id="a"),
    ...                         child_spec_for(SafeActor, id="b", lazy=True)])
    >>> [(child_id, ref is not None) for child_id, ref in app.ask(WhichChildren())]
    [('a', True), ('b', False)]
    >>> app.stop()
    True
    """


def child_spec_for(
    actor_cls: type[SafeActor],
    *args: Any,
    id: str,
    restart: RestartType = "permanent",
    shutdown: float = 5.0,
    lazy: bool = False,
    significant: bool = False,
    start_timeout: float = 5.0,
    **kwargs: Any,
) -> ChildSpec:
    """A :class:`ChildSpec` whose ``start`` is ``actor_cls.start(*args, link=link, **kwargs)``.

    >>> from conduit_mcp.otp import SafeActor
    >>> spec = child_spec_for(SafeActor, id="worker", restart="transient", shutdown=2.0)
    >>> spec.id, spec.restart, spec.shutdown, spec.lazy
    ('worker', 'transient', 2.0, False)
    """

    return ChildSpec(
        id, _Starter(actor_cls, args, kwargs), restart, shutdown, lazy, significant, start_timeout
    )


class _Starter:
    """``child_spec_for``'s ``start``: ``actor_cls.start(*args, link=link, **kwargs)``.

    A slotted object, not a closure: a client holds one per child spec for its whole life, and
    a closure over three names is a function and three cells for the cyclic collector to walk
    (measured with ``gc.get_objects()``: 9 tracked objects fewer per idle client).
    """

    __slots__ = ("actor_cls", "args", "kwargs")

    def __init__(
        self, actor_cls: type[SafeActor], args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> None:
        self.actor_cls = actor_cls
        self.args = args
        self.kwargs = kwargs

    def __repr__(self) -> str:
        return f"<start {self.actor_cls.__name__}>"

    def __call__(self, link: Link) -> pykka.ActorRef[Any]:
        return self.actor_cls.start(*self.args, link=link, **self.kwargs)


class _Child:
    """The supervisor's record of one child: its spec and current incarnation (if running)."""

    __slots__ = ("index", "ref", "spec", "urn")

    def __init__(self, spec: ChildSpec, index: int) -> None:
        self.spec = spec
        self.index = index
        self.ref: pykka.ActorRef[Any] | None = None
        self.urn: str | None = None


class _ExitBox:
    """Filled by a child's link during the start handshake, to learn why its init failed."""

    __slots__ = ("event", "reason")

    def __init__(self) -> None:
        self.event = Flag()
        self.reason: BaseException | None = None


class _ChildLink(Link):
    """The link of one child incarnation: tells the supervisor :class:`ChildExited` (and fills
    the start handshake's box, if any). Its fields in slots rather than a ``partial`` of a
    function (a partial and its args tuple, for as long as the child lives: one tracked
    object fewer per child for the cyclic collector)."""

    __slots__ = ("_box", "_child_id", "_sup")

    def __init__(self, sup: pykka.ActorRef[Any], child_id: str, box: _ExitBox | None) -> None:
        self._sup = sup
        self._child_id = child_id
        self._box = box

    def _send(self, urn: str, reason: BaseException | None) -> None:
        box = self._box
        if box is not None:
            box.reason = reason
            box.event.set()
        safe_tell(self._sup, ChildExited(self._child_id, urn, reason))


class Supervisor(PooledActor):
    """Starts, watches and restarts its children; see the module docstring for the rules.

    ``on_give_up(reason)`` is called when the supervisor exits on its own (intensity exceeded,
    or a significant child ended), not when it is stopped from outside; it runs in the
    supervisor's thread and must not block. ``registry`` receives every (re)started child's ref
    under the child's id.

    A client under your own supervisor (with ``on_give_up="stop"`` a client that exhausts
    ``max_reconnects`` exits, and the supervisor starts a fresh one; ``Client.whereis``
    follows the restarts):

    >>> import sys
    >>> import conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    >>> app = mcp.Supervisor.start(
    ...     [mcp.Client.child_spec(server, name="files", on_give_up="stop")],
    ...     strategy="one_for_one", max_restarts=3, max_seconds=5.0)
    >>> client = mcp.Client.whereis("files")
    >>> client.call_tool("add", {"a": 1, "b": 2}).text
    '3'
    >>> client.status().state
    'ready'
    >>> app.stop()
    True
    """

    def __init__(
        self,
        children: Sequence[ChildSpec],
        *,
        strategy: Strategy = "one_for_one",
        max_restarts: int = 3,
        max_seconds: float = 5.0,
        registry: Registry | None = None,
        on_give_up: Callable[[BaseException | None], None] | None = None,
        link: Link | None = None,
        announce: Callable[[pykka.ActorRef[Any]], None] | None = None,
    ) -> None:
        # Validated here, in the caller's thread, so a bad tree fails ``start`` itself.
        if strategy not in ("one_for_one", "rest_for_one", "one_for_all"):
            raise Error("config", "strategy", f"unknown supervisor strategy {strategy!r}")
        if max_restarts < 0 or max_seconds <= 0:
            raise Error("config", "max_restarts", "need max_restarts >= 0 and max_seconds > 0")
        ids = [spec.id for spec in children]
        if len(set(ids)) != len(ids):
            raise Error("config", "children", f"duplicate child ids in {ids!r}")
        for spec in children:
            if spec.restart not in ("permanent", "transient", "temporary"):
                raise Error("config", "restart", f"child {spec.id!r}: bad restart type")
            if spec.significant and spec.restart == "permanent":
                raise Error(
                    "config",
                    "significant",
                    f"child {spec.id!r}: permanent cannot be significant (it is always restarted)",
                )
        super().__init__(link=link)
        if announce is not None:
            # Its ref before init starts the children: under ``start_here`` init runs in the
            # caller's thread, and a child that tells a sibling not yet started (the
            # connection's first 401 asks the OAuth actor) reaches it through this ref.
            announce(self.actor_ref)
        self._children = [_Child(spec, i) for i, spec in enumerate(children)]
        self._by_id = {child.spec.id: child for child in self._children}
        self._strategy = strategy
        self._max_restarts = max_restarts
        self._max_seconds = max_seconds
        self._registry = registry
        self._on_give_up = on_give_up
        # Restart times within max_seconds, made at the first restart (a deque's first block
        # is ~0.7 KiB, and most supervisors never restart a child).
        self._restarts: deque[float] | None = None
        self._failed_starts = 0

    # -- lifecycle ---------------------------------------------------------------------------

    def init(self) -> None:
        """Start the non-lazy children in order, each after the previous one's init succeeded."""
        for child in self._children:
            if child.spec.lazy:
                continue
            try:
                self._start(child, wait=True)
            except BaseException:
                self._stop_all()
                raise

    def terminate(self, reason: BaseException | None) -> None:
        self._stop_all()

    def receive(self, message: Any) -> Any:
        if isinstance(message, ChildExited):
            self._on_child_exited(message)
            return None
        if isinstance(message, StartChild):
            try:
                child = self._by_id.get(message.child_id)
                if child is None:
                    raise Error("argument", "child_id", f"no child {message.child_id!r}")
                if child.ref is not None:
                    if message.then is not None:
                        child.ref.tell(message.then)
                    return child.ref
                return self._start(child, wait=False, first=message.then)
            finally:
                if message.forwarded is not None:
                    message.forwarded()
        if isinstance(message, WhichChildren):
            return [(child.spec.id, child.ref) for child in self._children]
        return super().receive(message)

    # -- starting and stopping ---------------------------------------------------------------

    def _start(self, child: _Child, *, wait: bool, first: Any = None) -> pykka.ActorRef[Any]:
        spec = child.spec
        box = _ExitBox() if wait else None
        link = _ChildLink(self.actor_ref, spec.id, box)
        if box is None:
            ref = spec.start(link)
        else:
            try:
                ref = spec.start(link)
            except Error:
                raise
            except Exception as exc:
                msg = f"child {spec.id!r} failed to start"
                raise Error("unavailable", "child_start", msg) from exc
        child.ref, child.urn = ref, ref.actor_urn
        if first is not None:
            ref.tell(first)
        if self._registry is not None:
            self._registry.set(spec.id, ref)
        if box is None:
            return ref
        # Synchronous start: the ping is answered only after init returned (Pykka's start
        # returns before on_start has run). A child started with ``start_here`` has run its
        # init already: no hand-off to ask it.
        try:
            if not init_ran(ref):
                ref.ask(PING, timeout=spec.start_timeout)
            elif not ref.is_alive():
                raise pykka.ActorDeadError(f"{ref} failed in init")
        except pykka.ActorDeadError:
            self._forget(child)
            box.event.wait(spec.start_timeout)
            if isinstance(box.reason, Error):
                raise box.reason from None
            msg = f"child {spec.id!r} failed to start"
            raise Error("unavailable", "child_start", msg) from box.reason
        except pykka.Timeout:
            self._stop_child(child, block=False)
            msg = f"child {spec.id!r} did not finish init within {spec.start_timeout} s"
            raise Error("unavailable", "child_start_timeout", msg) from None
        return ref

    def _start_or_report(self, child: _Child) -> None:
        """Restart path: a ``start`` that raises is reported as an exit of a new incarnation.

        So the ordinary exit handling retries it, counting intensity, as OTP does.
        """
        try:
            self._start(child, wait=False)
        except Exception as exc:
            logger.warning("%s: starting child %r failed: %r", self, child.spec.id, exc)
            self._failed_starts += 1
            child.ref, child.urn = None, f"start-failed:{self._failed_starts}"
            safe_tell(self.actor_ref, ChildExited(child.spec.id, child.urn, exc))

    def _forget(self, child: _Child) -> pykka.ActorRef[Any] | None:
        """Drop the current incarnation, so its exit notice will be ignored."""
        ref, child.ref, child.urn = child.ref, None, None
        if ref is not None and self._registry is not None:
            self._registry.remove(child.spec.id, ref)
        return ref

    def _stop_child(self, child: _Child, *, block: bool = True) -> None:
        ref = self._forget(child)
        if ref is None:
            return
        if not block:
            ref.stop(block=False)
            return
        try:
            stop_here(ref, timeout=child.spec.shutdown)
        except pykka.Timeout:
            logger.warning(
                "%s: child %r did not stop within %s s; leaving its thread behind",
                self,
                child.spec.id,
                child.spec.shutdown,
            )

    def _stop_all(self) -> None:
        for child in reversed(self._children):
            self._stop_child(child)

    # -- exits and restarts ------------------------------------------------------------------

    def _on_child_exited(self, msg: ChildExited) -> None:
        child = self._by_id.get(msg.child_id)
        if child is None or child.urn != msg.urn:
            return  # an incarnation we stopped ourselves, or already replaced
        self._forget(child)
        spec = child.spec
        restart = spec.restart == "permanent" or (
            spec.restart == "transient" and msg.reason is not None
        )
        if not restart:
            if spec.significant:
                logger.info("%s: significant child %r ended; shutting down", self, spec.id)
                self._exit_on_own(msg.reason)
            return
        if self._intensity_exceeded():
            reason = Error(
                "unavailable",
                "max_restarts",
                f"more than {self._max_restarts} restarts within {self._max_seconds} s",
            )
            logger.error(
                "%s: %s; giving up (last exit of %r: %r)", self, reason, spec.id, msg.reason
            )
            self._exit_on_own(reason)
            return
        if self._strategy == "one_for_one":
            self._start_or_report(child)
            return
        if self._strategy == "rest_for_one":
            affected = [c for c in self._children[child.index + 1 :] if c.ref is not None]
        else:
            affected = [c for c in self._children if c is not child and c.ref is not None]
        for sibling in reversed(affected):
            self._stop_child(sibling)
        restart_set = {child.index} | {c.index for c in affected if c.spec.restart != "temporary"}
        for c in self._children:
            if c.index in restart_set:
                self._start_or_report(c)

    def _intensity_exceeded(self) -> bool:
        now = time.monotonic()
        stamps = self._restarts
        if stamps is None:
            stamps = self._restarts = deque()
        stamps.append(now)
        while stamps and stamps[0] < now - self._max_seconds:
            stamps.popleft()
        return len(stamps) > self._max_restarts

    def _exit_on_own(self, reason: BaseException | None) -> None:
        self._stop_all()
        if self._on_give_up is not None:
            try:
                self._on_give_up(reason)
            except Exception:
                logger.exception("%s: on_give_up failed", self)
        self.stop_self(reason)
