"""A scripted person at a browser, for the OAuth interop tests: signs in and consents (or
refuses) on npm ``oidc-provider``'s development interaction pages with plain HTTP requests.

The walk is the one a browser makes: GET the authorization URL, follow the provider's
redirects (keeping its cookies), fill in the login form (any login; the dev pages take any
password), then submit the consent form, or follow the page's "Cancel" link to refuse
(``/interaction/<uid>/abort``: the provider redirects back with ``error=access_denied``).
It stops at the first redirect that leaves the provider's origin: the URL the browser lands
on at the client's ``redirect_uri``. A desktop app's browser then opens that URL (the client's
loopback listener: :meth:`Person.browse`); a headless app's person pastes it back
(``client.authorize(url)``).
"""

from __future__ import annotations

import http.cookiejar
import urllib.error
import urllib.parse
import urllib.request
from html.parser import HTMLParser
from typing import Any

# Authorization URL, interaction page, login POST, resume, consent page, consent POST,
# resume, redirect: 8 steps. A few more allowed; never a loop without end.
MAX_STEPS = 16
TIMEOUT = 5.0


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Hand every 3xx back to the walk, which decides whether to follow it."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


class _Page(HTMLParser):
    """The one form of an interaction page (action, hidden and named inputs) and its
    cancel link."""

    def __init__(self) -> None:
        super().__init__()
        self.action: str | None = None
        self.fields: dict[str, str] = {}
        self.cancel: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attr = {k: v or "" for k, v in attrs}
        if tag == "form" and self.action is None:
            self.action = attr.get("action")
        elif tag == "input" and attr.get("name"):
            self.fields[attr["name"]] = attr.get("value", "")
        elif tag == "a" and attr.get("href", "").endswith("/abort"):
            self.cancel = attr["href"]


class _Text(HTMLParser):
    """A page's visible text (an error page's message), without its style sheet."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in ("style", "script"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "script") and self._skip:
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip and data.strip():
            self.parts.append(data.strip())


def page_text(body: str, limit: int = 300) -> str:
    text = _Text()
    text.feed(body)
    return " ".join(text.parts)[:limit]


class Person:
    """One person with one browser (its own cookies): ``approve``, ``refuse`` or ``browse``.

    ``asked`` counts the authorization URLs this person was given.
    """

    def __init__(self, issuer: str, login: str = "alice") -> None:
        self.issuer = issuer.rstrip("/")
        self.login = login
        self.asked = 0
        self._opener = urllib.request.build_opener(
            urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar()), _NoRedirect()
        )

    def approve(self, url: str) -> str:
        """Sign in and consent; the URL the browser lands on at the client."""
        return self._walk(url, consent=True)

    def refuse(self, url: str) -> str:
        """Sign in, then cancel at the consent page; the URL the browser lands on (with
        ``error=access_denied``)."""
        return self._walk(url, consent=False)

    def browse(self, url: str, *, consent: bool = True) -> None:
        """A desktop app's browser: approve (or refuse), then open the redirect (the client's
        loopback listener), as ``OAuth(loopback=True, on_authorize=...)`` expects of it."""
        landed = self._walk(url, consent=consent)
        with self._opener.open(landed, timeout=TIMEOUT) as page:
            page.read()

    def _walk(self, url: str, *, consent: bool) -> str:
        self.asked += 1
        for _ in range(MAX_STEPS):
            if not url.startswith(self.issuer + "/"):
                return url  # left the provider: this is the redirect to the client
            status, location, body = self._send(url)
            if location is not None:
                url = urllib.parse.urljoin(url, location)
                continue
            if status != 200:
                where = urllib.parse.urlsplit(url).path
                raise AssertionError(
                    f"the provider answered {status} at {where}: {page_text(body)}"
                )
            page = _Page()
            page.feed(body)
            prompt = page.fields.get("prompt")
            if prompt == "consent" and not consent:
                if page.cancel is None:
                    raise AssertionError(f"no cancel link on the consent page: {page_text(body)}")
                url = urllib.parse.urljoin(url, page.cancel)
                continue
            if prompt not in ("login", "consent") or page.action is None:
                raise AssertionError(f"not an interaction page at {url}: {page_text(body)}")
            fields = dict(page.fields)
            if prompt == "login":
                fields.update(login=self.login, password="any password")
            status, location, body = self._send(
                urllib.parse.urljoin(url, page.action), urllib.parse.urlencode(fields).encode()
            )
            if location is None:
                raise AssertionError(f"the {prompt} form answered {status}: {page_text(body)}")
            url = urllib.parse.urljoin(url, location)
        raise AssertionError(f"no redirect to the client after {MAX_STEPS} steps")

    def refuse_in_browser(self, url: str) -> None:
        """:meth:`browse`, refusing at the consent page."""
        self.browse(url, consent=False)

    def _send(self, url: str, data: bytes | None = None) -> tuple[int, str | None, str]:
        """(status, Location of a redirect or None, body)."""
        request = urllib.request.Request(url, data=data, method="POST" if data else "GET")
        try:
            with self._opener.open(request, timeout=TIMEOUT) as resp:
                return resp.status, None, resp.read().decode(errors="replace")
        except urllib.error.HTTPError as e:
            body = e.read().decode(errors="replace")
            location = e.headers.get("Location") if 300 <= e.code < 400 else None
            return e.code, location, body
