"""Where a streamable HTTP server is, and how to present credentials: a frozen value.

Credentials come in three forms (docs/cache.md, "Private results"), and never appear in a
repr, a log, an exception or a span:

* ``headers``: static headers sent with every request (an API key header, say);
* ``bearer``: a static token, sent as ``Authorization: Bearer <token>``;
* ``auth``: a callable returning a header mapping, called before every request. It is user
  code, so it runs on a small worker pool, never on an actor thread or the I/O loop, and is
  bounded by ``auth_timeout``. ``credential_id`` names whose credentials it returns, so that
  private cached lists can be kept (docs/cache.md); without it nothing private is ever cached.
  Or ``auth`` is an :class:`~conduit_mcp.oauth.config.OAuth`: the client authorizes itself
  (docs/oauth.md); ``spec.oauth`` gives it to the transport.
"""

from __future__ import annotations

import hashlib
import math
import os
import ssl as _ssl
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from ..errors import Error
from ..oauth.config import OAuth
from ..protocol.cache_rules import UNIDENTIFIED
from ..protocol.http_reuse import DEFAULT_KEEP_ALIVE

AuthCallable = Callable[[], Mapping[str, str]]


@dataclass(frozen=True, slots=True)
class Http:
    """A streamable HTTP MCP endpoint (both eras).

    >>> spec = Http("http://127.0.0.1:8000/mcp", bearer="s3cret", headers={"X-Key": "k3y"})
    >>> "s3cret" in repr(spec) or "k3y" in repr(spec)
    False
    >>> spec
    Http(url='http://127.0.0.1:8000/mcp', credential_id=None)
    >>> Http("http://user:pw@127.0.0.1:8000/mcp?api_key=k3y")  # never a password or a query
    Http(url='http://127.0.0.1:8000/mcp', credential_id=None)
    >>> spec.host, spec.port
    ('127.0.0.1', 8000)
    >>> Http("ftp://example.com/")
    Traceback (most recent call last):
      ...
    conduit_mcp.errors.Error: config (http.url): Http url must be an http:// or https:// URL

    ``max_response`` bounds one response body or one SSE event (bytes; None: the client's
    ``max_frame``). ``stream_idle`` is the longest silence allowed on a long-lived stream
    (the legacy GET stream, a ``subscriptions/listen`` stream) before it is reopened; a
    request's own stream is bounded by its deadline instead. ``connect_timeout`` bounds
    opening a TCP connection and waiting for a free pooled one (past it, the request fails
    with ``transport``/``connect_timeout``: it was never sent). ``pool_limit`` caps the
    connections requests use (None: ``max_in_flight`` + 8); the long-lived streams (the
    legacy GET stream, a listen) have a pool of their own, so they never starve requests.
    ``close_timeout`` bounds the legacy ``DELETE`` of the session on close. ``keep_alive``
    is how long an idle pooled connection is kept for the next request (seconds; default 4,
    below the 5 s after which uvicorn, hypercorn and Node close it; a server's shorter
    ``Keep-Alive: timeout=`` wins): docs/connection.md, "Idle connections".
    ``sse_fallback=True`` is the spec's backwards-compatibility recipe (2025-03-26,
    Transports): an ``initialize`` POST answered 400, 404 or 405 makes the client open the
    old HTTP+SSE transport's GET stream at the same URL instead (docs/sse.md; ``Sse`` speaks
    only that one).

    TLS (docs/tls.md): ``verify`` trusts the CAs of a PEM file, or of an OpenSSL CA folder
    (hashed names, as ``openssl rehash`` makes), instead of the system's; ``ssl`` is a whole
    :class:`ssl.SSLContext` (a private CA, a client certificate for servers that require
    mutual TLS). One or the other; both serve the MCP server and this client's OAuth calls.
    The file is read once, here: a missing or unreadable one is a ``config`` error.

    >>> Http("https://127.0.0.1/mcp", verify="/no/such/ca.pem")
    Traceback (most recent call last):
      ...
    conduit_mcp.errors.Error: config (http.verify): Http verify: cannot read the CA certificates at '/no/such/ca.pem' (FileNotFoundError); give a PEM file or a folder of CA certificates
    """

    url: str = field(repr=False)
    headers: Mapping[str, str] | None = field(default=None, repr=False)
    bearer: str | None = field(default=None, repr=False)
    auth: AuthCallable | OAuth | None = field(default=None, repr=False)
    credential_id: str | None = None
    auth_timeout: float = field(default=5.0, repr=False)
    max_response: int | None = field(default=None, repr=False)
    stream_idle: float = field(default=300.0, repr=False)
    connect_timeout: float = field(default=10.0, repr=False)
    pool_limit: int | None = field(default=None, repr=False)
    close_timeout: float = field(default=2.0, repr=False)
    ssl: _ssl.SSLContext | None = field(default=None, repr=False)
    verify: str | os.PathLike[str] | None = field(default=None, repr=False)
    keep_alive: float = field(default=DEFAULT_KEEP_ALIVE, repr=False)
    sse_fallback: bool = field(default=False, repr=False)
    # The context ``verify`` built (init=False: made again by every copy's __post_init__).
    _verify_context: _ssl.SSLContext | None = field(
        default=None, init=False, repr=False, compare=False
    )

    def __repr__(self) -> str:
        # The URL's password and query may be credentials (``?api_key=``): origin and path only.
        fallback = ", sse_fallback=True" if self.sse_fallback is True else ""
        return f"Http(url={describe(self)!r}, credential_id={self.credential_id!r}{fallback})"

    def __post_init__(self) -> None:
        if not isinstance(self.url, str):
            raise Error("config", "http.url", "Http url must be a string")
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise Error("config", "http.url", "Http url must be an http:// or https:// URL")
        try:
            parts.port  # noqa: B018 - parsing it is the check
        except ValueError:
            raise Error(
                "config", "http.url", "the Http url's port is not a number 0-65535"
            ) from None
        if self.headers is not None:
            if not isinstance(self.headers, Mapping) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in self.headers.items()
            ):
                raise Error("config", "http.headers", "Http headers must map str to str")
            object.__setattr__(self, "headers", dict(self.headers))
        if self.bearer is not None and (not isinstance(self.bearer, str) or not self.bearer):
            raise Error("config", "http.bearer", "Http bearer must be a non-empty string")
        if parts.username is not None or parts.password is not None:
            # aiohttp turns URL credentials into an Authorization header, and refuses every
            # request that carries another one: say so now, not as a failed first request.
            sent = {k.lower() for k in self.headers or {}}
            if self.bearer is not None or self.auth is not None or "authorization" in sent:
                raise Error(
                    "config",
                    "http.url",
                    "the Http url carries credentials (user:password@) and so do bearer, auth "
                    "or an Authorization header; give them one way only",
                )
        if isinstance(self.auth, OAuth):
            sent = {k.lower() for k in self.headers or {}}
            if self.bearer is not None or "authorization" in sent:
                raise Error(
                    "config",
                    "http.auth",
                    "an OAuth auth sets the Authorization header itself: drop bearer and the "
                    "Authorization header",
                )
            if self.credential_id is not None:
                raise Error(
                    "config",
                    "http.credential_id",
                    "an OAuth auth has its own identity (principal, issuer, resource): "
                    "drop credential_id",
                )
        elif self.auth is not None:
            if not callable(self.auth):
                raise Error("config", "http.auth", "Http auth must be a callable")
            if self.bearer is not None:
                raise Error("config", "http.auth", "give Http either bearer or auth, not both")
        if self.credential_id is not None and (
            not isinstance(self.credential_id, str) or self.auth is None or is_oauth(self.auth)
        ):
            raise Error(
                "config",
                "http.credential_id",
                "credential_id is a string, given with an auth callable (an OAuth "
                "client's identity is its principal, issuer and resource)",
            )
        if type(self.sse_fallback) is not bool:
            raise Error("config", "http.sse_fallback", "sse_fallback must be True or False")
        object.__setattr__(self, "_verify_context", _tls_options(self.ssl, self.verify))
        for name in (
            "auth_timeout",
            "stream_idle",
            "connect_timeout",
            "close_timeout",
            "keep_alive",
        ):
            value = getattr(self, name)
            # ``not value > 0``: NaN is refused too (it compares false with everything).
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
                raise Error("config", f"http.{name}", f"{name} must be a number > 0")
        if not math.isfinite(self.keep_alive):
            raise Error(
                "config", "http.keep_alive", "keep_alive must be a finite number of seconds"
            )
        for name in ("max_response", "pool_limit"):
            value = getattr(self, name)
            if value is not None and (
                not isinstance(value, int) or isinstance(value, bool) or value < 1
            ):
                raise Error("config", f"http.{name}", f"{name} must be an int >= 1 or None")

    @property
    def tls(self) -> _ssl.SSLContext | None:
        """The TLS context for https connections (the MCP server's and the OAuth calls'):
        ``ssl``, or the one ``verify`` built; None: the system's trusted CAs.

        >>> Http("https://h/mcp").tls is None
        True
        """
        return self.ssl if self.ssl is not None else self._verify_context

    @property
    def oauth(self) -> OAuth | None:
        """The OAuth configuration when ``auth`` is one (the client then runs the OAuth
        actor and stamps its tokens), else None.

        >>> Http("http://h/mcp").oauth is None
        True
        """
        return self.auth if isinstance(self.auth, OAuth) else None

    @property
    def callback(self) -> AuthCallable | None:
        """The ``auth`` callable when ``auth`` is one (not an OAuth), else None.

        >>> def headers():
        ...     return {"Authorization": "Bearer from-a-vault"}
        >>> Http("http://h/mcp", auth=headers).callback is headers
        True
        """
        return None if self.auth is None or isinstance(self.auth, OAuth) else self.auth

    @property
    def host(self) -> str:
        """The server's host name (what spans record as ``server.address``).

        >>> Http("https://user:pw@mcp.example.com/mcp?k=v").host
        'mcp.example.com'
        """
        return urlsplit(self.url).hostname or ""

    @property
    def port(self) -> int:
        """The server's port, the scheme's default when the URL names none.

        >>> Http("https://mcp.example.com/mcp").port, Http("http://127.0.0.1:8000/mcp").port
        (443, 8000)
        """
        parts = urlsplit(self.url)
        return parts.port or (443 if parts.scheme == "https" else 80)

    def credential(self) -> str | None:
        """The identity of these credentials for the cache (docs/cache.md, "Private
        results"), never a secret.

        None without credentials; the SHA-256 of a static bearer token and of the static
        headers (any header may carry a credential, an API key under any name, so every one
        counts: another value is another identity); the SHA-256 of an auth callable's
        declared ``credential_id``. An auth callable without one gives ``"unidentified"``: its
        private results are never stored. With OAuth the identity is the token's (a hash of
        principal, issuer and resource), set when the OAuth actor publishes one; until then
        only the static headers count.

        >>> Http("http://h/mcp").credential() is None
        True
        >>> len(Http("http://h/mcp", bearer="t").credential())
        64
        >>> a = Http("http://h/mcp", headers={"X-Api-Key": "alice"}).credential()
        >>> b = Http("http://h/mcp", headers={"X-Api-Key": "bob"}).credential()
        >>> a != b and None not in (a, b)
        True
        """
        if self.auth is not None and not is_oauth(self.auth):
            if self.credential_id is None:
                return UNIDENTIFIED
            return hashlib.sha256(self.credential_id.encode()).hexdigest()
        if self.bearer is not None and not self.headers:
            return hashlib.sha256(self.bearer.encode()).hexdigest()
        if self.bearer is None and not self.headers:
            return None
        digest = hashlib.sha256()
        if self.bearer is not None:
            digest.update(b"bearer\0" + self.bearer.encode() + b"\0")
        for name, value in sorted((k.lower(), v) for k, v in (self.headers or {}).items()):
            digest.update(name.encode() + b"\0" + value.encode() + b"\0")
        return digest.hexdigest()

    def static_headers(self) -> dict[str, str]:
        """The headers every request carries (the bearer included); not the auth callable's.

        >>> Http("http://h/mcp", bearer="t0k", headers={"X-Team": "a"}).static_headers()
        {'X-Team': 'a', 'Authorization': 'Bearer t0k'}
        """
        headers = dict(self.headers or {})
        if self.bearer is not None:
            headers["Authorization"] = f"Bearer {self.bearer}"
        return headers


