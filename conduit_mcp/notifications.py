"""Server notifications as the user receives them, and the kinds of subscriber that receive them.

Every server notification but ``notifications/progress`` and
``notifications/cancelled`` reaches each subscriber, in order. The connection never runs user
code: it hands notifications to the client's notifier actor
(:class:`conduit_mcp.actors.notifier.Notifier`), which delivers them.

A subscriber is one of:

* a Pykka ``ActorRef``: it is told each :class:`ServerNotification` (a plain ``tell``). An actor
  that has died is unsubscribed at its first missed notification.
* a queue, i.e. anything with ``put_nowait`` that may be called from another thread
  (``queue.Queue``, ``queue.SimpleQueue``): each notification is ``put_nowait``; on a full
  bounded queue that notification is dropped for that subscriber (and counted), never waited
  for.
* an ``asyncio.Queue``: it must be subscribed from a thread running its event loop (or with
  ``loop=`` given), because the loop is captured at subscription: asyncio queues are not
  thread-safe, so notifications are put into it *on that loop* through
  ``loop.call_soon_threadsafe``. A full queue drops as above; a closed loop unsubscribes it.
* any other callable taking one :class:`ServerNotification`: it runs in the notifier's thread,
  one call at a time, in order, from its own queue of at most ``max_subscriber_backlog``
  notifications (a slow one delays only itself; when its queue is full a notification is
  dropped for it and counted). It must never wait on the client (an ``ask`` of the notifier
  from inside it would wait for itself). An exception from it is logged (its type only) and
  it stays subscribed. None is called after the client's ``stop()`` returned.

Each subscriber may name the methods it wants (``methods=``); ``None`` means every method.
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, Literal

import pykka

from .errors import Error

__all__ = [
    "LIST_REFRESHED",
    "TOOL_DEFINITION_CHANGED",
    "ServerNotification",
    "Subscriber",
    "SubscriberKind",
    "subscriber_key",
]

# Synthetic notifications the client itself delivers to subscribers (never from a server:
# the ``conduit_mcp/`` prefix is not an MCP method).
#: The methods of the client's own notifications begin with it (the server's never do).
OWN_PREFIX: Final = "conduit_mcp/"

TOOL_DEFINITION_CHANGED: Final = "conduit_mcp/tool_definition_changed"
"""The method of the notification a subscriber gets when a refreshed tool list holds a tool
whose definition changed under the same name (params ``{"name": ...}``): a server cannot
swap what a tool does behind a name the user approved without the application hearing.

>>> import conduit_mcp as mcp
>>> mcp.TOOL_DEFINITION_CHANGED
'conduit_mcp/tool_definition_changed'
"""

LIST_REFRESHED: Final = "conduit_mcp/list_refreshed"
"""The method of the notification a subscriber gets when a background refresh of a cached
list (after a ``list_changed``) has finished: params ``{"kind": "tools" | "prompts" |
"resources" | "resource_templates", "stored": bool}``; ``stored`` is False when its answer
was not cached (older than the cached list, or private under credentials that cannot be
identified).

>>> import queue, sys
>>> import conduit_mcp as mcp
>>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing", "--ttl-ms", "60000"])
>>> with mcp.Client.start(server) as client:
...     notes = queue.Queue()
...     client.subscribe_notifications(notes, methods=[mcp.LIST_REFRESHED])
...     _ = client.list_all_tools()                                  # cached from now on
...     _ = client.call_tool("add_tool", {"name": "fresh_tool"})     # the server announces it
...     note = notes.get(timeout=10)
>>> note.method, note.params["kind"], note.params["stored"]
('conduit_mcp/list_refreshed', 'tools', True)
"""

_EMPTY: Final[Mapping[str, Any]] = MappingProxyType({})

SubscriberKind = Literal["actor", "queue", "asyncio", "callable"]


@dataclass(frozen=True, slots=True, repr=False)
class ServerNotification:
    """One notification from a server, as delivered to subscribers.

    ``client`` is the name of the client it came through, ``method`` its JSON-RPC method and
    ``params`` its parameters, read-only (a view: nested values are as the server sent them,
    and the subscriber must not change them, since every subscriber sees the same objects).
    This is the message an ``ActorRef`` subscriber is told.

    ``repr`` shows the client and the method only: params may carry tool arguments, resource
    contents or secrets, and a repr ends up in logs.

    >>> n = ServerNotification("weather", "notifications/message", {"data": "s3cret"})
    >>> n
    ServerNotification(client='weather', method='notifications/message')
    >>> n.params["data"]
    's3cret'
    """

    client: str
    """The name of the client the notification came through."""
    method: str
    """The notification's method, e.g. ``notifications/tools/list_changed``."""
    params: Mapping[str, Any]
    """The notification's ``params`` (empty when it had none), read-only."""

    def __post_init__(self) -> None:
        params = self.params
        if params is None:
            params = _EMPTY
        elif not isinstance(params, MappingProxyType):
            if not isinstance(params, Mapping):
                raise Error("argument", "params", "notification params must be a mapping")
            # A view, not a copy: the connection hands over the dict it just decoded and keeps
            # no reference to it, so copying every notification would buy nothing.
            params = MappingProxyType(params)
        object.__setattr__(self, "params", params)

    def __repr__(self) -> str:
        return f"ServerNotification(client={self.client!r}, method={self.method!r})"


