"""The ``WWW-Authenticate`` challenge of a 401 or 403 (RFC 6750 section 3, RFC 9728 section 5.1).

A header may hold several challenges (``Basic realm="x", Bearer scope="a b"``) and a server
may send several headers; parameter values may be quoted and hold commas. Only the Bearer
challenge matters here: its ``resource_metadata`` (where the protected resource metadata
is), ``scope`` (what the operation needs), ``error`` and ``error_description``. authlib has no
client-side parser, so this one is written by hand (a small tokenizer, no regex backtracking
on hostile input; the header is bounded by the HTTP layer's header limit).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Challenge:
    """One authentication challenge. ``scope`` is the space-separated scope string, or None.

    >>> Challenge("bearer").scopes
    ()
    """

    scheme: str
    resource_metadata: str | None = None
    scope: str | None = None
    error: str | None = None
    error_description: str | None = None

    @property
    def scopes(self) -> tuple[str, ...]:
        """The challenged scopes, in order, without duplicates."""
        return tuple(dict.fromkeys((self.scope or "").split()))

    @property
    def insufficient_scope(self) -> bool:
        """A 403 asking for more scope (step-up), not a refusal of the token itself."""
        return self.error == "insufficient_scope"


_TOKEN_CHARS = frozenset(
    "!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
)


class _Scanner:
    __slots__ = ("text", "pos")

    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0

    def skip_space(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t":
            self.pos += 1

    def skip_separators(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos] in " \t,":
            self.pos += 1

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def token(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and self.text[self.pos] in _TOKEN_CHARS:
            self.pos += 1
        return self.text[start : self.pos]

    def token68(self) -> str:
        start = self.pos
        while self.pos < len(self.text) and (
            self.text[self.pos] in _TOKEN_CHARS or self.text[self.pos] in "/="
        ):
            self.pos += 1
        return self.text[start : self.pos]

    def quoted(self) -> str:
        self.pos += 1  # the opening quote
        out: list[str] = []
        while self.pos < len(self.text):
            char = self.text[self.pos]
            self.pos += 1
            if char == "\\" and self.pos < len(self.text):
                out.append(self.text[self.pos])
                self.pos += 1
            elif char == '"':
                break
            else:
                out.append(char)
        return "".join(out)


def _parse_one(text: str) -> list[tuple[str, dict[str, str]]]:
    # challenge = scheme [ token68 / #auth-param ]; a bare token (no "=") starts a new one.
    scan = _Scanner(text)
    found: list[tuple[str, dict[str, str]]] = []
    params: dict[str, str] | None = None
    while True:
        scan.skip_separators()
        if scan.pos >= len(text):
            return found
        name = scan.token()
        if not name:
            scan.pos += 1  # a stray character: skip it
            continue
        scan.skip_space()
        if scan.peek() != "=":
            params = {}
            found.append((name.lower(), params))
            continue
        scan.pos += 1  # "="
        if scan.peek() in ("=", ",", ""):  # a token68 with padding: no parameter
            while scan.peek() == "=":
                scan.pos += 1
            continue
        scan.skip_space()
        value = scan.quoted() if scan.peek() == '"' else scan.token68()
        if params is not None:
            params.setdefault(name.lower(), value)


def parse_challenges(headers: Iterable[str]) -> list[Challenge]:
    """Every challenge of every ``WWW-Authenticate`` header value, in order.

    >>> [c.scheme for c in parse_challenges(['Basic realm="a, b", Bearer scope="x y"'])]
    ['basic', 'bearer']
    >>> parse_challenges(['Bearer error="insufficient_scope", scope="files:write"'])[0].scopes
    ('files:write',)
    """
    challenges: list[Challenge] = []
    for header in headers:
        if not isinstance(header, str):
            continue
        for scheme, params in _parse_one(header):
            challenges.append(
                Challenge(
                    scheme=scheme,
                    resource_metadata=params.get("resource_metadata") or None,
                    scope=params.get("scope") or None,
                    error=params.get("error") or None,
                    error_description=params.get("error_description") or None,
                )
            )
    return challenges


def bearer_challenge(headers: Iterable[str]) -> Challenge | None:
    """The first Bearer challenge among the ``WWW-Authenticate`` values, or None.

    >>> c = bearer_challenge(['Bearer resource_metadata="https://mcp.example.com/.well-known/oauth-protected-resource", scope="a,b c"'])
    >>> c.resource_metadata, c.scope
    ('https://mcp.example.com/.well-known/oauth-protected-resource', 'a,b c')
    >>> bearer_challenge(['Basic realm="x"']) is None
    True
    """
    for challenge in parse_challenges(headers):
        if challenge.scheme == "bearer":
            return challenge
    return None
