"""``OAuth``: how a client authorizes against an HTTP MCP server, a frozen, checked value.

Imports nothing heavy (no authlib): ``Http`` checks ``isinstance(auth, OAuth)`` without
pulling the ``oauth`` extra in; constructing an ``OAuth`` checks that the extra is there.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from ..errors import Error
from .store import MemoryTokenStore, TokenStore
from .urls import is_loopback, is_secure

Grant = Literal["authorization_code", "client_credentials"]
ApplicationType = Literal["native", "web"]
AuthMethod = Literal["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]

GRANTS: frozenset[str] = frozenset({"authorization_code", "client_credentials"})
AUTH_METHODS: frozenset[str] = frozenset(
    {"none", "client_secret_basic", "client_secret_post", "private_key_jwt"}
)
#: The algorithms a DPoP proof may be signed with (``oauth/dpop.py`` holds their curves).
DPOP_ALGS: frozenset[str] = frozenset({"ES256", "ES384", "ES512"})
#: The JWS algorithms a ``private_key_jwt`` assertion may be signed with.
SIGNING_ALGS: frozenset[str] = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)


def _bad(name: str, message: str) -> Error:
    return Error("config", f"oauth.{name}", message)


def _check_str(value: Any, name: str) -> None:
    if value is not None and (not isinstance(value, str) or not value):
        raise _bad(name, f"OAuth {name} must be a non-empty string or None")


@dataclass(frozen=True, slots=True, eq=False)
class OAuth:
    """OAuth 2.1 for ``Http(url, auth=OAuth(...))`` (docs/oauth.md).

    How the client is registered, in the spec's order: pre-registered ``client_id`` (with
    ``client_secret`` or ``private_key``), else ``client_metadata_url`` (a client ID
    metadata document) when the authorization server supports those, else dynamic
    registration. ``grant="client_credentials"`` is machine-to-machine: no person, no
    redirect, a pre-registered client with a secret or a private key.

    >>> auth = OAuth(client_id="app", client_secret="s3cret", grant="client_credentials")
    >>> "s3cret" in repr(auth)
    False
    >>> auth
    OAuth(grant='client_credentials', client_id='app', principal='default', scopes=None)
    >>> OAuth(redirect_uri="http://example.com/cb")
    Traceback (most recent call last):
      ...
    conduit_mcp.errors.Error: config (oauth.redirect_uri): OAuth redirect_uri must be https, or http to 127.0.0.1, ::1 or localhost
    """

    client_id: str | None = None
    """A pre-registered client ID (first in the spec's registration order)."""
    client_secret: str | None = field(default=None, repr=False)
    """The pre-registered client's secret (never shown, logged or stored)."""
    client_metadata_url: str | None = None
    """An https URL of this client's metadata document, used as its ``client_id`` where the
    authorization server supports client ID metadata documents."""
    issuer: str | None = None
    """The one authorization server (its issuer identifier, compared exactly) this client
    authorizes with; another one named by the server is refused (``issuer_changed``).
    None: pre-registered credentials are bound to the issuer they are first used with
    (kept in the store); a registration of the client's own follows the server."""
    private_key: str | None = field(default=None, repr=False)
    """A PEM private key for ``private_key_jwt`` client authentication."""
    signing_alg: str = "RS256"
    """The JWS algorithm of the ``private_key_jwt`` assertion."""
    token_endpoint_auth: AuthMethod | None = None
    """How to authenticate at the token endpoint; None: chosen from what is given and what
    the authorization server lists (a key: ``private_key_jwt``; a secret:
    ``client_secret_basic`` unless only ``client_secret_post`` is listed; else ``none``)."""
    grant: Grant = "authorization_code"
    """``authorization_code`` (a person authorizes) or ``client_credentials`` (no person)."""
    scopes: tuple[str, ...] | None = None
    """The scopes to ask for; None: the challenge's, else the resource's
    ``scopes_supported``, else none."""
    redirect_uri: str | None = None
    """Where the authorization server sends the person back; None with ``loopback=True``:
    ``http://127.0.0.1:<port>/callback`` on a port the listener picks."""
    loopback: bool = False
    """Run the redirect listener on 127.0.0.1 (desktop use)."""
    on_authorize: Callable[[str], object] | None = field(default=None, repr=False)
    """Called with the authorization URL when a person must act; the application shows it."""
    store: TokenStore | None = field(default=None, repr=False)
    """Where tokens and registrations are kept; None: a new :class:`MemoryTokenStore`."""
    principal: str = "default"
    """Whose tokens these are: keys the store and the cache identity."""
    client_name: str = "conduit-mcp"
    """The ``client_name`` sent in dynamic registration."""
    application_type: ApplicationType = "native"
    """The ``application_type`` sent in dynamic registration: ``native`` for desktop, CLI
    and loopback apps, ``web`` for a remote web application."""
    dpop: bool | None = None
    """DPoP (RFC 9449, docs/oauth.md "DPoP"): tokens bound to a key pair of this client,
    proved on every request. None: when the authorization server advertises it and the
    resource requires it; True: always (a server that ignores the proofs issues Bearer
    tokens, used as such); False: never."""
    dpop_alg: str = "ES256"
    """The DPoP proofs' algorithm: ``ES256`` (an EC P-256 key), ``ES384`` or ``ES512``."""

    def __repr__(self) -> str:
        return (
            f"OAuth(grant={self.grant!r}, client_id={self.client_id!r}, "
            f"principal={self.principal!r}, scopes={self.scopes!r})"
        )

    def __post_init__(self) -> None:
        if importlib.util.find_spec("authlib") is None:
            raise _bad(
                "extra",
                "OAuth needs the oauth extra (authlib): pip install -e '.[oauth]' in a clone "
                "of conduit-mcp, or pip install 'conduit-mcp[oauth]' once it is published",
            )
        for name in ("client_id", "client_secret", "client_metadata_url", "private_key"):
            _check_str(getattr(self, name), name)
        if self.issuer is not None:
            parts = urlsplit(self.issuer) if isinstance(self.issuer, str) else None
            if parts is None or not is_secure(self.issuer) or parts.query or parts.fragment:
                raise _bad(
                    "issuer",
                    "OAuth issuer must be the authorization server's issuer: an https URL "
                    "(http only to 127.0.0.1, ::1 or localhost) without query or fragment",
                )
        if self.grant not in GRANTS:
            raise _bad("grant", "OAuth grant must be 'authorization_code' or 'client_credentials'")
        if self.client_secret is not None and self.client_id is None:
            raise _bad("client_secret", "OAuth client_secret is given with a client_id")
        if self.client_id is not None and self.client_metadata_url is not None:
            raise _bad(
                "client_metadata_url",
                "give OAuth either a pre-registered client_id or a client_metadata_url",
            )
        if self.client_metadata_url is not None:
            parts = urlsplit(self.client_metadata_url)
            if parts.scheme != "https" or not parts.hostname or parts.path in ("", "/"):
                raise _bad(
                    "client_metadata_url",
                    "OAuth client_metadata_url must be an https URL with a path",
                )
        if self.signing_alg not in SIGNING_ALGS:
            raise _bad("signing_alg", f"OAuth signing_alg must be one of {sorted(SIGNING_ALGS)}")
        if self.private_key is not None:
            if "PRIVATE KEY-----" not in self.private_key:
                raise _bad("private_key", "OAuth private_key must be a PEM private key")
            from .keys import load_private_key

            load_private_key(self.private_key, self.signing_alg)  # a bad key fails here, now
        self._check_auth_method()
        self._check_grant()
        self._check_scopes()
        self._check_redirect()
        if self.on_authorize is not None and not callable(self.on_authorize):
            raise _bad("on_authorize", "OAuth on_authorize must be a callable taking the URL")
        if self.store is None:
            object.__setattr__(self, "store", MemoryTokenStore())
        elif not all(callable(getattr(self.store, m, None)) for m in ("get", "put", "delete")):
            raise _bad("store", "OAuth store must have get(key), put(key, record), delete(key)")
        if not isinstance(self.principal, str) or not self.principal:
            raise _bad("principal", "OAuth principal must be a non-empty string")
        if not isinstance(self.client_name, str) or not self.client_name:
            raise _bad("client_name", "OAuth client_name must be a non-empty string")
        if self.application_type not in ("native", "web"):
            raise _bad("application_type", "OAuth application_type must be 'native' or 'web'")
        self._check_dpop()

    def _check_dpop(self) -> None:
        if self.dpop is not None and not isinstance(self.dpop, bool):
            raise _bad("dpop", "OAuth dpop must be True, False or None (when the server asks)")
        if not isinstance(self.dpop_alg, str) or self.dpop_alg not in DPOP_ALGS:
            raise _bad("dpop_alg", f"OAuth dpop_alg must be one of {sorted(DPOP_ALGS)}")

    def _check_auth_method(self) -> None:
        method = self.token_endpoint_auth
        if method is None:
            return
        if method not in AUTH_METHODS:
            raise _bad("token_endpoint_auth", f"must be one of {sorted(AUTH_METHODS)} or None")
        if method in ("client_secret_basic", "client_secret_post") and self.client_secret is None:
            raise _bad("token_endpoint_auth", f"{method} needs a client_secret")
        if method == "private_key_jwt" and self.private_key is None:
            raise _bad("token_endpoint_auth", "private_key_jwt needs a private_key")

    def _check_grant(self) -> None:
        if self.grant != "client_credentials":
            return
        if self.client_id is None or (self.client_secret is None and self.private_key is None):
            raise _bad(
                "grant",
                "the client_credentials grant needs a pre-registered client_id with a "
                "client_secret or a private_key",
            )
        if self.loopback or self.redirect_uri is not None or self.on_authorize is not None:
            raise _bad(
                "grant",
                "the client_credentials grant has no person and no redirect: drop loopback, "
                "redirect_uri and on_authorize",
            )

    def _check_scopes(self) -> None:
        if self.scopes is None:
            return
        scopes = self.scopes
        if isinstance(scopes, str) or not isinstance(scopes, Iterable):
            raise _bad("scopes", "OAuth scopes must be a list of scope strings or None")
        values = tuple(scopes)
        for scope in values:
            if not isinstance(scope, str) or not scope or any(c.isspace() for c in scope):
                raise _bad("scopes", "each OAuth scope is a non-empty string without spaces")
        object.__setattr__(self, "scopes", tuple(dict.fromkeys(values)))

    def _check_redirect(self) -> None:
        if not isinstance(self.loopback, bool):
            raise _bad("loopback", "OAuth loopback must be True or False")
        uri = self.redirect_uri
        if uri is not None:
            if not isinstance(uri, str):
                raise _bad("redirect_uri", "OAuth redirect_uri must be a URL string")
            parts = urlsplit(uri)
            local = parts.scheme == "http" and is_loopback(parts.hostname)
            if not (parts.scheme == "https" and parts.hostname) and not local:
                raise _bad(
                    "redirect_uri",
                    "OAuth redirect_uri must be https, or http to 127.0.0.1, ::1 or localhost",
                )
            if parts.fragment:
                raise _bad("redirect_uri", "OAuth redirect_uri must not have a fragment")
            if self.loopback and not local:
                raise _bad(
                    "redirect_uri",
                    "with loopback=True the redirect_uri must be http://127.0.0.1:<port>/...",
                )
        elif self.grant == "authorization_code" and not self.loopback:
            raise _bad(
                "redirect_uri",
                "the authorization_code grant needs a redirect_uri (paste-back) or "
                "loopback=True (a listener on 127.0.0.1)",
            )
