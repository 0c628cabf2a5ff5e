"""The access token the HTTP transport stamps on every request, published by the OAuth actor.

One :class:`TokenCell` per client (kept in the tree's ``Published``, so it outlives a
restarted connection or OAuth actor). The OAuth actor is its only writer: it replaces
``current`` with a new frozen :class:`TokenSnapshot` (one reference store, atomic under the
GIL); the transport reads ``current`` once per request on the I/O loop, without a lock
(docs/connection.md, "Authorizing"). The token goes in the ``Authorization`` header only,
never on a query string, and neither class shows it in a repr.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol


class Proofs(Protocol):
    """What signs DPoP proofs for a bound token (``oauth/dpop.py``'s ``Prover``)."""

    def proof(self, method: str, url: str, access_token: str | None = None) -> str: ...

    def remember(self, url: str, nonce: Any) -> bool: ...


@dataclass(frozen=True, slots=True)
class TokenSnapshot:
    """One access token: ``version`` grows with every new token (a 401 names the version it
    refused, so a refusal of an older token never triggers a second refresh);
    ``identity`` is the credentials' identity for the cache (a hash of principal, issuer and
    resource: never a secret); ``dpop``: the key a ``DPoP`` token is bound to, which proves
    every request (``http_dpop.py``)."""

    header: str = field(repr=False)  # "Bearer <token>" or "DPoP <token>"
    version: int
    identity: str | None = None
    dpop: Proofs | None = field(default=None, repr=False)


class TokenCell:
    """Holds the current :class:`TokenSnapshot` (None before the first token)."""

    __slots__ = ("current",)

    def __init__(self) -> None:
        self.current: TokenSnapshot | None = None

    def __repr__(self) -> str:
        snap = self.current
        return f"<TokenCell version={snap.version if snap is not None else 0}>"

    @property
    def version(self) -> int:
        """The current token's version; 0 before the first."""
        snap = self.current
        return snap.version if snap is not None else 0
