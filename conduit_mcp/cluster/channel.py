"""The caller's side of one host: calls out in batches, events back, no call lost in silence.

One channel per (caller, host). A call is queued with a *sink* (how its outcome reaches the
caller: a blocking waiter, an asyncio future, a Pykka future). Two daemon threads move the
data:

* the sender takes every call queued (up to ``protocol.MAX_BATCH``) and sends them as one
  message; while that message travels, new calls queue up, so calls travel alone when they
  are few and in batches when many are in flight (Ray's cost is per message). The reply
  holds the events of the calls that finished within the host's ``linger``;
* the poller asks the host for the rest (results, errors, progress, notifications),
  waiting on the host for the first one.

A host whose process dies fails every call that was sent to it with ``unavailable``/
``host_lost`` (it may have run: never sent again); calls queued but not yet sent go to the
host once it is back. A host that will not come back fails every call with
``unavailable``/``host_down``.
"""

from __future__ import annotations

import itertools
import logging
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from ..errors import Error
from ..types import Progress
from . import protocol as p
from .engine import HostHandle, HostLost

log = logging.getLogger("conduit_mcp.cluster")

#: How long one poll waits on the host for an event (the caller's lease is renewed by each).
POLL_WAIT = 1.0


class Sink:
    """Where a call's outcome goes; each method is called from the channel's threads."""

    def ok(self, value: Any) -> None:
        raise NotImplementedError

    def fail(self, error: Error) -> None:
        raise NotImplementedError

    def progress(self, value: Progress) -> None:
        pass


class _Pending:
    __slots__ = ("op", "sent", "sink")

    def __init__(self, op: str, sink: Sink) -> None:
        self.op = op
        self.sink = sink
        self.sent = False


