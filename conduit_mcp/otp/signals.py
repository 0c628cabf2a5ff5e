"""Python signal handlers held back while the main thread runs an actor or reads a call's
answer from a pipe (``tell_here``, ``StdioTransport.wait_here``, an asyncio caller's read).

A Python signal handler runs between two bytecodes of the main thread, wherever it is: a
Ctrl-C's ``KeyboardInterrupt`` raised in the middle of an actor's turn would break the
actor, and one raised in the middle of a read would lose what was read. So while the main
thread is inside, the handlers are replaced by one that only records the signal, and the
signals that came are run, in their order, once it has left (:func:`replay_signals`).

This runs twice for every sequential call in the main thread, so it is kept short (one C
call to read each handler; only those set in Python are replaced, one system call each).

>>> import signal
>>> held = hold_signals()
>>> signal.getsignal(signal.SIGINT) is signal.default_int_handler
False
>>> restore_signals(held[0])
>>> signal.getsignal(signal.SIGINT) is signal.default_int_handler
True
"""

from __future__ import annotations

import importlib
import os
import signal
import threading
from collections.abc import Callable, Sequence
from typing import Any, Final

#: The C module under :mod:`signal`: the same functions without its enum conversions, which
#: cost more than the system calls (measured: 1.7 µs a ``getsignal``, against 0.03 µs).
_signal: Any = importlib.import_module("_signal")

#: The signals whose Python handlers are held (the ones a program commonly handles in
#: Python; checking each costs a lookup, replacing one a system call, and only handlers set
#: in Python are replaced).
DEFERRED: Final = tuple(
    int(getattr(signal, name))
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2", "SIGALRM")
    if hasattr(signal, name)
)

#: The main thread's ident: the thread that called ``fork`` is the child's main thread.
_main = [threading.main_thread().ident]

Held = tuple[Sequence[tuple[int, Any]], list[tuple[int, Any]]]


def in_main_thread() -> bool:
    """Whether this is the main thread, the only one that runs Python signal handlers."""
    return threading.get_ident() == _main[0]


def hold_signals(then: Callable[[], None] | None = None) -> Held | None:
    """In the main thread: replace the Python signal handlers of :data:`DEFERRED` with one
    that only records the signal (and calls ``then``, e.g. to end a wait); ``(replaced,
    caught)``, for :func:`restore_signals` and :func:`replay_signals`. None where handlers
    cannot be replaced (nothing was changed)."""
    getsignal, setsignal = _signal.getsignal, _signal.signal
    held: list[tuple[int, Any]] = []
    caught: list[tuple[int, Any]] = []

    def hold(signum: int, frame: Any) -> None:
        caught.append((signum, frame))
        if then is not None:
            then()

    try:
        # A plain loop: on CPython 3.11 it beats tuple(map(getsignal, ...)) and a compare
        # with the handlers last seen (measured, interleaved: 403 ns against 558 ns).
        for signum in DEFERRED:
            handler = getsignal(signum)
            if callable(handler):
                setsignal(signum, hold)
                held.append((signum, handler))
    except (ValueError, OSError):  # not the main interpreter, or the OS refused
        restore_signals(held)
        return None
    return held, caught


def restore_signals(held: Sequence[tuple[int, Any]]) -> None:
    """Put back the handlers :func:`hold_signals` replaced."""
    setsignal = _signal.signal
    for signum, handler in held:
        setsignal(signum, handler)


def replay_signals(caught: list[tuple[int, Any]], held: Sequence[tuple[int, Any]]) -> None:
    """Run the handlers of the signals that came while they were held, in their order
    (what one raises goes to the caller, and the rest are not run, as if it had raised
    when its signal came)."""
    handlers = dict(held)
    for signum, frame in caught:
        handlers[signum](signum, frame)


def _forget_main_in_child() -> None:
    _main[0] = threading.get_ident()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_main_in_child)
