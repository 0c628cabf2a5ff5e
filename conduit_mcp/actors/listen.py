"""The listen-stream actor: the client's modern ``subscriptions/listen`` streams, apart from
the connection (docs/actor-tree.md, "Lazy children" and "How a notification travels";
docs/connection.md, "Listens and resource subscriptions").

A lazy, permanent child of the client's supervisor (id ``"listen"``), started the first time
the connection wants a listen. The connection decides *what* to listen for (it alone knows
the consumers, the cached kinds, the resource URIs and the server's capabilities) and tells
it as a :class:`Want`; this actor decides *how*:

* it opens a listen for the wanted filter through the transport's stream API
  (:meth:`~conduit_mcp.transports.base.Transport.open_stream`: over HTTP a POST on the
  streams' own pool, over stdio the one pipe), with a string id ``"listen-<n>"`` that never
  collides with the connection's integer ids;
* when the filter changes it opens a new listen and closes the old one once the new one is
  acknowledged; at most :data:`MAX_LISTENS` are open at once;
* a listen the server ends (a final result, an error, ``notifications/cancelled``) or whose
  stream drops is reopened after the backoff, never sooner than a floor
  (:data:`~conduit_mcp.protocol.listen.REOPEN_FLOOR`); the backoff grows while listens keep
  ending at once and starts again after one that lived;
* it publishes the filter the server honours (``Client.await_listening``) for the newest
  listen only;
* it routes a live listen's notifications, with the ``subscriptionId`` removed, back to the
  connection (:class:`ListenRouted`), which stays the only writer of the cache and the one
  that tells the notifier; a stream that dropped is told too (:class:`ListenDropped`: the
  cached lists are marked stale, notifications may have been missed). Over stdio, where
  every message shares one pipe, only the messages about a listen's life come here; its
  notifications go to the connection in their order among the others, and the connection
  routes those of a listen this actor publishes as open (``Published.live_listens``).

Isolation: whatever goes wrong in a stream (a bad event, a crash in this actor) costs only
this actor: no call in flight fails. A restarted incarnation closes what the old one left
open (a new sink supersedes the old at the transport), tells the connection it is back
(:class:`ListenBack`), and the connection tells it the current want again (the notifier's
``Replay`` is the same pattern).

It also owns the legacy era's HTTP GET stream (server messages outside any request): the
connection asks for it on entering ``ready`` (``Want.get``, a number per session); this actor
opens it through the same stream API (the transport holds the session's requests until it
is answered, so the server sees it before them), hands its messages to the connection as they
are (``Inbound``: the connection routes notifications and server requests; answers to calls
in flight already went to their callers), and reopens it when it ends, resumed with
``Last-Event-ID`` after the server's ``retry``, but never sooner than the floor and later
and later while it keeps ending at once (a server sending ``retry: 1`` and closing every
stream must not get a reconnect per millisecond). After :data:`~conduit_mcp.protocol.listen.
GIVE_UP_AFTER` failures in a row it gives up until the next session, with a warning.
"""

from __future__ import annotations

import itertools
import logging
import time
from dataclasses import dataclass
from typing import Any, NamedTuple

from ..backoff import GuardedBackoff
from ..config import Config
from ..otp.base import Link, safe_tell
from ..otp.pooled import PooledActor
from ..otp.registry import Registry
from ..otp.supervisor import ChildSpec, child_spec_for
from ..otp.timers import TimerHandle, schedule
from ..protocol import listen as lsn
from ..protocol import messages as msgs
from ..protocol.jsonrpc import ErrorResponse, Invalid, Notification, Response
from ..protocol.tasks import with_extension
from ..published import Published
from ..transports.base import Inbound, StreamEnded, StreamMessages

__all__ = [
    "MAX_LISTENS",
    "Incarnations",
    "ListenBack",
    "ListenDropped",
    "StreamGaveUp",
    "ListenRouted",
    "ListenStats",
    "ListenStream",
    "Stats",
    "Want",
    "WantSeen",
    "child_spec",
]

# The connection's logger: what it says is about the connection's streams.
log = logging.getLogger("conduit_mcp.listen")

