"""The TLS failure classifier (conduit_mcp/protocol/tls.py) and its hints, without sockets:
the exceptions are built as ``ssl`` and aiohttp build them."""

from __future__ import annotations

import ssl

import aiohttp
import pytest
from aiohttp.client_reqrep import ConnectionKey

from conduit_mcp.protocol.failures import Failure, describe, is_permanent
from conduit_mcp.protocol.tls import (
    CLOSED_OVER_TLS,
    classify_tls,
    is_tls_failure,
    tls_detail,
    tls_hint,
)

KEY = ConnectionKey("127.0.0.1", 8443, True, True, None, None, None)


def verify_error(code: int, message: str) -> ssl.SSLCertVerificationError:
    e = ssl.SSLCertVerificationError(
        1, f"[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed: {message} (_ssl.c:1006)"
    )
    e.verify_code = code
    e.verify_message = message
    e.reason = "CERTIFICATE_VERIFY_FAILED"
    return e


def alert(reason: str, text: str) -> ssl.SSLError:
    e = ssl.SSLError(1, f"[SSL: {reason}] {text} (_ssl.c:2580)")
    e.reason = reason
    return e


@pytest.mark.parametrize(
    ("code", "message", "problem"),
    [
        (62, "Hostname mismatch, certificate is not valid for 'mcp.example'.", "hostname_mismatch"),
        (64, "IP address mismatch, certificate is not valid for '127.0.0.1'.", "hostname_mismatch"),
        (10, "certificate has expired", "expired"),
        (9, "certificate is not yet valid", "not_yet_valid"),
        (18, "self-signed certificate", "self_signed"),
        (19, "self-signed certificate in certificate chain", "untrusted"),
        (20, "unable to get local issuer certificate", "untrusted"),
        (23, "certificate revoked", "revoked"),
        (26, "unsuitable certificate purpose", "not_for_servers"),
        (999, "a code this table does not know", "untrusted"),
    ],
)
def test_a_verification_failure_is_named_by_its_code(code, message, problem):
    e = verify_error(code, message)
    assert classify_tls(e) == (problem, message)
    # aiohttp's wrapper (itself an ssl error) gives the same name: the inner error counts.
    wrapped = aiohttp.ClientConnectorCertificateError(KEY, e)
    assert tls_detail(wrapped) == f"{problem}: {message}"


@pytest.mark.parametrize(
    ("reason", "problem"),
    [
        ("TLSV13_ALERT_CERTIFICATE_REQUIRED", "client_certificate_required"),
        ("TLSV1_ALERT_UNKNOWN_CA", "client_certificate_refused"),
        ("SSLV3_ALERT_BAD_CERTIFICATE", "client_certificate_refused"),
        ("WRONG_VERSION_NUMBER", "not_tls"),
        ("RECORD_LAYER_FAILURE", "not_tls"),
        ("SSLV3_ALERT_HANDSHAKE_FAILURE", "handshake_failed"),
    ],
)
def test_a_handshake_refused_by_an_alert_is_named_by_its_reason(reason, problem):
    e = alert(reason, reason.lower().replace("_", " "))
    assert classify_tls(e)[0] == problem
    assert classify_tls(aiohttp.ClientConnectorSSLError(KEY, e))[0] == problem
    # An alert after the handshake reaches aiohttp's reader as ClientOSError, the ssl error
    # as its cause; the reason is read from the text when the attribute is gone.
    later = aiohttp.ClientOSError(*e.args)
    later.__cause__ = ssl.SSLError(*e.args)
    assert is_tls_failure(later) and classify_tls(later)[0] == problem


def test_the_words_shown_are_openssls_without_the_source_line():
    e = alert("WRONG_VERSION_NUMBER", "wrong version number")
    assert classify_tls(e) == ("not_tls", "[SSL: WRONG_VERSION_NUMBER] wrong version number")


def test_not_a_tls_failure():
    reset = ConnectionResetError(104, "Connection reset by peer")
    assert not is_tls_failure(reset)
    assert classify_tls(reset) == ("handshake_failed", "ConnectionResetError")


def test_a_cycle_of_causes_is_walked_once():
    a, b = ValueError("a"), ValueError("b")
    a.__cause__, b.__cause__ = b, a
    assert not is_tls_failure(a)


@pytest.mark.parametrize(
    ("detail", "words"),
    [
        ("hostname_mismatch: x", "not valid for this host name"),
        ("expired: x", "has expired"),
        ("self_signed: x", "Http(verify='its-certificate.pem')"),
        ("untrusted: x", "Http(verify='ca.pem')"),
        ("client_certificate_required: x", "context.load_cert_chain"),
        ("not_tls: x", "check http:// versus https://"),
        ("ClientConnectorSSLError", "the TLS handshake failed"),
        (None, "the TLS handshake failed"),
    ],
)
def test_each_problem_has_its_hint(detail, words):
    assert words in tls_hint(detail)
    assert words in describe(Failure("tls_failed", detail))


def test_only_a_not_tls_failure_says_http_versus_https():
    for detail in ("hostname_mismatch: x", "expired: x", "self_signed: x", "untrusted: x"):
        assert "http:// versus https://" not in describe(Failure("tls_failed", detail))
        assert is_permanent(Failure("tls_failed", detail))


def test_a_close_over_tls_before_any_answer_names_the_client_certificate():
    text = describe(Failure("stream_broken", f"ServerDisconnectedError: {CLOSED_OVER_TLS}"))
    assert "requires a client certificate" in text and "Http(ssl=context)" in text
    assert "client certificate" not in describe(Failure("stream_broken", "ServerDisconnectedError"))
    assert not is_permanent(Failure("stream_broken", f"x: {CLOSED_OVER_TLS}"))
