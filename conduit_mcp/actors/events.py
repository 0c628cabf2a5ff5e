"""What the connection is told, and the internal events it tells itself.

Messages are frozen slotted dataclasses, but for three plain slotted classes: ``Deadline``, one
per request (a frozen dataclass's construction costs about twice a plain class's), and the
two below. A ``Call`` holds its clock (protocol/clock.py), which the connection pauses.

The API messages ``Call`` and ``AwaitReady`` (what the front ends send, with ``Abandon`` and
``ReconnectNow``) are plain slotted classes, not frozen dataclasses, because the connection
marks a ``Call`` queued or retried in place (one allocation per request on the hot path).
Their reprs never show params: those carry tool arguments (docs/secrets.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import Error
from ..protocol.clock import CallClock
from ..replies import Reply

# -- messages the client facade tells the connection ----------------------------------------


class Call:
    """One request from the API. ``deadline`` is absolute (``time.monotonic()``) and
    ``total`` the absolute bound on the whole call (None: the client's ``max_total_timeout``
    from when it is first paused) and ``reset`` the timeout each progress report restarts
    (None: ``reset_timeout_on_progress`` is off); they go to its ``clock``
    (protocol/clock.py), which the connection pauses while the handler works for the call
    and asks, when its timer fires, whether progress moved the deadline. ``rounds`` counts
    its modern ``input_required`` rounds and ``base`` keeps the params it was made with, from
    which each round's retry is built (docs/connection.md, "Server-to-client requests")."""

    __slots__ = (
        "method",
        "params",
        "clock",
        "reply",
        "progress",
        "retried",
        "queued",
        "rounds",
        "base",
        "auth_tries",
        "step_ups",
        "inputs",
    )

    def __init__(
        self,
        method: str,
        params: dict[str, Any] | None,
        deadline: float,
        reply: Reply,
        progress: bool = False,
        retried: bool = False,
        total: float | None = None,
        reset: float | None = None,
    ) -> None:
        self.method = method
        self.params = params
        self.clock = CallClock(deadline, total, reset)
        self.reply = reply
        self.progress = progress
        self.retried = retried
        self.queued = False  # counted in max_queued while postponed
        self.rounds = 0
        self.base = params
        self.auth_tries = 0  # times refused for its token (401) and sent again
        self.step_ups = 0  # times refused for its scope (403) and sent again after a step-up
        # A task's inputRequests to answer before this tasks/update is sent (docs/tasks.md):
        # the connection runs them as an input round, then sends the update.
        self.inputs: dict[str, Any] | None = None

    @property
    def deadline(self) -> float:
        """The clock's deadline now (absolute): it moves when a pause for the handler ends."""
        return self.clock.deadline

    def again(self) -> Call:
        """The same call, to send once more (``retried``): what it was made with and its
        rounds so far are kept."""
        clock = self.clock
        copy = Call(
            self.method,
            self.params,
            clock.deadline,
            self.reply,
            self.progress,
            True,
            clock.total,
            clock.reset,
        )
        copy.clock.heard = clock.heard  # progress heard before still counts
        copy.rounds = self.rounds
        copy.base = self.base
        copy.auth_tries = self.auth_tries
        copy.step_ups = self.step_ups
        return copy

    def resend(self, step_up: bool = False) -> Call:
        """The same call, refused for its token (401) or its scope (403, ``step_up``), to
        send once more with the next token: not ``retried`` (that is the one automatic retry
        of other causes)."""
        copy = self.again()
        copy.retried = self.retried
        if step_up:
            copy.step_ups += 1
        else:
            copy.auth_tries += 1
        return copy

    def __repr__(self) -> str:
        # Never the params: they carry tool arguments (docs/secrets.md).
        return f"<Call {self.method} id={self.reply.request_id}>"


class AwaitReady:
    """Answered with the Status once ready; postponed (and counted in max_queued) until then."""

    __slots__ = ("reply", "deadline", "queued", "seconds")

    def __init__(self, reply: Reply, deadline: float, seconds: float | None = None) -> None:
        self.reply = reply
        self.deadline = deadline
        self.queued = False
        self.seconds = seconds  # the caller's timeout, named when it runs out


