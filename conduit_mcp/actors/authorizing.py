"""The connection's ``authorizing`` state (docs/connection.md, "Authorizing"): OAuth only.

A 401 in the handshake or in ``ready`` (and a 403 ``insufficient_scope``: a step-up) enters
it when the transport spec carries an ``OAuth``. The connection never talks to an
authorization server itself: it tells the OAuth actor (``actors/oauth.py``) a
:class:`~.events.NeedToken` naming the token version the server refused, and waits, never
blocking, for its answer:

* :class:`~.events.TokenReady`: a newer token is published (``Published.token``, stamped by
  the transport on every request): back to ``ready`` (the refused requests are sent again,
  then the ones that waited) or to the handshake state the 401 interrupted;
* :class:`~.events.AwaitingUser`: a person must authorize (the URL went to the application's
  ``on_authorize``). The client never waits for a human: every request fails at once with
  ``auth``/``authorization_required`` until the OAuth actor has a token (``Client.authorize``
  or the loopback listener); ``await_ready`` waits, bounded by its timeout;
* :class:`~.events.AuthFailed`: no token can be had: the client closes with kind ``auth``
  (or, for a step-up over its limit, only the refused request fails).

Requests that arrive meanwhile wait (postponed, bounded by their deadlines and counted
against ``max_queued``), as before ``ready``. A request refused for a token that has been
replaced since is simply sent again, without asking for another one: a burst of 401s for one
expired token makes one refresh. A request is sent again at most :data:`MAX_AUTH_RESENDS`
times for its token; past that its caller gets the server's refusal.

A mixin of :class:`~conduit_mcp.actors.connection.Connection`, like :mod:`.handshake` and
:mod:`.http_outcomes`.
"""

from __future__ import annotations

import logging
from typing import Any, ClassVar

from ..errors import Error
from ..otp.statem import NextEvent, StateTimeout, Step
from ..transports.base import RequestFailed, TransportDown
from .core import ConnectionCore, Handlers
from .events import (
    STATE_TIMEOUT,
    AuthFailed,
    AwaitingUser,
    AwaitReady,
    Call,
    NeedToken,
    OAuthBack,
    TokenReady,
    transport_error,
)

log = logging.getLogger("conduit_mcp.connection")

#: How many times one request is sent again after a 401 or a step-up before its caller gets
#: the refusal: a server that refuses every new token must not loop.
MAX_AUTH_RESENDS = 2

#: How many step-ups (403 ``insufficient_scope``) one request gets before it fails
#: ``step_up_limit``: with the first authorization, at most three per request. The OAuth
#: actor also allows this many per resource and operation (``oauth.STEP_UP_LIMIT``).
MAX_STEP_UPS = 2

#: ``_auth_refused`` returns this for a refusal that is not OAuth's to handle.
NOT_MINE: Any = object()


def authorization_required() -> Error:
    """What a request gets while a person must authorize (never the URL: its ``state`` is a
    secret, and it went to ``on_authorize``)."""
    return Error(
        "auth",
        "authorization_required",
        "the server needs a person to authorize this client: the authorization URL was given "
        "to OAuth(on_authorize=...); open it, then pass the redirect URL to "
        "client.authorize(...) (or let OAuth(loopback=True) receive it), and call again",
    )


def step_up_limit(operation: str, refusal: Error) -> Error:
    """A request the server still refuses for its scope after every step-up it got."""
    return Error(
        "auth",
        "step_up_limit",
        f"{operation}: the server still asks for more scope after {MAX_STEP_UPS} step-ups; "
        "the scopes granted to this client do not allow it",
        data=refusal.data,
    )


def bearer_challenge(data: Any) -> dict[str, str]:
    """The parameters of the Bearer challenge in a refusal's ``data``; without one, the
    DPoP challenge's (RFC 9449 section 7.1), marked ``scheme="dpop"`` (the resource wants
    DPoP-bound tokens); empty if neither."""
    challenges = data.get("challenges") if type(data) is dict else None
    found: dict[str, str] | None = None
    for challenge in challenges or ():
        scheme = getattr(challenge, "scheme", None)
        params = getattr(challenge, "params", None)
        if scheme in ("bearer", "dpop") and type(params) is dict:
            kept = {k: v for k, v in params.items() if type(v) is str}
            if scheme == "bearer":
                kept.pop("scheme", None)  # the marker is ours, never a server's
                return kept
            if found is None:
                found = {**kept, "scheme": "dpop"}
    return found or {}


def _operation(call: Call) -> str:
    """Names what a step-up was for (its retry limit is per resource and operation)."""
    params = call.params if type(call.params) is dict else {}
    name = params.get("name") or params.get("uri")
    return f"{call.method} {name}" if type(name) is str else call.method


