"""Typed metadata from hostile server JSON: icons, titles, annotations and ``_meta``.

Metadata decorates an item; it never identifies one. So these parsers never raise: a
malformed piece is dropped (None or an empty tuple) and the item, and the list it is in,
survive. That is the opposite of ``conduit_mcp.protocol.results``' rule for identity fields
(a tool without a ``name`` fails its page), on purpose: a server that ships one bad icon
must not lose its users every tool. What is dropped stays in the item's ``raw``.

Every piece is bounded, so a hostile list costs at most a constant per item to read:

* at most ``MAX_ICONS`` icons are read per item (the rest are ignored, not scanned);
* an icon's ``src`` is at most ``MAX_ICON_SRC`` characters, ``mimeType`` at most
  ``MAX_MIME_TYPE``, ``sizes`` at most ``MAX_ICON_SIZES`` entries;
* an ``Annotations.lastModified`` is at most ``MAX_LAST_MODIFIED`` characters and a
  ``websiteUrl`` at most ``MAX_WEBSITE_URL``.

Icons follow the spec's security rules (MCP spec 2026-07-28, Basic, "General fields",
``icons``, "Security considerations"): the URI MUST be ``https:`` or ``data:`` and icon
URIs of unsafe schemes MUST be rejected; the client keeps "a strict allowlist of image
types", which here is ``image/*`` for both ``mimeType`` and a ``data:`` URI's media type.
"""

from __future__ import annotations

import math
import re
from typing import Any, Final, Literal, cast
from urllib.parse import urlsplit  # for websiteUrl only: one per server

from ..types import Annotations, Icon, Role, ToolAnnotations

MAX_ICONS: Final = 32
MAX_ICON_SRC: Final = 128 * 1024
MAX_ICON_SIZES: Final = 16
MAX_MIME_TYPE: Final = 255
MAX_LAST_MODIFIED: Final = 64
MAX_WEBSITE_URL: Final = 2048

_Theme = Literal["light", "dark"] | None  # evaluated once: a cast's type costs at runtime
# Without re.ASCII, IGNORECASE lets [a-z] match the Kelvin sign and the long s (Python's re
# documentation, re.IGNORECASE): a look-alike host or type would pass.
_ASCII_NOCASE: Final = re.ASCII | re.IGNORECASE
_THEMES: Final = ("light", "dark")  # a tuple: a hostile theme may be unhashable
_ROLES: Final = ("user", "assistant")
# RFC 6838 "Naming requirements": restricted-name characters; only image types are icons.
_MIME_RE: Final = re.compile(r"image/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}", _ASCII_NOCASE)
# HTML's "sizes" keywords: "any", or WxH with no leading zero, ASCII case-insensitive x.
_SIZE_RE: Final = re.compile(r"any|[1-9][0-9]{0,4}[xX][1-9][0-9]{0,4}", _ASCII_NOCASE)
_BASE64_RE: Final = re.compile(r"[A-Za-z0-9+/]*={0,2}")
# An https: URL whose authority is only a host (DNS labels or a bracketed IPv6 address) and
# an optional port: no user name or password (the spec says to fetch icons without
# credentials), nothing a browser would reinterpret. One match instead of urlsplit's
# several steps (benchmarks/bench_metadata.py).
_LABEL: Final = r"[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?"
_HTTPS_RE: Final = re.compile(
    rf"https://(?:{_LABEL}(?:\.{_LABEL})*\.?|\[[0-9a-f:.]+\])(?::([0-9]{{1,5}}))?"
    r"(?:[/?#][!-\[\]-~]*)?",
    _ASCII_NOCASE,
)
# RFC 2397: data:[<mediatype>][;base64],<data>, here with an image media type (none would
# mean text/plain) and at most 8 short parameters.
_DATA_RE: Final = re.compile(
    r"data:image/[a-z0-9][a-z0-9!#$&^_.+-]{0,126}((?:;[a-z0-9!#$&^_.+=\"-]{1,64}){0,8}),(.+)",
    _ASCII_NOCASE | re.DOTALL,
)
# Percent-encoded or plain URI characters (RFC 3986), for a data: URI's non-base64 payload.
_URI_CHARS_RE: Final = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]*")


def parse_title(value: Any) -> str | None:
    """A ``BaseMetadata.title``: the string, or None for anything else.

    >>> parse_title("Add numbers"), parse_title(3)
    ('Add numbers', None)
    """
    return value if type(value) is str else None


def parse_meta(value: Any) -> dict[str, Any] | None:
    """An item's ``_meta``: the object itself (read-only by convention), or None.

    >>> parse_meta({"vendor/x": 1}), parse_meta([1])
    ({'vendor/x': 1}, None)
    """
    return value if type(value) is dict else None


def _plain_ascii(text: str) -> bool:
    # No whitespace, no control characters, nothing a browser would "fix up" (backslash),
    # and ASCII only (an IRI's look-alike host is a homograph risk).
    return text.isascii() and text.isprintable() and " " not in text and "\\" not in text


