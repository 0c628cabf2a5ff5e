"""The grants without a person that present an assertion: enterprise-managed authorization
(the identity assertion authorization grant) and workload identity (the JWT-bearer grant).

* ``grant="identity_assertion"`` (the ``io.modelcontextprotocol/enterprise-managed-authorization``
  extension): the user's identity token from the enterprise identity provider's single
  sign-on is exchanged there (RFC 8693 token exchange, ``requested_token_type`` ID-JAG, the
  ``audience`` the MCP server's authorization server issuer, the ``resource`` the MCP
  server) for an identity assertion JWT authorization grant (ID-JAG), which the client
  presents to the MCP server's authorization server with the JWT-bearer grant (RFC 7523),
  authenticated as its registration there says.
* ``grant="jwt_bearer"`` (the ``io.modelcontextprotocol/auth/wif`` extension, workload
  identity federation): a platform-issued workload token (a Kubernetes service account
  token, a SPIFFE JWT-SVID, a CI job's OIDC token) is the JWT-bearer grant's assertion.

The identity token, the ID-JAG and the workload token are bearer secrets: they go into a
request body and nowhere else (no log line, no exception text, no ``repr``). A token
endpoint's refusal is told by its registered error code only (``safe_code``).

:func:`read_secret` runs on a worker thread (it may call the application's function or read
a file); the rest on the I/O loop.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import aiohttp
from authlib.common.urls import url_encode

from ..errors import Error
from ._http import HTTP_TIMEOUT, MAX_BODY, request, require_secure, unreachable_data
from .config import OAuth
from .discovery import Discovered
from .records import ClientCredentials, TokenSet, header_safe, safe_code
from .tokens import token_request

if TYPE_CHECKING:
    from .dpop import Prover

JWT_BEARER = "urn:ietf:params:oauth:grant-type:jwt-bearer"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_JAG = "urn:ietf:params:oauth:token-type:id-jag"
ID_TOKEN = "urn:ietf:params:oauth:token-type:id_token"
#: The largest assertion read from a function or a file (bytes): a JWT is a few kilobytes.
MAX_ASSERTION = 64 * 1024

__all__ = [
    "ID_JAG",
    "ID_TOKEN",
    "JWT_BEARER",
    "MAX_ASSERTION",
    "TOKEN_EXCHANGE",
    "exchange_identity",
    "jwt_bearer",
    "read_secret",
]


def _unavailable(what: str, why: str) -> Error:
    return Error(
        "auth",
        "assertion_unavailable",
        f"OAuth {what} gave no usable token: {why}",
    )


def read_secret(oauth: OAuth) -> str:
    """The assertion to present now: ``identity_token`` (``identity_assertion``) or
    ``assertion`` / ``assertion_file`` (``jwt_bearer``), asked or read afresh each time (a
    workload token rotates; an application's function may refresh the user's sign-on).
    Blocking: call it on a worker thread. Raises ``auth``/``assertion_unavailable`` naming
    the option and why (the function's exception class only, never its text).

    >>> from conduit_mcp.oauth.config import OAuth
    >>> read_secret(OAuth(grant="jwt_bearer", client_id="w", assertion=lambda: "eyJ.x.y"))
    'eyJ.x.y'
    >>> read_secret(OAuth(grant="jwt_bearer", client_id="w", assertion=lambda: ""))
    Traceback (most recent call last):
      ...
    conduit_mcp.errors.Error: auth (assertion_unavailable): OAuth assertion gave no usable token: the function returned an empty or non-string value
    """
    if oauth.grant == "identity_assertion":
        what, source, path = "identity_token", oauth.identity_token, None
    else:
        what, source, path = "assertion", oauth.assertion, oauth.assertion_file
    if path is not None:
        what = "assertion_file"
        try:
            with Path(path).open("rb") as f:
                raw = f.read(MAX_ASSERTION + 1)
        except OSError as exc:
            raise _unavailable(
                what, f"the file could not be read ({type(exc).__name__}: {exc.strerror})"
            ) from None
        if len(raw) > MAX_ASSERTION:
            raise _unavailable(what, f"the file holds more than {MAX_ASSERTION} bytes")
        try:
            value: Any = raw.decode("ascii").strip()
        except UnicodeDecodeError:
            raise _unavailable(what, "the file is not ASCII text (a JWT is)") from None
        if not value:
            raise _unavailable(what, "the file is empty")
    elif callable(source):
        try:
            value = source()
        except Exception as exc:
            raise _unavailable(what, f"the function raised {type(exc).__name__}") from None
        if not isinstance(value, str) or not value.strip():
            raise _unavailable(what, "the function returned an empty or non-string value")
        value = value.strip()
    else:
        value = source
    if not isinstance(value, str) or not value:
        raise _unavailable(what, "none was given")
    if len(value) > MAX_ASSERTION or not header_safe(value):
        raise _unavailable(
            what,
            f"it is not a compact token (visible ASCII, at most {MAX_ASSERTION} bytes)",
        )
    return value


async def exchange_identity(
    session: aiohttp.ClientSession,
    discovered: Discovered,
    oauth: OAuth,
    identity_token: str,
    scopes: Iterable[str] = (),
    *,
    timeout: float = HTTP_TIMEOUT,
    limit: int = MAX_BODY,
) -> str:
    """The identity token, exchanged at the identity provider's token endpoint (RFC 8693)
    for an ID-JAG whose audience is the MCP server's authorization server (its issuer) and
    whose resource is the MCP server (its protected resource metadata's ``resource``): the
    enterprise-managed authorization extension, "Token Exchange". The client authenticates
    with ``idp_client_id`` (and ``idp_client_secret``) in the body, as the extension's
    example does. Raises ``auth``/``token_exchange_failed``: refused (the identity
    provider's error code in the message), or an answer that is not an ID-JAG."""
    reason = "token_exchange_failed"
    assert oauth.idp_token_endpoint is not None and oauth.idp_client_id is not None
    url = require_secure(oauth.idp_token_endpoint, "identity provider token endpoint", reason)
    params = [
        ("grant_type", TOKEN_EXCHANGE),
        ("requested_token_type", ID_JAG),
        ("audience", discovered.issuer),
        ("resource", discovered.resource),
        ("subject_token", identity_token),
        ("subject_token_type", ID_TOKEN),
        ("client_id", oauth.idp_client_id),
    ]
    scopes = tuple(scopes)
    if scopes:
        params.append(("scope", " ".join(scopes)))
    if oauth.idp_client_secret is not None:
        params.append(("client_secret", oauth.idp_client_secret))
    resp = await request(
        session,
        "POST",
        url,
        what="identity provider token endpoint",
        reason=reason,
        data=str(url_encode(params)),
        timeout=timeout,
        limit=limit,
    )
    body = resp.json
    if resp.status != 200 or body is None:
        code = safe_code(body.get("error")) if body is not None else None
        raise Error(
            "auth",
            reason,
            f"the identity provider refused to exchange the user's identity token for an "
            f"ID-JAG (HTTP {resp.status}){': ' + code if code else ''}; check that the "
            "identity token is current and that the identity provider lets this client reach "
            "the MCP server",
            data=(
                unreachable_data(url, f"HTTP {resp.status}")
                if resp.status >= 500
                else ({"oauth_error": code} if code else None)
            ),
        )
    grant = body.get("access_token")
    if body.get("issued_token_type") != ID_JAG or not isinstance(grant, str) or not grant:
        raise Error(
            "auth",
            reason,
            "the identity provider's token exchange answer is not an ID-JAG (no access_token, "
            f"or issued_token_type is not {ID_JAG})",
        )
    if len(grant) > MAX_ASSERTION or not header_safe(grant):
        raise Error("auth", reason, "the identity provider issued an ID-JAG that is not a JWT")
    return grant


async def jwt_bearer(
    session: aiohttp.ClientSession,
    discovered: Discovered,
    client: ClientCredentials,
    oauth: OAuth,
    assertion: str,
    scopes: Iterable[str] = (),
    *,
    timeout: float = HTTP_TIMEOUT,
    limit: int = MAX_BODY,
    dpop: Prover | None = None,
) -> TokenSet:
    """Tokens for ``assertion`` (an ID-JAG, or a workload token) with the JWT-bearer grant
    (RFC 7523 section 2.1), the client authenticated as its registration says. A refusal of
    the assertion itself (``invalid_grant``: a bad signature, an issuer the authorization
    server does not trust, a wrong audience, an expired token) is ``auth``/
    ``assertion_refused``; any other is ``auth``/``token_failed``."""
    scopes = tuple(scopes)
    params = {"assertion": assertion, **({"scope": " ".join(scopes)} if scopes else {})}
    try:
        return await token_request(
            session,
            discovered,
            client,
            oauth,
            JWT_BEARER,
            params,
            reason="token_failed",
            requested=scopes,
            timeout=timeout,
            limit=limit,
            dpop=dpop,
        )
    except Error as exc:
        data = exc.data if isinstance(exc.data, dict) else {}
        if data.get("oauth_error") != "invalid_grant":
            raise
        what = "ID-JAG" if oauth.grant == "identity_assertion" else "workload identity token"
        raise Error(
            "auth",
            "assertion_refused",
            f"the authorization server {discovered.issuer} refused the {what} "
            "(invalid_grant): check that it trusts the token's issuer, that the token's "
            "audience is that issuer, and that the token has not expired",
            data=data,
        ) from None