@dataclass(slots=True, frozen=True)
class Abandon:
    """The caller gave up (its own timeout, task cancelled, exit): cancel at the server."""

    reply: Reply
    reason: str = "caller_down"


@dataclass(slots=True, frozen=True)
class ReconnectNow:
    """``Client.reconnect()``: leave ``closed`` (or cut a backoff wait short)."""

    reply: Reply | None = None


@dataclass(slots=True, frozen=True)
class RootsChanged:
    """``Client.roots_changed()``: tell a legacy server the handler's roots changed."""


# -- internal events -------------------------------------------------------------------------

CONNECT = "connect"
ADMITTED = "admitted"  # the connection's turn to handshake came (admission.py)
TURN_LEASE = "turn_lease"  # its turn is over, its handshake goes on (admission.py)
STATE_TIMEOUT = "state_timeout"
STABLE = "stable"
HEALTH = "health"
HEALTH_TIMEOUT = "health_timeout"


class Deadline:
    """Timer: the deadline of a call or an ``await_ready`` passed. One per request (its timer
    is armed with it): a plain slotted class, the cheapest to build."""

    __slots__ = ("item",)

    def __init__(self, item: Call | AwaitReady) -> None:
        self.item = item


def transport_error(reason: str, detail: str | None = None) -> Error:
    text = "the connection to the server was lost"
    if detail:
        text += f" ({reason} {detail})"
    return Error("transport", reason, text)


# -- the cache, notifications and credentials -------------------------------------------------


@dataclass(slots=True, frozen=True)
class CacheStore:
    """A caller walked every page of a list (``list_all_*`` on a miss): store it. ``reply``
    (if any) is answered once it is stored, so the caller's next ``tool(name)`` finds it."""

    kind: str
    items: tuple[Any, ...]
    pages: list[Any]
    fetched_at: float
    credential: str | None
    reply: Reply | None = None

    def __repr__(self) -> str:
        return f"<CacheStore {self.kind} items={len(self.items)}>"


@dataclass(slots=True, frozen=True)
class Consumers:
    """A notification subscriber came (``methods``: its filter, None for every method) or
    went (``add=False``): the connection listens for what subscribers want
    (docs/connection.md, "Listens and resource subscriptions")."""

    key: Any
    methods: frozenset[str] | None
    add: bool


@dataclass(slots=True, frozen=True)
class WatchTask:
    """A task the caller side polls (``push``: the callable that takes its
    ``notifications/tasks`` params, a hand-off to the I/O loop) or no longer polls
    (``push=None``): the connection listens for its pushed status (docs/tasks.md)."""

    task_id: str
    push: Any

    def __repr__(self) -> str:
        return f"<WatchTask {'on' if self.push is not None else 'off'}>"  # never the id


@dataclass(slots=True, frozen=True)
class SetAuth:
    """``Client.set_auth``: send these credentials from now on (``spec`` is the transport spec
    with them). Its repr never shows them."""

    spec: Any
    reply: Reply | None = None

    def __repr__(self) -> str:
        return "<SetAuth>"


COALESCE = "coalesce"
REFRESH = "refresh"


# -- the handler actor's messages (docs/connection.md, "Server-to-client requests") -------------


@dataclass(slots=True, frozen=True)
class ServeContext:
    """What a handler method is told about one server request, besides its params: safe to
    show (no params, no answers). ``request_id`` is the server's JSON-RPC id (legacy) or the
    ``inputRequests`` key (modern); ``related_method``/``related_id`` name the client's call
    it belongs to, when known (the id is the call's first JSON-RPC id)."""

    era: str
    request_id: Any
    related_method: str | None = None
    related_id: Any = None


@dataclass(slots=True, frozen=True)
class Serve:
    """Connection -> handler: run the handler method for one server request (legacy) or one
    ``inputRequests`` entry (modern). ``key`` is the connection's and comes back in
    :class:`Served`. Its repr never shows ``params`` (a user's data)."""

    key: Any
    method: str  # "sampling/createMessage" | "elicitation/create" | "roots/list"
    params: dict[str, Any] | None
    context: ServeContext

    def __repr__(self) -> str:
        return f"<Serve {self.method} key={self.key!r}>"


