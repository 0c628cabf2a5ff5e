"""What the OAuth library keeps: a token set and a client registration, frozen values whose
reprs show nothing secret and which turn into plain JSON records for a token store.

Pure: no I/O, no authlib, so a store can load them without the ``oauth`` extra.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

import orjson

from ..errors import Error

#: How long before expiry a token is refreshed, at most (seconds); a short-lived token is
#: refreshed when half its lifetime is left instead (see :meth:`TokenSet.refresh_at`).
REFRESH_LEEWAY = 60.0
#: The soonest a proactive renewal comes after the last one (seconds): a token that would
#: be expired by then (a lifetime under twice this) is renewed only when a server refuses it
#: (401), so tiny ``expires_in`` values cannot make an idle client ask for tokens in a loop.
REFRESH_FLOOR = 1.0
#: The longest lifetime believed from an ``expires_in`` (seconds, ten years): a larger
#: value, or a non-number, is treated as "no expiry given".
MAX_LIFETIME = 10 * 365 * 86400.0

Registration = Literal["pre-registered", "cimd", "dcr"]


def identity(principal: str, issuer: str, resource: str) -> str:
    """The cache identity of OAuth credentials (docs/cache-and-notifications.md): a
    SHA-256 over principal, issuer and resource, so a refresh keeps it and another
    principal, another authorization server or another resource changes it.

    >>> identity("alice", "https://as", "https://mcp/x") == identity("alice", "https://as", "https://mcp/x")
    True
    >>> identity("alice", "https://as", "https://mcp/x") == identity("bob", "https://as", "https://mcp/x")
    False
    >>> len(identity("a", "b", "c"))
    64
    """
    # JSON: unambiguous, whatever the parts contain.
    return hashlib.sha256(orjson.dumps(["oauth", principal, issuer, resource])).hexdigest()


#: The registered OAuth error codes (RFC 6749, 6750, 7591, 8707, 9449 and OpenID Connect):
#: only these are ever repeated in an exception message. Anything else a server puts in
#: ``error`` might be anything (an echoed token, say), so it is not shown.
ERROR_CODES: frozenset[str] = frozenset(
    {
        "invalid_request",
        "invalid_client",
        "invalid_grant",
        "unauthorized_client",
        "unsupported_grant_type",
        "invalid_scope",
        "access_denied",
        "unsupported_response_type",
        "server_error",
        "temporarily_unavailable",
        "invalid_redirect_uri",
        "invalid_client_metadata",
        "invalid_software_statement",
        "unapproved_software_statement",
        "invalid_target",
        "invalid_token",
        "insufficient_scope",
        "interaction_required",
        "login_required",
        "account_selection_required",
        "consent_required",
        "invalid_dpop_proof",
        "use_dpop_nonce",
    }
)
_SAFE_CODE = ERROR_CODES | {"Bearer", "bearer", "DPoP", "dpop", "MAC", "mac", "N_A", "none"}


def safe_code(value: Any) -> str | None:
    """A registered OAuth code fit for an exception message (``invalid_grant``), or None:
    the server's free text never goes into one.

    >>> safe_code("invalid_grant"), safe_code("eyJhbGciOi"), safe_code(3), safe_code("DPoP")
    ('invalid_grant', None, None, 'DPoP')
    """
    if isinstance(value, str) and value in _SAFE_CODE:
        return value
    return None


def header_safe(token: str) -> bool:
    """Whether ``token`` can be sent as ``Authorization: Bearer <token>``: visible ASCII
    only (RFC 6750 section 2.1's b64token is a subset). A CR, LF or NUL could split or end
    the header, and an HTTP library refuses to send it: such a token is refused when it is
    issued, so calls fail at once instead of waiting for their deadlines.

    >>> header_safe("eyJhbGciOi.x-y_z~+/="), header_safe("a\\r\\nX-Evil: 1"), header_safe("a b")
    (True, False, False)
    >>> header_safe("t\\x00"), header_safe("caf\\u00e9")
    (False, False)
    """
    return token.isascii() and all(33 <= ord(c) <= 126 for c in token)


def _opt_str(record: Mapping[str, Any], name: str) -> str | None:
    value = record.get(name)
    return value if isinstance(value, str) and value else None


def _opt_float(record: Mapping[str, Any], name: str) -> float | None:
    value = record.get(name)
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    return None


@dataclass(frozen=True, slots=True)
class TokenSet:
    """The tokens one authorization produced. Times are wall-clock seconds (``time.time()``),
    since a stored set outlives the process that got it.

    >>> t = TokenSet("secret-access", "secret-refresh", expires_at=1100.0, issued_at=1000.0,
    ...              scope=("a", "b"))
    >>> t
    TokenSet(expires_at=1100.0, scope=('a', 'b'), token_type='Bearer', refreshable=True)
    >>> t.refresh_at(), t.expired(1099.0), t.expired(1100.0)
    (1050.0, False, True)
    """

    access_token: str = field(repr=False)
    refresh_token: str | None = field(default=None, repr=False)
    expires_at: float | None = None
    scope: tuple[str, ...] = ()
    token_type: str = "Bearer"
    issued_at: float | None = field(default=None, repr=False)
    dpop_key: str | None = field(default=None, repr=False)
    """The private key (JWK JSON) a ``DPoP`` token is bound to (RFC 9449): kept with the
    tokens, since a bound refresh token is spent with the same key; never shown."""

    def __repr__(self) -> str:
        return (
            f"TokenSet(expires_at={self.expires_at!r}, scope={self.scope!r}, "
            f"token_type={self.token_type!r}, refreshable={self.refresh_token is not None})"
        )

    @classmethod
    def from_response(
        cls,
        body: Mapping[str, Any],
        *,
        now: float,
        requested: tuple[str, ...] = (),
        previous_refresh: str | None = None,
        reason: str = "token_failed",
        dpop_key: str | None = None,
    ) -> TokenSet:
        """The token set of a token endpoint's JSON answer (RFC 6749 section 5.1).

        No ``scope`` in the answer means the requested scope was granted; no
        ``refresh_token`` in a refresh's answer means the old one stays valid (section 6).
        A missing ``access_token`` or a token type other than Bearer is
        ``Error("auth", reason)``; with ``dpop_key`` (the request carried a DPoP proof
        made with it) a ``DPoP`` token is one too, bound to that key (RFC 9449 section 5),
        and a Bearer answer stays a Bearer token (the server chose not to bind it).

        >>> TokenSet.from_response({"access_token": "x", "token_type": "DPoP"}, now=0.0,
        ...                        dpop_key="{}").authorization()
        'DPoP x'

        >>> TokenSet.from_response({"access_token": "x", "expires_in": 60}, now=10.0,
        ...                        requested=("a",))
        TokenSet(expires_at=70.0, scope=('a',), token_type='Bearer', refreshable=False)
        >>> TokenSet.from_response({"access_token": "x", "token_type": "DPoP"}, now=0.0)
        Traceback (most recent call last):
          ...
        conduit_mcp.errors.Error: auth (token_failed): the token endpoint issued a 'DPoP' token; only Bearer tokens are supported
        """
        access = body.get("access_token")
        if not isinstance(access, str) or not access:
            raise Error("auth", reason, "the token endpoint's answer has no access_token")
        if not header_safe(access):
            raise Error(
                "auth",
                reason,
                "the token endpoint issued an access token that cannot be sent in an HTTP "
                "header (a control character such as CR, LF or NUL, a space, or a non-ASCII "
                "character); refusing it: the authorization server is broken",
            )
        token_type = body.get("token_type", "Bearer")
        bound = (
            dpop_key is not None and isinstance(token_type, str) and token_type.lower() == "dpop"
        )
        if not bound and (not isinstance(token_type, str) or token_type.lower() != "bearer"):
            shown = safe_code(token_type) or "unknown"
            raise Error(
                "auth",
                reason,
                f"the token endpoint issued a {shown!r} token; only Bearer tokens are supported",
            )
        expires_in = _opt_float(body, "expires_in")
        expires_at = None
        if expires_in is not None and 0 < expires_in <= MAX_LIFETIME:
            expires_at = now + expires_in
        scope_text = body.get("scope")
        scope = (
            tuple(dict.fromkeys(scope_text.split()))
            if isinstance(scope_text, str)
            else tuple(requested)
        )
        refresh = body.get("refresh_token")
        if not isinstance(refresh, str) or not refresh:
            refresh = previous_refresh
        return cls(
            access_token=access,
            refresh_token=refresh,
            expires_at=expires_at,
            scope=scope,
            token_type="DPoP" if bound else "Bearer",
            issued_at=now,
            dpop_key=dpop_key if bound else None,
        )

    def expired(self, now: float, leeway: float = 0.0) -> bool:
        """Whether the access token is past (or within ``leeway`` of) its expiry; a token
        without an expiry never is.

        >>> t = TokenSet("a", expires_at=1100.0)
        >>> t.expired(1050.0), t.expired(1050.0, leeway=60), TokenSet("a").expired(1e12)
        (False, True, False)
        """
        return self.expires_at is not None and now >= self.expires_at - leeway

    def refresh_at(self, leeway: float = REFRESH_LEEWAY) -> float | None:
        """When to refresh: ``leeway`` seconds before expiry, or halfway through a lifetime
        shorter than twice that; None without an expiry (refresh only on a 401).

        >>> TokenSet("a", expires_at=4000.0, issued_at=400.0).refresh_at()
        3940.0
        >>> TokenSet("a").refresh_at() is None
        True
        """
        if self.expires_at is None:
            return None
        lifetime = self.expires_at - self.issued_at if self.issued_at is not None else math.inf
        return self.expires_at - min(leeway, max(lifetime, 0.0) / 2)

    def renewal_delay(self, now: float, floor: float = REFRESH_FLOOR) -> float | None:
        """Seconds from ``now`` to the proactive renewal: at :meth:`refresh_at`, but never
        sooner than ``floor``; None without an expiry, or when the token is expired by then
        (renewed on a 401 only).

        >>> TokenSet("a", expires_at=4000.0, issued_at=400.0).renewal_delay(400.0)
        3540.0
        >>> TokenSet("a", expires_at=1.5, issued_at=0.0).renewal_delay(0.0)
        1.0
        >>> TokenSet("a", expires_at=0.05, issued_at=0.0).renewal_delay(0.0) is None
        True
        """
        at = self.refresh_at()
        if at is None or self.expires_at is None:
            return None
        delay = max(at - now, floor)
        if now + delay >= self.expires_at:
            return None
        return delay

    def authorization(self) -> str:
        """The ``Authorization`` header value (RFC 6750 section 2.1; RFC 9449 section 7.1
        for a DPoP-bound token).

        >>> TokenSet("t0k").authorization(), TokenSet("t0k", token_type="DPoP").authorization()
        ('Bearer t0k', 'DPoP t0k')
        """
        return f"{'DPoP' if self.token_type == 'DPoP' else 'Bearer'} {self.access_token}"

    def to_record(self) -> dict[str, Any]:
        """A JSON-ready record for a :class:`~conduit_mcp.oauth.store.TokenStore`.

        >>> sorted(TokenSet("a", "r", expires_at=1100.0).to_record())
        ['access_token', 'expires_at', 'issued_at', 'refresh_token', 'scope', 'token_type']
        """
        return {
            "access_token": self.access_token,
            "refresh_token": self.refresh_token,
            "expires_at": self.expires_at,
            "issued_at": self.issued_at,
            "scope": list(self.scope),
            "token_type": self.token_type,
            **({"dpop_key": self.dpop_key} if self.dpop_key is not None else {}),
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> TokenSet | None:
        """The token set a store kept, or None when the record is not one (a damaged or
        foreign record is treated as absent: the flow starts over, it does not crash; a
        ``DPoP`` token without its key is one).

        >>> TokenSet.from_record(TokenSet("a", scope=("mcp",)).to_record())
        TokenSet(expires_at=None, scope=('mcp',), token_type='Bearer', refreshable=False)
        >>> TokenSet.from_record({"access_token": "not a header value"}) is None
        True
        """
        access = _opt_str(record, "access_token")
        if access is None or not header_safe(access):
            return None
        key = _opt_str(record, "dpop_key")
        bound = record.get("token_type") == "DPoP"
        if bound and key is None:
            return None
        scope = record.get("scope")
        return cls(
            access_token=access,
            refresh_token=_opt_str(record, "refresh_token"),
            expires_at=_opt_float(record, "expires_at"),
            scope=tuple(s for s in scope if isinstance(s, str)) if isinstance(scope, list) else (),
            token_type="DPoP" if bound else "Bearer",
            issued_at=_opt_float(record, "issued_at"),
            dpop_key=key if bound else None,
        )


@dataclass(frozen=True, slots=True)
class ClientCredentials:
    """How this client is known to one authorization server (its ``issuer``): kept per
    issuer, never shown to another one (Authorization, "Client Registration").

    >>> c = ClientCredentials("app", "s3cret", "client_secret_basic", "https://as.example")
    >>> c
    ClientCredentials(client_id='app', token_endpoint_auth_method='client_secret_basic', issuer='https://as.example', registration='pre-registered')
    """

    client_id: str
    client_secret: str | None = field(default=None, repr=False)
    token_endpoint_auth_method: str = "none"
    issuer: str = ""
    registration: Registration = "pre-registered"
    redirect_uris: tuple[str, ...] = field(default=(), repr=False)
    client_secret_expires_at: float | None = field(default=None, repr=False)

    def usable(self, issuer: str, redirect_uri: str | None, now: float) -> bool:
        """Whether a kept registration still serves: the same issuer, the redirect URI
        registered, the secret not expired (0 or None: never expires).

        >>> c = ClientCredentials("a", issuer="https://as", redirect_uris=("http://127.0.0.1/cb",),
        ...                       registration="dcr")
        >>> c.usable("https://as", "http://127.0.0.1/cb", 0.0), c.usable("https://other", None, 0.0)
        (True, False)
        """
        if self.issuer != issuer:
            return False
        if (
            redirect_uri is not None
            and self.registration == "dcr"
            and redirect_uri not in self.redirect_uris
        ):
            return False
        expires = self.client_secret_expires_at
        return not (expires and now >= expires)

    def loopback_port(self, path: str = "/callback") -> int | None:
        """The port of the first ``http://127.0.0.1:<port><path>`` redirect URI registered,
        or None: a desktop login listens there again when it is free, so the registration
        still serves (its redirect URI is registered exactly; the loopback listener's).

        >>> ClientCredentials("a", redirect_uris=("https://app/cb", "http://127.0.0.1:5123/callback"),
        ...                   registration="dcr").loopback_port()
        5123
        >>> ClientCredentials("a", redirect_uris=("http://127.0.0.1/callback",)).loopback_port()
        """
        for uri in self.redirect_uris:
            parts = urlsplit(uri)
            try:
                port = parts.port
            except ValueError:
                continue
            if (parts.scheme, parts.hostname, parts.path) == ("http", "127.0.0.1", path) and port:
                return port
        return None

    def to_record(self) -> dict[str, Any]:
        return {
            "client_id": self.client_id,
            "client_secret": self.client_secret,
            "token_endpoint_auth_method": self.token_endpoint_auth_method,
            "issuer": self.issuer,
            "registration": self.registration,
            "redirect_uris": list(self.redirect_uris),
            "client_secret_expires_at": self.client_secret_expires_at,
        }

    @classmethod
    def from_record(cls, record: Mapping[str, Any]) -> ClientCredentials | None:
        client_id = _opt_str(record, "client_id")
        issuer = _opt_str(record, "issuer")
        method = _opt_str(record, "token_endpoint_auth_method") or "none"
        registration = record.get("registration")
        if client_id is None or issuer is None or registration not in ("cimd", "dcr"):
            return None  # pre-registered credentials come from the OAuth config, not a store
        uris = record.get("redirect_uris")
        return cls(
            client_id=client_id,
            client_secret=_opt_str(record, "client_secret"),
            token_endpoint_auth_method=method,
            issuer=issuer,
            registration=registration,
            redirect_uris=tuple(u for u in uris if isinstance(u, str))
            if isinstance(uris, list)
            else (),
            client_secret_expires_at=_opt_float(record, "client_secret_expires_at"),
        )
