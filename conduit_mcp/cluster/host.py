"""The host: a Hub built from a :class:`~conduit_mcp.cluster.protocol.HostSpec`, driven by
plain-data messages on an asyncio loop. Engine-neutral: the Ray engine wraps it in an async
actor (``conduit_mcp.cluster.ray_engine``); the tests drive it on a plain loop.

A caller talks to a host with two kinds of message, both plain data:

* ``submit(caller, calls)``: a batch of calls (``protocol.call``), started at once as tasks
  on the host's loop; it answers how many it took, never waits for them;
* ``poll(caller, wait)``: the caller's events (results, errors, progress, notifications),
  waiting up to ``wait`` seconds for the first; every poll renews the caller's lease.

A caller that stops polling for ``lease`` seconds is gone (its process died, or its machine):
the host cancels its calls (each cancelled at its server, as a local cancelled call is) and
forgets it. The host never calls back into a caller, so nothing callable crosses: the
caller's ``on_progress`` and subscribers run on its own side, fed by the events.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import asdict
from typing import Any

from ..errors import Error
from ..hub.hub import Hub
from ..hub.notify import HubNotification
from ..types import Progress
from . import protocol as p

log = logging.getLogger("conduit_mcp.cluster.host")

#: Events kept per caller that has not polled them (past it, the oldest notifications go).
MAX_EVENTS = 100_000
#: The most events in one poll's answer.
MAX_POLL = 4096


class _Caller:
    __slots__ = ("events", "lingering", "notes", "seen", "tasks", "wake")

    def __init__(self, now: float) -> None:
        self.events: deque[dict[str, Any]] = deque()
        self.tasks: dict[int, asyncio.Task[None]] = {}
        self.wake = asyncio.Event()
        self.seen = now
        self.notes: tuple[frozenset[str] | None, frozenset[str] | None] | None = None
        self.lingering = 0  # submits waiting for their calls: their replies take the events


class HostCore:
    """One host. Build it on the loop that will drive it (``asyncio.get_running_loop``);
    a spec the Hub refuses is kept as :attr:`error` (a plain failure), never raised, so an
    engine that restarts hosts does not restart a bad one forever."""

    def __init__(
        self,
        spec: Mapping[str, Any],
        *,
        lease: float = 10.0,
        environ: Mapping[str, str] | None = None,
        secrets_file: str | None = None,
    ) -> None:
        self.spec = p.HostSpec.from_data(spec)
        self.lease = lease
        self.pid = os.getpid()
        self.started = time.time()
        self.error: dict[str, Any] | None = None
        self.hub: Hub | None = None
        self._callers: dict[str, _Caller] = {}
        self._notes: asyncio.Queue[HubNotification] | None = None
        self._watch: asyncio.Task[None] | None = None
        self._fan: asyncio.Task[None] | None = None
        env: Mapping[str, str] = os.environ if environ is None else environ
        try:
            env = p.host_environ(secrets_file, env)
        except Error as exc:  # the host runs no hub; its info says why
            self.error = p.failure(0, exc, ())["error"]
        self._secrets = p.secret_values(self.spec.config, env)
        try:
            if self.error is None:
                p.check_spec(self.spec)
                self.hub = Hub.start(dict(self.spec.config), environ=env, **dict(self.spec.options))
        except Error as exc:
            self.error = p.failure(0, exc, self._secrets)["error"]
        except Exception as exc:  # a bug in the spec's handling: plain, never a traceback
            log.warning("host %s failed to start: %s", self.spec.name, type(exc).__name__)
            self.error = {
                "kind": "config",
                "reason": "host_start",
                "message": f"the host could not start its hub ({type(exc).__name__})",
                "code": None,
                "data": None,
            }

    # -- lifecycle ----------------------------------------------------------------------------

    def begin(self) -> None:
        """Start the lease watch and the notification fan-out (on the running loop)."""
        if self._watch is None:
            self._watch = asyncio.get_running_loop().create_task(self._watch_leases())
            if self.hub is not None:
                self._notes = asyncio.Queue(maxsize=MAX_EVENTS)
                self.hub.subscribe_notifications(self._notes)
                self._fan = asyncio.get_running_loop().create_task(self._fan_out(self._notes))

    def stop(self) -> None:
        for caller in list(self._callers.values()):
            for task in caller.tasks.values():
                task.cancel()
        self._callers.clear()
        for background in (self._watch, self._fan):
            if background is not None:
                background.cancel()
        if self.hub is not None:
            self.hub.stop()

    def info(self) -> dict[str, Any]:
        """What ``cluster.status()`` shows of this host, plain."""
        hub = self.hub
        return {
            "name": self.spec.name,
            "tenant": self.spec.tenant,
            "pid": self.pid,
            "started": self.started,
            "error": self.error,
            "servers": list(hub.servers()) if hub is not None else [],
            "clients": len(hub.servers()) if hub is not None else 0,
            "ready": sum(1 for s in hub.status().values() if s.state == "ready")
            if hub is not None
            else 0,
            "resources": dict(self.spec.resources),
            "callers": len(self._callers),
            "in_flight": sum(len(c.tasks) for c in self._callers.values()),
        }

    # -- messages -----------------------------------------------------------------------------

    def _caller(self, caller: str) -> _Caller:
        found = self._callers.get(caller)
        if found is None:
            self.begin()
            found = self._callers[caller] = _Caller(time.monotonic())
        return found

    async def submit(
        self, caller: str, calls: list[dict[str, Any]], linger: float = 0.0
    ) -> list[dict[str, Any]]:
        """Start every call of a batch; wait up to ``linger`` s for them to finish and answer
        the caller's events so far (fast calls come back in the submit's own reply, one
        message each way; the rest come in :meth:`poll`'s)."""
        state = self._caller(caller)
        state.seen = time.monotonic()
        loop = asyncio.get_running_loop()
        started: list[asyncio.Task[None]] = []
        for message in calls[: p.MAX_BATCH + 64]:
            if isinstance(message, Mapping) and isinstance(message.get("cancel"), int):
                found = state.tasks.pop(message["cancel"], None)
                if found is not None:
                    found.cancel()
                continue
            try:
                cid, op, args, wants = p.check_call(message)
            except Error as exc:
                bad = message.get("id") if isinstance(message, Mapping) else None
                self._push(state, p.failure(bad if isinstance(bad, int) else -1, exc))
                continue
            task = loop.create_task(self._run(state, cid, op, args, wants))
            state.tasks[cid] = task
            started.append(task)
        if started and linger > 0:
            state.lingering += 1
            try:
                await asyncio.wait(started, timeout=linger)
            finally:
                state.lingering -= 1
        out = self._drain(state)
        if state.events:  # more than one reply holds: the poll takes the rest
            state.wake.set()
        return out

    def _drain(self, state: _Caller) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        events = state.events
        while events and len(out) < MAX_POLL:
            out.append(events.popleft())
        return out

    async def poll(self, caller: str, wait: float) -> list[dict[str, Any]]:
        """The caller's events, waiting up to ``wait`` s for the first (renews its lease)."""
        state = self._caller(caller)
        state.seen = time.monotonic()
        if not state.events and wait > 0:
            state.wake.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(state.wake.wait(), min(wait, self.lease / 2))
        state.seen = time.monotonic()
        return self._drain(state)

    def leave(self, caller: str) -> int:
        """A caller that closes: its calls are cancelled; how many were."""
        state = self._callers.pop(caller, None)
        if state is None:
            return 0
        for task in state.tasks.values():
            task.cancel()
        return len(state.tasks)

    def notes(self, caller: str, methods: list[str] | None, servers: list[str] | None) -> None:
        """Send this caller the servers' notifications (filtered), or stop (both None and
        ``methods == []``)."""
        state = self._caller(caller)
        state.notes = (
            None
            if methods == []
            else (
                frozenset(methods) if methods is not None else None,
                frozenset(servers) if servers is not None else None,
            )
        )

    # -- views --------------------------------------------------------------------------------

    def views(self) -> dict[str, Any]:
        """The merged view as plain data: each item's qualified name and raw JSON, the
        resources' owners, the status of every server."""
        hub = self.hub
        if hub is None:
            return {"error": self.error, "tools": [], "prompts": [], "resources": [],
                    "resource_templates": [], "status": {}, "owners": {}}  # fmt: skip
        secrets = self._secrets
        return {
            "error": None,
            "tools": [[t.name, p.redact(t.raw, secrets)] for t in hub.tools()],
            "prompts": [[t.name, p.redact(t.raw, secrets)] for t in hub.prompts()],
            "resources": [p.redact(r.raw, secrets) for r in hub.resources()],
            "resource_templates": [p.redact(r.raw, secrets) for r in hub.resource_templates()],
            "owners": {r.uri: hub.resource_server(r.uri) for r in hub.resources()},
            "status": {n: asdict(s) for n, s in hub.status().items()},
            "restarts": hub.restarts(),
        }

    async def await_ready(self, timeout: float, servers: Any) -> dict[str, Any]:
        """``hub.await_ready`` on the host; the status as plain data, or a failure."""
        if self.hub is None:
            return {"error": self.error}
        try:
            found = await self.hub.aio.await_ready(timeout, servers)
        except Error as exc:
            return {"error": p.failure(0, exc, self._secrets)["error"]}
        return {"error": None, "status": {n: asdict(s) for n, s in found.items()}}

    # -- work ---------------------------------------------------------------------------------

    def _push(self, state: _Caller, event: dict[str, Any]) -> None:
        events = state.events
        if len(events) >= MAX_EVENTS:  # a caller that never polls: drop a notification
            for i, old in enumerate(events):
                if "note" in old:
                    del events[i]
                    break
        events.append(event)
        if not state.lingering:  # else the lingering submit's reply carries it (within linger)
            state.wake.set()

    async def _run(
        self, state: _Caller, cid: int, op: str, args: dict[str, Any], wants: bool
    ) -> None:
        secrets = self._secrets
        try:
            if self.hub is None:
                raise p.error_of(self.error or {"kind": "closed", "reason": "host_start"})
            if wants:

                def on_progress(value: Progress) -> None:
                    self._push(state, p.progress(cid, p.redact(asdict(value), secrets)))

                args["on_progress"] = on_progress
            value = await getattr(self.hub.aio, op)(**args)
            if op == "set_logging_level":  # per server: None or an error, as plain data
                raw = p.levels(value, secrets)
            elif op in ("subscribe", "unsubscribe"):
                raw = None
            else:
                raw = getattr(value, "raw", value)
            event = p.result(cid, p.redact(raw, secrets))
        except asyncio.CancelledError:
            state.tasks.pop(cid, None)
            raise
        except Error as exc:
            event = p.failure(cid, exc, secrets)
        except TypeError:
            event = p.failure(
                cid, Error("argument", "arguments", f"{op} was given arguments it does not take")
            )
        except Exception as exc:
            log.warning("host %s: %s failed with %s", self.spec.name, op, type(exc).__name__)
            event = p.failure(
                cid,
                Error("protocol", "host_error", f"{op} failed on the host ({type(exc).__name__})"),
            )
        state.tasks.pop(cid, None)
        self._push(state, event)

    async def _watch_leases(self) -> None:
        while True:
            await asyncio.sleep(max(self.lease / 4, 0.05))
            now = time.monotonic()
            for name, state in list(self._callers.items()):
                if p.lease_expired(state.seen, now, self.lease):
                    cancelled = self.leave(name)
                    if cancelled:
                        log.info(
                            "host %s: a caller stopped polling; %d call(s) cancelled",
                            self.spec.name,
                            cancelled,
                        )

    async def _fan_out(self, notes: asyncio.Queue[HubNotification]) -> None:
        secrets = self._secrets
        while True:
            note = await notes.get()
            for state in self._callers.values():
                if state.notes is None:
                    continue
                methods, servers = state.notes
                if methods is not None and note.method not in methods:
                    continue
                if servers is not None and note.server not in servers:
                    continue
                self._push(
                    state, p.notification(note.server, note.method, p.redact(note.params, secrets))
                )
