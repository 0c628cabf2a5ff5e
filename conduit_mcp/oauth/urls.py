"""Which URLs an OAuth client may talk to: pure checks, no I/O and nothing heavy imported
(the ``OAuth`` config uses them and is imported wherever ``Http`` is)."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

_LOOPBACK_NAMES = frozenset({"localhost"})


def is_loopback(host: str | None) -> bool:
    """Whether ``host`` names this machine (``localhost``, 127.0.0.0/8, ``::1``).

    >>> is_loopback("127.0.0.1"), is_loopback("::1"), is_loopback("localhost")
    (True, True, True)
    >>> is_loopback("example.com"), is_loopback(None)
    (False, False)
    """
    if not host:
        return False
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def is_secure(url: str) -> bool:
    """https, or http to a loopback host: what the spec allows for an authorization
    server's endpoints (Authorization, "Communication Security").

    >>> is_secure("https://as.example.com/token"), is_secure("http://127.0.0.1:9/token")
    (True, True)
    >>> is_secure("http://as.example.com/token"), is_secure("ftp://x/")
    (False, False)
    """
    parts = urlsplit(url)
    if not parts.hostname:
        return False
    if parts.scheme == "https":
        return True
    return parts.scheme == "http" and is_loopback(parts.hostname)