def _tls_options(context: Any, verify: str | os.PathLike[str] | None) -> _ssl.SSLContext | None:
    """Check ``ssl`` and ``verify``; the context ``verify`` names (None without it)."""
    if context is not None and not isinstance(context, _ssl.SSLContext):
        raise Error(
            "config",
            "http.ssl",
            "Http ssl must be an ssl.SSLContext (ssl.create_default_context(cafile=...))",
        )
    if verify is None:
        return None
    if isinstance(verify, bool) or not isinstance(verify, (str, os.PathLike)):
        raise Error(
            "config",
            "http.verify",
            "Http verify is the path of a CA file (PEM) or folder; to turn verification "
            "off there is no option",
        )
    if context is not None:
        raise Error(
            "config",
            "http.verify",
            "give Http either ssl or verify, not both: load the CAs into the context "
            "(context.load_verify_locations(...))",
        )
    path = os.fspath(verify)
    try:
        if os.path.isdir(path):
            return _ssl.create_default_context(capath=path)
        return _ssl.create_default_context(cafile=path)
    except (OSError, _ssl.SSLError) as exc:
        raise Error(
            "config",
            "http.verify",
            f"Http verify: cannot read the CA certificates at {path!r} ({type(exc).__name__}); "
            "give a PEM file or a folder of CA certificates",
        ) from None


def is_oauth(auth: Any) -> bool:
    """Whether ``auth`` is an OAuth configuration (``conduit_mcp.OAuth``) rather than a
    callable: the client then starts an OAuth actor and the transport stamps its token."""
    return isinstance(auth, OAuth)


def safe_url(url: str) -> str:
    """``scheme://host[:port]/path`` of ``url``: no user, password, query or fragment, which
    may all carry credentials (``http://user:secret@host/mcp``, ``?api_key=...``).

    >>> safe_url("https://u:secret@[::1]:8443/mcp?api_key=secret#x")
    'https://[::1]:8443/mcp'
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        port = parts.port
    except ValueError:
        port = None
    netloc = host if port is None else f"{host}:{port}"
    return f"{parts.scheme}://{netloc}{parts.path}"


def describe(spec: Any) -> str:
    """A safe one-line description of a transport spec for logs and reprs (no credentials,
    no query)."""
    if isinstance(spec, Http):
        return safe_url(spec.url)
    return type(spec).__name__