def _describe(sub: object) -> str:
    return getattr(sub, "__qualname__", None) or type(sub).__qualname__


def _kind_of(sub: object) -> SubscriberKind:
    if isinstance(sub, pykka.ActorRef):
        return "actor"
    if isinstance(sub, type):
        # A class has ``put_nowait`` (queue.Queue) or is callable (it would be instantiated
        # per notification): always a mistake.
        msg = f"the class {_describe(sub)} is not a subscriber; pass an instance"
        raise Error("argument", "subscriber", msg)
    if isinstance(sub, asyncio.Queue):
        return "asyncio"
    if callable(getattr(sub, "put_nowait", None)):
        return "queue"
    if callable(sub):
        return "callable"
    msg = (
        f"{type(sub).__qualname__} is not a subscriber type: pass a pykka ActorRef, a queue "
        "(queue.Queue, queue.SimpleQueue, asyncio.Queue) or a callable taking one notification"
    )
    raise Error("argument", "subscriber", msg)


def subscriber_key(sub: object) -> Hashable:
    """The identity of a subscriber: subscribing the same key twice makes one subscriber.

    An actor is keyed by its URN (two refs to one actor are one subscriber), a hashable object
    by equality (so ``obj.method`` twice is one subscriber), anything else by identity. Raises
    ``Error("argument", "subscriber")`` for anything that is not a subscriber.

    >>> import queue
    >>> q = queue.SimpleQueue()
    >>> subscriber_key(q) == subscriber_key(q)
    True
    >>> subscriber_key(42)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    conduit_mcp.errors.Error: argument (subscriber): int is not a subscriber type: ...
    """
    return _key(sub, _kind_of(sub))


def _key(sub: Any, kind: SubscriberKind) -> Hashable:
    if kind == "actor":
        return ("actor", sub.actor_urn)
    try:
        hash(sub)
    except TypeError:
        # The subscriber holds ``sub``, so its id cannot be reused while it is subscribed.
        return ("id", id(sub))
    return ("object", sub)


def _methods(methods: Iterable[str] | None) -> frozenset[str] | None:
    if methods is None:
        return None
    if isinstance(methods, str | bytes):
        raise Error("argument", "methods", "methods must be a collection of method names")
    try:
        names = frozenset(methods)
    except TypeError:
        raise Error("argument", "methods", "methods must be a collection of method names") from None
    if not names or not all(isinstance(m, str) and m for m in names):
        raise Error("argument", "methods", "methods must be non-empty method names (or None)")
    return names


class Subscriber:
    """A validated subscriber: its target, how it is delivered to, and its method filter.

    Build it with :meth:`of` in the subscribing caller's thread: that is where the loop of an
    ``asyncio.Queue`` is captured and where a bad argument raises.
    """

    __slots__ = ("target", "kind", "key", "methods", "loop", "name")

    def __init__(
        self,
        target: Any,
        kind: SubscriberKind,
        key: Hashable,
        methods: frozenset[str] | None,
        loop: asyncio.AbstractEventLoop | None,
    ) -> None:
        #: The ActorRef, queue or callable given.
        self.target = target
        #: How notifications reach it: ``"actor"``, ``"queue"``, ``"asyncio"`` or ``"callable"``.
        self.kind = kind
        #: Its :func:`subscriber_key`.
        self.key = key
        #: The methods it wants; ``None``: every method.
        self.methods = methods
        #: For ``"asyncio"``: the loop its queue belongs to; else ``None``.
        self.loop = loop
        #: A short description for logs (a type or function name, never a repr).
        self.name = _describe(target)

    @classmethod
    def of(
        cls,
        sub: Any,
        methods: Iterable[str] | None = None,
        *,
        loop: asyncio.AbstractEventLoop | None = None,
    ) -> Subscriber:
        """Validate ``sub`` (see the module docstring for the kinds) and its ``methods``.

        For an ``asyncio.Queue``, ``loop`` is its event loop; by default the loop running in
        the calling thread, and ``Error("argument", "subscriber")`` if none is running.
        """
        if isinstance(sub, Subscriber):
            return sub
        kind = _kind_of(sub)
        names = _methods(methods)
        if kind == "asyncio":
            if loop is None:
                try:
                    loop = asyncio.get_running_loop()
                except RuntimeError:
                    msg = (
                        "an asyncio.Queue must be subscribed from its event loop's thread "
                        "(or with loop=)"
                    )
                    raise Error("argument", "subscriber", msg) from None
        elif loop is not None:
            raise Error("argument", "loop", "loop= applies to an asyncio.Queue only")
        return cls(sub, kind, _key(sub, kind), names, loop)

    def wants(self, method: str) -> bool:
        """Whether the filter lets ``method`` through."""
        return self.methods is None or method in self.methods

    def __repr__(self) -> str:
        methods = "all" if self.methods is None else sorted(self.methods)
        return f"<Subscriber {self.kind} {self.name} methods={methods}>"
