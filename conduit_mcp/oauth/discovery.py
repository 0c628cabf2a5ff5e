"""Where to authorize: protected resource metadata, then the authorization server's metadata.

The order (Authorization, "Authorization Server Discovery"):

1. RFC 9728 protected resource metadata (PRM): the challenge's ``resource_metadata`` URL,
   then the path-aware well-known URL, then the root one. Its ``resource`` must be the
   server's canonical URI or a parent of it on the same origin (a root document names the
   origin), else the document is refused (``resource_mismatch``).
2. The first authorization server it lists; its RFC 8414 / OpenID Connect metadata at the
   spec's URLs, in the spec's order; the document's ``issuer`` must be identical to the
   issuer the URL was built from (``issuer_mismatch``).
3. No PRM at all: the 2025-03-26 rules (the server's origin is the authorization server:
   its metadata, else the default ``/authorize``, ``/token`` and ``/register``). Only when
   there really is none: no ``resource_metadata`` in the challenge, and a definite "no"
   (404, ...) at every well-known URL. A fetch that fails (no answer, a 5xx, a 429, a JSON
   body that does not parse) is ``discovery_failed`` marked worth a retry
   (``Error.data["unreachable"]``): the client backs off and tries again, as for an
   unreachable authorization server, and sends no credential anywhere meanwhile; the same
   holds for the authorization server's metadata (no default endpoints after a 503).

PKCE with S256 must be advertised (``no_pkce``). Every authorization server URL must be
https, or http to a loopback host. RFC 9728 is written here by hand (authlib has none);
authlib builds the RFC 8414 well-known URL and checks the metadata's fields.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from authlib.oauth2.rfc8414 import AuthorizationServerMetadata, get_well_known_url

from ..errors import Error
from ._http import (
    HTTP_TIMEOUT,
    MAX_BODY,
    UNREACHABLE,
    is_loopback,
    is_secure,
    is_unreachable,
    request,
    require_secure,
    unreachable_data,
)
from .challenge import Challenge

log = logging.getLogger("conduit_mcp.oauth")

_PRM_SUFFIX = "oauth-protected-resource"


def canonical_resource(url: str) -> str:
    """The server's canonical URI for RFC 8707 ``resource``: lowercase scheme and host, the
    port only when it is not the scheme's default, no user, query, fragment or trailing
    slash.

    >>> canonical_resource("HTTPS://MCP.Example.com:443/mcp/?x=1#f")
    'https://mcp.example.com/mcp'
    >>> canonical_resource("http://127.0.0.1:8080/")
    'http://127.0.0.1:8080'
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    host = (parts.hostname or "").lower()
    if ":" in host:
        host = f"[{host}]"
    port = parts.port
    default = {"http": 80, "https": 443}.get(scheme)
    netloc = host if port is None or port == default else f"{host}:{port}"
    return urlunsplit((scheme, netloc, parts.path.rstrip("/"), "", ""))


def origin(url: str) -> str:
    """``scheme://host[:port]`` of ``url``, canonical.

    >>> origin("https://Mcp.example.com/a/b")
    'https://mcp.example.com'
    """
    parts = urlsplit(canonical_resource(url))
    return f"{parts.scheme}://{parts.netloc}"


def resource_matches(advertised: str, server_url: str) -> bool:
    """Whether a PRM's ``resource`` names this server: its canonical URI, or a parent of it
    on the same origin at a path-segment boundary.

    >>> resource_matches("https://mcp.example.com", "https://mcp.example.com/mcp")
    True
    >>> resource_matches("https://mcp.example.com/mc", "https://mcp.example.com/mcp")
    False
    >>> resource_matches("https://evil.example.com/mcp", "https://mcp.example.com/mcp")
    False
    """
    want = canonical_resource(server_url)
    have = canonical_resource(advertised)
    if have == want:
        return True
    if origin(have) != origin(want):
        return False
    return want.startswith(have + "/")


def prm_urls(server_url: str, challenge_url: str | None = None) -> list[str]:
    """The protected resource metadata URLs to try, in order: the challenge's, the
    path-aware well-known URL (only when the server URL has a path), the root one.

    >>> prm_urls("https://mcp.example.com/public/mcp")
    ['https://mcp.example.com/.well-known/oauth-protected-resource/public/mcp', 'https://mcp.example.com/.well-known/oauth-protected-resource']
    >>> prm_urls("https://mcp.example.com/", "https://mcp.example.com/prm")
    ['https://mcp.example.com/prm', 'https://mcp.example.com/.well-known/oauth-protected-resource']
    """
    canonical = canonical_resource(server_url)
    root = f"{origin(canonical)}/.well-known/{_PRM_SUFFIX}"
    urls = [challenge_url] if challenge_url else []
    if urlsplit(canonical).path:
        urls.append(get_well_known_url(canonical, external=True, suffix=_PRM_SUFFIX))
    urls.append(root)
    return list(dict.fromkeys(urls))