#: At most four listens exist at once (docs/connection.md, "Listens and resource
#: subscriptions").
MAX_LISTENS = 4

# Listen ids are unique in the process: a restarted actor never reuses its predecessor's.
_ids = itertools.count(1)


# -- messages ------------------------------------------------------------------------------


@dataclass(slots=True, frozen=True)
class Want:
    """Connection -> listen actor: listen for ``filter`` ({}: for nothing) on ``transport``
    (connection attempt ``gen``, protocol ``version``). ``seq`` numbers the connection's
    wants: only a listen for the latest is published. ``get``: the legacy session whose GET
    stream to keep open (0: none)."""

    seq: int
    filter: dict[str, Any]
    gen: int
    transport: Any
    version: str
    get: int = 0

    def __repr__(self) -> str:
        return f"Want(seq={self.seq}, filter={sorted(self.filter)}, gen={self.gen}, get={self.get})"


@dataclass(slots=True, frozen=True)
class ListenBack:
    """Listen actor -> connection, when an incarnation starts: tell me the want again
    (``restarted``: a predecessor crashed, so notifications may have been missed)."""

    restarted: bool


@dataclass(slots=True, frozen=True)
class WantSeen:
    """Listen actor -> connection: the want ``seq`` was acted on (its listen request, if
    one was needed, is on its way: over stdio, in the pipe before anything the connection
    sends next). A caller whose call changed the want is answered only then, so a change
    it makes next is not missed."""

    seq: int


@dataclass(slots=True, frozen=True)
class ListenRouted:
    """Listen actor -> connection: a live listen's notifications, ``subscriptionId``
    removed, in arrival order."""

    gen: int
    notifications: list[Notification]


@dataclass(slots=True, frozen=True)
class ListenDropped:
    """Listen actor -> connection: a listen's stream dropped; the cached lists are stale."""

    gen: int


@dataclass(slots=True, frozen=True)
class StreamGaveUp:
    """Listen actor -> connection: the legacy GET stream of attempt ``gen`` is given up until
    the next session (the connection shows it in the status, ``degraded``)."""

    gen: int


@dataclass(slots=True, frozen=True)
class _Reopen:
    token: int
    what: str  # "listen" or "get"


@dataclass(slots=True, frozen=True)
class Stats:
    """Ask: the answer is a :class:`ListenStats`."""


class ListenStats(NamedTuple):
    """Counters of one listen actor incarnation."""

    listens: int
    """Listens open now."""
    dropped: int
    """Notifications of no live listen (a closed one's, a stray), dropped."""
    get_open: bool
    """Whether the legacy GET stream is open now."""
    get_reopens: int
    """Times the GET stream of the current session was reopened."""
    get_gave_up: bool
    """Whether the GET stream of the current session was given up (failures in a row)."""


class Incarnations:
    """How many listen actors one client tree has started (the first is no restart)."""

    __slots__ = ("count",)

    def __init__(self) -> None:
        self.count = 0


class _GetStream:
    """The legacy GET stream of one session, as the listen actor keeps it."""

    __slots__ = (
        "session",
        "tag",
        "opened",
        "last_event_id",
        "churn",
        "failures",
        "reopens",
        "warned",
        "gave_up",
        "timer",
        "token",
    )

    def __init__(self, session: int = 0) -> None:
        self.session = session  # the connection's session number (0: none wanted)
        self.tag: str | None = None  # while open
        self.opened = 0.0
        self.last_event_id: str | None = None  # resumed from here
        self.churn = 0  # ends in a row that came too soon
        self.failures = 0  # failed attempts in a row
        self.reopens = 0
        self.warned = False
        self.gave_up = False
        self.timer: TimerHandle | None = None  # the pending reopen
        self.token = 0

    def cancel_timer(self) -> None:
        timer, self.timer = self.timer, None
        if timer is not None:
            timer.cancel()


class _Listen:
    __slots__ = ("filter", "order", "opened", "acked", "honoured")

    def __init__(self, filter: dict[str, Any], order: int, opened: float) -> None:
        self.filter = filter
        self.order = order  # opening order: an acknowledgement closes every older listen
        self.opened = opened
        self.acked = False
        self.honoured: dict[str, Any] = {}