class Channel:
    """Calls to one host and their outcomes (see the module's docstring)."""

    def __init__(
        self,
        handle: HostHandle,
        linger: float,
        wait_alive: Callable[[HostHandle, float], dict[str, Any]],
        info: dict[str, Any] | None = None,
        respawn: Callable[[dict[str, Any]], tuple[HostHandle, dict[str, Any]]] | None = None,
    ) -> None:
        self.handle = handle
        self.name = handle.name
        self.caller = uuid.uuid4().hex
        self.linger = linger
        self._wait_alive = wait_alive
        self._cv = threading.Condition()
        self._queue: list[dict[str, Any]] = []
        self._pending: dict[int, _Pending] = {}
        self._ids = itertools.count(1)
        self.pid: int | None = (info or {}).get("pid")
        self.info: dict[str, Any] = dict(info or {})
        # Starts the host again from its spec when it died for good with its node (the
        # owner's side only): a new actor, a new handle.
        self._respawn = respawn
        self.restarts = 0
        self.lost = 0
        self.messages = 0
        self.calls = 0
        self.down: Error | None = None
        self.closed = False
        self.notes: Callable[[dict[str, Any]], None] | None = None
        # The server log level this caller set (hub.set_logging_level): a host started
        # again from its spec has lost it, so it is sent again when the host is back.
        self.log_level: str | None = None
        # Set while the host is lost and not yet back: calls queue (never sent to a host
        # that is restarting, where Ray fails them at once).
        self._restarting = False
        self._sending = False  # a batch is on its way (by the sender or an inline caller)
        self._threads = [
            threading.Thread(target=self._send_loop, name=f"conduit-cluster-send-{self.name}"),
            threading.Thread(target=self._poll_loop, name=f"conduit-cluster-poll-{self.name}"),
        ]
        for thread in self._threads:
            thread.daemon = True
            thread.start()

    def __repr__(self) -> str:
        return f"<conduit_mcp.cluster.Channel {self.name!r} in_flight={len(self._pending)}>"

    # -- the caller's side --------------------------------------------------------------------

    def send(
        self,
        op: str,
        args: dict[str, Any],
        sink: Sink,
        progress: bool = False,
        inline: bool = False,
    ) -> int:
        """Queue a call; its outcome goes to ``sink``. ``inline``: a blocking caller sends
        the message itself when no other is on its way (one thread hand-off fewer each way).

        Raises:
            Error: ``argument`` for a value that cannot cross; ``closed``/``stopped`` after
                :meth:`close`; ``unavailable``/``host_down`` when the host will not return.
        """
        cid = next(self._ids)
        message = p.call(cid, op, args, progress)
        with self._cv:
            if self.closed:
                raise Error("closed", "stopped", "the cluster's hub was stopped")
            if self.down is not None:
                raise _copy(self.down)
            self._pending[cid] = _Pending(op, sink)
            self._queue.append(message)
            batch = None
            if inline and not self._sending and not self._restarting:
                batch = self._take()
            else:
                self._cv.notify()
        if batch is not None:
            self._submit(batch)
        return cid

    def _take(self) -> list[dict[str, Any]]:
        """The next batch (under the lock): marked sent, so a loss fails it."""
        self._sending = True
        batch = self._queue[: p.MAX_BATCH]
        del self._queue[: p.MAX_BATCH]
        for message in batch:
            found = self._pending.get(message.get("id", -1))
            if found is not None:
                found.sent = True
        return batch

    def _submit(self, batch: list[dict[str, Any]]) -> None:
        self.messages += 1
        self.calls += len(batch)
        try:
            events = self.handle.submit(self.caller, batch, self.linger)
        except HostLost as exc:
            self._done_sending()
            self._lost(exc)
            return
        except Exception as exc:  # the engine refused the message: those calls fail
            self._done_sending()
            error = Error(
                "unavailable",
                "host_error",
                f"a message to host {self.name!r} failed ({type(exc).__name__})",
            )
            for message in batch:
                self._finish(message.get("id", -1), None, error)
            return
        self._done_sending()
        self._deliver(events)

    def _done_sending(self) -> None:
        with self._cv:
            self._sending = False
            if self._queue:
                self._cv.notify()

    def cancel(self, cid: int) -> None:
        """Give a call up: the host cancels it at its server (no outcome comes)."""
        with self._cv:
            found = self._pending.pop(cid, None)
            if found is None:
                return
            if found.sent:
                self._queue.append({"cancel": cid})
            else:
                self._queue[:] = [m for m in self._queue if m.get("id") != cid]
            self._cv.notify()

    def in_flight(self) -> int:
        return len(self._pending)

    def close(self, leave: bool = True) -> None:
        """Fail what is pending with ``closed``/``stopped`` and stop the threads; the host
        is told to cancel this caller's calls (``leave``)."""
        with self._cv:
            if self.closed:
                return
            self.closed = True
            pending = list(self._pending.values())
            self._pending.clear()
            self._queue.clear()
            self._cv.notify_all()
        for item in pending:
            item.sink.fail(Error("closed", "stopped", "the cluster's hub was stopped"))
        if leave:
            try:
                self.handle.leave(self.caller)
            except Exception:
                pass

    # -- the threads --------------------------------------------------------------------------

    def _send_loop(self) -> None:
        while True:
            with self._cv:
                while (not self._queue or self._restarting or self._sending) and not self.closed:
                    self._cv.wait(timeout=1.0 if self._restarting else None)
                if self.closed:
                    return
                batch = self._take()
            self._submit(batch)

    def _poll_loop(self) -> None:
        while not self.closed:
            try:
                events = self.handle.poll(self.caller, POLL_WAIT)
            except HostLost as exc:
                if self.closed:
                    return  # the hub stopped and its hosts were stopped on purpose: no loss
                self._lost(exc)
                if self.down is not None:
                    return
                if exc.permanent:
                    self._again()
                else:
                    self._back()
                continue
            except Exception as exc:
                if self.closed:
                    return
                log.warning("cluster: a poll of host %s failed (%s)", self.name, type(exc).__name__)
                time.sleep(0.1)  # a bounded retry of an engine hiccup, never a wait on an event
                continue
            self._deliver(events)

    def _lost(self, exc: HostLost) -> None:
        """Fail every call sent to a host that died (``host_lost``); with a host that will
        not come back, every call queued too (``host_down``)."""
        with self._cv:
            self._restarting = not exc.permanent
            sent = [cid for cid, item in self._pending.items() if item.sent]
            failed = [(cid, self._pending.pop(cid)) for cid in sent]
            if exc.permanent and self.down is None and self._respawn is None:
                self.down = Error(
                    "unavailable",
                    "host_down",
                    f"host {self.name!r} died and will not restart (max_restarts reached or "
                    "stopped): start the tenant's hub again",
                    data={"host": self.name},
                )
                failed += list(self._pending.items())
                self._pending.clear()
                self._queue.clear()
        if failed:
            self.lost += len(sent)
            log.warning("cluster: host %s lost with %d call(s) in flight", self.name, len(sent))
        error = p.host_lost(self.name, self.pid)
        for cid, item in failed:
            item.sink.fail(error if cid in sent else _copy(self.down or error))

    def _again(self) -> None:
        """A host that died for good: started again from its spec (when this caller owns
        it and its node is gone), else every call fails ``host_down`` from now on."""
        respawn = self._respawn
        try:
            if respawn is None:
                raise HostLost(self.name, permanent=True)
            handle, info = respawn(self.info)
        except Exception as exc:
            if respawn is not None and not self.closed:
                log.warning(
                    "cluster: host %s could not start again (%s)", self.name, type(exc).__name__
                )
            self._respawn = None
            self._lost(HostLost(self.name, permanent=True))
            return
        finally:
            with self._cv:
                self._restarting = False
                self._cv.notify_all()
        self.handle = handle
        self.info = info
        self.restarts += 1
        self.pid = info.get("pid")
        self._relevel()

    def _back(self) -> None:
        """Wait for the host to restart; count the restart; send what queued meanwhile."""
        try:
            info = self._wait_alive(self.handle, 60.0)
        except HostLost as exc:
            self._lost(HostLost(exc.host, permanent=True))
            if self.down is None:
                self._again()
            return
        except Exception:
            return
        finally:
            with self._cv:
                self._restarting = False
                self._cv.notify_all()
        if info.get("pid") != self.pid:
            self.restarts += 1
            self.pid = info.get("pid")
            self._relevel()
        self.info = info

    def _relevel(self) -> None:
        """Give a host started again the log level this caller set (its outcome unread)."""
        level = self.log_level
        if level is None or self.closed:
            return
        try:
            self.send("set_logging_level", {"level": level, "timeout": None}, _Dropped())
        except Error:
            pass

    def _deliver(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            cid = event.get("id")
            if "ok" in event:
                self._finish(cid, event["ok"], None)
            elif "error" in event:
                self._finish(cid, None, p.error_of(event["error"]))
            elif "progress" in event:
                found = self._pending.get(cid)  # type: ignore[arg-type]
                if found is not None:
                    params = event["progress"]
                    found.sink.progress(
                        Progress(
                            params.get("progress", 0.0), params.get("total"), params.get("message")
                        )
                    )
            elif "note" in event and self.notes is not None:
                self.notes(event["note"])

    def _finish(self, cid: Any, value: Any, error: Error | None) -> None:
        with self._cv:
            found = self._pending.pop(cid, None)
        if found is None:  # given up, failed as lost, or closed: nobody waits for it
            return
        if error is not None:
            found.sink.fail(error)
            return
        try:
            decoded = p.decode(found.op, value)
        except Error as exc:
            found.sink.fail(exc)
            return
        found.sink.ok(decoded)


class _Dropped(Sink):
    """An outcome nobody waits for."""

    def ok(self, value: Any) -> None:
        pass

    def fail(self, error: Error) -> None:
        pass


def _copy(error: Error) -> Error:
    return Error(error.kind, error.reason, error.message, code=error.code, data=error.data)