def as_metadata_urls(issuer: str) -> list[str]:
    """The authorization server metadata URLs to try for ``issuer``, in the spec's order.

    >>> for u in as_metadata_urls("https://auth.example.com/tenant1"): print(u)
    https://auth.example.com/.well-known/oauth-authorization-server/tenant1
    https://auth.example.com/.well-known/openid-configuration/tenant1
    https://auth.example.com/tenant1/.well-known/openid-configuration
    >>> as_metadata_urls("https://auth.example.com")
    ['https://auth.example.com/.well-known/oauth-authorization-server', 'https://auth.example.com/.well-known/openid-configuration']
    """
    parts = urlsplit(issuer)
    base = f"{parts.scheme}://{parts.netloc}"
    path = parts.path.rstrip("/")
    if not path:
        return [
            f"{base}/.well-known/oauth-authorization-server",
            f"{base}/.well-known/openid-configuration",
        ]
    return [
        get_well_known_url(f"{base}{path}", external=True),
        get_well_known_url(f"{base}{path}", external=True, suffix="openid-configuration"),
        f"{base}{path}/.well-known/openid-configuration",
    ]


@dataclass(frozen=True, slots=True)
class Discovered:
    """What discovery found: the ``resource`` to name in every request (the PRM's own
    string; without a PRM the server's canonical URI), the PRM document
    (None on the 2025-03-26 fallback), the chosen ``issuer`` and its metadata (on the
    default-endpoints fallback, a document built from the defaults; ``legacy`` says so)."""

    resource: str
    prm: Mapping[str, Any] | None = field(repr=False)
    issuer: str
    as_metadata: Mapping[str, Any] = field(repr=False)
    legacy: bool = False

    @property
    def authorization_endpoint(self) -> str | None:
        value = self.as_metadata.get("authorization_endpoint")
        return value if isinstance(value, str) else None

    @property
    def token_endpoint(self) -> str:
        return str(self.as_metadata["token_endpoint"])

    @property
    def registration_endpoint(self) -> str | None:
        value = self.as_metadata.get("registration_endpoint")
        return value if isinstance(value, str) else None

    @property
    def resource_scopes(self) -> tuple[str, ...] | None:
        """The PRM's ``scopes_supported``, or None when it lists none."""
        return _str_list(self.prm.get("scopes_supported")) if self.prm is not None else None

    @property
    def server_scopes(self) -> tuple[str, ...]:
        """The authorization server's ``scopes_supported`` (empty when absent)."""
        return _str_list(self.as_metadata.get("scopes_supported")) or ()

    @property
    def auth_methods(self) -> tuple[str, ...] | None:
        """``token_endpoint_auth_methods_supported``, or None when absent."""
        return _str_list(self.as_metadata.get("token_endpoint_auth_methods_supported"))

    @property
    def iss_supported(self) -> bool:
        """RFC 9207: whether the redirect must carry ``iss``."""
        return self.as_metadata.get("authorization_response_iss_parameter_supported") is True

    @property
    def cimd_supported(self) -> bool:
        return self.as_metadata.get("client_id_metadata_document_supported") is True


def _str_list(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list):
        return None
    return tuple(dict.fromkeys(v for v in value if isinstance(v, str) and v))


#: Statuses that say "try again later" (a server error, a timeout, a rate limit), not "there
#: is no document here": such an answer never leads to the 2025-03-26 fallback.
_TRANSIENT = frozenset({408, 425, 429})


def classify_answer(status: int, parsed: bool, content_type: str) -> str:
    """What one metadata answer says: ``found`` (200 with a JSON object), ``absent`` (a
    definite "no document here": 404, 410, a redirect (never followed), any other status
    below 500, or a 200 page that is not JSON at all, an HTML catch-all) or ``failed`` (5xx,
    408, 425, 429, or a 200 JSON body that does not parse: try again later, never fall back
    on it).

    >>> classify_answer(200, True, "application/json"), classify_answer(404, False, "")
    ('found', 'absent')
    >>> classify_answer(503, False, "text/plain"), classify_answer(429, False, "")
    ('failed', 'failed')
    >>> classify_answer(200, False, "application/json"), classify_answer(200, False, "text/html")
    ('failed', 'absent')
    """
    if status == 200:
        if parsed:
            return "found"
        return "failed" if "json" in content_type.lower() else "absent"
    if status >= 500 or status in _TRANSIENT:
        return "failed"
    return "absent"


def _retry_later(what: str, failures: list[str], data: Any = UNREACHABLE) -> Error:
    """A metadata fetch that failed (no answer, or a "try again" one): worth a retry, like an
    unreachable authorization server, and never a reason to fall back."""
    return Error(
        "auth",
        "discovery_failed",
        f"the {what} could not be fetched ({failures[0]}); trying again later",
        data=data,
    )


