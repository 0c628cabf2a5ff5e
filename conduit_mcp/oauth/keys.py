"""The ``private_key_jwt`` key: a PEM private key read once, with the key type its signing
algorithm needs (joserfc, authlib's JOSE library)."""

from __future__ import annotations

from typing import Any

from ..errors import Error


def key_type(alg: str) -> str:
    """The JWK key type an algorithm signs with.

    >>> key_type("RS256"), key_type("PS384"), key_type("ES256"), key_type("EdDSA")
    ('RSA', 'RSA', 'EC', 'OKP')
    """
    if alg == "EdDSA":
        return "OKP"
    return {"R": "RSA", "P": "RSA", "E": "EC"}[alg[0]]


def load_private_key(pem: str, alg: str) -> Any:
    """The joserfc key of ``pem`` for ``alg``; ``Error("config", "oauth.private_key")``
    when it is not a private key of that type (the key's text is never in the message)."""
    from joserfc.jwk import ECKey, OKPKey, RSAKey

    kinds: dict[str, Any] = {"RSA": RSAKey, "EC": ECKey, "OKP": OKPKey}
    kind = kinds[key_type(alg)]
    try:
        key: Any = kind.import_key(pem)
    except Exception as e:
        raise Error(
            "config",
            "oauth.private_key",
            f"the private_key is not a {key_type(alg)} private key for {alg} ({type(e).__name__})",
        ) from None
    if not key.is_private:
        raise Error("config", "oauth.private_key", "the private_key is a public key")
    return key


def public_jwks(pem: str, alg: str) -> dict[str, Any]:
    """The JWK set of the public half of ``pem``, for dynamic registration."""
    key = load_private_key(pem, alg)
    jwk = dict(key.as_dict(private=False))
    jwk.setdefault("alg", alg)
    jwk.setdefault("use", "sig")
    return {"keys": [jwk]}
