"""Waiting for notifications in tests, with a deadline and never a sleep.

A test that sends a burst of notifications and then asks what a subscriber got cannot know
when the last one has arrived. So it asks the scripted server for one more, a barrier (any
method it chooses, e.g. ``test/barrier``), sent after the burst: notifications reach a
subscriber in order, so when the barrier arrives, everything before it has.

>>> import queue
>>> from types import SimpleNamespace as Note
>>> notes = queue.Queue()
>>> for method in ("a", "b", "test/barrier", "c"):
...     notes.put(Note(method=method))
>>> [n.method for n in notes_before(notes, "test/barrier", timeout=1)]
['a', 'b']

Some state announces itself with no event at all (a count an authorization server keeps, a
line only a server's stderr shows). ``until`` polls such a check, cheap and local, under a
deadline, and fails naming what it waited for:

>>> seen = iter([False, False, True])
>>> until(lambda: next(seen), what="the third look", timeout=1)
>>> until(lambda: False, what="a server that never answers", timeout=0.05)
Traceback (most recent call last):
AssertionError: timed out after 0.05 s waiting for a server that never answers
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from typing import Any

__all__ = ["notes_before", "until"]

#: How often ``until`` looks again: often enough that a test waits ~20 ms past the moment the
#: state holds, rarely enough that the looking costs nothing beside the code under test.
POLL_INTERVAL = 0.02


def notes_before(notes: queue.Queue[Any], barrier: str, timeout: float = 5.0) -> list[Any]:
    """The notifications taken from ``notes`` before the next one whose method is ``barrier``
    (which is consumed); an ``AssertionError`` naming what came if none does by ``timeout``."""
    deadline = time.monotonic() + timeout
    got: list[Any] = []
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"no {barrier} within {timeout} s; got {[n.method for n in got]}"
        try:
            note = notes.get(timeout=left)
        except queue.Empty:
            continue
        if note.method == barrier:
            return got
        got.append(note)


def until(
    check: Callable[[], object], *, what: str = "the condition", timeout: float = 10.0
) -> None:
    """Return once ``check()`` is true; an ``AssertionError`` naming ``what`` if it is still
    false at ``timeout`` seconds. For state no event announces; where an event exists, wait
    on it instead."""
    deadline = time.monotonic() + timeout
    pause = threading.Event()
    while not check():
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout:g} s waiting for {what}")
        pause.wait(POLL_INTERVAL)
