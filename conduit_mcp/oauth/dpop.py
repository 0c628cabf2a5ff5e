"""DPoP (RFC 9449): tokens bound to a key the client holds, proved on every request.

A DPoP-bound access token is useless without the private key it is bound to: the client
signs a fresh *proof* (a JWT of type ``dpop+jwt``, its public key in the header) for every
token request and every request to the resource, naming the HTTP method (``htm``), the URL
without query or fragment (``htu``), when (``iat``), a random identifier never used twice
(``jti``), for a resource request the hash of the access token (``ath``), and the server's
nonce when it asked for one (``nonce``; RFC 9449 sections 8 and 9). The token is then sent as
``Authorization: DPoP <token>``. docs/oauth.md, "DPoP", says how the client uses it.

:class:`Prover` holds one client's key pair and the nonces servers gave it (per origin); the
clock is passed in. joserfc generates the keys, computes the thumbprint (RFC 7638) and signs;
what is written here is the proof's claims and the nonce rules. Everything runs on the I/O
loop (token requests and the HTTP transport's middleware), so there is no lock.

The private key never leaves the :class:`Prover` but for the token store (its record goes
with the tokens bound to it): no repr, log record or error shows it, nor a proof.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import orjson
from joserfc import jwt
from joserfc.jwk import ECKey

from ..errors import Error

#: The proof signing algorithms this client offers, and the curve of each one's key.
ALGS: dict[str, str] = {"ES256": "P-256", "ES384": "P-384", "ES512": "P-521"}
#: The longest server nonce kept (characters): a longer one is ignored (not sent back).
MAX_NONCE = 512
#: How many origins' nonces one key remembers (the oldest is forgotten first).
MAX_ORIGINS = 16

__all__ = ["ALGS", "MAX_NONCE", "MAX_ORIGINS", "Prover", "ath", "htu", "use_dpop"]


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def htu(url: str) -> str:
    """The ``htu`` of a request to ``url``: without query, fragment or userinfo (RFC 9449
    section 4.2).

    >>> htu("https://u:p@mcp.example.com:8443/mcp?session=1#x")
    'https://mcp.example.com:8443/mcp'
    """
    parts = urlsplit(url)
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = host if parts.port is None else f"{host}:{parts.port}"
    return urlunsplit((parts.scheme.lower(), netloc, parts.path, "", ""))


def _origin(url: str) -> str:
    parts = urlsplit(htu(url))
    return f"{parts.scheme}://{parts.netloc}"


def ath(access_token: str) -> str:
    """The ``ath`` claim: the base64url SHA-256 of the access token (RFC 9449 section 4.2).

    >>> ath("Kz~8mXK1EalYznwH-LC-1fBAo.4Ljp~zsPE_NeO.gxU")
    'fUHyO2r2Z3DZ53EsNrWBb0xWXoaNy59IiKCAqksmQEo'
    """
    return _b64(hashlib.sha256(access_token.encode("ascii")).digest())


def _nonce_ok(value: Any) -> bool:
    """A nonce is 1*NQCHAR (RFC 9449 section 8.1), bounded here by :data:`MAX_NONCE`."""
    return (
        isinstance(value, str)
        and 0 < len(value) <= MAX_NONCE
        and all(c == "!" or "#" <= c <= "[" or "]" <= c <= "~" for c in value)
    )


class Prover:
    """One client's DPoP key pair, and the nonces servers asked it to use.

    >>> prover = Prover.generate("ES256", clock=lambda: 1000.0)
    >>> proof = prover.proof("POST", "https://as.example/token?x=1")
    >>> from joserfc import jwt
    >>> token = jwt.decode(proof, prover.public_key())
    >>> token.header["typ"], token.claims["htm"], token.claims["htu"], token.claims["iat"]
    ('dpop+jwt', 'POST', 'https://as.example/token', 1000)
    >>> "d" in token.header["jwk"], repr(prover)
    (False, "Prover(alg='ES256')")
    """

    __slots__ = ("_clock", "_jwk", "_key", "_nonces", "_public", "alg")

    def __init__(self, jwk: str, *, clock: Callable[[], float] = time.time) -> None:
        """``jwk``: the private key as JWK JSON (what :meth:`private_jwk` gave; its ``alg``
        member names the proofs' algorithm). A key that cannot be read is
        ``Error("auth", "dpop_failed")``."""
        try:
            value = orjson.loads(jwk)
            alg = value.get("alg")
            key = ECKey.import_key(value)
            if alg not in ALGS or key.curve_name != ALGS[alg] or not key.is_private:
                raise ValueError("not a private key of the algorithm's curve")
        except Exception:
            raise Error(
                "auth",
                "dpop_failed",
                "the DPoP key stored with the tokens cannot be read; delete those tokens "
                "(conduit-mcp logout) so that new ones are bound to a new key",
            ) from None
        self.alg: str = alg
        """The proofs' algorithm (``ES256``, ``ES384`` or ``ES512``)."""
        self._jwk = jwk  # as given: the store's record compares equal to it
        self._key = key
        self._public = key.as_dict(private=False)
        self._clock = clock
        self._nonces: OrderedDict[str, str] = OrderedDict()

    @classmethod
    def generate(cls, alg: str = "ES256", *, clock: Callable[[], float] = time.time) -> Prover:
        """A new key pair for ``alg`` (EC P-256 for the default ES256)."""
        if alg not in ALGS:
            raise Error("config", "oauth.dpop_alg", f"DPoP alg must be one of {sorted(ALGS)}")
        key = ECKey.generate_key(ALGS[alg], private=True)
        return cls(orjson.dumps({**key.as_dict(private=True), "alg": alg}).decode(), clock=clock)

    def __repr__(self) -> str:
        return f"Prover(alg={self.alg!r})"

    def private_jwk(self) -> str:
        """The private key as JWK JSON, for the token store only."""
        return self._jwk

    def public_key(self) -> ECKey:
        """The public key (what a server verifies a proof with)."""
        return ECKey.import_key(self._public)

    @property
    def thumbprint(self) -> str:
        """The key's JWK SHA-256 thumbprint (RFC 7638): a bound token's ``cnf.jkt``."""
        return str(self._key.thumbprint())

    def proof(self, method: str, url: str, access_token: str | None = None) -> str:
        """A fresh proof for one request: ``method`` to ``url`` (its query and fragment
        dropped), with the origin's nonce when one was given, and ``ath`` for a request
        that presents ``access_token``. Never the same ``jti`` twice (192 random bits)."""
        claims: dict[str, Any] = {
            "jti": secrets.token_urlsafe(24),
            "htm": method.upper(),
            "htu": htu(url),
            "iat": int(self._clock()),
        }
        nonce = self._nonces.get(_origin(url))
        if nonce is not None:
            claims["nonce"] = nonce
        if access_token is not None:
            claims["ath"] = ath(access_token)
        header = {"typ": "dpop+jwt", "alg": self.alg, "jwk": self._public}
        return jwt.encode(header, claims, self._key, algorithms=[self.alg])

    def remember(self, url: str, nonce: Any) -> bool:
        """Keep ``nonce`` (a ``DPoP-Nonce`` header) for ``url``'s origin; False when it is
        not a nonce (empty, too long, a character RFC 9449 does not allow) or unchanged.

        >>> p = Prover.generate()
        >>> p.remember("https://as.example/token", "n-1"), p.remember("https://as.example/x", "n-1")
        (True, False)
        >>> p.remember("https://as.example/token", 'bad"nonce'), p.remember("https://as.example", "")
        (False, False)
        """
        if not _nonce_ok(nonce):
            return False
        origin = _origin(url)
        if self._nonces.get(origin) == nonce:
            return False
        self._nonces[origin] = nonce
        self._nonces.move_to_end(origin)
        while len(self._nonces) > MAX_ORIGINS:
            self._nonces.popitem(last=False)
        return True


def use_dpop(
    setting: bool | None,
    alg: str,
    as_metadata: Mapping[str, Any],
    prm: Mapping[str, Any] | None,
    challenged: bool,
) -> bool:
    """Whether token requests carry DPoP proofs. ``setting`` is ``OAuth(dpop=...)``: False
    never; True always (an authorization server that lists its algorithms must list
    ``alg``); None (the default) when the authorization server advertises
    ``dpop_signing_alg_values_supported`` with ``alg`` and the resource requires DPoP (its
    metadata's ``dpop_bound_access_tokens_required``, or a 401 with only a DPoP challenge).

    >>> meta = {"dpop_signing_alg_values_supported": ["ES256"]}
    >>> use_dpop(None, "ES256", meta, {"dpop_bound_access_tokens_required": True}, False)
    True
    >>> use_dpop(None, "ES256", meta, {}, False), use_dpop(None, "ES256", meta, None, True)
    (False, True)
    >>> use_dpop(None, "ES256", {}, {"dpop_bound_access_tokens_required": True}, True)
    False
    >>> use_dpop(True, "ES256", {}, None, False), use_dpop(False, "ES256", meta, None, True)
    (True, False)
    """
    if setting is False:
        return False
    listed = as_metadata.get("dpop_signing_alg_values_supported")
    algs = [a for a in listed if isinstance(a, str)] if isinstance(listed, list) else None
    if setting is True:
        if algs and alg not in algs:
            raise Error(
                "auth",
                "dpop_failed",
                f"the authorization server signs no DPoP proofs with {alg} (it lists "
                f"{sorted(a for a in algs if a in ALGS) or 'none this client offers'}): "
                f"give OAuth(dpop_alg=...) one of those, or dpop=None",
            )
        return True
    if not algs or alg not in algs:
        return False
    required = prm is not None and prm.get("dpop_bound_access_tokens_required") is True
    return required or challenged
