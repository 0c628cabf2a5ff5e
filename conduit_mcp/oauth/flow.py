"""The authorization code flow's pure steps: which scopes, the authorization URL, and the
checks on the redirect that comes back. No I/O: the OAuth actor shows the URL, a person or
the loopback listener brings the redirect back, and :mod:`.tokens` exchanges the code.

authlib builds the URL and the PKCE S256 challenge and makes the secrets; the RFC 9207
``iss`` table, the scope rules and the redirect checks are written here (authlib's RFC
9207 support is server side).
"""

from __future__ import annotations

import hmac
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import parse_qsl, urlsplit

from authlib.common.security import generate_token
from authlib.oauth2.rfc6749.parameters import prepare_grant_uri
from authlib.oauth2.rfc7636 import create_s256_code_challenge

from ..errors import Error
from .discovery import Discovered
from .records import ClientCredentials, safe_code

OFFLINE_ACCESS = "offline_access"
#: The longest redirect URL (or query) accepted back from a person or a listener.
MAX_REDIRECT = 8192
#: PKCE verifier length (RFC 7636 section 4.1 allows 43 to 128 characters).
VERIFIER_LENGTH = 64
STATE_LENGTH = 32


def select_scopes(
    *,
    configured: Iterable[str] | None = None,
    challenged: Iterable[str] = (),
    resource_scopes: Iterable[str] | None = None,
    held: Iterable[str] = (),
    server_scopes: Iterable[str] = (),
    offline: bool = True,
) -> tuple[str, ...]:
    """The scopes to ask for (Authorization, "Scope Selection Strategy").

    The configured scopes when given, else the challenge's, else the resource's
    ``scopes_supported``, else none (the request then omits ``scope``). A step-up (a
    challenge while scopes are ``held``) asks for the union of both. ``offline_access`` is
    added when the authorization server lists it and something else is asked for
    (``offline``: the grant can use a refresh token).

    >>> select_scopes(challenged=["files:read"], resource_scopes=["a", "b"])
    ('files:read',)
    >>> select_scopes(resource_scopes=["a", "b"], server_scopes=["a", "offline_access"])
    ('a', 'b', 'offline_access')
    >>> select_scopes(held=["a"], challenged=["b"])
    ('a', 'b')
    >>> select_scopes(server_scopes=["offline_access"])
    ()
    """
    challenged = tuple(challenged)
    if configured is not None:
        base = tuple(configured) + challenged
    elif challenged:
        base = challenged
    else:
        base = tuple(resource_scopes or ())
    held = tuple(held)
    if held and challenged:
        base = held + base
    scopes = tuple(dict.fromkeys(s for s in base if s))
    if offline and scopes and OFFLINE_ACCESS in tuple(server_scopes):
        scopes = tuple(dict.fromkeys((*scopes, OFFLINE_ACCESS)))
    return scopes


def new_verifier() -> str:
    """A PKCE code verifier (letters and digits, :data:`VERIFIER_LENGTH` long)."""
    return str(generate_token(VERIFIER_LENGTH))


def new_state() -> str:
    """An unguessable ``state`` for one authorization request."""
    return str(generate_token(STATE_LENGTH))


@dataclass(frozen=True, slots=True)
class Pending:
    """One authorization in progress: what the redirect is checked against and what the
    code is exchanged with. The URL, state and verifier are never shown.

    ``iss_required``: the authorization server advertised RFC 9207 support, so a redirect
    without ``iss`` is refused.
    """

    url: str = field(repr=False)
    state: str = field(repr=False)
    verifier: str = field(repr=False)
    issuer: str
    redirect_uri: str
    scopes: tuple[str, ...]
    resource: str
    iss_required: bool = False


def begin_authorization(
    discovered: Discovered,
    client: ClientCredentials,
    redirect_uri: str,
    scopes: Iterable[str],
    *,
    state: str | None = None,
    verifier: str | None = None,
) -> Pending:
    """The authorization URL (PKCE S256, ``state``, ``resource``, ``scope`` when any) and
    what to check its answer against.

    With ``offline_access`` among the scopes it also asks ``prompt=consent``: OpenID Connect
    Core 1.0, section 11 ("Offline Access") has the server ignore ``offline_access`` without
    it, and OpenID providers do (npm ``oidc-provider`` drops the scope and issues no refresh
    token), so every expiry would need a person again.

    Raises ``Error("auth", "discovery_failed")`` when the server has no authorization
    endpoint.
    """
    endpoint = discovered.authorization_endpoint
    if endpoint is None:
        raise Error(
            "auth",
            "discovery_failed",
            f"the authorization server {discovered.issuer} has no authorization_endpoint",
        )
    state_value = state or new_state()
    verifier_value = verifier or new_verifier()
    asked = tuple(scopes)
    url = prepare_grant_uri(
        endpoint,
        client.client_id,
        "code",
        redirect_uri=redirect_uri,
        scope=" ".join(asked) if asked else None,
        state=state_value,
        code_challenge=create_s256_code_challenge(verifier_value),
        code_challenge_method="S256",
        resource=discovered.resource,
        prompt="consent" if OFFLINE_ACCESS in asked else None,
    )
    return Pending(
        url=str(url),
        state=state_value,
        verifier=verifier_value,
        issuer=discovered.issuer,
        redirect_uri=redirect_uri,
        scopes=asked,
        resource=discovered.resource,
        iss_required=discovered.iss_supported,
    )


