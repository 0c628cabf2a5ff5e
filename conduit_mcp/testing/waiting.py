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
"""

from __future__ import annotations

import queue
import time
from typing import Any

__all__ = ["notes_before"]


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