async def _fetch_prm(
    session: aiohttp.ClientSession,
    server_url: str,
    url: str,
    timeout: float,
    limit: int,
    failures: list[str],
) -> Mapping[str, Any] | None:
    """The checked document at ``url``, or None: absent, or failed (then a note is added
    to ``failures``). A body over ``limit`` is ``Error`` at once (a broken server)."""
    try:
        resp = await request(
            session,
            "GET",
            url,
            what="protected resource metadata",
            reason="discovery_failed",
            timeout=timeout,
            limit=limit,
        )
    except Error as e:
        if not is_unreachable(e.data):
            raise  # tls_failed among them: no other URL there passes the same handshake
        log.debug("protected resource metadata at %s: %s", url, e.message)
        failures.append(e.message)
        return None
    outcome = classify_answer(resp.status, resp.json is not None, resp.content_type)
    if outcome != "found":
        log.debug("no protected resource metadata at %s (HTTP %d)", url, resp.status)
        if outcome == "failed":
            failures.append(f"{url} answered HTTP {resp.status}")
        return None
    doc = resp.json
    assert doc is not None
    resource = doc.get("resource")
    if not isinstance(resource, str) or not resource_matches(resource, server_url):
        raise Error(
            "auth",
            "resource_mismatch",
            f"the protected resource metadata at {url} names another resource than "
            f"{canonical_resource(server_url)}; refusing to send tokens for it",
        )
    servers = _str_list(doc.get("authorization_servers"))
    if not servers:
        raise Error(
            "auth",
            "discovery_failed",
            f"the protected resource metadata at {url} lists no authorization_servers",
        )
    return doc


def _check_metadata(doc: Mapping[str, Any], issuer: str, url: str) -> None:
    for name in ("issuer", "token_endpoint"):
        if not isinstance(doc.get(name), str):
            raise Error(
                "auth",
                "discovery_failed",
                f"the authorization server metadata at {url} has no {name} (a URL string)",
            )
    metadata = AuthorizationServerMetadata(dict(doc))
    try:
        metadata.validate_issuer()
        metadata.validate_token_endpoint()
        metadata.validate_registration_endpoint()
        metadata.validate_token_endpoint_auth_methods_supported()
        metadata.validate_code_challenge_methods_supported()
        metadata.validate_scopes_supported()
    except ValueError as e:  # authlib's messages name the field and the rule, not values
        raise Error(
            "auth", "discovery_failed", f"the authorization server metadata at {url}: {e}"
        ) from None
    except Exception as e:  # a field of the wrong type
        raise Error(
            "auth",
            "discovery_failed",
            f"the authorization server metadata at {url} is malformed ({type(e).__name__})",
        ) from None
    for name in ("authorization_endpoint", "token_endpoint", "registration_endpoint"):
        value = doc.get(name)
        if value is not None:
            require_secure(value, f"authorization server's {name}", "discovery_failed")
            if urlsplit(value).fragment:  # RFC 6749 section 3: an endpoint has no fragment
                raise Error(
                    "auth", "discovery_failed", f"the authorization server's {name} has a fragment"
                )
    methods = _str_list(doc.get("code_challenge_methods_supported")) or ()
    if "S256" not in methods:
        raise Error(
            "auth",
            "no_pkce",
            f"the authorization server {issuer} does not advertise PKCE S256 "
            "(code_challenge_methods_supported); refusing to proceed",
        )


async def fetch_as_metadata(
    session: aiohttp.ClientSession,
    issuer: str,
    *,
    timeout: float = HTTP_TIMEOUT,
    limit: int = MAX_BODY,
    same_origin: bool = False,
) -> Mapping[str, Any] | None:
    """The metadata of ``issuer`` from the first of :func:`as_metadata_urls` that has it,
    checked; None when none has any. A document whose ``issuer`` is not identical to
    ``issuer`` is never used (``issuer_mismatch`` when no other URL has a good one).

    ``same_origin`` is for the 2025-03-26 fallback only: there no issuer was named by
    anyone (the MCP server's origin is the authorization server by that revision's rule),
    so a document served at that origin naming an issuer on the same origin (some put
    the path of their endpoints in it, ``<origin>/oauth``) is used, with its own issuer.
    """
    mismatched: str | None = None
    failures: list[str] = []
    last: Any = UNREACHABLE
    for url in as_metadata_urls(issuer):
        try:
            resp = await request(
                session,
                "GET",
                url,
                what="authorization server metadata",
                reason="discovery_failed",
                timeout=timeout,
                limit=limit,
            )
        except Error as e:
            if not is_unreachable(e.data):
                # a body over the limit (a broken server, not an absent document), or
                # tls_failed (no other URL there passes the same handshake: docs/tls.md)
                raise
            log.debug("authorization server metadata at %s: %s", url, e.message)
            failures.append(e.message)
            last = e.data
            continue
        outcome = classify_answer(resp.status, resp.json is not None, resp.content_type)
        if outcome == "failed":
            failures.append(f"{url} answered HTTP {resp.status}")
            last = unreachable_data(url, f"HTTP {resp.status}")
        if outcome != "found" or resp.json is None:
            continue
        named = resp.json.get("issuer")
        if named != issuer and not (
            same_origin
            and isinstance(named, str)
            and is_secure(named)
            and origin(named) == origin(issuer)
        ):
            mismatched = url
            continue
        _check_metadata(resp.json, str(named), url)
        return resp.json
    if mismatched is not None:
        raise Error(
            "auth",
            "issuer_mismatch",
            f"the authorization server metadata at {mismatched} names another issuer "
            f"than {issuer}; not using it",
        )
    if failures:
        # No answer, or "try again later", from one of the URLs: the server is down or
        # unwell, not without metadata (worth a retry; never the default endpoints).
        raise _retry_later(f"authorization server metadata of {issuer}", failures, last)
    return None


