"""A JWT issuer for tests: a key pair that plays a workload platform, a single sign-on or an
enterprise identity provider next to the test authorization server (:mod:`.assertions`)."""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any

import orjson

__all__ = ["JwtIssuer"]


class JwtIssuer:
    """An issuer identifier and an EC P-256 key: :meth:`sign` makes its JWTs, :attr:`trust`
    is the ``--trust ISSUER=JWKS_FILE`` value that makes a test authorization server accept
    them (``AuthServerProcess(..., trust=[issuer.trust])``), :attr:`key_file` the PEM an
    identity provider signs with (``signing_key=issuer.key_file``).

    >>> import tempfile
    >>> platform = JwtIssuer("https://k8s.example.test", tempfile.mkdtemp())
    >>> platform.trust.startswith("https://k8s.example.test=")
    True
    >>> platform.sign(sub="ci:job", aud="https://as.example.test").count(".")
    2
    """

    def __init__(self, issuer: str, workdir: str | os.PathLike[str]) -> None:
        from joserfc.jwk import ECKey

        self.issuer = issuer
        self._key = ECKey.generate_key("P-256")
        name = secrets.token_hex(4)
        self.jwks_file = str(Path(workdir) / f"jwks-{name}.json")
        self.key_file = str(Path(workdir) / f"key-{name}.pem")
        Path(self.jwks_file).write_bytes(orjson.dumps({"keys": [self._key.as_dict(private=False)]}))
        Path(self.key_file).write_bytes(self._key.as_pem(private=True))
        os.chmod(self.key_file, 0o600)

    def __repr__(self) -> str:
        return f"<JwtIssuer {self.issuer}>"

    @property
    def trust(self) -> str:
        """``ISSUER=JWKS_FILE``: the test authorization server's ``--trust`` value.

        >>> import tempfile
        >>> JwtIssuer("https://sso.test", tempfile.mkdtemp()).trust.split("=")[0]
        'https://sso.test'
        """
        return self.trusted_as(self.issuer)

    def trusted_as(self, issuer: str) -> str:
        """The ``--trust`` value for these keys under another issuer identifier: a test
        identity provider's, known once it listens (``trusted_as(idp.issuer)``).

        >>> import tempfile
        >>> keys = JwtIssuer("https://idp.test", tempfile.mkdtemp())
        >>> keys.trusted_as("http://127.0.0.1:8123").split("=")[0]
        'http://127.0.0.1:8123'
        """
        return f"{issuer}={self.jwks_file}"

    def sign(self, *, sub: str, aud: str, ttl: float = 600.0, **claims: Any) -> str:
        """A JWT of this issuer for ``sub`` and ``aud``, valid ``ttl`` seconds (negative:
        expired already), with ``iat`` and a fresh ``jti``; ``claims`` are added.

        >>> import tempfile
        >>> sso = JwtIssuer("https://sso.test", tempfile.mkdtemp())
        >>> len(sso.sign(sub="alice", aud="app", email="alice@example.com").split("."))
        3
        """
        from joserfc import jwt

        now = int(time.time())
        body = {"iss": self.issuer, "sub": sub, "aud": aud, "iat": now, "exp": now + int(ttl)}
        body.update({"jti": secrets.token_hex(8), **claims})
        return jwt.encode({"alg": "ES256"}, body, self._key)
