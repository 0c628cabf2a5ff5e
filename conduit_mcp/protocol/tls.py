"""Why a TLS connection failed, named from the ``ssl`` exception: pure functions, no I/O.

A certificate the client cannot verify is not a server that is down: retrying cannot help,
so the client fails at once with ``tls_failed`` (the MCP server's, or the authorization
server's) and says which check failed and what to change (docs/tls.md). The name is read
from OpenSSL's verification code (``ssl.SSLCertVerificationError.verify_code``, the X.509
``X509_V_ERR_*`` numbers, stable across OpenSSL releases) or, for a handshake refused by an
alert, from the alert's OpenSSL reason (``TLSV13_ALERT_CERTIFICATE_REQUIRED``); what is shown
is that name and OpenSSL's own words, which name at most the host, never a credential.

>>> import ssl
>>> e = ssl.SSLCertVerificationError(1, "certificate verify failed: certificate has expired")
>>> e.verify_code, e.verify_message = 10, "certificate has expired"
>>> tls_detail(e)
'expired: certificate has expired'
>>> tls_hint(tls_detail(e))
"the server's certificate has expired (or this machine's clock is wrong): renew the certificate"
"""

from __future__ import annotations

import re
import ssl
from typing import Literal

TlsProblem = Literal[
    "hostname_mismatch",
    "expired",
    "not_yet_valid",
    "self_signed",
    "untrusted",
    "revoked",
    "not_for_servers",
    "client_certificate_required",
    "client_certificate_refused",
    "not_tls",
    "handshake_failed",
]

# X.509 verification codes (OpenSSL's x509_vfy.h, X509_V_ERR_*).
_VERIFY_CODES: dict[int, TlsProblem] = {
    2: "untrusted",  # UNABLE_TO_GET_ISSUER_CERT
    9: "not_yet_valid",  # CERT_NOT_YET_VALID
    10: "expired",  # CERT_HAS_EXPIRED
    18: "self_signed",  # DEPTH_ZERO_SELF_SIGNED_CERT
    19: "untrusted",  # SELF_SIGNED_CERT_IN_CHAIN: a root nobody here trusts
    20: "untrusted",  # UNABLE_TO_GET_ISSUER_CERT_LOCALLY
    21: "untrusted",  # UNABLE_TO_VERIFY_LEAF_SIGNATURE
    23: "revoked",  # CERT_REVOKED
    24: "untrusted",  # INVALID_CA
    26: "not_for_servers",  # INVALID_PURPOSE
    62: "hostname_mismatch",  # HOSTNAME_MISMATCH
    64: "hostname_mismatch",  # IP_ADDRESS_MISMATCH
}

# OpenSSL reasons of a handshake the other side ended with an alert, or that never was TLS.
_REASONS: dict[str, TlsProblem] = {
    "TLSV13_ALERT_CERTIFICATE_REQUIRED": "client_certificate_required",
    "PEER_DID_NOT_RETURN_A_CERTIFICATE": "client_certificate_required",
    "SSLV3_ALERT_BAD_CERTIFICATE": "client_certificate_refused",
    "TLSV1_ALERT_UNKNOWN_CA": "client_certificate_refused",
    "SSLV3_ALERT_CERTIFICATE_UNKNOWN": "client_certificate_refused",
    "SSLV3_ALERT_CERTIFICATE_EXPIRED": "client_certificate_refused",
    "TLSV1_ALERT_ACCESS_DENIED": "client_certificate_refused",
    "WRONG_VERSION_NUMBER": "not_tls",
    "RECORD_LAYER_FAILURE": "not_tls",
    "PACKET_LENGTH_TOO_LONG": "not_tls",
    "HTTP_REQUEST": "not_tls",
    "UNKNOWN_PROTOCOL": "not_tls",
}

_REASON_IN_TEXT = re.compile(r"\[SSL: ([A-Z0-9_]+)\]")
_OPENSSL_SUFFIX = re.compile(r"\s*\(_ssl\.c:\d+\)\s*$")

_HINTS: dict[str, str] = {
    "hostname_mismatch": "the server's certificate is not valid for this host name: use a "
    "name (or IP address) the certificate lists, or have the certificate reissued for it",
    "expired": "the server's certificate has expired (or this machine's clock is wrong): "
    "renew the certificate",
    "not_yet_valid": "the server's certificate is not valid yet (or this machine's clock is wrong)",
    "self_signed": "the server's certificate is self-signed: trust it with "
    "Http(verify='its-certificate.pem'), or give the server a certificate from a trusted CA",
    "untrusted": "the server's certificate is issued by a CA this client does not trust: "
    "trust that CA with Http(verify='ca.pem') (a file or a folder of CA certificates) or "
    "Http(ssl=context)",
    "revoked": "the server's certificate was revoked",
    "not_for_servers": "the server's certificate is not meant for a TLS server (its key "
    "usage): have it reissued",
    "client_certificate_required": "the server requires a client certificate: give one "
    "with Http(ssl=context) after context.load_cert_chain('client.pem', 'client.key')",
    "client_certificate_refused": "the server refused the client certificate (unknown CA, "
    "expired or not accepted there)",
    "not_tls": "the server does not speak TLS there: check http:// versus https:// and the port",
    "handshake_failed": "the TLS handshake failed: check http:// versus https:// and the port",
}


