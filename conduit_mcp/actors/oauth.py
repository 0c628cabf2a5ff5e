"""The OAuth actor: finds or renews the client's access token (docs/actor-tree.md, "The OAuth
actor"; the connection's side: docs/connection.md, "Authorizing").

A permanent child of the client's supervisor (id ``"oauth"``), started with the client only
when the transport spec is ``Http(auth=OAuth(...))``. The connection tells it
:class:`~.events.NeedToken` when the server refused a token; it answers
:class:`~.events.TokenReady` (a newer token is published in ``Published.token``, which the
transport stamps on every request), :class:`~.events.AwaitingUser` (a person must authorize)
or :class:`~.events.AuthFailed`. Where a token comes from, in order:

1. the token already published, if it is newer than the refused one (one refresh for a
   burst of 401s);
2. the store (``OAuth(store=...)``), read again every time: another client of the same
   principal, or this process before a restart, may have a newer token;
3. a refresh, when a refresh token is held: on a 401 before any full authorization, and
   ahead of expiry (scheduled on the I/O loop);
4. the ``client_credentials`` grant (machine-to-machine: no person);
5. a person's authorization: the URL goes to ``on_authorize`` (user code: run on a worker
   thread, bounded, never on this actor or the loop), and the code comes back through
   ``Client.authorize(redirect_url)`` (paste-back) or the loopback listener on 127.0.0.1 (an
   aiohttp site on the I/O loop, closed after one good redirect or
   :data:`LOOPBACK_TIMEOUT`).

It never blocks its thread: every HTTP step (discovery, registration, a token request) is a
coroutine on the client's I/O loop whose outcome comes back as a message. The store is read
and written here, on the actor's thread (it may be a file). Refreshes are single-flight per
principal, issuer, resource and store in the process: a second asker shares the running
refresh, and the store is read again before each, so a rotating refresh token is never spent
twice; no lock is held while a request is in flight. A refused refresh (revoked, rotated
away) deletes the tokens: a person is asked again, or the ``client_credentials`` grant runs
again.

Step-up: a 403 ``insufficient_scope`` re-authorizes with the union of the scopes held and
challenged, at most :data:`STEP_UP_LIMIT` times per resource and operation; past that the
refused request fails ``auth``/``step_up_limit`` and nothing else does.

Secrets (tokens, the code, the PKCE verifier, ``state``, the client secret, assertions) never
appear in a repr, a log record, an exception text or a crash report: the library's records
hide them in their reprs, this actor's messages show only their kind, and failures are logged
by reason and exception class only.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import aiohttp
import pykka

from ..config import Config
from ..errors import Error
from ..oauth._http import is_unreachable
from ..oauth.records import identity as identity_of
from ..otp.base import Link, SafeActor, safe_tell
from ..otp.registry import Registry
from ..otp.supervisor import ChildSpec, child_spec_for
from ..published import Published
from ..replies import Reply
from ..transports import loop as io_loop
from ..transports.http_spec import Http
from ..transports.http_token import TokenSnapshot
from ..transports.http_wire import _pool
from .events import AuthFailed, AwaitingUser, NeedToken, OAuthBack, TokenReady

if TYPE_CHECKING:
    from ..oauth.discovery import Discovered
    from ..oauth.flow import Pending
    from ..oauth.records import ClientCredentials, TokenSet

log = logging.getLogger("conduit_mcp.oauth")

#: How many step-ups one resource and operation gets before its request fails.
STEP_UP_LIMIT = 2
#: How long the loopback listener waits for the browser's redirect (seconds).
LOOPBACK_TIMEOUT = 300.0
#: How long ``on_authorize`` (user code) may take before it is left to itself (seconds).
ON_AUTHORIZE_TIMEOUT = 10.0

__all__ = ["Authorize", "OAuthActor", "child_spec"]


class Authorize:
    """``Client.authorize``: the redirect URL a person's browser was sent to. ``reply`` is
    answered once tokens exist (or with the error). Its repr never shows the URL (its
    ``code`` and ``state`` are secrets)."""

    __slots__ = ("redirect_url", "reply")

    def __init__(self, redirect_url: str, reply: Reply) -> None:
        self.redirect_url = redirect_url
        self.reply = reply

    def __repr__(self) -> str:
        return "<Authorize>"


class _Done:
    """A step on the I/O loop finished: ``op`` numbers it (a later one supersedes it)."""

    __slots__ = ("op", "step", "future")

    def __init__(self, op: int, step: str, future: Future[Any]) -> None:
        self.op = op
        self.step = step
        self.future = future

    def __repr__(self) -> str:
        return f"<_Done {self.step} op={self.op}>"


class _Redirect:
    """The loopback listener received a redirect (its URL is a secret)."""

    __slots__ = ("url", "listener")

    def __init__(self, url: str, listener: int) -> None:
        self.url = url
        self.listener = listener

    def __repr__(self) -> str:
        return "<_Redirect>"


class _RefreshDue:
    """Timer: the token is close to its expiry; ``gen`` names the token it was set for."""

    __slots__ = ("gen",)

    def __init__(self, gen: int) -> None:
        self.gen = gen


class _ListenerTimeout:
    __slots__ = ("listener",)

    def __init__(self, listener: int) -> None:
        self.listener = listener


# -- single-flight refreshes, on the I/O loop ----------------------------------------------------

_flights: dict[Any, asyncio.Future[Any]] = {}
# The last refresh of each principal, issuer, resource and store: (the refresh token it
# spent, what it got). A client that read the store just before another one's refresh
# landed asks to spend that token again: it gets the outcome instead.
_spent: dict[Any, tuple[str, Any]] = {}


async def single_flight(key: Any, spend: str, make: Callable[[], Awaitable[Any]]) -> Any:
    """Spend the refresh token ``spend`` with ``make()`` once: a second asker while it runs
    shares the running refresh, and one after it gets the same outcome, so a rotating
    refresh token is never spent twice in this process. Only the I/O loop touches
    ``_flights`` and ``_spent``: no lock, and nothing held while the request is in flight."""
    done = _spent.get(key)
    if done is not None and done[0] == spend:
        return done[1]
    running = _flights.get(key)
    if running is not None:
        return await asyncio.shield(running)
    fut: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    _flights[key] = fut
    try:
        result = await make()
    except BaseException as exc:
        fut.set_exception(exc if isinstance(exc, Exception) else asyncio.CancelledError())
        fut.exception()  # retrieved: asyncio never warns about it
        raise
    finally:
        if _flights.get(key) is fut:
            del _flights[key]
    _spent[key] = (spend, result)
    fut.set_result(result)
    return result


def _as_auth_error(exc: BaseException, reason: str) -> Error:
    """A step's failure as ``Error("auth", ...)``: the library's own errors as they are, any
    other exception by its class only (its text may quote a URL or a body)."""
    if isinstance(exc, Error):
        return exc
    if isinstance(exc, (asyncio.TimeoutError, TimeoutError)):
        return Error("auth", reason, "the authorization server did not answer in time")
    return Error(
        "auth", reason, f"talking to the authorization server failed ({type(exc).__name__})"
    )


def _unreachable(error: Error) -> Error:
    """``auth``/``oauth_unreachable``: which authorization server, what the last attempt
    met, and what happens now (docs/connection.md, "Authorizing")."""
    data = error.data if isinstance(error.data, dict) else {}
    where = data.get("origin") or "(unknown)"
    detail = data.get("detail") or error.reason
    return Error(
        "auth",
        "oauth_unreachable",
        f"the authorization server {where} cannot be reached ({detail}); the client keeps "
        "trying with backoff (max_reconnects): check that it is running and reachable from "
        "here",
        data=data,
    )


class OAuthActor(SafeActor):
    """See the module docstring."""

    def __init__(
        self,
        client_name: str,
        registry: Registry,
        shared: Published,
        spec: Http,
        config: Config,
        *,
        link: Link | None = None,
    ) -> None:
        super().__init__(link=link)
        from ..oauth import config as oauth_config  # the oauth extra, only with OAuth

        assert isinstance(spec.auth, oauth_config.OAuth)
        self._name = client_name
        self._registry = registry
        self._shared = shared
        self._oauth = spec.auth
        store = spec.auth.store
        assert store is not None  # OAuth gives a MemoryTokenStore when none is given
        self._store = store
        self._url = spec.url
        self._timeout = config.request_timeout
        self._seq = -1  # the latest ask's seq
        self._asked = False  # the connection waits for an answer to it
        self._challenge: dict[str, str] = {}
        self._operation: str | None = None
        self._refused = False  # the ask being answered refused the token held
        self._step_ups: dict[str, int] = {}
        self._op = 0
        self._busy: str | None = None
        self._then: str | None = None  # what a registration step is for
        self._discovered: Discovered | None = None
        self._client: ClientCredentials | None = None
        self._tokens: TokenSet | None = None
        self._identity: str | None = None
        self._wanted: tuple[str, ...] = ()
        self._pending: Pending | None = None  # a person's authorization in progress
        self._reauthorized = False  # a refused exchange started a new one (once per token)
        self._waiters: list[Reply] = []  # Client.authorize calls waiting for the tokens
        self._refresh_gen = 0
        self._listener = 0  # the loopback listener's number (0: none)
        self._listener_port: int | None = None
        self._loop_state = _LoopState(spec.tls)  # touched on the I/O loop only
        self._replaced_client = False  # a forgotten registration was replaced (once)

    def __repr__(self) -> str:
        return f"<OAuthActor {self._name!r} busy={self._busy} waiting_user={self._pending is not None}>"

    # -- life ----------------------------------------------------------------------------------

    def init(self) -> None:
        # A restarted incarnation lost what it was asked: an authorizing connection asks again.
        restarted = self._shared.token.current is not None
        self._tell_connection(OAuthBack(restarted))

    def terminate(self, reason: BaseException | None) -> None:
        for reply in self._waiters:
            reply.fail(Error("unavailable", "oauth_stopped", "the OAuth actor stopped"))
        self._waiters = []
        state = self._loop_state
        try:
            io_loop.submit(state.close())
        except RuntimeError:  # the loop is gone (interpreter exit)
            pass

    # -- messages ------------------------------------------------------------------------------

    def receive(self, message: Any) -> Any:
        t = type(message)
        if t is _Done:
            if message.op == self._op:
                self._busy = None
                self._on_done(message.step, message.future)
            return None
        if t is NeedToken:
            self._on_need(message)
            return None
        if t is Authorize:
            self._on_authorize(message.redirect_url, message.reply)
            return None
        if t is _Redirect:
            if message.listener == self._listener:
                self._on_authorize(message.url, None)
            return None
        if t is _RefreshDue:
            if (
                message.gen == self._refresh_gen
                and self._busy is None
                and self._tokens is not None
                and self._discovered is not None
            ):
                self._renew()
            return None
        if t is _ListenerTimeout:
            self._listener_timed_out(message.listener)
            return None
        return super().receive(message)

    def _on_need(self, ask: NeedToken) -> None:
        self._seq = ask.seq
        self._asked = True
        if ask.challenge:
            self._challenge = dict(ask.challenge)
        if ask.operation is not None:
            self._step_up(ask.operation)
            return
        cell = self._shared.token
        if cell.version > ask.stale:
            self._answer(TokenReady(ask.seq, self._identity))
            return
        if self._busy is not None:
            return  # answered when the running step is done
        if self._pending is not None:
            self._answer(AwaitingUser(ask.seq))
            return
        if ask.stale > 0:
            # A token refused: the server may have moved to another authorization server
            # (two GETs to find out; a new issuer means a new registration and new tokens).
            self._discovered = None
        self._refused = ask.stale > 0
        self._obtain(refused=self._refused)

    def _step_up(self, operation: str) -> None:
        resource = self._discovered.resource if self._discovered is not None else self._url
        key = f"{resource} {operation}"
        count = self._step_ups.get(key, 0) + 1
        if count > STEP_UP_LIMIT:
            self._answer(
                AuthFailed(
                    self._seq,
                    Error(
                        "auth",
                        "step_up_limit",
                        f"{operation}: the server asked for more scope {STEP_UP_LIMIT} times "
                        "and still refuses; the granted scopes do not allow it",
                    ),
                    fatal=False,
                )
            )
            return
        self._step_ups[key] = count
        self._operation = operation
        self._full(step_up=True)

    # -- finding a token -------------------------------------------------------------------------

    def _obtain(self, *, refused: bool) -> None:
        """A token: discovered first, then the store, a refresh, or a full authorization."""
        if self._discovered is None:
            self._discover()
            return
        from ..oauth.store import load_tokens

        d = self._discovered
        try:
            stored = load_tokens(self._store, self._oauth.principal, d.issuer, d.resource)
        except Exception as exc:
            log.warning("the OAuth token store failed (%s)", type(exc).__name__)
            stored = None
        held = self._tokens
        now = time.time()
        refused_token = held.access_token if held is not None and refused else None
        if (
            stored is not None
            and stored.access_token != refused_token
            and not stored.expired(now, 5.0)
        ):
            self._publish(stored, save=False)  # another client's, or from before a restart
            return
        tokens = stored or held
        if tokens is not None and tokens.refresh_token is not None:
            self._tokens = tokens
            self._with_client(None, "refresh")
            return
        self._full(step_up=False)

    def _renew(self) -> None:
        """Ahead of expiry: refresh, or ask for client credentials again."""
        if self._tokens is not None and self._tokens.refresh_token is not None:
            self._with_client(None, "refresh")
        elif self._oauth.grant == "client_credentials":
            self._with_client(None, "credentials")

    def _full(self, *, step_up: bool) -> None:
        """No refresh possible: the client_credentials grant, or a person."""
        d = self._discovered
        if d is None:
            self._discover()
            return
        from ..oauth.flow import select_scopes

        challenged = tuple(self._challenge.get("scope", "").split())
        held = self._tokens.scope if (step_up and self._tokens is not None) else ()
        self._wanted = select_scopes(
            configured=self._oauth.scopes,
            challenged=challenged,
            resource_scopes=d.resource_scopes,
            held=held,
            server_scopes=d.server_scopes,
            offline=self._oauth.grant == "authorization_code",
        )
        if self._oauth.grant == "client_credentials":
            self._with_client(None, "credentials")
            return
        oauth = self._oauth
        if oauth.on_authorize is None and not oauth.loopback:
            self._fail(
                Error(
                    "auth",
                    "authorization_required",
                    "the server needs a person to authorize this client, and nothing can show "
                    "them the URL: give OAuth(on_authorize=...) or OAuth(loopback=True)",
                )
            )
            return
        if oauth.loopback and self._listener_port is None:
            self._listener += 1
            listener, reuse = self._listener, self._kept_port(d.issuer)
            self._run("listener", lambda _session: self._start_listener(listener, reuse))
            return
        self._with_client(self._redirect_uri(), "authorize")

    def _kept_port(self, issuer: str) -> int | None:
        """The loopback port of the registration held or stored for ``issuer``: listening
        there again keeps its redirect URI, so a desktop login does not register anew each
        time (``redirect_uri`` with ``loopback=True`` pins the port instead)."""
        if self._oauth.redirect_uri is not None:
            return None
        client = self._client
        if client is None or client.issuer != issuer:
            from ..oauth.store import load_client

            try:
                client = load_client(self._store, issuer)
            except Exception as exc:
                log.warning("the OAuth token store failed (%s)", type(exc).__name__)
                client = None
        return client.loopback_port() if client is not None else None

    def _redirect_uri(self) -> str:
        uri = self._oauth.redirect_uri
        if uri is not None:
            return str(uri)
        return f"http://127.0.0.1:{self._listener_port}/callback"

    def _with_client(self, redirect_uri: str | None, then: str) -> None:
        """Register (or reuse the registration) at the issuer, then ``then``."""
        issuer = self._found().issuer
        client = self._client
        if client is not None and client.usable(issuer, redirect_uri, time.time()):
            self._next(then)
            return
        from ..oauth.issuers import bind_issuer
        from ..oauth.store import load_client

        try:
            bind_issuer(self._store, self._oauth, issuer)  # issuer_changed: nothing is sent
        except Error as exc:
            self._fail(exc)
            return

        try:
            known = load_client(self._store, issuer)
        except Exception as exc:
            log.warning("the OAuth token store failed (%s)", type(exc).__name__)
            known = None
        self._then = then
        self._register(known, redirect_uri)

    def _next(self, then: str) -> None:
        if then == "refresh":
            self._refresh()
        elif then == "credentials":
            self._credentials()
        else:
            self._begin_authorization()

    def _begin_authorization(self) -> None:
        from ..oauth.flow import begin_authorization

        try:
            pending = begin_authorization(
                self._found(), self._registered(), self._redirect_uri(), self._wanted
            )
        except Error as exc:
            self._fail(exc)
            return
        self._pending = pending
        on_authorize = self._oauth.on_authorize
        if on_authorize is not None:
            io_loop.submit(_call_user(on_authorize, pending.url))
        log.info("a person must authorize this client; the URL went to on_authorize")
        if self._asked:
            self._answer(AwaitingUser(self._seq))

    def _on_authorize(self, redirect_url: str, reply: Reply | None) -> None:
        """A redirect, pasted back (``reply``) or received by the loopback listener."""
        pending = self._pending
        if pending is None:
            if reply is not None:
                reply.fail(
                    Error(
                        "argument",
                        "no_authorization",
                        "no authorization is waiting for a redirect (the client has a token, "
                        "or has not been refused one yet)",
                    )
                )
            return
        from ..oauth.flow import finish_authorization

        try:
            code = finish_authorization(pending, redirect_url)
        except Error as exc:
            if reply is not None:
                reply.fail(exc)
            if exc.kind == "auth" and _same_state(pending.state, redirect_url):
                # The authorization's own answer, refused (a wrong or missing iss, the
                # person said no): no later redirect can come for it.
                self._pending = None
                self._close_listener()
                self._fail(exc)
            # Otherwise a forged or stale redirect: the real one may still come.
            return
        self._pending = None
        self._close_listener()
        if reply is not None:
            self._waiters.append(reply)
        self._exchange(pending, code)

    def _listener_timed_out(self, listener: int) -> None:
        if listener != self._listener or self._pending is None:
            return
        self._pending = None
        self._close_listener()
        self._fail(
            Error(
                "auth",
                "authorization_required",
                f"nobody completed the authorization within {LOOPBACK_TIMEOUT:.0f} s; "
                "client.reconnect() starts it again",
            )
        )

    # -- the steps' outcomes -----------------------------------------------------------------------

    def _on_done(self, step: str, future: Future[Any]) -> None:
        exc = future.exception()
        if exc is not None:
            self._step_failed(step, exc)
            return
        value = future.result()
        if step == "discover":
            identity = identity_of(self._oauth.principal, value.issuer, value.resource)
            if self._identity is not None and identity != self._identity:
                # Another authorization server (or resource): nothing of the old one is used
                # there, neither the registration nor the tokens.
                log.info("the server's authorization server changed; authorizing there")
                self._tokens = None
                self._client = None
            self._discovered = value
            self._identity = identity
            self._obtain(refused=self._refused)
        elif step == "register":
            self._client = value
            from ..oauth.store import save_client

            try:
                save_client(self._store, value)
            except Exception as store_exc:
                log.warning("the OAuth token store failed (%s)", type(store_exc).__name__)
            then, self._then = self._then, None
            self._next(then or "authorize")
        elif step == "listener":
            self._listener_port = value
            self._with_client(self._redirect_uri(), "authorize")
        else:  # refresh, credentials, exchange: tokens
            self._replaced_client = False
            self._publish(value, save=True)
            for reply in self._waiters:
                reply.ok(None)
            self._waiters = []

    def _step_failed(self, step: str, exc: BaseException) -> None:
        reasons = {
            "discover": "discovery_failed",
            "register": "registration_failed",
            "refresh": "refresh_failed",
        }
        if step == "listener":
            error = Error(
                "auth",
                "loopback_failed",
                f"the loopback redirect listener could not start on 127.0.0.1 "
                f"({type(exc).__name__}); free its port, or use redirect_uri and "
                "client.authorize(...)",
            )
        else:
            error = _as_auth_error(exc, reasons.get(step, "token_failed"))
        if is_unreachable(error.data):
            error = _unreachable(error)
        log.info("OAuth %s failed: %s", step, error.reason)
        if self._forgotten(step, error):
            return
        operation, self._operation = self._operation, None
        if operation is not None and step in ("credentials", "exchange"):
            # A step-up the authorization server refused (a scope it does not grant): only
            # the request that asked for it fails; the token held still serves the others.
            for reply in self._waiters:
                reply.fail(error)
            self._waiters = []
            self._answer(
                AuthFailed(
                    self._seq,
                    Error(
                        "auth",
                        "insufficient_scope",
                        f"{operation}: the server asks for more scope and the authorization "
                        f"server refused it ({error.reason})",
                    ),
                    fatal=False,
                )
            )
            return
        if step == "refresh":
            # Refused (revoked, rotated away, expired) or unreachable: never spent again.
            self._forget_tokens()
            if self._asked:
                self._full(step_up=False)
            return
        if step == "exchange" and self._asked and self._retry_authorization(error):
            for reply in self._waiters:
                reply.fail(error)
            self._waiters = []
            self._full(step_up=False)  # a new URL: the person may try again, once
            return
        self._fail(error)

    def _forgotten(self, step: str, error: Error) -> bool:
        """``invalid_client`` for a dynamic registration: the authorization server forgot
        it (a reset, an expiry). Delete it, and register again, once until tokens come
        (then authorize: a person, if the grant needs one); True when that is under way.
        Not for a code exchange: the person has just authorized with this very client at
        that server, so a refusal there is the server's word on the client, not a lapse of
        memory (it closes, with no second tab)."""
        client, data = self._client, error.data
        if (
            step not in ("refresh", "credentials")
            or client is None
            or client.registration != "dcr"
            or self._replaced_client
            or not (isinstance(data, dict) and data.get("oauth_error") == "invalid_client")
        ):
            return False
        log.info("the authorization server forgot this client's registration; registering again")
        self._replaced_client = True
        self._client = None
        from ..oauth.store import delete_client

        try:
            delete_client(self._store, client.issuer)
        except Exception as exc:
            log.warning("the OAuth token store failed (%s)", type(exc).__name__)
        if step == "refresh":
            self._forget_tokens()  # its refresh token was the forgotten client's
        for reply in self._waiters:
            reply.fail(error)
        self._waiters = []
        if self._asked:
            self._full(step_up=False)
        return True

    def _retry_authorization(self, error: Error) -> bool:
        """Whether a refused code exchange starts a new authorization by itself: only for a
        code the token endpoint calls ``invalid_grant`` (expired while the person took
        their time, or spent), and once until a token comes. Nothing else a person can fix
        (a client the server refuses, a broken answer): the client closes instead of
        handing ``on_authorize`` one URL after another."""
        data = error.data if isinstance(error.data, dict) else {}
        if self._reauthorized or data.get("oauth_error") != "invalid_grant":
            return False
        self._reauthorized = True
        return True

    def _forget_tokens(self) -> None:
        self._tokens = None
        d = self._discovered
        if d is None:
            return
        from ..oauth.store import delete_tokens

        try:
            delete_tokens(self._store, self._oauth.principal, d.issuer, d.resource)
        except Exception as exc:
            log.warning("the OAuth token store failed (%s)", type(exc).__name__)

    def _publish(self, tokens: TokenSet, *, save: bool) -> None:
        """Keep, store and publish ``tokens`` (a new version), tell the connection, and
        schedule the next refresh."""
        self._tokens = tokens
        self._reauthorized = False
        d = self._found()
        if save:
            from ..oauth.store import save_tokens

            try:
                save_tokens(self._store, self._oauth.principal, d.issuer, d.resource, tokens)
            except Exception as exc:
                log.warning("the OAuth token store failed (%s)", type(exc).__name__)
        cell = self._shared.token
        expires = tokens.expires_at
        cell.current = TokenSnapshot(
            tokens.authorization(),
            cell.version + 1,
            self._identity,
            None if expires is None else time.monotonic() + (expires - time.time()),
        )
        self._operation = None
        seq = self._seq if self._asked else -1
        self._answer(TokenReady(seq, self._identity))
        self._schedule_refresh(tokens)

    def _schedule_refresh(self, tokens: TokenSet) -> None:
        self._refresh_gen += 1
        # Never sooner than REFRESH_FLOOR: a token expired by then is renewed on a 401 only.
        delay = tokens.renewal_delay(time.time())
        if delay is None:
            return
        if tokens.refresh_token is None and self._oauth.grant != "client_credentials":
            return  # nothing to renew it with: a 401 asks a person
        ref, gen = self.actor_ref, self._refresh_gen
        loop = io_loop.io_loop()
        loop.call_soon_threadsafe(lambda: loop.call_later(delay, safe_tell, ref, _RefreshDue(gen)))

    def _fail(self, error: Error) -> None:
        for reply in self._waiters:
            reply.fail(error)
        self._waiters = []
        self._answer(AuthFailed(self._seq, error, fatal=True))

    def _answer(self, message: Any) -> None:
        # AwaitingUser is not the end: the connection waits on for the token or the failure.
        t = type(message)
        if t is AuthFailed or (t is TokenReady and message.seq >= 0):
            self._asked = False
        self._tell_connection(message)

    def _tell_connection(self, message: Any) -> None:
        conn = self._registry.get("connection")
        if conn is not None:
            try:
                conn.tell(message)
            except pykka.ActorDeadError:
                pass

    # -- running a step on the I/O loop ------------------------------------------------------------

    def _run(self, step: str, make: Callable[[aiohttp.ClientSession], Awaitable[Any]]) -> None:
        self._op += 1
        self._busy = step
        op, ref, state = self._op, self.actor_ref, self._loop_state
        bound = 4 * self._timeout

        async def run() -> Any:
            return await asyncio.wait_for(make(state.session()), bound)

        future = io_loop.submit(run())
        future.add_done_callback(lambda f: safe_tell(ref, _Done(op, step, f)))

    # Each step's inputs are taken here, on the actor's thread, and handed to the coroutine:
    # the I/O loop never reads the actor's changing state.

    def _discover(self) -> None:
        from ..oauth.challenge import Challenge
        from ..oauth.discovery import discover

        c = self._challenge
        challenge = Challenge(
            "bearer",
            resource_metadata=c.get("resource_metadata"),
            scope=c.get("scope"),
            error=c.get("error"),
        )
        url, timeout = self._url, self._timeout
        self._run("discover", lambda s: discover(s, url, challenge, timeout=timeout))

    def _register(self, known: ClientCredentials | None, redirect_uri: str | None) -> None:
        from ..oauth.registration import register

        d, oauth, timeout = self._found(), self._oauth, self._timeout
        self._run(
            "register",
            lambda s: register(s, d, oauth, known, redirect_uri=redirect_uri, timeout=timeout),
        )

    def _refresh(self) -> None:
        from ..oauth.tokens import refresh

        d, client, oauth, timeout = self._found(), self._registered(), self._oauth, self._timeout
        tokens = self._tokens
        if tokens is None or tokens.refresh_token is None:
            self._full(step_up=False)
            return
        key = (id(self._store), oauth.principal, d.issuer, d.resource)
        spend = tokens.refresh_token
        self._run(
            "refresh",
            lambda s: single_flight(
                key, spend, lambda: refresh(s, d, client, oauth, tokens, timeout=timeout)
            ),
        )

    def _credentials(self) -> None:
        from ..oauth.tokens import client_credentials

        d, client, oauth, timeout = self._found(), self._registered(), self._oauth, self._timeout
        wanted = self._wanted
        self._run(
            "credentials",
            lambda s: client_credentials(s, d, client, oauth, wanted, timeout=timeout),
        )

    def _exchange(self, pending: Pending, code: str) -> None:
        from ..oauth.tokens import exchange_code

        d, client, oauth, timeout = self._found(), self._registered(), self._oauth, self._timeout
        self._run(
            "exchange",
            lambda s: exchange_code(s, d, client, oauth, pending, code, timeout=timeout),
        )

    def _found(self) -> Discovered:
        d = self._discovered
        if d is None:  # every caller runs after discovery: a bug, and the actor restarts
            raise RuntimeError("OAuth step before discovery")
        return d

    def _registered(self) -> ClientCredentials:
        client = self._client
        if client is None:  # every caller runs after registration
            raise RuntimeError("OAuth step before registration")
        return client

    async def _start_listener(self, listener: int, reuse: int | None = None) -> int:
        """The loopback listener (I/O loop): ``redirect_uri``'s port and path, or ``reuse``
        (the kept registration's port) when it is free, else any port, and ``/callback``;
        only immutable fields of the actor are read here."""
        uri = self._oauth.redirect_uri
        parts = urlsplit(uri) if uri is not None else None
        port = parts.port if parts is not None and parts.port else 0
        path = parts.path if parts is not None and parts.path else "/callback"
        ref = self.actor_ref

        def got(url: str) -> None:
            safe_tell(ref, _Redirect(url, listener))

        bound: int | None = None
        if parts is None and reuse:
            try:
                bound = await self._loop_state.listen(reuse, path, got)
            except OSError:
                log.info("the kept loopback port is taken; listening on another one")
        if bound is None:
            bound = await self._loop_state.listen(port, path, got)
        loop = asyncio.get_running_loop()
        loop.call_later(LOOPBACK_TIMEOUT, safe_tell, ref, _ListenerTimeout(listener))
        return bound

    def _close_listener(self) -> None:
        self._listener_port = None
        self._listener += 1  # a late redirect of the old one is ignored
        io_loop.submit(self._loop_state.stop_listening())


class _LoopState:
    """What this actor keeps on the I/O loop: its HTTP session and the loopback listener.
    Touched on the loop only (no lock)."""

    __slots__ = ("_session", "_runner", "_tls")

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self._session: aiohttp.ClientSession | None = None
        self._runner: Any = None
        self._tls = tls  # Http(ssl=/verify=): it serves the authorization server too

    def session(self) -> aiohttp.ClientSession:
        session = self._session
        if session is None or session.closed:
            from ..oauth._http import connection_trace

            connector = aiohttp.TCPConnector(ssl=self._tls or True)
            session = self._session = aiohttp.ClientSession(
                connector=connector, trace_configs=[connection_trace()]
            )
        return session

    async def listen(self, port: int, path: str, got: Callable[[str], None]) -> int:
        """Serve ``path`` on 127.0.0.1:``port`` (0: any); each request's URL goes to
        ``got``. The bound port."""
        from aiohttp import web

        from ..oauth.pages import redirect_page

        await self.stop_listening()

        async def callback(request: web.Request) -> web.Response:
            got(str(request.url))
            status, text = redirect_page(request.query)  # says what happened, and what now
            return web.Response(status=status, text=text, content_type="text/plain")

        app = web.Application()
        app.router.add_get(path, callback)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", port)
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()  # a port in use: nothing is left behind
            raise
        self._runner = runner
        addresses = runner.addresses  # (host, port) of each bound socket
        return int(addresses[0][1]) if addresses else port

    async def stop_listening(self) -> None:
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()

    async def close(self) -> None:
        await self.stop_listening()
        session, self._session = self._session, None
        if session is not None:
            await session.close()


def _same_state(state: str, redirect_url: str) -> bool:
    """Whether ``redirect_url`` carries ``state`` (compared in constant time)."""
    query = urlsplit(redirect_url).query if "?" in redirect_url else redirect_url
    given = parse_qs(query).get("state") or [""]
    return hmac.compare_digest(given[0].encode(), state.encode())


async def _call_user(on_authorize: Callable[[str], object], url: str) -> None:
    """Run the application's ``on_authorize(url)`` on a worker thread, bounded; its failure
    is logged by class only (never the URL)."""
    loop = asyncio.get_running_loop()
    try:
        await asyncio.wait_for(
            loop.run_in_executor(_pool(), on_authorize, url), ON_AUTHORIZE_TIMEOUT
        )
    except TimeoutError:
        log.warning("on_authorize did not return within %ss", ON_AUTHORIZE_TIMEOUT)
    except Exception as exc:
        log.warning("on_authorize raised %s", type(exc).__name__)


def child_spec(
    client_name: str, registry: Registry, shared: Published, spec: Http, config: Config
) -> ChildSpec:
    """The permanent supervisor child ``oauth``, started with the client."""
    return child_spec_for(
        OAuthActor,
        client_name,
        registry,
        shared,
        spec,
        config,
        id="oauth",
        restart="permanent",
        shutdown=2.0,
    )
