"""The OAuth actor: finds or renews the client's access token (docs/actor-tree.md, "The OAuth
actor"; the connection's side: docs/connection.md, "Authorizing").

A permanent child of the client's supervisor (id ``"oauth"``), started with the client only
when the transport spec is ``Http(auth=OAuth(...))``. The connection tells it
:class:`~.events.NeedToken` when the server refused a token; it answers
:class:`~.events.TokenReady` (a newer token is published in ``Published.token``, which the
transport stamps on every request), :class:`~.events.AwaitingUser` (a person must authorize)
or :class:`~.events.AuthFailed`.

How a token is found (the store, a refresh, the ``client_credentials`` grant, a person) is one
coroutine, :func:`conduit_mcp.oauth.acquire.acquire`, read top to bottom there. This actor
decides *when* one runs and publishes what it returns:

* an ask answered by the token already published, if it is newer than the refused one (one
  refresh for a burst of 401s), or while a person is asked (:class:`~.events.AwaitingUser`);
  otherwise an acquisition starts, unless one runs (its answer serves every ask);
* a step-up (403 ``insufficient_scope``) starts a new acquisition, superseding a running one,
  at most :data:`STEP_UP_LIMIT` times per resource and operation; past that the refused
  request fails ``auth``/``step_up_limit`` and nothing else does;
* a renewal ahead of expiry (a timer on the I/O loop) when nothing runs;
* a person's redirect, pasted back (:class:`Authorize`, from ``Client.authorize``) or received
  by the loopback listener, is checked here (``state``, ``iss``) and its code handed to the
  waiting acquisition. ``on_authorize`` (user code) runs on a worker thread, bounded
  (:data:`ON_AUTHORIZE_TIMEOUT`), never on this actor or the loop; the loopback listener
  waits at most :data:`LOOPBACK_TIMEOUT`.

It never blocks its thread: the acquisition runs on the client's I/O loop, the token store and
user code on worker threads, and every outcome comes back as a message tagged with its
acquisition's number (a superseded one's are dropped).

Secrets (tokens, the code, the PKCE verifier, ``state``, the client secret, assertions) never
appear in a repr, a log record, an exception text or a crash report: the library's records
hide them in their reprs, this actor's messages show only their kind, and failures are logged
by reason and exception class only.
"""

from __future__ import annotations

import asyncio
import hmac
import logging
import os
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import parse_qs, urlsplit

import pykka

from ..config import Config
from ..errors import Error
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
    import aiohttp

    from ..oauth.acquire import Held, Outcome, Want
    from ..oauth.config import OAuth
    from ..oauth.flow import Pending
    from ..oauth.on_loop import OnLoop
    from ..oauth.records import TokenSet
    from ..oauth.store import TokenStore

log = logging.getLogger("conduit_mcp.oauth")

T = TypeVar("T")

#: How many step-ups one resource and operation gets before its request fails.
STEP_UP_LIMIT = 2
#: How long the loopback listener waits for the browser's redirect (seconds).
LOOPBACK_TIMEOUT = 300.0
#: How long ``on_authorize`` (user code) may take before it is left to itself (seconds).
ON_AUTHORIZE_TIMEOUT = 10.0
#: Threads for token store calls (a file, or the application's store), shared by every
#: client: apart from the pool of ``on_authorize`` and auth callables, so one of those that
#: hangs never holds up a store call.
STORE_WORKERS = 4

_store_pool: ThreadPoolExecutor | None = None
_store_lock = threading.Lock()


def _stores() -> ThreadPoolExecutor:
    global _store_pool
    with _store_lock:
        if _store_pool is None:
            _store_pool = ThreadPoolExecutor(STORE_WORKERS, thread_name_prefix="conduit-mcp-store")
        return _store_pool


def _forget_stores_in_child() -> None:
    # A forked child has the pool object but none of its threads: it would queue forever.
    global _store_pool, _store_lock
    _store_pool = None
    _store_lock = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_stores_in_child)

__all__ = ["Authorize", "OAuthActor", "child_spec"]