def check_iss(iss_required: bool, iss: str | None, issuer: str) -> None:
    """RFC 9207 on the redirect, by the spec's table: advertised and present, or present
    at all, compare by simple string comparison; advertised and absent, refuse; neither,
    proceed. Raises ``Error("auth", "issuer_mismatch")``.

    >>> check_iss(False, None, "https://as")
    >>> check_iss(True, None, "https://as")
    Traceback (most recent call last):
      ...
    conduit_mcp.errors.Error: auth (issuer_mismatch): the authorization server advertises the iss parameter but the redirect has none; refusing the response
    >>> check_iss(False, "https://as/", "https://as")
    Traceback (most recent call last):
      ...
    conduit_mcp.errors.Error: auth (issuer_mismatch): the redirect's iss is not the issuer the authorization was started with; refusing the response
    """
    if iss is None:
        if iss_required:
            raise Error(
                "auth",
                "issuer_mismatch",
                "the authorization server advertises the iss parameter but the redirect has "
                "none; refusing the response",
            )
        return
    if iss != issuer:
        raise Error(
            "auth",
            "issuer_mismatch",
            "the redirect's iss is not the issuer the authorization was started with; "
            "refusing the response",
        )


_REDIRECT_PARAMS = frozenset({"code", "state", "iss", "error", "error_description", "error_uri"})


def _redirect_params(redirect_url: str) -> dict[str, str]:
    if not isinstance(redirect_url, str) or not redirect_url.strip():
        raise Error("argument", "redirect_url", "give the full URL the browser was sent back to")
    if len(redirect_url) > MAX_REDIRECT:
        raise Error("argument", "redirect_url", f"the redirect URL is longer than {MAX_REDIRECT}")
    text = redirect_url.strip()
    parts = urlsplit(text)
    if parts.scheme:
        # A pasted URL must be where a browser came back to: http(s) with a host. Anything
        # else (javascript:, data:, file:, a bare host:port) is not a redirect at all, and
        # is said so rather than read as a response with a wrong issuer.
        if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
            raise Error(
                "argument",
                "redirect_url",
                "the redirect URL must be the http(s) URL the browser was sent back to "
                "(or its query, ?code=...&state=...)",
            )
        query = parts.query or parts.fragment  # a fragment response is never ours: checked below
    else:
        query = text.lstrip("?")
    params: dict[str, str] = {}
    for name, value in parse_qsl(query, keep_blank_values=True):
        if name in params:
            shown = name if name in _REDIRECT_PARAMS else "a"
            raise Error("argument", "redirect_url", f"the redirect URL repeats {shown!r} parameter")
        params[name] = value
    return params


def finish_authorization(pending: Pending, redirect_url: str) -> str:
    """The authorization code in ``redirect_url`` (the full URL, or its query), checked.

    In order: RFC 9207 ``iss`` (a mismatch means nothing else in the response is acted
    on), ``state`` (constant-time), then the server's ``error``, then ``code``.
    Raises ``Error("auth", ...)`` with ``issuer_mismatch``, ``state_mismatch`` or
    ``authorization_denied`` (the server's error code in the message), and
    ``Error("argument", "redirect_url")`` for text that is not a redirect.
    """
    params = _redirect_params(redirect_url)
    check_iss(pending.iss_required, params.get("iss"), pending.issuer)
    state = params.get("state")
    if state is None or not hmac.compare_digest(state.encode(), pending.state.encode()):
        raise Error(
            "auth",
            "state_mismatch",
            "the redirect's state is not the one of the authorization in progress (an old "
            "or forged redirect): it was ignored, and the authorization in progress still "
            "waits; complete it with the URL given to on_authorize most recently",
        )
    if "error" in params:
        shown = safe_code(params["error"]) or "an unregistered error code"
        raise Error(
            "auth",
            "authorization_denied",
            f"the authorization server refused the authorization: {shown}",
        )
    code = params.get("code")
    if not code:
        raise Error("argument", "redirect_url", "the redirect URL carries no code")
    return code