def icon_src_ok(src: Any) -> bool:
    """Whether ``src`` may be an icon's URI: ``https:`` with a host, or a ``data:`` URI of
    an image type, well-formed and at most ``MAX_ICON_SRC`` characters.

    >>> icon_src_ok("https://example.com/icon.png"), icon_src_ok("data:image/png;base64,iVBO")
    (True, True)
    >>> [icon_src_ok(u) for u in ("http://example.com/i.png", "javascript:alert(1)",
    ...  "file:///etc/passwd", "https://user:pw@example.com/i.png", "data:text/html,<b>")]
    [False, False, False, False, False]
    """
    if type(src) is not str or len(src) > MAX_ICON_SRC:
        return False
    # Each pattern admits printable ASCII only, without spaces or backslashes: nothing a
    # browser would "fix up", no look-alike (IRI) host.
    https = _HTTPS_RE.fullmatch(src)
    if https is not None:
        return https.group(1) is None or int(https.group(1)) <= 65535
    data = _DATA_RE.fullmatch(src)
    if data is None:
        return False  # any other scheme, or a data: URI that is not an image
    if data.group(1)[-7:].lower() == ";base64":
        return _BASE64_RE.fullmatch(data.group(2)) is not None
    return _URI_CHARS_RE.fullmatch(data.group(2)) is not None


def _sizes(value: Any) -> tuple[str, ...] | None:
    if value is None:
        return ()
    if type(value) is not list or len(value) > MAX_ICON_SIZES:
        return None
    for size in value:
        if type(size) is not str or not _SIZE_RE.fullmatch(size):
            return None
    return tuple(value)


def parse_icon(value: Any) -> Icon | None:
    """One ``Icon``, or None when any field it has is malformed or unsafe.

    An icon is kept whole or not at all: one with an unknown ``theme`` is not shown on the
    wrong background, one with a non-image ``mimeType`` is not rendered as an image.

    >>> parse_icon({"src": "https://example.com/i.png", "theme": "dark"}).theme
    'dark'
    >>> parse_icon({"src": "https://example.com/i.png", "mimeType": "text/html"}) is None
    True
    """
    if type(value) is not dict or not icon_src_ok(value.get("src")):
        return None
    mime = value.get("mimeType")
    if mime is not None and (
        type(mime) is not str or len(mime) > MAX_MIME_TYPE or not _MIME_RE.fullmatch(mime)
    ):
        return None
    sizes = _sizes(value.get("sizes"))
    theme = value.get("theme")
    if sizes is None or (theme is not None and theme not in _THEMES):
        return None
    return Icon(value["src"], mime, sizes, cast(_Theme, theme), raw=value)


def parse_icons(value: Any) -> tuple[Icon, ...]:
    """The well-formed, safe icons of an ``icons`` array, in order; at most ``MAX_ICONS``
    entries are read. Anything but an array is no icons.

    >>> len(parse_icons([{"src": "https://example.com/i.png"}] * 1000))
    32
    >>> parse_icons("https://example.com/i.png"), parse_icons([{"src": "ftp://x/i.png"}])
    ((), ())
    """
    if type(value) is not list:
        return ()
    icons = (parse_icon(item) for item in value[:MAX_ICONS])
    return tuple(icon for icon in icons if icon is not None)


def _hint(value: Any) -> bool | None:
    return value if type(value) is bool else None


def parse_tool_annotations(value: Any) -> ToolAnnotations | None:
    """A tool's ``annotations`` object; None when it is not an object. A hint that is not a
    boolean, or a title that is not a string, is None (absent), not an error.

    >>> parse_tool_annotations({"readOnlyHint": True}).read_only_hint
    True
    >>> parse_tool_annotations([]) is None
    True
    """
    if type(value) is not dict:
        return None
    return ToolAnnotations(
        parse_title(value.get("title")),
        _hint(value.get("readOnlyHint")),
        _hint(value.get("destructiveHint")),
        _hint(value.get("idempotentHint")),
        _hint(value.get("openWorldHint")),
        raw=value,
    )


def _priority(value: Any) -> float | None:
    if (type(value) is int or type(value) is float) and math.isfinite(value) and 0 <= value <= 1:
        return float(value)
    return None


def parse_annotations(value: Any) -> Annotations | None:
    """A resource's or template's ``annotations`` object; None when it is not an object.

    >>> parse_annotations({"audience": ["assistant"], "priority": 0}).priority
    0.0
    """
    if type(value) is not dict:
        return None
    audience = value.get("audience")
    roles: tuple[Role, ...] = ()
    if type(audience) is list:
        # Only two roles exist: scanning stops once both are seen, so a long list is cheap.
        seen: list[Role] = []
        for role in audience:
            if role in _ROLES and role not in seen:
                seen.append(role)
                if len(seen) == len(_ROLES):
                    break
        roles = tuple(seen)
    modified = value.get("lastModified")
    if type(modified) is not str or len(modified) > MAX_LAST_MODIFIED:
        modified = None
    return Annotations(roles, _priority(value.get("priority")), modified, raw=value)


def parse_size(value: Any) -> int | None:
    """A resource's ``size`` in bytes: a non-negative integer (not a bool), else None.

    >>> parse_size(1024), parse_size(-1), parse_size(True), parse_size(2.5)
    (1024, None, None, None)
    """
    return value if type(value) is int and value >= 0 else None


def parse_website_url(value: Any) -> str | None:
    """An ``Implementation.websiteUrl`` kept only as an ``http:``/``https:`` URL with a host
    (a link a UI shows must never be ``javascript:``); None otherwise.

    >>> parse_website_url("https://example.com"), parse_website_url("javascript:alert(1)")
    ('https://example.com', None)
    """
    if type(value) is not str or len(value) > MAX_WEBSITE_URL or not _plain_ascii(value):
        return None
    try:
        parts = urlsplit(value)
    except ValueError:
        return None
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        return None
    return value
