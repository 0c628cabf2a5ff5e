"""Reading HTTP response headers the transport acts on: ``Retry-After`` and ``WWW-Authenticate``.

A 429 or 503 may say when to come back (RFC 9110 §10.2.3); a 401 or 403 carries Bearer
challenges whose ``resource_metadata``, ``scope`` and ``error`` drive the OAuth flow
(MCP spec, "Authorization"; RFC 9110). Both are parsed leniently: a header a server got wrong must
not turn into an exception in the transport, so garbage parses to "nothing said".
"""

from __future__ import annotations

import email.utils
import math
import re
import time
from collections.abc import Sequence
from datetime import UTC
from typing import Final, NamedTuple
from urllib.request import parse_http_list

# RFC 9110 §5.6.2 token characters, for an auth-scheme.
_TCHAR: Final = r"!#$%&'*+\-.^_`|~0-9A-Za-z"
# An element of the comma-split header that starts a challenge: a scheme alone, or a scheme,
# whitespace and the rest (its first auth-param, or a token68).
_SCHEME: Final = re.compile(rf"([{_TCHAR}]+)(?:[ \t]+(.*))?", re.S)
# RFC 9110 §11.2: token68 = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"="
_TOKEN68: Final = re.compile(r"[A-Za-z0-9\-._~+/]+=*")
_DELTA: Final = re.compile(r"-?[0-9]+(?:\.[0-9]+)?")


def parse_retry_after(value: str | None, now: float | None = None) -> float | None:
    """Seconds to wait according to a ``Retry-After`` header, or None when it says nothing usable.

    The header is delta-seconds (``120``) or an HTTP-date (``Wed, 21 Oct 2015 07:28:00 GMT``;
    the obsolete RFC 850 and asctime forms are read too), taken relative to ``now`` (a Unix
    time; ``time.time()`` when None). A date in the past, or a negative delay, is 0. A
    fractional delay (``1.5``, not RFC syntax but seen in the wild) is accepted. The result
    is not capped (the caller bounds it by its own deadline), but a number too large for a
    float is garbage, not a reason to retry at once.

    >>> parse_retry_after("120")
    120.0
    >>> parse_retry_after("Thu, 01 Jan 1970 00:01:40 GMT", now=40.0)
    60.0
    >>> parse_retry_after("-3"), parse_retry_after("soon"), parse_retry_after(None)
    (0.0, None, None)
    """
    if value is None:
        return None
    text = value.strip()
    if not text:
        return None
    if _DELTA.fullmatch(text):
        seconds = float(text)
        if not math.isfinite(seconds):  # hundreds of digits: nonsense, not "retry at once"
            return None
        return seconds if seconds > 0.0 else 0.0
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if when.tzinfo is None:  # asctime and "-0000" carry no zone: HTTP dates are in GMT
        when = when.replace(tzinfo=UTC)
    delay = when.timestamp() - (time.time() if now is None else now)
    return delay if delay > 0.0 else 0.0


class Challenge(NamedTuple):
    """One challenge of a ``WWW-Authenticate`` header: its scheme, lower-cased, and auth-params.

    Parameter names are lower-cased too (they are case-insensitive); values are unquoted.
    The ``repr`` names the parameters but never shows their values: an ``error_description``
    or a ``resource_metadata`` URL is server-controlled text that need not end up in logs.

    >>> Challenge("bearer", {"resource_metadata": "https://a.example/x", "scope": "read"})
    Challenge(scheme='bearer', params=['resource_metadata', 'scope'])
    """

    scheme: str
    params: dict[str, str]

    def __repr__(self) -> str:
        return f"Challenge(scheme={self.scheme!r}, params={list(self.params)!r})"


def parse_challenges(values: Sequence[str]) -> list[Challenge]:
    """The challenges in the ``WWW-Authenticate`` header values, in order.

    ``values`` is every ``WWW-Authenticate`` field of the response (aiohttp's
    ``headers.getall("WWW-Authenticate", [])``); one field may hold several challenges,
    ``Basic realm="x", Bearer error="invalid_token"``. The field is split on commas
    outside quotes with ``urllib.request.parse_http_list`` (which also removes quoted-pair
    backslashes); an element starting with ``scheme SP`` (or a scheme alone) opens a new
    challenge, and each other ``name=value`` element is a parameter of the open one. The
    auth-params are then read as ``parse_keqv_list`` would, but tolerating what it does
    not: whitespace around ``=``, an empty value, a bare token. A token68 (``Negotiate
    abc==``) is not kept: MCP only reads Bearer's auth-params. For a parameter given
    twice the first is kept. Elements before any scheme are ignored.

    >>> [c.scheme for c in parse_challenges(['Basic realm="a, b", Bearer scope="x y"'])]
    ['basic', 'bearer']
    >>> parse_challenges(['Bearer error="invalid_token", resource_metadata="https://s/.well-known/x"'])[0].params
    {'error': 'invalid_token', 'resource_metadata': 'https://s/.well-known/x'}
    """
    if isinstance(values, str):  # one field value passed bare: not a sequence of characters
        values = [values]
    out: list[Challenge] = []
    for value in values:
        if type(value) is not str:
            continue
        current: dict[str, str] | None = None
        for element in parse_http_list(value):
            if not element:
                continue
            match = _SCHEME.fullmatch(element)
            if match is not None and not (match.group(2) or "").startswith("="):
                current = {}
                out.append(Challenge(match.group(1).lower(), current))
                rest = match.group(2)
                if rest and _TOKEN68.fullmatch(rest) is None:
                    _add_param(current, rest)
            elif current is not None:
                _add_param(current, element)
    return out


def _add_param(params: dict[str, str], element: str) -> None:
    """One ``name=value`` auth-param; an element without ``=`` is ignored."""
    name, eq, raw = element.partition("=")
    name = name.strip().lower()
    if not eq or not name:
        return
    raw = raw.strip()
    if len(raw) >= 2 and raw[0] == '"' and raw[-1] == '"':
        raw = raw[1:-1]
    params.setdefault(name, raw)
