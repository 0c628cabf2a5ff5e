"""Cancel at the server the requests of a Pykka actor that died while waiting for them.

A blocked thread that gives up, or a cancelled task, tells the connection ``Abandon`` itself.
An actor calling through ``client.futures`` holds only a future: when it dies, nothing in it
runs any more, and its requests would run to their deadline. The connection cannot watch it
(it must never run user code or wait on another actor), so one light watcher thread per
process does, for pending futures only:

* ``FutureClient`` finds the calling actor from its thread (``otp._pykka``) and registers
  ``(its actor_stopped event, the reply, the connection)``: a lock and a list append;
* every :data:`POLL` seconds, while anything is registered, the watcher drops what was
  answered and tells the connection ``Abandon(reply, "caller_down")`` for each request whose
  actor stopped; with nothing registered it sleeps until something is.

A future handed to another actor that then outlives its caller is cancelled with the caller;
an actor that wants that should make the request from the actor that will wait for it.
"""

from __future__ import annotations

import threading
from typing import Any

import pykka

from .replies import Reply
from .request import abandon

#: How often the watcher looks at the callers of pending futures. A dead actor's requests are
#: cancelled within this (plus a message to the connection), not at their deadline.
POLL = 0.05

_Entry = tuple[threading.Event, Reply, "pykka.ActorRef[Any]"]


class CallerWatch:
    """The watcher: see the module docstring. One per process (:data:`WATCH`)."""

    def __init__(self, poll: float = POLL) -> None:
        self._poll = poll
        self._lock = threading.Condition()
        self._entries: list[_Entry] = []
        self._thread: threading.Thread | None = None

    def watch(self, stopped: threading.Event, reply: Reply, conn: pykka.ActorRef[Any]) -> None:
        """Cancel ``reply``'s request at the server if ``stopped`` is set before it is
        answered."""
        with self._lock:
            self._entries.append((stopped, reply, conn))
            if self._thread is None:
                self._thread = threading.Thread(
                    target=self._run, name="conduit-mcp-caller-watch", daemon=True
                )
                self._thread.start()
            elif len(self._entries) == 1:
                self._lock.notify()

    def pending(self) -> int:
        """How many requests are watched now (answered ones leave at the next look)."""
        with self._lock:
            return len(self._entries)

    def _run(self) -> None:
        stop_event = threading.Event()  # never set: the watcher lives as long as the process
        while True:
            with self._lock:
                while not self._entries:
                    self._lock.wait()
            stop_event.wait(self._poll)
            self._look()

    def _look(self) -> None:
        with self._lock:
            entries = self._entries
            keep = [e for e in entries if not e[1].done and not e[0].is_set()]
            gone = [e for e in entries if not e[1].done and e[0].is_set()]
            self._entries = keep
        for _stopped, reply, conn in gone:
            abandon(conn, reply, "caller_down")


#: The process's watcher.
WATCH = CallerWatch()
