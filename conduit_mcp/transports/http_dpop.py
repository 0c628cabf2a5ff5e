"""DPoP on the MCP server's requests: a fresh proof on every hop, and the server's nonce.

An aiohttp client middleware of both of the transport's sessions (requests and streams: both
HTTP eras, the listen stream, the session's DELETE), the innermost, so that every request
actually sent, a re-send included, carries a proof of its own (RFC 9449 section 4.2: a
``jti`` is never used twice). It acts only on a request whose ``Authorization`` is a ``DPoP``
token (``http.py``'s ``headers`` stamps it from the :class:`~.http_token.TokenCell`): it adds
the ``DPoP`` header, signed by the key the token is bound to, with ``ath`` the token's hash.

A server that wants a nonce (RFC 9449 section 9) answers 401 with ``WWW-Authenticate: DPoP
error="use_dpop_nonce"`` and a ``DPoP-Nonce``: the request is sent once more, at once, with
a new proof carrying the nonce, which is kept for the origin's later requests (a
``DPoP-Nonce`` on any answer replaces it). A second refusal goes up as any 401 does.
"""

from __future__ import annotations

from typing import Any

import aiohttp

from ..protocol.http_status import parse_challenges
from .http_token import Proofs, TokenCell

__all__ = ["dpop_middleware"]


def _asks_nonce(prover: Proofs, url: str, resp: aiohttp.ClientResponse) -> bool:
    """Keep the answer's nonce; whether it is a 401 asking for it (a new one)."""
    fresh = prover.remember(url, resp.headers.get("DPoP-Nonce"))
    if resp.status != 401 or not fresh:
        return False
    return any(
        c.scheme == "dpop" and c.params.get("error") == "use_dpop_nonce"
        for c in parse_challenges(resp.headers.getall("WWW-Authenticate", []))
    )


def dpop_middleware(cell: TokenCell) -> Any:
    """The middleware for a transport whose tokens are ``cell``'s (module docstring)."""

    async def middleware(
        request: aiohttp.ClientRequest, handler: aiohttp.ClientHandlerType
    ) -> aiohttp.ClientResponse:
        snap = cell.current
        prover = snap.dpop if snap is not None else None
        auth = request.headers.get("Authorization", "")
        if prover is None or not auth.startswith("DPoP "):
            return await handler(request)
        token, url = auth[5:], str(request.url)
        request.headers["DPoP"] = prover.proof(request.method, url, token)
        resp = await handler(request)
        if not _asks_nonce(prover, url, resp):
            return resp
        resp.release()
        request.headers["DPoP"] = prover.proof(request.method, url, token)
        resp = await handler(request)
        _asks_nonce(prover, url, resp)  # keeps a newer nonce; no third try
        return resp

    return middleware