class AuthorizingStates(ConnectionCore):
    """``authorizing`` (see the module docstring)."""

    # -- entering ------------------------------------------------------------------------------

    def _auth_refused(self, ev: RequestFailed) -> Any:
        """A request refused with 401 (or 403 ``insufficient_scope``) under OAuth: sent again
        once a token exists. :data:`NOT_MINE` for any other refusal."""
        data = ev.error.data if type(ev.error.data) is dict else {}
        status: int = data.get("status", 0)
        challenge = bearer_challenge(data)
        step_up = status == 403 and challenge.get("error") == "insufficient_scope"
        if not self._oauth or not (status == 401 or step_up):
            return NOT_MINE
        call = self._pending.pop(ev.rid, None)
        if call is None:
            if type(ev.rid) is str and status == 401:
                return self._listen_refused(data, challenge)
            self._tel.dropped()
            return None
        self.set_timeout(call, None, None)
        if step_up and call.step_ups >= MAX_STEP_UPS:
            call.reply.fail(step_up_limit(_operation(call), ev.error))
            return None
        if not step_up and call.auth_tries >= MAX_AUTH_RESENDS:
            call.reply.fail(ev.error)
            return None
        stale = data.get("token", 0)
        # Refused an older token (the current one may do), or a token is being asked for
        # already, or the handshake runs: sent again once there is one. A step-up is counted
        # only when this request asks for one (below).
        asks = self.state == "ready" and stale >= self._shared.token.version
        retry = call.resend(step_up) if asks or not step_up else call.again()
        retry.retried = call.retried
        call.reply.request_id = None
        again = NextEvent(retry, kind="cast")
        if not asks:
            return Step(None, [again])
        self._pause_ready()
        self._ask_token(status, challenge, stale, _operation(call) if step_up else None)
        if step_up:
            self._auth_call = retry
        self._auth_resume = "ready"
        return Step("authorizing", [again])

    def _listen_refused(self, data: dict[str, Any], challenge: dict[str, str]) -> Any:
        """A listen stream refused its token (the listen actor reopens it after its backoff):
        in ``ready``, with no newer token, authorize as for a request, with no request to
        send again."""
        stale = data.get("token", 0)
        if self.state != "ready" or stale < self._shared.token.version:
            return None
        self._pause_ready()
        self._ask_token(401, challenge, stale, None)
        self._auth_resume = "ready"
        return "authorizing"

    def _handshake_refused(self, ev: RequestFailed) -> Any:
        """The handshake's own request refused under OAuth: authorize, then run that
        handshake state again. None for a refusal OAuth cannot answer."""
        data = ev.error.data if type(ev.error.data) is dict else {}
        status: int = data.get("status", 0)
        challenge = bearer_challenge(data)
        step_up = status == 403 and challenge.get("error") == "insufficient_scope"
        if not self._oauth or not (status == 401 or step_up):
            return None
        stale = data.get("token", 0)
        if not step_up and stale > 0 and stale >= self._shared.token.version:
            # The current token refused: a fresh one is asked for at most MAX_AUTH_RESENDS
            # times per attempt, then the normal backoff (a server that refuses every token
            # must not make the client loop on the token endpoint).
            gen, count = self._auth_refusals
            count = count + 1 if gen == self._gen else 1
            self._auth_refusals = (self._gen, count)
            if count > MAX_AUTH_RESENDS:
                return self._every_token_refused(ev.error, count)
        # A step-up of the handshake itself is limited like any operation's (the OAuth actor
        # counts them per resource and operation).
        operation = (
            ("initialize" if self.state == "initializing" else "server/discover")
            if step_up
            else None
        )
        self._ask_token(status, challenge, stale, operation)
        self._auth_resume = self.state
        return "authorizing"

    def _every_token_refused(self, refusal: Error, count: int) -> Any:
        """The handshake refused ``count`` current tokens in a row: back off and reconnect
        (``unauthorized``), and fail the waiting requests with why, at once."""
        log.warning("the server refused %d fresh tokens for its handshake; backing off", count)
        error = Error(
            "auth",
            "unauthorized",
            f"the server refused the handshake with {count} fresh tokens in a row; the client "
            "backs off and tries again (max_reconnects): check that the authorization server "
            "issues tokens this server accepts (their resource, audience and scopes)",
            data=refusal.data,
        )
        self._drop_transport()
        self._fail_waiting(error)
        return self._lost("unauthorized", f"{count} fresh tokens refused")

    def _fail_waiting(self, error: Error) -> None:
        """Fail the requests and ``await_ready`` waiters that wait for ``ready`` (and any in
        flight) with ``error``: an attempt ended for a reason they must hear now, not at
        their deadlines."""
        self._fail_pending(error)
        for item in self.remove_postponed(lambda e: type(e) in (Call, AwaitReady)):
            self._queued_done(item)
            if not item.reply.done:
                item.reply.fail(error)

    def _ask_token(
        self, status: int, challenge: dict[str, str], stale: int, operation: str | None
    ) -> None:
        self._auth_seq += 1
        ask = NeedToken(self._auth_seq, stale, status, challenge, operation)
        self._auth_ask = ask
        self._auth_user = False
        if not self._siblings.tell("oauth", ask):
            log.warning("no OAuth actor to ask for a token")

    def _pause_ready(self) -> None:
        """Leaving ready for authorizing: the transport, its listens and the cache stay; only
        ready's own timers stop."""
        self._stop_ready_timers()

    # -- authorizing ---------------------------------------------------------------------------

    def enter_authorizing(self, old: str) -> list[Any]:
        self._publish("authorizing", None)
        # The OAuth actor bounds each of its requests; this bounds the whole (a lost answer,
        # a stuck actor). Not while a person acts: that has no bound here.
        return [StateTimeout(4 * self._cfg.request_timeout, STATE_TIMEOUT)]

    def on_authorizing(self, kind: str, ev: Any) -> Any:
        handler = self._IN_AUTHORIZING.get(type(ev))
        return self._common(kind, ev) if handler is None else handler(self, kind, ev)

    def _authorizing_call(self, kind: str, ev: Call) -> Any:
        if self._auth_user:
            if ev.queued:
                self._queued_done(ev)
            if not ev.reply.done:
                ev.reply.fail(authorization_required())
            return None
        return self._postpone(kind, ev)

    def _authorizing_token(self, kind: str, ev: TokenReady) -> Any:
        self._token_identity(ev)
        if ev.seq != self._auth_seq:
            return None  # an answer to an older ask
        self._auth_ask = None
        self._auth_user = False
        self._auth_call = None
        resume = self._auth_resume
        return resume if resume in ("discovering", "initializing") else "ready"

    def _authorizing_user(self, kind: str, ev: AwaitingUser) -> Any:
        if ev.seq != self._auth_seq:
            return None
        self._auth_user = True
        self._publish("authorizing", "authorization_required")
        error = authorization_required()
        for item in self.remove_postponed(lambda e: type(e) is Call):
            self._queued_done(item)
            if not item.reply.done:
                item.reply.fail(error)
        return Step(None, [StateTimeout(None)])

    def _authorizing_failed(self, kind: str, ev: AuthFailed) -> Any:
        if ev.seq != self._auth_seq:
            return None
        self._auth_ask = None
        call, self._auth_call = self._auth_call, None
        if not ev.fatal and self._auth_resume == "ready":
            # Only the refused request fails (a step-up past its limit); the others go on.
            # (In the handshake nothing can go on without it: that closes, below.)
            if call is not None:
                for item in self.remove_postponed(lambda e: e is call):
                    self._queued_done(item)
                call.reply.fail(ev.error)
            self._auth_user = False
            resume = self._auth_resume
            return resume if resume in ("discovering", "initializing") else "ready"
        data = ev.error.data
        if isinstance(data, dict) and data.get("unreachable"):
            # The authorization server could not be reached: no refusal, so back off and
            # try again (bounded by max_reconnects), as for a server that is down; the
            # waiting requests hear why now, not at their deadlines.
            log.warning("OAuth: the authorization server is unreachable; reconnecting")
            self._auth_user = False
            self._fail_waiting(ev.error)
            where, detail = data.get("origin"), data.get("detail")
            return self._lost("oauth_unreachable", f"{where}: {detail}" if where else detail)
        log.warning("OAuth failed (%s); closing", ev.error.reason)
        self._auth_error = ev.error
        return self._closed("auth_failed")

    def _authorizing_back(self, kind: str, ev: OAuthBack) -> None:
        ask = self._auth_ask
        if ask is not None:
            self._siblings.tell("oauth", ask)  # a restarted OAuth actor lost the ask

    def _authorizing_down(self, kind: str, ev: TransportDown) -> Any:
        if ev.gen != self._gen:
            return None
        self._auth_ask = None
        self._fail_pending(transport_error(ev.reason, ev.detail))
        return self._lost(ev.reason, ev.detail)

    def _authorizing_named(self, kind: str, ev: str) -> Any:
        if kind == "state_timeout":
            log.warning("no OAuth token within %ss; reconnecting", 4 * self._cfg.request_timeout)
            self._auth_ask = None
            self._drop_transport()
            return self._lost("auth_timeout")
        return self._common(kind, ev)

    def _authorizing_await(self, kind: str, ev: AwaitReady) -> Any:
        return self._postpone(kind, ev)

    # -- in any state ----------------------------------------------------------------------------

    def _token_identity(self, ev: TokenReady) -> None:
        """A token's cache identity: the same principal keeps the private lists, another
        deletes them (docs/cache.md, "Private results")."""
        self._changes.set_identity(ev.identity)

    def _common_token(self, kind: str, ev: TokenReady) -> None:
        self._token_identity(ev)

    _IN_AUTHORIZING: ClassVar[Handlers] = {
        Call: _authorizing_call,
        AwaitReady: _authorizing_await,
        TokenReady: _authorizing_token,
        AwaitingUser: _authorizing_user,
        AuthFailed: _authorizing_failed,
        OAuthBack: _authorizing_back,
        TransportDown: _authorizing_down,
        str: _authorizing_named,
    }


__all__ = [
    "MAX_AUTH_RESENDS",
    "MAX_STEP_UPS",
    "AuthorizingStates",
    "authorization_required",
    "bearer_challenge",
]
