"""The Pykka internals this runtime relies on, named in one place.

Pykka (pinned ``>=4.5,<5``) has no supervision, timers or state machines; building them needs
a few things Pykka does not promise as public API. Each is used only through this module, and
``tests/otp/test_pykka_guard.py`` checks every one, so a Pykka release that moves one fails
that test with its name instead of breaking an actor at run time.

* ``Actor._handle_receive``: Pykka's per-message dispatcher. :class:`~.base.SafeActor` wraps
  it, because proxy calls never reach ``on_receive`` and a ``BaseException`` escaping there
  would stop every actor of the process.
* ``Actor._create_actor_inbox``: the documented inbox hook. Our actors use a C-level
  ``queue.SimpleQueue`` instead of ``queue.Queue`` (measured: the largest single cost of a
  round trip was ``queue.Queue``'s Python-level ``Condition``).
* ``pykka.messages._ActorStop``: Pykka's own stop message, which a statem must tell apart from
  a cast when it collects what is left in its mailbox.
* ``SimpleQueue.get_nowait`` on the inbox, and the envelope's ``message`` / ``reply_to``:
  reading what is left in a dead actor's mailbox without blocking.
* ``ActorRegistry._actor_refs`` and ``_actor_refs_lock``: in a forked child, forgetting the
  parent's actors (their threads were not copied) without taking a lock that a thread of the
  parent may have held at the fork.
* ``Actor._actor_loop_setup`` (runs ``on_start``, logs and stops the actor if it raises),
  ``Actor._actor_loop_teardown`` (answers what is left in a dead actor's mailbox) and
  ``Actor._handle_failure`` (logs an unhandled error, stops the actor): the pieces of Pykka's
  own actor loop that a :class:`~.pooled.PooledActor` runs on a pool worker instead of a
  thread of its own. Its ``_start_actor_loop`` is Pykka's hook for new actor types.
* A ``ThreadingActor``'s thread runs the bound method ``actor._actor_loop`` as its target,
  kept by CPython's ``Thread`` as ``_target`` while it runs: :func:`calling_actor_stopped`
  finds the actor calling from the current thread (Pykka has no "current actor" API).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Any, Final

import pykka
from pykka import messages as _messages

#: The name of Pykka's dispatcher method that SafeActor wraps.
HANDLE_RECEIVE: Final = "_handle_receive"
#: The name of Pykka's inbox factory hook.
CREATE_INBOX: Final = "_create_actor_inbox"
#: Pykka's stop message type.
ACTOR_STOP: Final[type] = _messages._ActorStop


def new_inbox() -> queue.SimpleQueue[Any]:
    """The inbox our actors use: C-level, with the ``get``/``put``/``empty`` Pykka calls."""
    return queue.SimpleQueue()


def take_nowait(inbox: Any) -> Any:
    """One envelope from an actor's inbox, or raise ``queue.Empty`` (never blocks)."""
    return inbox.get_nowait()


def envelope_parts(envelope: Any) -> tuple[Any, Any]:
    """``(message, reply_to)`` of a Pykka envelope."""
    return envelope.message, envelope.reply_to


def forget_refs_in_child(keep: Callable[[Any], bool]) -> None:
    """After ``fork``, in the child: drop every registered ref for which ``keep`` is false.

    The registry's lock is replaced first: a thread of the parent may have held it at the
    fork, and that thread does not exist in the child, so the old lock might never be freed.
    """
    registry = pykka.ActorRegistry
    registry._actor_refs_lock = threading.RLock()
    registry._actor_refs[:] = [ref for ref in registry._actor_refs if keep(ref)]


def actor_loop_setup(actor: pykka.Actor) -> None:
    """Pykka's start of an actor's loop: ``on_start``, and on an error the failure path."""
    actor._actor_loop_setup()


def actor_loop_teardown(actor: pykka.Actor) -> None:
    """Pykka's end of an actor's loop: every message left gets ``ActorDeadError`` (a stop
    gets its answer)."""
    actor._actor_loop_teardown()


def handle_failure(actor: pykka.Actor, info: Any) -> None:
    """Pykka's handling of an unhandled error: logged, the actor unregistered and stopped."""
    actor._handle_failure(*info)


def calling_actor_stopped() -> threading.Event | None:
    """The ``actor_stopped`` event of the Pykka actor whose thread calls this, or None when
    the current thread is not an actor's. Costs two attribute reads."""
    target = getattr(threading.current_thread(), "_target", None)
    actor = getattr(target, "__self__", None)
    if isinstance(actor, pykka.Actor):
        return actor.actor_stopped
    return None


__all__ = [
    "actor_loop_setup",
    "actor_loop_teardown",
    "calling_actor_stopped",
    "handle_failure",
    "ACTOR_STOP",
    "CREATE_INBOX",
    "HANDLE_RECEIVE",
    "envelope_parts",
    "forget_refs_in_child",
    "new_inbox",
    "pykka",
    "take_nowait",
]