async def discover(
    session: aiohttp.ClientSession,
    server_url: str,
    challenge: Challenge | None = None,
    *,
    timeout: float = HTTP_TIMEOUT,
    limit: int = MAX_BODY,
) -> Discovered:
    """Find the authorization server of ``server_url`` (see the module's docstring).

    Raises ``Error("auth", reason)``: ``resource_mismatch``, ``issuer_mismatch``,
    ``no_pkce``, ``discovery_failed`` (nothing found, an insecure or malformed document).
    """
    challenge_url = challenge.resource_metadata if challenge is not None else None
    named = challenge_url is not None
    if challenge_url is not None and not (
        is_secure(challenge_url) or origin(challenge_url) == origin(server_url)
    ):
        log.debug("ignoring an insecure resource_metadata URL from the challenge")
        challenge_url = None
    prm: Mapping[str, Any] | None = None
    failures: list[str] = []
    for url in prm_urls(server_url, challenge_url):
        prm = await _fetch_prm(session, server_url, url, timeout, limit, failures)
        if prm is not None:
            break
    if prm is None:
        # The 2025-03-26 rules (the MCP server's origin is the authorization server, and
        # gets the client's credentials) only when there is really no metadata: none
        # named by the challenge, and a definite "no" at every well-known URL.
        if failures:
            raise _retry_later("protected resource metadata", failures)
        if named:
            raise Error(
                "auth",
                "discovery_failed",
                "the server's challenge names protected resource metadata (resource_metadata) "
                "that is not served there nor at the well-known URLs; not falling back to "
                "the 2025-03-26 rules",
            )
        return await _discover_legacy(session, server_url, timeout=timeout, limit=limit)
    # The resource as the PRM names it, verbatim: it is what the authorization server
    # knows the resource by (a root document names the origin).
    resource = str(prm["resource"])
    servers = _str_list(prm.get("authorization_servers")) or ()
    issuer = next((s for s in servers if is_secure(s)), None)
    if issuer is None:
        raise Error(
            "auth",
            "discovery_failed",
            "the protected resource metadata lists no https authorization server",
        )
    metadata = await fetch_as_metadata(session, issuer, timeout=timeout, limit=limit)
    if metadata is None:
        raise Error(
            "auth",
            "discovery_failed",
            f"no authorization server metadata found for {issuer} "
            "(tried RFC 8414 and OpenID Connect discovery)",
        )
    return Discovered(resource=resource, prm=prm, issuer=issuer, as_metadata=metadata)


async def _discover_legacy(
    session: aiohttp.ClientSession, server_url: str, *, timeout: float, limit: int
) -> Discovered:
    # The 2025-03-26 revision: no PRM; the MCP server's origin is the authorization server.
    base = origin(server_url)
    require_secure(base, "authorization server (the MCP server's origin)", "discovery_failed")
    resource = canonical_resource(server_url)
    metadata = await fetch_as_metadata(
        session, base, timeout=timeout, limit=limit, same_origin=True
    )
    if metadata is not None:
        return Discovered(resource, None, str(metadata["issuer"]), metadata, legacy=True)
    defaults = {
        "issuer": base,
        "authorization_endpoint": f"{base}/authorize",
        "token_endpoint": f"{base}/token",
        "registration_endpoint": f"{base}/register",
        # That revision required PKCE of every client; there is no document to advertise it.
        "code_challenge_methods_supported": ["S256"],
    }
    return Discovered(resource, None, base, defaults, legacy=True)


__all__ = [
    "Discovered",
    "as_metadata_urls",
    "canonical_resource",
    "classify_answer",
    "discover",
    "fetch_as_metadata",
    "is_loopback",
    "origin",
    "prm_urls",
    "resource_matches",
]
