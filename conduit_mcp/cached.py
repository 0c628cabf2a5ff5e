"""The client's cache, notification and credential API (issue 4), mixed into ``Client``.

Reads (``cached_tools``, ``tool(name)``, ...) go straight to the connection's
:class:`~conduit_mcp.cache.Cache` from the caller's thread: no actor is messaged and no lock
is taken, so a lookup costs a few dictionary reads. Subscribing tells the notifier actor
(started on first use) and the connection (which listens for what subscribers want); it never
waits on either.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import time
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

import pykka

from .actors.events import CacheStore, Consumers, SetAuth
from .actors.notifier import Subscribe, Unsubscribe
from .api import PageWalk, _timeout
from .errors import Error
from .replies import SyncReply
from .transports.http_spec import Http

# The longest a list_all_* waits for its fetched list to be stored (it never fails on it).
_STORE_WAIT = 1.0

if TYPE_CHECKING:
    from .cache import Cache
    from .tree import ClientTree


def fresh_items(runtime: ClientTree, kind: str) -> tuple[Any, ...] | None:
    """The cached list if it is fresh under the current credentials (seed 003), else None.
    A cache gone with its connection is a miss: the fetch then fails or succeeds on its own."""
    cache = runtime.shared.cache
    if cache is None:
        return None
    try:
        entry = cache.fresh(kind, time.monotonic())
    except Error:
        return None
    return entry.items if entry is not None else None


def begin_listing(
    runtime: ClientTree, kind: str, timeout: float | None, refresh: bool
) -> tuple[Any, ...] | PageWalk:
    """``list_all_*``'s first step, for every front end: the cached items when fresh (and not
    ``refresh``), else the :class:`~conduit_mcp.api.PageWalk` to run."""
    if not refresh:
        cached = fresh_items(runtime, kind)
        if cached is not None:
            return cached
    return PageWalk(
        kind, _timeout(timeout, runtime.config.request_timeout), walk_credential(runtime)
    )


def store_walk(runtime: ClientTree, walk: Any, reply: Any = None) -> bool:
    """Hand a whole fetched list to the connection, the cache's only writer. With ``reply``
    the caller can wait until it is stored (a miss already cost a whole fetch; one more
    round trip makes ``list_all_tools()`` then ``tool(name)`` find it)."""
    try:
        runtime.connection().tell(
            CacheStore(
                walk.kind, tuple(walk.items), walk.raws, walk.started, walk.credential, reply
            )
        )
        return True
    except Exception:  # the connection is gone or restarting: nothing to store it in
        return False


def store_walk_and_wait(runtime: ClientTree, walk: Any) -> None:
    reply = SyncReply()
    if store_walk(runtime, walk, reply):
        with contextlib.suppress(queue.Empty):
            reply.queue.get(timeout=max(0.0, min(_STORE_WAIT, walk.deadline - time.monotonic())))


def walk_credential(runtime: ClientTree) -> str | None:
    cache = runtime.shared.cache
    try:
        return cache.credential if cache is not None else None
    except Error:
        return None


class CacheApi:
    """Cache reads, notification subscriptions and ``set_auth`` (see the module docstring).

    >>> import queue, sys, conduit_mcp as mcp
    >>> server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing", "--ttl-ms", "60000"])
    >>> with mcp.Client.start(server) as client:
    ...     _ = client.await_ready(timeout=10)
    ...     notes = queue.Queue()
    ...     client.subscribe_notifications(notes, methods=[mcp.LIST_REFRESHED])
    ...     names = {t.name for t in client.list_all_tools()}   # fetched, then cached
    ...     client.tool("add").name, client.list_all_tools() == client.cached_tools()
    ...     _ = client.call_tool("add_tool", {"name": "fresh_tool"})  # the server announces it
    ...     notes.get(timeout=10).params["kind"], client.tool("fresh_tool").name
    ('add', True)
    ('tools', 'fresh_tool')
    """

    name: str
    _pinned: ClientTree | None

    def _runtime(self) -> ClientTree:  # pragma: no cover - Client defines it
        raise NotImplementedError

    def _cache(self) -> Cache:
        cache = self._runtime().shared.cache
        if cache is None:
            raise Error("unavailable", "cache_gone", "the client has no cache yet")
        return cache

    # -- reads that never fetch ---------------------------------------------------------------

    def cached_tools(self) -> tuple[Any, ...] | None:
        """The cached tools, fresh or not (None if never fetched, or private to other
        credentials); never asks the server. ``Error("unavailable", "cache_gone")`` if the
        connection is gone."""
        return self._cache().items("tools")

    def cached_prompts(self) -> tuple[Any, ...] | None:
        """The cached prompts (see :meth:`cached_tools`)."""
        return self._cache().items("prompts")

    def cached_resources(self) -> tuple[Any, ...] | None:
        """The cached resources (see :meth:`cached_tools`)."""
        return self._cache().items("resources")

    def cached_resource_templates(self) -> tuple[Any, ...] | None:
        """The cached resource templates (see :meth:`cached_tools`)."""
        return self._cache().items("resource_templates")

    def tool(self, name: str) -> Any:
        """The cached :class:`~conduit_mcp.types.Tool` named ``name``, or None. A point lookup:
        one item, no copy of the list, no message, no lock."""
        cache = (self._pinned or self._runtime()).shared.cache
        if cache is None:  # a tree still starting (a supervisor's child_spec), as _cache()
            raise Error("unavailable", "cache_gone", "the client has no cache yet")
        return cache.lookup("tools", name)

    def prompt(self, name: str) -> Any:
        """The cached prompt named ``name``, or None."""
        return self._cache().lookup("prompts", name)

    def resource(self, uri: str) -> Any:
        """The cached resource with this ``uri``, or None."""
        return self._cache().lookup("resources", uri)

    def resource_template(self, uri_template: str) -> Any:
        """The cached resource template with this ``uri_template``, or None."""
        return self._cache().lookup("resource_templates", uri_template)

    # -- notifications ------------------------------------------------------------------------

    def subscribe_notifications(
        self, subscriber: Any, methods: Iterable[str] | None = None
    ) -> None:
        """Deliver server notifications (all but progress and cancelled) to ``subscriber``,
        in order: a Pykka ``ActorRef`` (told a
        :class:`~conduit_mcp.notifications.ServerNotification`), a callable (run in the
        client's notifier thread, never the connection's), or a queue (``put_nowait``; an
        ``asyncio.Queue`` is filled on its own loop). ``methods`` limits it to those methods.
        A ``list_changed`` burst arrives coalesced: the first at once, then at most one per
        250 ms. In the modern era this also opens a ``subscriptions/listen`` for what the
        server advertises. A dead subscriber is removed."""
        runtime = self._runtime()
        message = Subscribe(subscriber, methods)  # validated here, in the caller's thread
        sub = message.subscriber
        if not runtime.siblings.tell("notifier", message):
            raise Error("closed", "stopped", f"client {self.name!r} is not running")
        _tell_connection(runtime, Consumers(sub.key, sub.methods, True))

    def unsubscribe_notifications(self, subscriber: Any) -> None:
        """Stop delivering to ``subscriber`` (no-op if it was not subscribed)."""
        runtime = self._runtime()
        message = Unsubscribe(subscriber)
        runtime.siblings.tell("notifier", message)
        _tell_connection(runtime, Consumers(message.key, None, False))

    def await_listening(self, timeout: float = 5.0) -> dict[str, Any]:
        """Modern era: block until the server acknowledged a ``subscriptions/listen`` and
        return the filter it honours (so a change made after this is not missed). Legacy
        era: ``{}`` at once (notifications need no listen there). ``Error("timeout")`` if no
        listen is acknowledged in time (no consumer, or the server advertises nothing)."""
        runtime = self._runtime()
        if runtime.shared.status.era == "legacy":
            return {}
        honoured = runtime.shared.wait_listen(_timeout(timeout, timeout))
        if honoured is None:
            raise Error("timeout", "deadline", "no subscriptions/listen was acknowledged in time")
        return honoured

    def subscribe(self, uri: str, *, timeout: float | None = None) -> None:
        """Subscribe to ``notifications/resources/updated`` for ``uri``. Kept across
        reconnects: sent again on every new session (legacy ``resources/subscribe``) or
        carried by every listen (modern)."""
        self.request("resources/subscribe", {"uri": _uri(uri)}, timeout=timeout)  # type: ignore[attr-defined]

    def unsubscribe(self, uri: str, *, timeout: float | None = None) -> None:
        """Undo :meth:`subscribe`."""
        self.request("resources/unsubscribe", {"uri": _uri(uri)}, timeout=timeout)  # type: ignore[attr-defined]

    # -- credentials --------------------------------------------------------------------------

    def set_auth(
        self,
        *,
        bearer: str | None = None,
        headers: Mapping[str, str] | None = None,
        auth: Any = None,
        credential_id: str | None = None,
        timeout: float = 5.0,
    ) -> None:
        """Send other credentials from the next request on (HTTP only). Every private cached
        list is deleted at once (seed 003); public ones are kept. The values never appear in
        a repr, a log or a span."""
        runtime = self._runtime()
        spec = runtime.spec
        if not isinstance(spec, Http):
            raise Error("argument", "transport", "set_auth needs an Http transport")
        try:
            new = dataclasses.replace(
                spec, bearer=bearer, headers=headers, auth=auth, credential_id=credential_id
            )
        except Error as exc:
            raise Error("argument", exc.reason, exc.message) from None
        runtime.spec = new  # a restarted connection starts with these
        reply = SyncReply()
        runtime.connection().tell(SetAuth(new, reply))
        seconds = _timeout(timeout, timeout)
        try:
            _tag, value = reply.queue.get(timeout=seconds)
        except Exception:
            raise Error("timeout", "deadline", "set_auth was not applied in time") from None
        if isinstance(value, Error):
            raise value


def _tell_connection(runtime: ClientTree, message: Any) -> None:
    """Tell the connection who consumes notifications now. A connection restarting after a
    crash may miss it: the notifier, which has the subscription already, tells the new one
    every subscriber when it starts (``Replay``), so this never fails the caller."""
    try:
        runtime.connection().tell(message)
    except (Error, pykka.ActorDeadError):
        pass


def _uri(uri: Any) -> str:
    if not isinstance(uri, str) or not uri:
        raise Error("argument", "uri", "uri must be a non-empty string")
    return uri
