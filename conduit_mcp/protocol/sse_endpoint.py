"""The HTTP+SSE transport's ``endpoint`` event (MCP spec 2024-11-05, Transports, "HTTP with
SSE"): where the client POSTs its messages, checked before anything is sent there.

The server names the endpoint in the first event of its GET stream, as a URL relative to the
stream's (``/messages/?session_id=...``) or absolute. The spec gives it no other bound, so a
hostile or compromised stream could point the client's POSTs (its headers, its bearer token,
tool arguments) at any host: the endpoint must be on the stream URL's origin (scheme, host and
port), as the official clients now require. Pure functions, no I/O.
"""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit

from ..errors import Error

#: The longest endpoint accepted, in characters: a URL, not a payload.
MAX_ENDPOINT = 8192

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> tuple[str, str, int] | None:
    """``(scheme, host, port)`` of an http(s) URL, the default port filled in; None if it is
    not one.

    >>> origin("http://127.0.0.1/sse"), origin("HTTPS://Example.COM:443/x")
    (('http', '127.0.0.1', 80), ('https', 'example.com', 443))
    >>> origin("ftp://h/"), origin("http://h:99999/")
    (None, None)
    """
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    try:
        port = parts.port
    except ValueError:
        return None
    return scheme, parts.hostname.lower(), port or _DEFAULT_PORTS[scheme]


def show_origin(url: str) -> str:
    """``scheme://host:port`` of ``url``, safe to show (no path, query or credentials).

    >>> show_origin("http://user:pw@evil.example:8080/steal?token=x")
    'http://evil.example:8080'
    """
    got = origin(url)
    if got is None:
        return urlsplit(url).scheme or "?"
    scheme, host, port = got
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def resolve_endpoint(stream_url: str, data: bytes) -> str:
    """The absolute URL of the message endpoint the ``endpoint`` event's ``data`` names.

    >>> resolve_endpoint("http://127.0.0.1:8000/sse", b"/messages/?session_id=ab12")
    'http://127.0.0.1:8000/messages/?session_id=ab12'
    >>> resolve_endpoint("http://127.0.0.1:8000/app/sse", b"message?sessionId=1")
    'http://127.0.0.1:8000/app/message?sessionId=1'
    >>> resolve_endpoint("http://127.0.0.1:8000/sse", b"http://evil.example/messages")
    Traceback (most recent call last):
      ...
    conduit_mcp.errors.Error: protocol (endpoint_origin): the server's SSE stream named a message endpoint on another origin (http://evil.example:80, the stream is on http://127.0.0.1:8000); nothing was sent there. If that server is the right one, give its URL to Sse

    Raises ``Error("protocol", "endpoint_origin")`` for another origin (``data`` holds it, as
    ``scheme://host:port``), ``Error("protocol", "bad_endpoint")`` for data that is not a URL.
    """
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError:
        text = ""
    if not text or len(text) > MAX_ENDPOINT or any(c in text for c in "\r\n\0 "):
        raise Error(
            "protocol",
            "bad_endpoint",
            "the server's SSE stream sent an endpoint event that is not a URL",
        )
    url = urljoin(stream_url, text)
    mine, theirs = origin(stream_url), origin(url)
    if theirs is None:
        raise Error(
            "protocol",
            "bad_endpoint",
            "the server's SSE stream named a message endpoint that is not an http(s) URL",
        )
    if theirs != mine:
        shown = show_origin(url)
        raise Error(
            "protocol",
            "endpoint_origin",
            f"the server's SSE stream named a message endpoint on another origin ({shown}, "
            f"the stream is on {show_origin(stream_url)}); nothing was sent there. If that "
            "server is the right one, give its URL to Sse",
            data={"origin": shown},
        )
    return url
