"""How this client is known to an authorization server, in the spec's order
(Authorization, "Client Registration"): pre-registered credentials; a client ID metadata
document (the ``client_id`` is an https URL) when the server supports those; RFC 7591
dynamic registration (with ``application_type``). A registration is kept per ``issuer``;
another issuer never sees it and gets a registration of its own.

The store is not touched here (it may be user code or a file): the caller loads the kept
registration with :func:`~.store.load_client`, passes it in as ``known`` and keeps what
comes back with :func:`~.store.save_client`, off the I/O loop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import aiohttp
from authlib.oauth2.rfc7591 import ClientMetadataClaims

from ..errors import Error
from ._http import HTTP_TIMEOUT, MAX_BODY, request, require_secure
from .config import AUTH_METHODS, OAuth
from .discovery import Discovered
from .keys import public_jwks
from .records import ClientCredentials, safe_code
from .tokens import choose_auth_method

__all__ = ["ClientCredentials", "check_auth_method", "client_metadata", "register"]


#: Token endpoint auth methods with a registered name, shown in a message as they are
#: (anything else a server puts there might be anything, so it is not repeated).
_NAMED_METHODS = frozenset(
    AUTH_METHODS | {"client_secret_jwt", "tls_client_auth", "self_signed_tls_client_auth"}
)


def check_auth_method(method: str, *, has_secret: bool, has_key: bool) -> None:
    """Refuse a registration answer this client cannot authenticate with: a method it does
    not support, a secret method without a ``client_secret``, ``private_key_jwt`` without
    ``OAuth(private_key=...)``. Raises ``Error("auth", "registration_failed")``: no person
    can fix it, so the client never authorizes (a browser tab) with it.

    >>> check_auth_method("none", has_secret=False, has_key=False)
    >>> check_auth_method("client_secret_basic", has_secret=False, has_key=False)
    Traceback (most recent call last):
      ...
    conduit_mcp.errors.Error: auth (registration_failed): the registration answer assigns client_secret_basic but gives no client_secret; register the client at the authorization server by hand and give OAuth its client_id and client_secret
    """
    if method not in AUTH_METHODS:
        shown = repr(method) if method in _NAMED_METHODS else "(unregistered)"
        raise Error(
            "auth",
            "registration_failed",
            f"the registration answer assigns the token endpoint auth method {shown}, which "
            f"this client does not support ({', '.join(sorted(AUTH_METHODS))}); register the "
            "client at the authorization server by hand and give OAuth its client_id",
        )
    if method in ("client_secret_basic", "client_secret_post") and not has_secret:
        raise Error(
            "auth",
            "registration_failed",
            f"the registration answer assigns {method} but gives no client_secret; register "
            "the client at the authorization server by hand and give OAuth its client_id "
            "and client_secret",
        )
    if method == "private_key_jwt" and not has_key:
        raise Error(
            "auth",
            "registration_failed",
            "the registration answer assigns private_key_jwt but OAuth has no private_key; "
            "give OAuth(private_key=...), or register the client by hand",
        )


def client_metadata(oauth: OAuth, redirect_uri: str | None) -> dict[str, Any]:
    """The RFC 7591 metadata this client registers with: ``client_name``,
    ``application_type``, ``redirect_uris``, the authorization code and refresh grants, and
    the token endpoint auth method its configuration implies (a key: ``private_key_jwt``
    with the public JWK; else ``none``, a public client). Checked with authlib.
    """
    method = "private_key_jwt" if oauth.private_key is not None else "none"
    metadata: dict[str, Any] = {
        "client_name": oauth.client_name,
        "application_type": oauth.application_type,
        "redirect_uris": [redirect_uri] if redirect_uri else [],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
    }
    if oauth.private_key is not None:
        metadata["jwks"] = public_jwks(oauth.private_key, oauth.signing_alg)
    try:
        ClientMetadataClaims(metadata, {}).validate()
    except Exception as e:
        raise Error(
            "config", "oauth.redirect_uri", f"the client metadata is not valid ({e})"
        ) from None
    return metadata


async def register(
    session: aiohttp.ClientSession,
    discovered: Discovered,
    oauth: OAuth,
    known: ClientCredentials | None = None,
    *,
    redirect_uri: str | None = None,
    timeout: float = HTTP_TIMEOUT,
    limit: int = MAX_BODY,
    now: Callable[[], float] = time.time,
) -> ClientCredentials:
    """This client's credentials at ``discovered.issuer``: pre-registered (from ``oauth``);
    else ``known`` when it was made for this issuer and this redirect URI and its secret
    has not expired; else a client ID metadata document; else dynamic registration.

    Raises ``Error("auth", "registration_failed")``: no way to register (no client_id, no
    CIMD support, no registration endpoint), or the registration endpoint refused.
    """
    issuer = discovered.issuer
    if oauth.client_id is not None:
        method = choose_auth_method(
            oauth.token_endpoint_auth,
            has_secret=oauth.client_secret is not None,
            has_key=oauth.private_key is not None,
            supported=discovered.auth_methods,
        )
        return ClientCredentials(
            client_id=oauth.client_id,
            client_secret=oauth.client_secret,
            token_endpoint_auth_method=method,
            issuer=issuer,
            registration="pre-registered",
        )
    if known is not None and known.usable(issuer, redirect_uri, now()):
        try:  # a kept registration no token request could use is registered again
            check_auth_method(
                known.token_endpoint_auth_method,
                has_secret=known.client_secret is not None,
                has_key=oauth.private_key is not None,
            )
            return known
        except Error:
            pass
    if oauth.client_metadata_url is not None and discovered.cimd_supported:
        return ClientCredentials(
            client_id=oauth.client_metadata_url,
            token_endpoint_auth_method="private_key_jwt" if oauth.private_key else "none",
            issuer=issuer,
            registration="cimd",
            redirect_uris=(redirect_uri,) if redirect_uri else (),
        )
    endpoint = discovered.registration_endpoint
    if endpoint is None:
        raise Error(
            "auth",
            "registration_failed",
            f"the authorization server {issuer} supports neither client ID metadata documents "
            "(for a client_metadata_url) nor dynamic registration; register the client there "
            "and give OAuth its client_id",
        )
    require_secure(endpoint, "registration endpoint", "registration_failed")
    metadata = client_metadata(oauth, redirect_uri)
    resp = await request(
        session,
        "POST",
        endpoint,
        what="registration endpoint",
        reason="registration_failed",
        json=metadata,
        timeout=timeout,
        limit=limit,
    )
    answer = resp.json
    if resp.status not in (200, 201) or answer is None:
        code = safe_code(answer.get("error")) if answer is not None else None
        raise Error(
            "auth",
            "registration_failed",
            f"the registration endpoint refused (HTTP {resp.status})"
            + (f": {code}" if code else ""),
        )
    client_id = answer.get("client_id")
    if not isinstance(client_id, str) or not client_id:
        raise Error("auth", "registration_failed", "the registration answer has no client_id")
    given_secret = answer.get("client_secret")
    secret = given_secret if isinstance(given_secret, str) and given_secret else None
    given_method = answer.get("token_endpoint_auth_method")
    if isinstance(given_method, str):
        method = given_method
    else:
        method = "client_secret_basic" if secret else str(metadata["token_endpoint_auth_method"])
    check_auth_method(method, has_secret=secret is not None, has_key=oauth.private_key is not None)
    expires = answer.get("client_secret_expires_at")
    uris = answer.get("redirect_uris")
    return ClientCredentials(
        client_id=client_id,
        client_secret=secret,
        token_endpoint_auth_method=method,
        issuer=issuer,
        registration="dcr",
        redirect_uris=tuple(u for u in uris if isinstance(u, str))
        if isinstance(uris, list)
        else ((redirect_uri,) if redirect_uri else ()),
        client_secret_expires_at=float(expires)
        if isinstance(expires, (int, float)) and not isinstance(expires, bool) and expires > 0
        else None,
    )