@dataclass(slots=True, frozen=True, repr=False)
class Authorize:
    """``Client.authorize``: the redirect URL a person's browser was sent to. ``reply`` is
    answered once tokens exist (or with the error). Its repr never shows the URL (its
    ``code`` and ``state`` are secrets)."""

    redirect_url: str
    reply: Reply

    def __repr__(self) -> str:
        return "<Authorize>"


@dataclass(slots=True, frozen=True)
class _Done:
    """Acquisition ``run`` ended (a later one supersedes it)."""

    run: int
    future: Future[Outcome] = field(repr=False)


@dataclass(slots=True, frozen=True)
class _Awaiting:
    """Acquisition ``run`` waits for a person: ``code`` takes their redirect's code."""

    run: int
    pending: Pending = field(repr=False)
    code: asyncio.Future[str] = field(repr=False)


@dataclass(slots=True, frozen=True)
class _Refused:
    """Acquisition ``run``'s code was refused; it asks the person again."""

    run: int
    error: Error = field(repr=False)


@dataclass(slots=True, frozen=True)
class _Redirect:
    """The loopback listener of acquisition ``run`` received a redirect (a secret URL)."""

    run: int
    url: str = field(repr=False)


@dataclass(slots=True, frozen=True)
class _RefreshDue:
    """Timer: the token is close to its expiry; ``gen`` names the token it was set for."""

    gen: int


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
        from ..oauth.acquire import Held
        from ..oauth.on_loop import OnLoop

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
        self._refused = False  # it refused the token held
        self._challenge: dict[str, str] = {}
        self._step_ups: dict[str, int] = {}
        self._held: Held = Held()  # what the last acquisition learnt
        self._runs = 0  # the latest acquisition's number
        self._running: Future[Outcome] | None = None
        self._pending: Pending | None = None  # a person's authorization in progress
        self._code: asyncio.Future[str] | None = None  # where the person's code goes
        self._waiters: list[Reply] = []  # Client.authorize calls waiting for the tokens
        self._refresh_gen = 0
        self._on_loop: OnLoop = OnLoop(spec.tls)  # touched on the I/O loop only

    def __repr__(self) -> str:
        running = self._running is not None
        return f"<OAuthActor {self._name!r} running={running} waiting_user={self._pending is not None}>"

    # -- life ----------------------------------------------------------------------------------

    def init(self) -> None:
        # A restarted incarnation lost what it was asked: an authorizing connection asks again.
        restarted = self._shared.token.current is not None
        self._tell_connection(OAuthBack(restarted))

    def terminate(self, reason: BaseException | None) -> None:
        self._settle(Error("unavailable", "oauth_stopped", "the OAuth actor stopped"))
        if self._running is not None:
            self._running.cancel()
        try:
            io_loop.submit(self._on_loop.close())
        except RuntimeError:  # the loop is gone (interpreter exit)
            pass

    # -- messages ------------------------------------------------------------------------------

    def receive(self, message: Any) -> Any:
        t = type(message)
        if t is NeedToken:
            self._on_need(message)
        elif t is Authorize:
            self._on_redirect(message.redirect_url, message.reply)
        elif t in (_Done, _Awaiting, _Refused, _Redirect):
            if message.run == self._runs:  # else: from a superseded acquisition
                if t is _Done:
                    self._finished(message.future)
                elif t is _Awaiting:
                    self._awaiting(message.pending, message.code)
                elif t is _Refused:
                    self._settle(message.error)
                else:
                    self._on_redirect(message.url, None)
        elif t is _RefreshDue:
            held = self._held
            if message.gen == self._refresh_gen and self._running is None and held.tokens:
                self._start(self._want(renew=True))
        else:
            return super().receive(message)
        return None

    def _on_need(self, ask: NeedToken) -> None:
        self._seq = ask.seq
        self._asked = True
        self._refused = ask.stale > 0  # it refused the token held
        if ask.challenge:
            self._challenge = dict(ask.challenge)
        if ask.operation is not None:
            self._step_up(ask.operation)
        elif self._shared.token.version > ask.stale:
            self._answer(TokenReady(ask.seq, self._held.identity))
        elif self._pending is not None:
            self._answer(AwaitingUser(ask.seq))
        elif self._running is None:  # else answered when the running acquisition ends
            self._start(self._want(refused=self._refused))

    def _step_up(self, operation: str) -> None:
        d = self._held.discovered
        key = f"{d.resource if d is not None else self._url} {operation}"
        count = self._step_ups.get(key, 0) + 1
        if count > STEP_UP_LIMIT:
            error = Error(
                "auth",
                "step_up_limit",
                f"{operation}: the server asked for more scope {STEP_UP_LIMIT} times "
                "and still refuses; the granted scopes do not allow it",
            )
            self._answer(AuthFailed(self._seq, error, fatal=False))
            return
        self._step_ups[key] = count
        self._start(self._want(step_up=operation))

    # -- acquisitions --------------------------------------------------------------------------

    def _want(self, **kind: Any) -> Want:
        from ..oauth.acquire import Want

        return Want(dict(self._challenge), **kind)

    def _start(self, want: Want) -> None:
        """Run an acquisition on the I/O loop (superseding a running one): its inputs are
        taken here, on the actor's thread; the loop never reads the actor's changing state."""
        from ..oauth.acquire import acquire

        if self._running is not None:
            self._running.cancel()
        self._runs += 1
        self._pending = self._code = None
        run, ref = self._runs, self.actor_ref
        around = _Around(
            self._oauth, self._store, self._url, self._timeout, self._on_loop, run, ref
        )
        running = self._running = io_loop.submit(acquire(around, self._held, want))
        running.add_done_callback(lambda f: safe_tell(ref, _Done(run, f)))

    def _finished(self, running: Future[Outcome]) -> None:
        self._running = None
        self._pending = self._code = None
        outcome = running.result()  # a bug in the acquisition raises here: a restart
        self._held = outcome.held
        if outcome.tokens is not None:
            self._publish(outcome.tokens)
            self._settle(None)
        elif outcome.error is not None:
            self._settle(outcome.error)
            self._answer(AuthFailed(self._seq, outcome.error, fatal=outcome.fatal))
        elif self._asked:  # a renewal got none while an ask waited
            self._start(self._want(refused=self._refused))

    def _publish(self, tokens: TokenSet) -> None:
        """Publish ``tokens`` (a new version), tell the connection, schedule the renewal."""
        cell = self._shared.token
        # A DPoP-bound token goes with its key: the transport proves every request with it.
        dpop = self._held.dpop if tokens.dpop_key is not None else None
        cell.current = TokenSnapshot(
            tokens.authorization(), cell.version + 1, self._held.identity, dpop
        )
        seq = self._seq if self._asked else -1
        self._answer(TokenReady(seq, self._held.identity))
        self._schedule_refresh(tokens)

    def _schedule_refresh(self, tokens: TokenSet) -> None:
        self._refresh_gen += 1
        # Never sooner than REFRESH_FLOOR: a token expired by then is renewed on a 401 only.
        delay = tokens.renewal_delay(time.time())
        if delay is None:
            return
        if tokens.refresh_token is None and self._oauth.needs_person:
            return  # nothing to renew it with: a 401 asks a person
        ref, gen = self.actor_ref, self._refresh_gen
        loop = io_loop.io_loop()
        loop.call_soon_threadsafe(lambda: loop.call_later(delay, safe_tell, ref, _RefreshDue(gen)))

    # -- a person --------------------------------------------------------------------------------

    def _awaiting(self, pending: Pending, code: asyncio.Future[str]) -> None:
        self._pending, self._code = pending, code
        on_authorize = self._oauth.on_authorize
        if on_authorize is not None:
            io_loop.submit(_call_user(on_authorize, pending.url))
        if self._asked:
            self._answer(AwaitingUser(self._seq))

    def _on_redirect(self, redirect_url: str, reply: Reply | None) -> None:
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
            code: str | Error = finish_authorization(pending, redirect_url)
        except Error as exc:
            if reply is not None:
                reply.fail(exc)
            if not (exc.kind == "auth" and _same_state(pending.state, redirect_url)):
                return  # a forged or stale redirect: the real one may still come
            # The authorization's own answer, refused (a wrong or missing iss, the person
            # said no): no later redirect can come for it; the acquisition fails with it.
            code = exc
        else:
            if reply is not None:
                self._waiters.append(reply)
        waiting, self._code, self._pending = self._code, None, None
        if waiting is not None:
            io_loop.call_soon(_hand, waiting, code)

    def _settle(self, error: Error | None) -> None:
        """Answer the ``Client.authorize`` calls waiting for the tokens."""
        waiters, self._waiters = self._waiters, []
        for reply in waiters:
            if error is None:
                reply.ok(None)
            else:
                reply.fail(error)

    # -- the connection ------------------------------------------------------------------------

    def _answer(self, message: Any) -> None:
        # AwaitingUser is not the end: the connection waits on for the token or the failure.
        t = type(message)
        if t is AuthFailed or (t is TokenReady and message.seq >= 0):
            self._asked = False
        self._tell_connection(message)

    def _tell_connection(self, message: Any) -> None:
        self._registry.tell("connection", message)


