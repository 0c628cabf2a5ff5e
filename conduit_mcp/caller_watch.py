"""Cancel at the server the requests of a Pykka actor that died while waiting for them.

A blocked thread that gives up, or a cancelled task, tells the connection ``Abandon`` itself.
An actor calling through ``client.futures`` holds only a future: when it dies, nothing in it
runs any more, and its requests would run to their deadline. The connection cannot watch it
(it must never run user code or wait on another actor), so one light watcher thread per
process does, for pending futures only:

* ``FutureClient`` finds the calling actor from its thread (``otp._pykka``, once per thread)
  and registers ``(its actor_stopped event, the reply, the connection)``: a deque append;
* every :data:`POLL` seconds, while anything is registered, the watcher drops what was
  answered and tells the connection ``Abandon(reply, "caller_down")`` for each request whose
  actor stopped; with nothing registered it sleeps until something is.

A future handed to another actor that then outlives its caller is cancelled with the caller;
an actor that wants that should make the request from the actor that will wait for it.
"""

from __future__ import annotations

import os
import threading
from collections import deque
from typing import Any

import pykka

from .replies import Reply
from .request import abandon

#: How often the watcher looks at the callers of pending futures. A dead actor's requests are
#: cancelled within this (plus a message to the connection), not at their deadline.
POLL = 0.05

_Entry = tuple[threading.Event, Reply, "pykka.ActorRef[Any]"]


class CallerWatch:
    """The watcher: see the module docstring. One per process (:data:`WATCH`).

    Registering is a ``deque.append`` (atomic under the GIL, no lock) and, when the watcher
    sleeps, one ``Event.set``: measured, the lock and condition of a first version cost more
    than everything else on the caller's side together.
    """

    def __init__(self, poll: float = POLL) -> None:
        self._poll = poll
        self._entries: deque[_Entry] = deque()
        self._busy = threading.Event()  # set while entries may exist
        self._start_lock = threading.Lock()
        self._thread: threading.Thread | None = None

    def watch(self, stopped: threading.Event, reply: Reply, conn: pykka.ActorRef[Any]) -> None:
        """Cancel ``reply``'s request at the server if ``stopped`` is set before it is
        answered."""
        self._entries.append((stopped, reply, conn))
        if not self._busy.is_set():
            self._busy.set()
            if self._thread is None:
                self._start()

    def pending(self) -> int:
        """How many requests are watched now (answered ones leave at the next look)."""
        return len(self._entries)

    def _start(self) -> None:
        with self._start_lock:
            if self._thread is None:
                thread = threading.Thread(
                    target=self._run, name="conduit-mcp-caller-watch", daemon=True
                )
                thread.start()
                self._thread = thread

    def _run(self) -> None:
        pause = threading.Event()  # never set: a sleep that is not time.sleep
        while True:
            self._busy.wait()
            pause.wait(self._poll)
            self._look()
            if not self._entries:
                self._busy.clear()
                if self._entries:  # registered between the check and the clear
                    self._busy.set()

    def _look(self) -> None:
        entries = self._entries
        for _ in range(len(entries)):
            entry = entries.popleft()
            stopped, reply, conn = entry
            if reply.done:
                continue
            if stopped.is_set():
                abandon(conn, reply, "caller_down")
                continue
            entries.append(entry)

    def forget_in_child(self) -> None:
        """After ``fork``, in the child: the watcher thread was not copied, and the entries
        are the parent's requests."""
        self._entries = deque()
        self._busy = threading.Event()
        self._start_lock = threading.Lock()
        self._thread = None


#: The process's watcher.
WATCH = CallerWatch()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=WATCH.forget_in_child)