#: The detail of an https request the server closed before any answer (no TLS alert said
#: why): what a server that requires a client certificate does to a client without one
#: (TLS 1.3 checks it after the client's side of the handshake is done).
CLOSED_OVER_TLS = "closed over TLS before any answer"

CLOSED_OVER_TLS_HINT = (
    "the server closed the TLS connection before answering: a server that requires a "
    "client certificate does that to a client without one (or with one it does not accept): "
    "give one with Http(ssl=context) after context.load_cert_chain('client.pem', 'client.key')"
)


def classify_tls(exc: BaseException) -> tuple[TlsProblem, str]:
    """``(problem, OpenSSL's words)`` for a TLS failure: the exception itself, or one that
    wraps it (aiohttp's ``ClientConnectorCertificateError`` and ``ClientConnectorSSLError``
    keep it as their cause, or as ``certificate_error`` / ``os_error``).

    >>> classify_tls(ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number (_ssl.c:1006)"))
    ('not_tls', '[SSL: WRONG_VERSION_NUMBER] wrong version number')
    >>> classify_tls(ValueError("no TLS here"))
    ('handshake_failed', 'ValueError')
    """
    found = _find_ssl_error(exc)
    if found is None:
        return "handshake_failed", type(exc).__name__
    if isinstance(found, ssl.SSLCertVerificationError):
        code = getattr(found, "verify_code", None)
        words = str(getattr(found, "verify_message", "") or "") or _words(found)
        problem = _VERIFY_CODES.get(code) if isinstance(code, int) else None
        return problem or "untrusted", words
    reason = getattr(found, "reason", None)
    if not isinstance(reason, str):
        match = _REASON_IN_TEXT.search(str(found))
        reason = match.group(1) if match else None
    problem = _REASONS.get(reason or "", "handshake_failed")
    return problem, _words(found)


def tls_detail(exc: BaseException) -> str:
    """``"problem: OpenSSL's words"``, the ``detail`` of a ``tls_failed`` failure.

    >>> e = ssl.SSLCertVerificationError(1, "x")
    >>> e.verify_code = 64
    >>> e.verify_message = "IP address mismatch, certificate is not valid for '127.0.0.1'."
    >>> tls_detail(e)
    "hostname_mismatch: IP address mismatch, certificate is not valid for '127.0.0.1'."
    """
    problem, words = classify_tls(exc)
    return f"{problem}: {words}" if words else problem


def tls_hint(detail: str | None) -> str:
    """What to change, for a ``tls_failed`` detail (:func:`tls_detail`); the generic hint
    when the detail names no known problem (an older client's ``ClientConnectorSSLError``).

    >>> tls_hint("untrusted: unable to get local issuer certificate").startswith("the server's certificate is issued by a CA")
    True
    >>> tls_hint(None)
    'the TLS handshake failed: check http:// versus https:// and the port'
    """
    name = (detail or "").split(":", 1)[0].strip()
    return _HINTS.get(name, _HINTS["handshake_failed"])


def is_tls_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is, or wraps, an ``ssl`` error (a handshake or an alert).

    >>> is_tls_failure(ssl.SSLError(1, "x")), is_tls_failure(ConnectionResetError())
    (True, False)
    """
    return _find_ssl_error(exc) is not None


def _find_ssl_error(exc: BaseException) -> ssl.SSLError | None:
    """The innermost ``ssl`` error ``exc`` is or wraps (aiohttp's wrappers are ``ssl``
    errors themselves, with the telling one inside). A bounded walk: causes that loop, or
    a long chain, cannot make it run away."""
    seen: set[int] = set()

    def walk(current: BaseException, depth: int) -> ssl.SSLError | None:
        seen.add(id(current))
        if depth < 6:
            for attr in ("certificate_error", "os_error", "__cause__", "__context__"):
                inner = getattr(current, attr, None)
                if isinstance(inner, BaseException) and id(inner) not in seen:
                    found = walk(inner, depth + 1)
                    if found is not None:
                        return found
        return current if isinstance(current, ssl.SSLError) else None

    return walk(exc, 0)


def _words(exc: BaseException) -> str:
    text = exc.args[1] if len(exc.args) > 1 and isinstance(exc.args[1], str) else str(exc)
    return _OPENSSL_SUFFIX.sub("", text)[:200]


__all__ = [
    "CLOSED_OVER_TLS",
    "CLOSED_OVER_TLS_HINT",
    "TlsProblem",
    "classify_tls",
    "is_tls_failure",
    "tls_detail",
    "tls_hint",
]
