"""Checking DPoP proofs (RFC 9449 section 4.3), for the test servers: the authorization
server checks the proof of a token request, the protected MCP server the proof of each
request that presents a DPoP-bound token.

Written from the RFC's list, in its order: one well-formed JWT, ``typ`` ``dpop+jwt``, an
asymmetric ``alg``, a public ``jwk`` that verifies the signature, ``htm`` and ``htu`` of
this request, ``iat`` within the window, the server's ``nonce`` when it asks for one, ``ath``
the presented token's hash, and a ``jti`` not seen before (a replayed proof is refused).
joserfc reads and verifies the JWT; the rules are here.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections import OrderedDict
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from joserfc import jws, jwt
from joserfc.jwk import ECKey, OKPKey, RSAKey

__all__ = ["ASYMMETRIC", "ProofChecker", "ProofRefused", "htu_of"]

#: The algorithms a proof may be signed with (no ``none``, no MAC).
ASYMMETRIC = ("ES256", "ES384", "ES512", "RS256", "RS384", "RS512", "PS256", "PS384", "PS512")
#: How far a proof's ``iat`` may be from this server's clock (seconds).
WINDOW = 300
#: How many ``jti`` values are remembered (the oldest is forgotten first).
MAX_SEEN = 100_000


class ProofRefused(Exception):
    """A proof refused: ``error`` is ``invalid_dpop_proof`` or ``use_dpop_nonce``."""

    def __init__(self, error: str, description: str) -> None:
        super().__init__(f"{error}: {description}")
        self.error = error
        self.description = description


def htu_of(url: str) -> str:
    """A URL as ``htu`` compares: lower-case scheme and host, no query or fragment."""
    parts = urlsplit(url)
    return urlunsplit((parts.scheme.lower(), parts.netloc.lower(), parts.path, "", ""))


def _ath(token: str) -> str:
    digest = hashlib.sha256(token.encode("ascii")).digest()
    return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()


class ProofChecker:
    """One server's proof checks: its nonce (when it asks for one) and the ``jti`` values
    it has seen."""

    def __init__(self, *, require_nonce: bool = False) -> None:
        self.require_nonce = require_nonce
        self.nonce = secrets.token_urlsafe(16)
        self._seen: OrderedDict[str, None] = OrderedDict()

    def rotate_nonce(self) -> str:
        self.nonce = secrets.token_urlsafe(16)
        return self.nonce

    def check(
        self, proofs: list[str], method: str, url: str, access_token: str | None = None
    ) -> str:
        """The JWK thumbprint of the key that signed the one proof in ``proofs`` (the
        request's ``DPoP`` header values), or :class:`ProofRefused`."""
        if len(proofs) != 1:
            raise ProofRefused("invalid_dpop_proof", "exactly one DPoP header is required")
        proof = proofs[0]
        try:
            header = jws.extract_compact(proof.encode()).protected
        except Exception:
            raise ProofRefused("invalid_dpop_proof", "not a JWS") from None
        if header.get("typ") != "dpop+jwt":
            raise ProofRefused("invalid_dpop_proof", "typ must be dpop+jwt")
        alg = header.get("alg")
        if alg not in ASYMMETRIC and alg != "EdDSA":
            raise ProofRefused("invalid_dpop_proof", "alg must be asymmetric")
        jwk = header.get("jwk")
        if not isinstance(jwk, dict) or "d" in jwk or jwk.get("kty") == "oct":
            raise ProofRefused("invalid_dpop_proof", "jwk must be a public key")
        kinds: dict[str, Any] = {"EC": ECKey, "RSA": RSAKey, "OKP": OKPKey}
        try:
            key = kinds[jwk["kty"]].import_key(jwk)
            claims = jwt.decode(proof, key, algorithms=[alg]).claims
        except Exception:
            raise ProofRefused("invalid_dpop_proof", "the signature does not verify") from None
        jti = claims.get("jti")
        if not isinstance(jti, str) or not jti:
            raise ProofRefused("invalid_dpop_proof", "jti is missing")
        if claims.get("htm") != method:
            raise ProofRefused("invalid_dpop_proof", "htm is not this request's method")
        htu = claims.get("htu")
        if not isinstance(htu, str) or "?" in htu or "#" in htu or htu_of(htu) != htu_of(url):
            raise ProofRefused("invalid_dpop_proof", "htu is not this request's URL")
        iat = claims.get("iat")
        if not isinstance(iat, int) or abs(time.time() - iat) > WINDOW:
            raise ProofRefused("invalid_dpop_proof", "iat is outside the window")
        if access_token is not None and claims.get("ath") != _ath(access_token):
            raise ProofRefused("invalid_dpop_proof", "ath is not the token's hash")
        if jti in self._seen:
            raise ProofRefused("invalid_dpop_proof", "this proof was used before (jti)")
        if self.require_nonce and claims.get("nonce") != self.nonce:
            self._remember(jti)
            raise ProofRefused("use_dpop_nonce", "use the DPoP-Nonce this server gave")
        self._remember(jti)
        return str(key.thumbprint())

    def _remember(self, jti: str) -> None:
        self._seen[jti] = None
        while len(self._seen) > MAX_SEEN:
            self._seen.popitem(last=False)
