"""Hub notifications: each member's server notifications, tagged with the server's name.

A hub subscription is applied to every member, and again to each member the hub starts
later (a restart, ``add_server``): the member's notifier runs a small callable that tags the
notification and hands it to the user's subscriber the way ``Client.subscribe_notifications``
would (an ``ActorRef`` is told, a queue gets ``put_nowait``, an ``asyncio.Queue`` is filled on
its own loop, a callable is called in the member's notifier thread).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import pykka

from ..errors import Error
from ..notifications import ServerNotification

__all__ = ["HubNotification", "Subscription"]

log = logging.getLogger("conduit_mcp.hub")


@dataclass(frozen=True, slots=True, repr=False)
class HubNotification:
    """One server notification that came through the Hub: ``server`` is the config key.

    ``repr`` shows the server and the method only (params may carry secrets).

    >>> HubNotification("files", "notifications/message", {"data": "s3cret"})
    HubNotification(server='files', method='notifications/message')
    """

    server: str
    """The config key of the server it came from."""
    method: str
    """The notification's method."""
    params: Mapping[str, Any]
    """Its params, read-only (as ``ServerNotification.params``)."""

    def __repr__(self) -> str:
        return f"HubNotification(server={self.server!r}, method={self.method!r})"


def _deliverer(subscriber: Any) -> Callable[[HubNotification], None]:
    if isinstance(subscriber, pykka.ActorRef):
        return subscriber.tell
    if isinstance(subscriber, type):
        raise Error("argument", "subscriber", "a class is not a subscriber; pass an instance")
    if isinstance(subscriber, asyncio.Queue):
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            raise Error(
                "argument",
                "subscriber",
                "subscribe an asyncio.Queue from a thread running its event loop",
            ) from None
        queue = subscriber

        def on_loop(note: HubNotification) -> None:
            try:
                loop.call_soon_threadsafe(_put, queue, note)
            except RuntimeError:
                pass  # the loop is closed

        return on_loop
    put = getattr(subscriber, "put_nowait", None)
    if callable(put):

        def to_queue(note: HubNotification) -> None:
            try:
                put(note)
            except Exception:  # a full queue drops this one, never waits
                pass

        return to_queue
    if callable(subscriber):
        return subscriber  # type: ignore[no-any-return]
    raise Error(
        "argument",
        "subscriber",
        "a subscriber is an ActorRef, a queue, an asyncio.Queue or a callable",
    )


def _put(queue: asyncio.Queue[Any], note: HubNotification) -> None:
    try:
        queue.put_nowait(note)
    except asyncio.QueueFull:
        pass


class Subscription:
    """One hub subscriber and the members it is attached to."""

    __slots__ = ("deliver", "methods", "servers", "attached", "_lock")

    def __init__(
        self, subscriber: Any, methods: Iterable[str] | None, servers: Iterable[str] | None
    ) -> None:
        if methods is not None and (
            isinstance(methods, str) or not all(isinstance(m, str) for m in methods)
        ):
            raise Error("argument", "methods", "methods must be a list of method names")
        self.deliver = _deliverer(subscriber)
        self.methods = None if methods is None else list(methods)
        self.servers = None if servers is None else frozenset(servers)
        self.attached: dict[str, tuple[Any, Callable[[ServerNotification], None]]] = {}
        # attach runs in the subscribing thread and in the hub supervisor (a member it
        # starts): held for a dict update only, so a client is never subscribed twice.
        self._lock = threading.Lock()

    def attach(self, server: str, client: Any) -> None:
        if self.servers is not None and server not in self.servers:
            return
        deliver = self.deliver

        def tagged(note: ServerNotification) -> None:
            deliver(HubNotification(server, note.method, note.params))

        with self._lock:
            current = self.attached.get(server)
            if current is not None and current[0] is client:
                return
            self.attached[server] = (client, tagged)
        try:
            client.subscribe_notifications(tagged, self.methods)
        except Error:
            with self._lock:
                if self.attached.get(server) == (client, tagged):
                    del self.attached[server]

    def detach_all(self) -> None:
        with self._lock:
            attached = list(self.attached.values())
            self.attached.clear()
        for client, tagged in attached:
            try:
                client.unsubscribe_notifications(tagged)
            except Error:
                pass