class _Around:
    """What one acquisition needs from this actor (:class:`~conduit_mcp.oauth.acquire.
    Surroundings`), on the I/O loop: immutable inputs, the loop side, and messages back
    tagged with the acquisition's number."""

    def __init__(
        self,
        oauth: OAuth,
        store: TokenStore,
        url: str,
        timeout: float,
        on_loop: OnLoop,
        run: int,
        ref: pykka.ActorRef[Any],
    ) -> None:
        self.oauth, self.store, self.url, self.timeout = oauth, store, url, timeout
        self.turn = on_loop.turn
        self._on_loop, self._run, self._ref = on_loop, run, ref
        self._listening_since: float | None = None

    def session(self) -> aiohttp.ClientSession:
        return self._on_loop.session()

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        return await asyncio.get_running_loop().run_in_executor(_stores(), fn, *args)

    async def listen(self, reuse: int | None) -> int:
        """``redirect_uri``'s port and path, or ``reuse`` (the kept registration's port) when
        it is free, else any port, and ``/callback``."""
        uri = self.oauth.redirect_uri
        parts = urlsplit(uri) if uri is not None else None
        port = parts.port if parts is not None and parts.port else 0
        path = parts.path if parts is not None and parts.path else "/callback"
        ref, run = self._ref, self._run

        def got(url: str) -> None:
            safe_tell(ref, _Redirect(run, url))

        bound: int | None = None
        if parts is None and reuse:
            try:
                bound = await self._on_loop.listen(reuse, path, got)
            except OSError:
                log.info("the kept loopback port is taken; listening on another one")
        if bound is None:
            bound = await self._on_loop.listen(port, path, got)
        self._listening_since = asyncio.get_running_loop().time()
        return bound

    async def stop_listening(self) -> None:
        self._listening_since = None
        await self._on_loop.stop_listening()

    async def person(self, pending: Pending) -> str:
        loop = asyncio.get_running_loop()
        code: asyncio.Future[str] = loop.create_future()
        safe_tell(self._ref, _Awaiting(self._run, pending, code))
        since = self._listening_since
        if since is None:  # paste-back only: Client.authorize, or a new ask, ends the wait
            return await code
        try:
            return await asyncio.wait_for(code, max(0.0, since + LOOPBACK_TIMEOUT - loop.time()))
        except TimeoutError:
            raise Error(
                "auth",
                "authorization_required",
                f"nobody completed the authorization within {LOOPBACK_TIMEOUT:.0f} s; "
                "client.reconnect() starts it again",
            ) from None

    def refused(self, error: Error) -> None:
        safe_tell(self._ref, _Refused(self._run, error))


def _hand(waiting: asyncio.Future[str], code: str | Error) -> None:
    """On the loop: the person's code (or their redirect's refusal) to the acquisition."""
    if waiting.done():  # it gave up meanwhile (the listener's timeout)
        return
    if isinstance(code, Error):
        waiting.set_exception(code)
    else:
        waiting.set_result(code)


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