@dataclass(slots=True, frozen=True)
class ServeError:
    """Why a handler method produced no result: ``code`` is the JSON-RPC error the server is
    answered with (legacy), ``reason`` the ``Error`` reason a modern call fails with, and
    ``message`` safe text (never the params, the answer, or an exception's own text)."""

    code: int
    message: str
    reason: (
        str  # "declined" | "busy" | "timeout" | "raised" | "bad_result" | "no_method" | "bad_mode"
    )


@dataclass(slots=True, frozen=True)
class Served:
    """Handler -> connection: the JSON result of a :class:`Serve` (``error`` None), or why
    there is none. Its repr never shows ``result``."""

    key: Any
    result: dict[str, Any] | None
    error: ServeError | None = None

    def __repr__(self) -> str:
        return f"<Served key={self.key!r} ok={self.error is None}>"


@dataclass(slots=True, frozen=True)
class Unserve:
    """Connection -> handler: the server cancelled (or the connection lost) the request of
    ``key``: stop its work; no :class:`Served` is expected (one that comes is dropped)."""

    key: Any


@dataclass(slots=True, frozen=True)
class HandlerNotification:
    """Connection -> handler: a server notification for ``handle_notification`` (or
    ``handle_log`` for ``notifications/message``), run in arrival order."""

    method: str
    params: dict[str, Any] | None

    def __repr__(self) -> str:
        return f"<HandlerNotification {self.method}>"


@dataclass(slots=True, frozen=True)
class ServeExpired:
    """The connection's own bound on a :class:`Serve` (``handler_timeout`` and a margin): a
    handler that crashed or lost the message still gets its server an answer."""

    key: Any


@dataclass(slots=True, frozen=True)
class RoundRetry:
    """Timer: retry the modern call whose state-only round ``rid`` answered, after a
    backoff."""

    rid: Any


# -- the OAuth actor's messages (docs/connection.md, "Authorizing") ---------------------------


@dataclass(slots=True, frozen=True)
class NeedToken:
    """Connection -> OAuth actor: the server refused token ``stale`` (its version; 0: none was
    sent) with ``status`` 401, or 403 ``insufficient_scope`` for ``operation`` (step-up).
    ``challenge`` is the Bearer challenge's parameters (``resource_metadata``, ``scope``,
    ``error``); ``seq`` comes back in the answer. Nothing here is a secret."""

    seq: int
    stale: int
    status: int
    challenge: dict[str, str]
    operation: str | None = None

    def __repr__(self) -> str:
        return f"<NeedToken seq={self.seq} status={self.status} stale={self.stale}>"


@dataclass(slots=True, frozen=True)
class TokenReady:
    """OAuth actor -> connection: a token newer than the refused one is published
    (``Published.token``); ``identity`` is its cache identity (never a secret)."""

    seq: int
    identity: str | None


@dataclass(slots=True, frozen=True)
class AwaitingUser:
    """OAuth actor -> connection: a person must authorize; the URL went to ``on_authorize``
    (never here: its ``state`` is a secret). Calls fail at once until :class:`TokenReady`."""

    seq: int


@dataclass(slots=True, frozen=True)
class AuthFailed:
    """OAuth actor -> connection: no token can be had (``error``, kind ``auth``). ``fatal``:
    the client closes (discovery or registration failed, a refused grant); otherwise only
    the refused call fails (a step-up over its limit) and the others are sent again."""

    seq: int
    error: Error
    fatal: bool = True

    def __repr__(self) -> str:
        return f"<AuthFailed seq={self.seq} {self.error.kind}/{self.error.reason}>"


@dataclass(slots=True, frozen=True)
class OAuthBack:
    """OAuth actor -> connection, from every incarnation's start: a crashed one lost what it
    was asked; an authorizing connection asks again."""

    restarted: bool