# -- the actor -----------------------------------------------------------------------------


class ListenStream(PooledActor):
    """See the module docstring. ``registry`` finds the connection at every tell (a
    restarted connection is a new actor)."""

    def __init__(
        self,
        client_name: str,
        registry: Registry,
        shared: Published,
        config: Config,
        incarnations: Incarnations,
        *,
        link: Link | None = None,
    ) -> None:
        super().__init__(link=link)
        self._client_name = client_name
        self._registry = registry
        self._shared = shared
        self._cfg = config
        self._incarnations = incarnations
        self._backoff = GuardedBackoff(config.backoff, config.backoff_base, config.backoff_max)
        self._want: Want | None = None  # what the connection asked for last
        self._listens: dict[str, _Listen] = {}  # open listens by id
        self._newest: str | None = None  # the listen for the wanted filter
        self._order = 0
        self._attempt = 0  # reopens in a row of listens that ended too soon
        self._timer: TimerHandle | None = None  # the pending reopen
        self._token = 0
        self.dropped = 0  # notifications of no live listen (a closed one's, a stray)
        # The legacy GET stream: its tag while open, the session it is for, where to resume.
        self._get = _GetStream()

    def __repr__(self) -> str:
        return f"<ListenStream {self._client_name} listens={len(self._listens)}>"

    # -- life cycle ----------------------------------------------------------------------------

    def init(self) -> None:
        self._incarnations.count += 1
        self._tell_connection(ListenBack(self._incarnations.count > 1))

    def terminate(self, reason: BaseException | None) -> None:
        self._cancel_timer()
        self._get.cancel_timer()
        want = self._want
        if want is not None and self._get.tag is not None:
            self._close(self._get.tag)
        if want is not None:
            for tag in list(self._listens):
                self._close(tag)
            # await_listening waits for the next incarnation's listen.
            self._shared.publish_listen_for(want.seq, None)
        self._shared.live_listens = frozenset()

    # -- messages ------------------------------------------------------------------------------

    def receive(self, message: Any) -> Any:
        t = type(message)
        if t is StreamMessages:
            self._on_messages(message)
        elif t is StreamEnded:
            self._on_ended(message)
        elif t is Want:
            self._on_want(message)
        elif t is Stats:
            get = self._get
            return ListenStats(
                len(self._listens), self.dropped, get.tag is not None, get.reopens, get.gave_up
            )
        elif t is _Reopen:
            if message.what == "get":
                if message.token == self._get.token and self._get.timer is not None:
                    self._get.timer = None
                    self._open_get()
            elif message.token == self._token and self._timer is not None:
                self._timer = None
                self._update()
        else:
            return super().receive(message)
        return None

    def _on_want(self, want: Want) -> None:
        self._act_on(want)
        self._tell_connection(WantSeen(want.seq))

    def _act_on(self, want: Want) -> None:
        old, self._want = self._want, want
        if old is not None and (old.gen != want.gen or old.transport is not want.transport):
            # A new transport: the old one's listens went with it.
            self._listens.clear()
            self._publish_live()
            self._newest = None
            self._attempt = 0
            self._cancel_timer()
            self._get.cancel_timer()
            self._get = _GetStream()
        if want.get != self._get.session:
            self._want_get(want)
        if old is None or old.filter != want.filter:
            self._cancel_timer()  # a new filter is listened for at once, not after a backoff
        if not want.filter:
            for tag in list(self._listens):
                self._close(tag)
            self._newest = None
            return
        self._update()

    def _on_messages(self, ev: StreamMessages) -> None:
        want = self._want
        if want is None or ev.gen != want.gen:
            return  # an earlier transport's
        if ev.tag is not None and ev.tag == self._get.tag:
            self._get_messages(want, ev.messages)
            return
        routed: list[Notification] = []
        for m in ev.messages:
            if isinstance(m, Notification):
                note = self._notification(m)
                if note is not None:
                    routed.append(note)
            elif isinstance(m, (Response, ErrorResponse)):
                if isinstance(m.id, str) and m.id in self._listens:
                    if isinstance(m, ErrorResponse):
                        log.info("the server refused a listen: JSON-RPC error %s", m.code)
                    self._ended(m.id, dropped=False)
            elif isinstance(m, Invalid):
                log.warning("dropped an unusable message on a listen stream: %s", m.reason)
        if routed:
            self._tell_connection(ListenRouted(want.gen, routed))

    def _notification(self, m: Notification) -> Notification | None:
        """A notification on a listen's stream: consumed here, dropped, or returned to be
        routed (its ``subscriptionId`` removed)."""
        params = m.params
        if m.method == lsn.CANCELLED:
            # A server may end a listen with a cancellation instead of a final result; both
            # mean "subscription ended" (MCP spec 2026-07-28, "Subscriptions").
            rid = params.get("requestId") if params is not None else None
            if isinstance(rid, str) and rid in self._listens:
                self._ended(rid, dropped=False)
            return None
        sid = lsn.subscription_id(params)
        if sid is None:
            return m  # on a listen's stream, but for no listen: the connection decides
        if not (isinstance(sid, str) and sid in self._listens):
            self.dropped += 1
            return None  # a listen we closed, or never opened: not routed
        if m.method == lsn.ACKNOWLEDGED:
            self._acked(sid, params)
            return None
        assert params is not None  # it carries a subscriptionId
        return Notification(m.method, lsn.without_subscription(params))

    def _on_ended(self, ev: StreamEnded) -> None:
        want = self._want
        if want is not None and ev.gen == want.gen and ev.tag == self._get.tag:
            self._get_ended(ev)
            return
        if want is not None and ev.gen == want.gen and ev.tag in self._listens:
            log.debug("a listen stream ended: %s", ev.detail)
            self._ended(ev.tag, dropped=True)

    # -- listens -------------------------------------------------------------------------------

    def _update(self) -> None:
        """Open a listen for the wanted filter unless one is open (or is being reopened)."""
        want = self._want
        if want is None or not want.filter:
            return
        newest = self._listens.get(self._newest) if self._newest is not None else None
        if newest is not None and newest.filter == want.filter:
            if newest.acked:
                self._shared.publish_listen_for(want.seq, dict(newest.honoured))
            return
        if self._timer is not None or len(self._listens) >= MAX_LISTENS:
            return  # re-evaluated when the backoff passes, or one ends or is acknowledged
        tag = f"{lsn.TAG_PREFIX}{next(_ids)}"
        message = msgs.request(
            tag,
            lsn.LISTEN,
            {"notifications": want.filter},
            era="modern",
            version=want.version,
            client_info=self._cfg.client_info,
            # a listen for task ids must declare the Tasks extension (else -32021)
            capabilities=(
                with_extension(self._cfg.capabilities)
                if "taskIds" in want.filter
                else self._cfg.capabilities
            ),
        )
        self._order += 1
        self._listens[tag] = _Listen(want.filter, self._order, time.monotonic())
        self._publish_live()  # before it is opened: its first notification is routed
        self._newest = tag
        want.transport.open_stream(tag, message, self.actor_ref)

    def _acked(self, tag: str, params: Any) -> None:
        listen = self._listens[tag]
        listen.acked = True
        honoured = params.get("notifications") if type(params) is dict else None
        listen.honoured = dict(honoured) if type(honoured) is dict else {}
        if listen.honoured != listen.filter:
            log.info("the server honours only part of the listen filter")
        # The old listens close once the new one is acknowledged.
        for other, older in list(self._listens.items()):
            if older.order < listen.order:
                self._close(other)
        self._update()  # publishes it if it is the wanted one; opens one if the want moved

    def _ended(self, tag: str, *, dropped: bool) -> None:
        """The server ended a listen or its stream dropped: reopen the wanted one after the
        backoff, never sooner than the floor."""
        listen = self._listens.pop(tag)
        self._publish_live()
        want = self._want
        assert want is not None
        if dropped:
            self._tell_connection(ListenDropped(want.gen))
        if tag != self._newest:
            self._update()  # room for a listen that waited for one of the four to end
            return
        self._newest = None
        self._shared.publish_listen_for(want.seq, None)
        lived = time.monotonic() - listen.opened >= lsn.LIVED
        self._attempt = 1 if lived else self._attempt + 1
        delay = max(lsn.REOPEN_FLOOR, self._backoff(self._attempt))
        if self._attempt == 3:
            log.warning(
                "client %s: the server keeps ending the listen at once; reopening it after "
                "%.1f s and backing off",
                self._client_name,
                delay,
            )
        self._cancel_timer()
        self._token += 1
        token, ref = self._token, self.actor_ref

        def wake() -> None:  # the timer thread: only a tell
            safe_tell(ref, _Reopen(token, "listen"))

        self._timer = schedule(time.monotonic() + delay, wake)

    def _close(self, tag: str) -> None:
        self._listens.pop(tag, None)
        self._publish_live()  # before it is closed: nothing of it is routed from now on
        if self._newest == tag:
            self._newest = None
        want = self._want
        if want is None:
            return
        try:
            want.transport.close_stream(tag)
        except Exception as exc:  # a transport that is going away: its streams go with it
            log.debug("listen close not sent: %s", type(exc).__name__)

    # -- the legacy GET stream ---------------------------------------------------------------

    def _want_get(self, want: Want) -> None:
        """A new session wants its GET stream (or none is wanted any more)."""
        get = self._get
        if get.tag is not None:
            self._close(get.tag)
        get.cancel_timer()
        self._get = _GetStream(want.get)
        if want.get:
            self._open_get()

    def _open_get(self) -> None:
        want, get = self._want, self._get
        if want is None or not want.get or get.tag is not None:
            return
        get.tag = f"get-{next(_ids)}"
        get.opened = time.monotonic()
        want.transport.open_stream(get.tag, None, self.actor_ref, get.last_event_id)

    def _get_messages(self, want: Want, messages: list[Any]) -> None:
        usable = []
        for m in messages:
            if isinstance(m, Invalid):
                log.warning("dropped an unusable message on the GET stream: %s", m.reason)
            else:
                usable.append(m)
        if usable:
            # The connection routes them as it routes what a transport reads.
            self._tell_connection(Inbound(want.gen, usable))

    def _get_ended(self, ev: StreamEnded) -> None:
        get = self._get
        get.tag = None
        if ev.last_event_id is not None:
            get.last_event_id = ev.last_event_id
        if ev.final:
            log.debug("the GET stream ended for good: %s", ev.detail)
            return  # the server offers none, or the session is gone (a new one asks again)
        get.failures = get.failures + 1 if ev.detail == "failed" else 0
        if get.failures >= lsn.GIVE_UP_AFTER:
            get.gave_up = True
            log.warning(
                "client %s: the server's GET stream failed %d times in a row; not reopened "
                "until the next session",
                self._client_name,
                get.failures,
            )
            self._tell_connection(StreamGaveUp(ev.gen))
            return
        lived = time.monotonic() - get.opened >= lsn.LIVED
        get.churn = 0 if lived else get.churn + 1
        delay = lsn.reopen_delay(ev.retry_ms, get.churn)
        get.reopens += 1
        if get.churn >= 3 and not get.warned:
            get.warned = True
            log.warning(
                "client %s: the server's GET stream keeps ending at once (%d times in a row); "
                "reopening it after %.1f s, backing off",
                self._client_name,
                get.churn,
                delay,
            )
        get.token += 1
        token, ref = get.token, self.actor_ref

        def wake() -> None:  # the timer thread: only a tell
            safe_tell(ref, _Reopen(token, "get"))

        get.timer = schedule(time.monotonic() + delay, wake)

    def _publish_live(self) -> None:
        self._shared.live_listens = frozenset(self._listens)

    def _cancel_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _tell_connection(self, message: Any) -> None:
        # Restarting: the new one tells its want when it is ready.
        self._registry.tell("connection", message)


def child_spec(
    client_name: str,
    registry: Registry,
    shared: Published,
    config: Config,
    *,
    id: str = "listen",
    shutdown: float = 5.0,
) -> ChildSpec:
    """The lazy, permanent supervisor child for one client's listen actor."""
    return child_spec_for(
        ListenStream,
        client_name,
        registry,
        shared,
        config,
        Incarnations(),
        id=id,
        restart="permanent",
        shutdown=shutdown,
        lazy=True,
    )
