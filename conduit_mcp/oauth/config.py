"""``OAuth``: how a client authorizes against an HTTP MCP server, a frozen, checked value.

Imports nothing heavy (no authlib): ``Http`` checks ``isinstance(auth, OAuth)`` without
pulling the ``oauth`` extra in; constructing an ``OAuth`` checks that the extra is there.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from ..errors import Error
from .store import MemoryTokenStore, TokenStore
from .urls import is_loopback, is_secure

Grant = Literal["authorization_code", "client_credentials", "identity_assertion", "jwt_bearer"]
ApplicationType = Literal["native", "web"]
AuthMethod = Literal["none", "client_secret_basic", "client_secret_post", "private_key_jwt"]

GRANTS: frozenset[str] = frozenset(
    {"authorization_code", "client_credentials", "identity_assertion", "jwt_bearer"}
)
#: The MCP extension each grant is (docs/oauth.md, "Declared extensions"): the client declares
#: it in ``capabilities.extensions``. The person's grant is the core specification's.
GRANT_EXTENSIONS: dict[str, str] = {
    "client_credentials": "io.modelcontextprotocol/oauth-client-credentials",
    "identity_assertion": "io.modelcontextprotocol/enterprise-managed-authorization",
    "jwt_bearer": "io.modelcontextprotocol/auth/wif",
}
#: DPoP's extension, declared when ``OAuth(dpop=True)`` asks for bound tokens (with
#: ``dpop=None`` the client binds them only when both servers ask, and declares nothing).
DPOP_EXTENSION = "io.modelcontextprotocol/auth/dpop"
#: A secret the application hands over: the text itself, or a function asked at each use.
Secret = str | Callable[[], str]
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
    redirect, a pre-registered client with a secret or a private key;
    ``grant="identity_assertion"`` (enterprise-managed authorization) and ``grant="jwt_bearer"``
    (workload identity) have no person either.

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
    """``authorization_code`` (a person authorizes); without a person: ``client_credentials``
    (a client secret or key), ``identity_assertion`` (the user's enterprise single sign-on,
    exchanged at their identity provider) or ``jwt_bearer`` (a workload's platform-issued
    identity token); docs/oauth.md."""
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
    identity_token: Secret | None = field(default=None, repr=False)
    """``grant="identity_assertion"``: the user's identity assertion from the enterprise
    identity provider's single sign-on (an OpenID Connect ID token), or a function returning
    it, called (on a worker thread) at each token exchange, so it may hand out a fresh one."""
    idp_token_endpoint: str | None = None
    """``grant="identity_assertion"``: the enterprise identity provider's token endpoint, where
    the identity token is exchanged (RFC 8693) for an identity assertion authorization grant."""
    idp_client_id: str | None = None
    """``grant="identity_assertion"``: this client's ID at the identity provider (the audience
    of the identity token)."""
    idp_client_secret: str | None = field(default=None, repr=False)
    """``grant="identity_assertion"``: this client's secret at the identity provider, when it
    wants one (sent in the token exchange's body)."""
    assertion: Secret | None = field(default=None, repr=False)
    """``grant="jwt_bearer"``: the platform-issued workload identity token (a JWT), or a
    function returning it, called (on a worker thread) at each token request."""
    assertion_file: str | os.PathLike[str] | None = None
    """``grant="jwt_bearer"``: a file holding the workload identity token (a Kubernetes
    projected service account token, say), read again at each token request: it rotates."""

    @property
    def needs_person(self) -> bool:
        """Whether a token comes from a person's authorization (``authorization_code``); the
        other grants repeat by themselves, ahead of expiry too.

        >>> OAuth(loopback=True).needs_person
        True
        >>> OAuth(grant="jwt_bearer", client_id="ci", assertion="eyJ.x.y").needs_person
        False
        """
        return self.grant == "authorization_code"

    @property
    def extensions(self) -> tuple[str, ...]:
        """The MCP extensions this configuration uses, declared in the client's
        capabilities (docs/oauth.md, "Declared extensions").

        >>> OAuth(grant="client_credentials", client_id="svc", client_secret="s").extensions
        ('io.modelcontextprotocol/oauth-client-credentials',)
        >>> OAuth(loopback=True).extensions
        ()
        >>> OAuth(loopback=True, dpop=True).extensions
        ('io.modelcontextprotocol/auth/dpop',)
        """
        ext = GRANT_EXTENSIONS.get(self.grant)
        grant = (ext,) if ext is not None else ()
        return (*grant, DPOP_EXTENSION) if self.dpop else grant

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
        for name in (
            "client_id",
            "client_secret",
            "client_metadata_url",
            "private_key",
            "idp_token_endpoint",
            "idp_client_id",
            "idp_client_secret",
        ):
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
            raise _bad("grant", f"OAuth grant must be one of {sorted(GRANTS)}")
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
        self._check_grant_inputs()
        if self.grant == "authorization_code":
            return
        if self.grant == "client_credentials" and (
            self.client_id is None or (self.client_secret is None and self.private_key is None)
        ):
            raise _bad(
                "grant",
                "the client_credentials grant needs a pre-registered client_id with a "
                "client_secret or a private_key",
            )
        if self.client_id is None:
            raise _bad(
                "grant",
                f"the {self.grant} grant needs the client_id this client is registered with "
                "at the MCP server's authorization server",
            )
        if self.loopback or self.redirect_uri is not None or self.on_authorize is not None:
            raise _bad(
                "grant",
                f"the {self.grant} grant has no person and no redirect: drop loopback, "
                "redirect_uri and on_authorize",
            )

    def _check_grant_inputs(self) -> None:
        """Each grant's own inputs, and none of another grant's (a forgotten option would
        otherwise be silently ignored)."""
        exchange = ("identity_token", "idp_token_endpoint", "idp_client_id", "idp_client_secret")
        workload = ("assertion", "assertion_file")
        own = {"identity_assertion": exchange, "jwt_bearer": workload}.get(self.grant, ())
        for name in (*exchange, *workload):
            if getattr(self, name) is not None and name not in own:
                raise _bad(name, f"OAuth {name} belongs to another grant than {self.grant!r}")
        for name in ("identity_token", "assertion"):
            value = getattr(self, name)
            if (
                value is not None
                and not callable(value)
                and (not isinstance(value, str) or not value)
            ):
                raise _bad(
                    name, f"OAuth {name} must be a non-empty string or a function returning one"
                )
        if self.grant == "identity_assertion":
            for name in ("identity_token", "idp_token_endpoint", "idp_client_id"):
                if getattr(self, name) is None:
                    raise _bad(name, f"the identity_assertion grant needs OAuth {name}")
            endpoint = self.idp_token_endpoint
            if (
                not isinstance(endpoint, str)
                or not is_secure(endpoint)
                or urlsplit(endpoint).fragment
            ):
                raise _bad(
                    "idp_token_endpoint",
                    "OAuth idp_token_endpoint must be an https URL (http only to 127.0.0.1, "
                    "::1 or localhost) without a fragment",
                )
        if self.grant == "jwt_bearer":
            if (self.assertion is None) == (self.assertion_file is None):
                raise _bad(
                    "assertion",
                    "the jwt_bearer grant needs exactly one of OAuth assertion (the token, or "
                    "a function returning it) and assertion_file (a file holding it)",
                )
            path = self.assertion_file
            if path is not None:
                if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
                    raise _bad("assertion_file", "OAuth assertion_file must be a file path")
                object.__setattr__(self, "assertion_file", os.fspath(path))

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
