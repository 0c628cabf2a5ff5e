"""One acquisition of an access token, start to end, as one coroutine (docs/actor-tree.md, "The
OAuth actor").

Why a coroutine: the steps (discover, register, refresh or authorize, exchange) each wait on
the network or on a person, and their order and their failures are the whole story. Written
as callbacks, the story is spread over a dispatch on step names; here it reads top to bottom,
and a new step is one more ``await`` where it belongs.

:func:`acquire` runs on the library's I/O loop (``transports/loop.py``), one at a time per
client (:class:`Surroundings.turn`); the OAuth actor starts it, hands it what the actor
learnt from earlier runs (:class:`Held`, a copy), and publishes what it returns
(:class:`Outcome`). Nothing here blocks the loop: the token store (a file, or the
application's own) and the application's code run on worker threads
(:meth:`Surroundings.blocking`), every HTTP step is bounded, and a person's redirect is
awaited, never polled. Which step failed decides what follows (:class:`_Failed`):

* discovery, registration, a refused issuer binding, a code the authorization server refuses
  twice: the client closes (``fatal``); one it cannot reach: ``oauth_unreachable``, and the
  connection backs off;
* a refused refresh (revoked, rotated away, ``invalid_grant``): the tokens are deleted and a
  full authorization follows (none for a renewal ahead of expiry: the next 401 asks); a
  refresh that cannot reach the authorization server (no answer, a refused connection, a
  5xx) keeps them, and an ask hears ``oauth_unreachable``;
* ``invalid_client`` for a dynamic registration on a refresh or a ``client_credentials``
  grant: the server forgot it; it is deleted and replaced, once per acquisition;
* a step-up (403 ``insufficient_scope``) the authorization server refuses: only the request
  that asked fails (not fatal).
* the grants that present an assertion (``identity_assertion``, ``jwt_bearer``;
  :mod:`.assertions`): the assertion is asked for, read or exchanged afresh at each token
  request; one that cannot be had (``assertion_unavailable``), a refused token exchange
  (``token_exchange_failed``) or a refused assertion (``assertion_refused``) closes the
  client, never tried again with the same input.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..errors import Error
from . import store as stores
from ._http import is_unreachable
from .assertions import exchange_identity, jwt_bearer, read_secret
from .challenge import Challenge
from .discovery import discover
from .flow import begin_authorization, select_scopes
from .issuers import bind_issuer
from .records import identity as identity_of
from .registration import register
from .tokens import client_credentials, exchange_code
from .tokens import refresh as refresh_grant

if TYPE_CHECKING:
    import aiohttp

    from .config import OAuth
    from .discovery import Discovered
    from .dpop import Prover
    from .flow import Pending
    from .records import ClientCredentials, TokenSet
    from .store import TokenStore

log = logging.getLogger("conduit_mcp.oauth")

T = TypeVar("T")

__all__ = ["Held", "Outcome", "Surroundings", "Want", "acquire", "single_flight"]


@dataclass(slots=True)
class Held:
    """What one acquisition learns and the next one reuses. The OAuth actor keeps it between
    acquisitions; each acquisition works on its own copy and returns it, so a superseded one
    changes nothing."""

    discovered: Discovered | None = None
    identity: str | None = None  # the cache identity of principal, issuer and resource
    client: ClientCredentials | None = None
    tokens: TokenSet | None = None
    wanted: tuple[str, ...] = ()  # the scopes the last full authorization asked for
    dpop: Prover | None = None  # the DPoP key of the tokens held (or of the next ones)


@dataclass(frozen=True, slots=True)
class Want:
    """What an acquisition is for. ``refused``: the server refused the token held (so the
    store's copy of it is no answer, and discovery runs again: the server may have moved to
    another authorization server). ``step_up``: the operation a 403 ``insufficient_scope``
    named. ``renew``: ahead of expiry, nobody waiting: a refresh (or the
    ``client_credentials`` grant), never a person. ``challenge``: the Bearer challenge's
    parameters."""

    challenge: dict[str, str]
    refused: bool = False
    step_up: str | None = None
    renew: bool = False


@dataclass(frozen=True, slots=True)
class Outcome:
    """How an acquisition ended: ``tokens`` (saved, to be published), or ``error`` (``fatal``:
    the client closes; otherwise only the request that asked fails), or neither (a renewal
    that got none: the next ask tries again)."""

    held: Held
    tokens: TokenSet | None = None
    error: Error | None = None
    fatal: bool = True


class Surroundings(Protocol):
    """What an acquisition needs from the actor that runs it: all of it is used on the I/O
    loop."""

    oauth: OAuth
    store: TokenStore
    url: str  # the MCP server's
    timeout: float  # the client's request_timeout
    turn: asyncio.Lock  # one acquisition at a time (a superseded one finishes first)

    def session(self) -> aiohttp.ClientSession: ...

    async def blocking(self, fn: Callable[..., T], *args: Any) -> T:
        """``fn(*args)`` on a worker thread (the store may be a file, or the application's)."""
        ...

    async def listen(self, reuse: int | None) -> int:
        """Start the loopback listener (``reuse``: the kept registration's port, when free);
        its port. ``OSError`` when it cannot."""
        ...

    async def stop_listening(self) -> None: ...

    async def person(self, pending: Pending) -> str:
        """Show ``pending.url`` to a person and wait for the code of their redirect (raises
        the redirect's refusal, or ``auth``/``authorization_required`` when the loopback
        listener waited in vain)."""
        ...

    def refused(self, error: Error) -> None:
        """The code a person brought back was refused; a new authorization follows (their
        ``Client.authorize`` calls get ``error``)."""
        ...


async def acquire(around: Surroundings, held: Held, want: Want) -> Outcome:
    """One acquisition: a token, or why there is none (module docstring)."""
    async with around.turn:
        run = _Acquisition(around, replace(held), want)
        try:
            tokens = await run.main()
        except _Failed as failed:
            return Outcome(run.held, error=failed.error, fatal=failed.fatal)
        finally:
            await around.stop_listening()
        return Outcome(run.held, tokens)


class _Failed(Exception):
    """How an acquisition ends without tokens (raised from any step)."""

    def __init__(self, error: Error, *, fatal: bool = True) -> None:
        super().__init__(error.reason)
        self.error, self.fatal = error, fatal


class _Acquisition:
    """One run of :func:`acquire`: its steps, in the order they happen."""

    def __init__(self, around: Surroundings, held: Held, want: Want) -> None:
        self.around, self.held, self.want = around, held, want
        self.oauth = around.oauth
        self.replaced_client = False  # a forgotten registration was replaced (once)
        self.reauthorized = False  # a refused code started a new authorization (once)

    async def main(self) -> TokenSet | None:
        """Where a token comes from, in order: the store (another client of the same
        principal, or this process before a restart), unless it holds the very token just
        refused; a refresh, when a refresh token is held; then :meth:`full`: the
        ``client_credentials`` grant, or a person."""
        if self.want.renew:
            return await self.renew()
        if self.want.step_up is not None:
            return await self.full()
        if self.want.refused:
            self.held.discovered = None  # two GETs: has the server moved?
        d = await self.discovered()
        stored = await self.store(stores.load_tokens, self.oauth.principal, d.issuer, d.resource)
        stored = _with_readable_key(stored)
        held = self.held.tokens
        refused = held.access_token if held is not None and self.want.refused else None
        if (
            stored is not None
            and stored.access_token != refused
            and not stored.expired(time.time(), 5.0)
        ):
            self.held.tokens = stored  # another client's, or from before a restart
            self.bind(stored)
            return stored
        tokens = stored or held
        if tokens is not None and tokens.refresh_token is not None:
            self.held.tokens = tokens
            got = await self.refresh()
            if got is not None:
                return got
        return await self.full()

    async def renew(self) -> TokenSet | None:
        """Ahead of expiry: refresh, or ask for client credentials again; never a person."""
        tokens = self.held.tokens
        if tokens is not None and tokens.refresh_token is not None:
            return await self.refresh()
        if not self.oauth.needs_person:
            return await self.credentials()
        return None

    # -- the steps -----------------------------------------------------------------------------

    async def discovered(self) -> Discovered:
        """The server's authorization server and resource (found again after a refusal). A
        new one (or a new resource) gets nothing of the old: no registration, no tokens."""
        if self.held.discovered is not None:
            return self.held.discovered
        c = self.want.challenge
        challenge = Challenge(
            "bearer",
            resource_metadata=c.get("resource_metadata"),
            scope=c.get("scope"),
            error=c.get("error"),
        )
        around = self.around
        found = await self.step(
            "discover",
            "discovery_failed",
            discover(around.session(), around.url, challenge, timeout=around.timeout),
        )
        identity = identity_of(self.oauth.principal, found.issuer, found.resource)
        if self.held.identity is not None and identity != self.held.identity:
            log.info("the server's authorization server changed; authorizing there")
            self.held.tokens = None
            self.held.client = None
        self.held.discovered, self.held.identity = found, identity
        return found

    async def registered(self, redirect_uri: str | None) -> ClientCredentials:
        """The client's registration at the issuer: the one held when it still serves, else
        registered (or the stored one confirmed) after the issuer binding is checked
        (``issuer_changed``: nothing is sent)."""
        d = self.found
        client = self.held.client
        if client is not None and client.usable(d.issuer, redirect_uri, time.time()):
            return client
        try:
            await self.around.blocking(bind_issuer, self.around.store, self.oauth, d.issuer)
        except Error as exc:
            raise _Failed(exc) from None
        known = await self.store(stores.load_client, d.issuer)
        around = self.around
        client = await self.step(
            "register",
            "registration_failed",
            register(
                around.session(),
                d,
                self.oauth,
                known,
                redirect_uri=redirect_uri,
                timeout=around.timeout,
            ),
        )
        self.held.client = client
        await self.store(stores.save_client, client)
        return client

    async def refresh(self) -> TokenSet | None:
        """The refresh token spent once in the process (:func:`single_flight`). None when it
        was refused (the tokens are deleted: an ask authorizes in full), or, for a renewal,
        when the authorization server could not be reached (the tokens are kept)."""
        d, client = self.found, await self.registered(None)
        tokens, around = self.held.tokens, self.around
        assert tokens is not None and tokens.refresh_token is not None
        dpop = self.prover()
        key = (id(around.store), self.oauth.principal, d.issuer, d.resource)
        try:
            got = await self.step(
                "refresh",
                "refresh_failed",
                single_flight(
                    key,
                    tokens.refresh_token,
                    lambda: refresh_grant(
                        around.session(),
                        d,
                        client,
                        self.oauth,
                        tokens,
                        timeout=around.timeout,
                        dpop=dpop,
                    ),
                ),
            )
        except _Failed as failed:
            if failed.error.reason == "oauth_unreachable":
                # Not refused: the tokens stay, held and stored, for the next attempt. An ask
                # hears why (the connection backs off); a renewal leaves it to the next 401.
                if self.want.renew:
                    return None
                raise
            # Refused (revoked, rotated away, expired): never spent again. A forgotten
            # registration goes too: its refresh token was that client's.
            await self.forgotten(failed.error)
            await self.forget_tokens()
            return None
        return await self.keep(got)

    async def full(self) -> TokenSet:
        """No refresh possible: the ``client_credentials`` grant, or a person."""
        d = await self.discovered()
        challenged = tuple(self.want.challenge.get("scope", "").split())
        held = self.held.tokens.scope if self.want.step_up and self.held.tokens else ()
        self.held.wanted = select_scopes(
            configured=self.oauth.scopes,
            challenged=challenged,
            resource_scopes=d.resource_scopes,
            held=held,
            server_scopes=d.server_scopes,
            offline=self.oauth.grant == "authorization_code",
        )
        if not self.oauth.needs_person:
            return await self.credentials()
        if self.oauth.on_authorize is None and not self.oauth.loopback:
            raise _Failed(
                Error(
                    "auth",
                    "authorization_required",
                    "the server needs a person to authorize this client, and nothing can show "
                    "them the URL: give OAuth(on_authorize=...) or OAuth(loopback=True)",
                )
            )
        return await self.authorize()

    async def credentials(self) -> TokenSet:
        """A grant without a person (again with a new registration, when the server forgot
        the one it was asked with): ``client_credentials``, or an assertion's
        (:meth:`asserted`)."""
        d, client, around = self.found, await self.registered(None), self.around
        try:
            if self.oauth.grant == "client_credentials":
                work = client_credentials(
                    around.session(),
                    d,
                    client,
                    self.oauth,
                    self.held.wanted,
                    timeout=around.timeout,
                    dpop=self.prover(),
                )
            else:
                work = jwt_bearer(
                    around.session(),
                    d,
                    client,
                    self.oauth,
                    await self.asserted(),
                    self.held.wanted,
                    timeout=around.timeout,
                    dpop=self.prover(),
                )
            got = await self.step("credentials", "token_failed", work)
        except _Failed as failed:
            if await self.forgotten(failed.error):
                return await self.credentials()
            raise self.step_up_refused(failed) from None
        return await self.keep(got)

    async def asserted(self) -> str:
        """The JWT-bearer grant's assertion, obtained now: the workload token as it is at
        this moment (``jwt_bearer``: the string, the function's answer, the file's text), or
        the ID-JAG the identity provider exchanges the user's identity token for
        (``identity_assertion``). Neither is kept: each token request asks again."""
        around = self.around
        try:
            secret = await asyncio.wait_for(
                around.blocking(read_secret, self.oauth), 4 * around.timeout
            )
        except Error as exc:
            raise _Failed(exc) from None
        except TimeoutError:
            raise _Failed(
                Error(
                    "auth",
                    "assertion_unavailable",
                    f"the OAuth {'identity_token' if self.oauth.grant == 'identity_assertion' else 'assertion'} "
                    f"function did not answer within {4 * around.timeout:.0f} s",
                )
            ) from None
        if self.oauth.grant != "identity_assertion":
            return secret
        return await self.step(
            "token exchange",
            "token_exchange_failed",
            exchange_identity(
                around.session(),
                self.found,
                self.oauth,
                secret,
                self.held.wanted,
                timeout=around.timeout,
            ),
        )

    async def authorize(self) -> TokenSet:
        """A person's authorization: the loopback listener (when asked for), the
        registration for its redirect URI, the URL to the person, the code back, exchanged."""
        d, oauth = self.found, self.oauth
        redirect_uri = oauth.redirect_uri
        if oauth.loopback:
            try:
                port = await self.around.listen(await self.kept_port(d.issuer))
            except Exception as exc:  # a port in use, mostly (OSError)
                raise _Failed(
                    Error(
                        "auth",
                        "loopback_failed",
                        f"the loopback redirect listener could not start on 127.0.0.1 "
                        f"({type(exc).__name__}); free its port, or use redirect_uri and "
                        "client.authorize(...)",
                    )
                ) from None
            if redirect_uri is None:
                redirect_uri = f"http://127.0.0.1:{port}/callback"
        assert redirect_uri is not None  # OAuth checks: redirect_uri, or loopback=True
        client = await self.registered(redirect_uri)
        try:
            pending = begin_authorization(d, client, redirect_uri, self.held.wanted)
        except Error as exc:
            raise _Failed(exc) from None
        log.info("a person must authorize this client; the URL went to on_authorize")
        try:
            code = await self.around.person(pending)
        except Error as exc:
            raise _Failed(exc) from None
        await self.around.stop_listening()
        around = self.around
        try:
            got = await self.step(
                "exchange",
                "token_failed",
                exchange_code(
                    around.session(),
                    d,
                    client,
                    oauth,
                    pending,
                    code,
                    timeout=around.timeout,
                    dpop=self.prover(),
                ),
            )
        except _Failed as failed:
            if self.want.step_up is None and self.retry_authorization(failed.error):
                self.around.refused(failed.error)
                return await self.authorize()  # a new URL: the person may try again, once
            raise self.step_up_refused(failed) from None
        return await self.keep(got)

    # -- what the steps share ----------------------------------------------------------------

    @property
    def found(self) -> Discovered:
        d = self.held.discovered
        assert d is not None  # every caller runs after discovery
        return d

    async def step(self, name: str, reason: str, work: Awaitable[T]) -> T:
        """One HTTP step, bounded: its failure as ``_Failed`` (``auth``/``reason``, or
        ``oauth_unreachable`` when the server could not be reached at all), logged by
        ``name`` and reason only."""
        try:
            return await asyncio.wait_for(work, 4 * self.around.timeout)
        except Exception as exc:
            error = _as_auth_error(exc, reason)
            if is_unreachable(error.data):
                error = _unreachable(error)
            log.info("OAuth %s failed: %s", name, error.reason)
            raise _Failed(error) from None

    def step_up_refused(self, failed: _Failed) -> _Failed:
        """A step-up the authorization server refused (a scope it does not grant): only the
        request that asked for it fails; the token held still serves the others."""
        operation = self.want.step_up
        if operation is None:
            return failed
        return _Failed(
            Error(
                "auth",
                "insufficient_scope",
                f"{operation}: the server asks for more scope and the authorization "
                f"server refused it ({failed.error.reason})",
            ),
            fatal=False,
        )

    async def forgotten(self, error: Error) -> bool:
        """``invalid_client`` for a dynamic registration: the authorization server forgot
        it (a reset, an expiry). Delete it, so that the next step registers again, once per
        acquisition. Not for a code exchange: the person has just authorized with this very
        client at that server, so a refusal there is the server's word on the client, not a
        lapse of memory (it closes, with no second tab)."""
        client, data = self.held.client, error.data
        if (
            client is None
            or client.registration != "dcr"
            or self.replaced_client
            or not (isinstance(data, dict) and data.get("oauth_error") == "invalid_client")
        ):
            return False
        log.info("the authorization server forgot this client's registration; registering again")
        self.replaced_client = True
        self.held.client = None
        await self.store(stores.delete_client, client.issuer)
        return True

    def retry_authorization(self, error: Error) -> bool:
        """Whether a refused code exchange starts a new authorization by itself: only for a
        code the token endpoint calls ``invalid_grant`` (expired while the person took
        their time, or spent), and once. Nothing else a person can fix (a client the server
        refuses, a broken answer): the client closes instead of handing ``on_authorize`` one
        URL after another."""
        data = error.data if isinstance(error.data, dict) else {}
        if self.reauthorized or data.get("oauth_error") != "invalid_grant":
            return False
        self.reauthorized = True
        return True

    async def kept_port(self, issuer: str) -> int | None:
        """The loopback port of the registration held or stored for ``issuer``: listening
        there again keeps its redirect URI, so a desktop login does not register anew each
        time (``redirect_uri`` with ``loopback=True`` pins the port instead)."""
        if self.oauth.redirect_uri is not None:
            return None
        client = self.held.client
        if client is None or client.issuer != issuer:
            client = await self.store(stores.load_client, issuer)
        return client.loopback_port() if client is not None else None

    def prover(self) -> Prover | None:
        """The DPoP key a token request proves, or None (Bearer): the key of the tokens held
        (a bound refresh token is spent with its key), else, when DPoP is to be used
        (:func:`~.dpop.use_dpop`), this client's key, made once and kept with the tokens."""
        from .dpop import Prover, use_dpop

        tokens = self.held.tokens
        if tokens is not None and tokens.dpop_key is not None:
            return self.bind(tokens)
        d = self.found
        challenged = self.want.challenge.get("scheme") == "dpop"
        try:
            wanted = use_dpop(
                self.oauth.dpop, self.oauth.dpop_alg, d.as_metadata, d.prm, challenged
            )
        except Error as exc:
            raise _Failed(exc) from None
        if not wanted:
            return None
        if self.held.dpop is None or self.held.dpop.alg != self.oauth.dpop_alg:
            self.held.dpop = Prover.generate(self.oauth.dpop_alg)
        return self.held.dpop

    def bind(self, tokens: TokenSet) -> Prover | None:
        """Hold the key ``tokens`` are bound to (a stored set's, after a restart)."""
        from .dpop import Prover

        key = tokens.dpop_key
        if key is None:
            return None
        held = self.held.dpop
        if held is None or held.private_jwk() != key:
            self.held.dpop = None
            try:
                self.held.dpop = Prover(key)
            except Error as exc:
                raise _Failed(exc) from None
        return self.held.dpop

    async def keep(self, tokens: TokenSet) -> TokenSet:
        """New tokens: held and stored (the actor publishes them)."""
        d = self.found
        self.bind(tokens)
        self.held.tokens = tokens
        await self.store(stores.save_tokens, self.oauth.principal, d.issuer, d.resource, tokens)
        return tokens

    async def forget_tokens(self) -> None:
        self.held.tokens = None
        d = self.found
        await self.store(stores.delete_tokens, self.oauth.principal, d.issuer, d.resource)

    async def store(self, fn: Callable[..., T], *args: Any) -> T | None:
        """A store call off the loop; a store that fails is logged (by class) and reads as
        empty: the acquisition goes on without it."""
        try:
            return await self.around.blocking(fn, self.around.store, *args)
        except Exception as exc:
            log.warning("the OAuth token store failed (%s)", type(exc).__name__)
            return None


# -- single-flight refreshes, on the I/O loop ----------------------------------------------------

_flights: dict[Any, asyncio.Future[Any]] = {}
# The last refresh of each principal, issuer, resource and store: (the refresh token it
# spent, what it got). A client that read the store just before another one's refresh
# landed asks to spend that token again: it gets the outcome instead.
_spent: dict[Any, tuple[str, Any]] = {}


async def single_flight(key: Any, spend: str, make: Callable[[], Awaitable[Any]]) -> Any:
    """Spend the refresh token ``spend`` with ``make()`` once: a second asker while it runs
    shares the running refresh, and one after it gets the same outcome, so a rotating
    refresh token is never spent twice in this process. The refresh is a task of its own: an
    asker that goes away (a superseded acquisition) never cancels it, so its answer (a
    rotated refresh token) is kept for the next. Only the I/O loop touches ``_flights`` and
    ``_spent``: no lock, and nothing held while the request is in flight."""
    done = _spent.get(key)
    if done is not None and done[0] == spend:
        return done[1]
    running = _flights.get(key)
    if running is None:
        running = _flights[key] = asyncio.ensure_future(_fly(key, spend, make))
        running.add_done_callback(_retrieved)
    return await asyncio.shield(running)


async def _fly(key: Any, spend: str, make: Callable[[], Awaitable[Any]]) -> Any:
    try:
        result = await make()
    finally:
        if _flights.get(key) is asyncio.current_task():
            del _flights[key]
    _spent[key] = (spend, result)
    return result


def _retrieved(task: asyncio.Future[Any]) -> None:
    # Its askers may all have gone: asyncio then never warns about an unretrieved failure.
    if not task.cancelled():
        task.exception()


def _with_readable_key(tokens: TokenSet | None) -> TokenSet | None:
    """Stored tokens, or None when they are DPoP-bound to a key that cannot be read (a
    damaged record): such tokens cannot be used nor refreshed, so the client authorizes
    afresh (a new key), as for no tokens at all."""
    if tokens is None or tokens.dpop_key is None:
        return tokens
    from .dpop import Prover

    try:
        Prover(tokens.dpop_key)
    except Error:
        log.warning("the stored DPoP key cannot be read; authorizing with a new key")
        return None
    return tokens


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
