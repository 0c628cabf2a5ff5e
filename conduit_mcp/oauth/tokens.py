"""The token endpoint: the code exchange, the refresh and the client_credentials grant.

Every request names the ``resource`` (RFC 8707) and authenticates the client the way its
registration says: ``none`` (``client_id`` in the body), ``client_secret_basic`` (an HTTP
Basic header and no ``client_id`` in the body), ``client_secret_post`` (both in the body) or
``private_key_jwt`` (a signed assertion whose audience is the issuer, per RFC 7523bis).
authlib builds the bodies, the client authentication and the assertion; this module does
the bounded HTTP. No redirect is followed; the answer is read up to a size limit.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

import aiohttp
from authlib.common.urls import add_params_to_qs
from authlib.oauth2.auth import ClientAuth
from authlib.oauth2.rfc6749.parameters import prepare_token_request
from authlib.oauth2.rfc7523 import private_key_jwt_sign

from ..errors import Error
from ._http import HTTP_TIMEOUT, MAX_BODY, request, require_secure, unreachable_data
from .config import OAuth
from .discovery import Discovered
from .flow import Pending
from .keys import load_private_key
from .records import ClientCredentials, TokenSet, safe_code

if TYPE_CHECKING:
    from .dpop import Prover

ASSERTION_TYPE = "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"
#: How long a private_key_jwt assertion is valid (seconds).
ASSERTION_LIFETIME = 300

__all__ = [
    "ASSERTION_TYPE",
    "TokenSet",
    "choose_auth_method",
    "client_credentials",
    "exchange_code",
    "refresh",
    "token_request",
]


def choose_auth_method(
    configured: str | None,
    *,
    has_secret: bool,
    has_key: bool,
    supported: Iterable[str] | None,
) -> str:
    """The token endpoint auth method: the configured one; else ``private_key_jwt`` with a
    key; with a secret ``client_secret_basic`` unless the server lists only
    ``client_secret_post`` (an absent list means ``client_secret_basic``, RFC 8414); else
    ``none``.

    >>> choose_auth_method(None, has_secret=True, has_key=False, supported=None)
    'client_secret_basic'
    >>> choose_auth_method(None, has_secret=True, has_key=False, supported=["client_secret_post"])
    'client_secret_post'
    >>> choose_auth_method(None, has_secret=False, has_key=False, supported=["none"])
    'none'
    """
    if configured is not None:
        return configured
    if has_key:
        return "private_key_jwt"
    if has_secret:
        listed = tuple(supported) if supported is not None else ("client_secret_basic",)
        if "client_secret_basic" not in listed and "client_secret_post" in listed:
            return "client_secret_post"
        return "client_secret_basic"
    return "none"


def _authenticate(
    client: ClientCredentials,
    oauth: OAuth,
    issuer: str,
    url: str,
    body: str,
    now: Callable[[], float],
) -> tuple[dict[str, str], str]:
    headers: dict[str, str] = {}
    method = client.token_endpoint_auth_method
    if method == "private_key_jwt":
        if oauth.private_key is None:
            raise Error(
                "config",
                "oauth.private_key",
                "the client is registered for private_key_jwt but OAuth has no private_key",
            )
        issued = int(now())
        try:
            assertion = private_key_jwt_sign(
                load_private_key(oauth.private_key, oauth.signing_alg),
                client.client_id,
                issuer,  # the audience: the authorization server's issuer identifier
                alg=oauth.signing_alg,
                issued_at=issued,
                expires_at=issued + ASSERTION_LIFETIME,
            )
        except Error:
            raise
        except Exception as e:  # an algorithm the key cannot sign with
            raise Error(
                "config",
                "oauth.private_key",
                f"cannot sign the client assertion with the private key and "
                f"{oauth.signing_alg} ({type(e).__name__})",
            ) from None
        body = _append(
            body,
            [
                ("client_id", client.client_id),
                ("client_assertion_type", ASSERTION_TYPE),
                ("client_assertion", str(assertion)),
            ],
        )
        return headers, body
    if method in ("client_secret_basic", "client_secret_post") and client.client_secret is None:
        raise Error(
            "config",
            "oauth.client_secret",
            f"the client is registered for {method} but has no client_secret",
        )
    if method not in ("none", "client_secret_basic", "client_secret_post"):
        raise Error(
            "auth",
            "token_failed",
            f"the client's token endpoint auth method {_shown_method(method)} is not supported",
        )
    auth = ClientAuth(client.client_id, client.client_secret, method)
    _, headers, body = auth.prepare("POST", url, headers, body)
    return headers, body


_KNOWN_METHODS = frozenset(
    {"client_secret_jwt", "tls_client_auth", "self_signed_tls_client_auth", "private_key_jwt"}
)


def _shown_method(method: str) -> str:
    return repr(method) if method in _KNOWN_METHODS else "(unregistered)"


def _append(body: str, params: list[tuple[str, str]]) -> str:
    return str(add_params_to_qs(body, params))


async def token_request(
    session: aiohttp.ClientSession,
    discovered: Discovered,
    client: ClientCredentials,
    oauth: OAuth,
    grant_type: str,
    params: dict[str, str],
    *,
    reason: str,
    requested: tuple[str, ...] = (),
    previous_refresh: str | None = None,
    timeout: float = HTTP_TIMEOUT,
    limit: int = MAX_BODY,
    now: Callable[[], float] = time.time,
    busy_is_unreachable: bool = False,
    dpop: Prover | None = None,
) -> TokenSet:
    """One token request: ``grant_type`` with ``params`` and ``resource``, the client
    authenticated, the answer turned into a :class:`TokenSet`. Any refusal, a timeout or a
    malformed answer is ``Error("auth", reason)`` (the server's error code in the message,
    never its description or anything sent). ``busy_is_unreachable``: a 5xx answer is the
    server's trouble, not a refusal, and its ``data`` says unreachable, as for a timeout.

    ``dpop``: the request carries a fresh DPoP proof of that key (RFC 9449 section 5); a
    400 ``use_dpop_nonce`` with a ``DPoP-Nonce`` is answered once, with a new proof (and a
    new client assertion: neither is ever sent twice) carrying the nonce (section 8)."""
    url = require_secure(discovered.token_endpoint, "token endpoint", reason)
    fields = {k: v for k, v in params.items() if v is not None}
    form = str(prepare_token_request(grant_type, resource=discovered.resource, **fields))
    for attempt in range(2):
        headers, body = _authenticate(client, oauth, discovered.issuer, url, form, now)
        if dpop is not None:
            headers["DPoP"] = dpop.proof("POST", url)
        started = now()
        resp = await request(
            session,
            "POST",
            url,
            what="token endpoint",
            reason=reason,
            headers=headers,
            data=body,
            timeout=timeout,
            limit=limit,
        )
        if dpop is None:
            break
        fresh = dpop.remember(url, resp.dpop_nonce)
        asked = resp.status == 400 and (resp.json or {}).get("error") == "use_dpop_nonce"
        if not (asked and attempt == 0 and fresh):
            break
    if resp.status != 200 or resp.json is None:
        code = safe_code(resp.json.get("error")) if resp.json is not None else None
        detail = f": {code}" if code else ""
        raise Error(
            "auth",
            reason,
            f"the token endpoint refused the {grant_type} grant (HTTP {resp.status}){detail}",
            # The registered code only (safe_code): invalid_client says the server forgot
            # a dynamic registration, which the OAuth actor then replaces.
            data=_refusal_data(url, resp.status, code, busy_is_unreachable),
        )
    return TokenSet.from_response(
        resp.json,
        now=started,
        requested=requested,
        previous_refresh=previous_refresh,
        reason=reason,
        dpop_key=dpop.private_jwk() if dpop is not None else None,
    )


def _refusal_data(url: str, status: int, code: str | None, busy: bool) -> dict[str, Any] | None:
    """A refused token request's ``Error.data``: the registered error code (``safe_code``),
    and, for a 5xx when ``busy`` counts, that the server could not serve it.

    >>> _refusal_data("https://as.example/token", 400, "invalid_grant", True)
    {'oauth_error': 'invalid_grant'}
    >>> _refusal_data("https://as.example/token", 503, None, True)
    {'unreachable': True, 'origin': 'https://as.example', 'detail': 'HTTP 503'}
    >>> _refusal_data("https://as.example/token", 503, None, False) is None
    True
    """
    data: dict[str, Any] = unreachable_data(url, f"HTTP {status}") if busy and status >= 500 else {}
    if code:
        data["oauth_error"] = code
    return data or None


async def exchange_code(
    session: aiohttp.ClientSession,
    discovered: Discovered,
    client: ClientCredentials,
    oauth: OAuth,
    pending: Pending,
    code: str,
    *,
    timeout: float = HTTP_TIMEOUT,
    limit: int = MAX_BODY,
    dpop: Prover | None = None,
) -> TokenSet:
    """The authorization code (from :func:`~.flow.finish_authorization`) for tokens, with
    the PKCE verifier and the same redirect URI. Raises ``Error("auth", "token_failed")``."""
    params = {
        "code": code,
        "redirect_uri": pending.redirect_uri,
        "code_verifier": pending.verifier,
    }
    return await token_request(
        session,
        discovered,
        client,
        oauth,
        "authorization_code",
        params,
        reason="token_failed",
        requested=pending.scopes,
        timeout=timeout,
        limit=limit,
        dpop=dpop,
    )


async def refresh(
    session: aiohttp.ClientSession,
    discovered: Discovered,
    client: ClientCredentials,
    oauth: OAuth,
    tokens: TokenSet,
    *,
    timeout: float = HTTP_TIMEOUT,
    limit: int = MAX_BODY,
    dpop: Prover | None = None,
) -> TokenSet:
    """New tokens for ``tokens``' refresh token (spent: with rotation, the old one is never
    valid again, so the caller must keep the answer before anything else). Raises
    ``Error("auth", "refresh_failed")``: refused (revoked, expired, rotated away: the caller
    then authorizes in full), or unreachable (no answer, or a 5xx: ``data`` says so, and the
    tokens are worth keeping for the next attempt)."""
    if tokens.refresh_token is None:
        raise Error("auth", "refresh_failed", "the tokens have no refresh token")
    return await token_request(
        session,
        discovered,
        client,
        oauth,
        "refresh_token",
        {"refresh_token": tokens.refresh_token},
        reason="refresh_failed",
        requested=tokens.scope,
        previous_refresh=tokens.refresh_token,
        timeout=timeout,
        limit=limit,
        dpop=dpop,
        busy_is_unreachable=True,  # a refusal deletes the tokens; a 5xx must not
    )


async def client_credentials(
    session: aiohttp.ClientSession,
    discovered: Discovered,
    client: ClientCredentials,
    oauth: OAuth,
    scopes: Iterable[str] = (),
    *,
    timeout: float = HTTP_TIMEOUT,
    limit: int = MAX_BODY,
    dpop: Prover | None = None,
) -> TokenSet:
    """Machine-to-machine tokens (the ``client_credentials`` grant): no person, the client
    authenticated by its secret or its private key. Raises ``Error("auth",
    "token_failed")``."""
    scopes = tuple(scopes)
    params = {"scope": " ".join(scopes)} if scopes else {}
    return await token_request(
        session,
        discovered,
        client,
        oauth,
        "client_credentials",
        params,
        reason="token_failed",
        requested=scopes,
        timeout=timeout,
        limit=limit,
        dpop=dpop,
    )
