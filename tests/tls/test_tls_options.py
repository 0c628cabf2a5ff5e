"""``Http(ssl=..., verify=...)``: checked once, when the spec is made (docs/tls.md)."""

from __future__ import annotations

import dataclasses
import ssl

import pytest

import conduit_mcp as mcp


def config_error(**kw: object) -> mcp.Error:
    with pytest.raises(mcp.Error) as err:
        mcp.Http("https://127.0.0.1:8443/mcp", **kw)  # type: ignore[arg-type]
    assert err.value.kind == "config"
    return err.value


def test_verify_builds_a_context_trusting_only_that_ca(certs):
    spec = mcp.Http("https://127.0.0.1:8443/mcp", verify=certs.ca)
    context = spec.tls
    assert isinstance(context, ssl.SSLContext)
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    assert [c["subject"] for c in context.get_ca_certs()] == [
        ((("commonName", "conduit-mcp test CA"),),)
    ]
    # A copy (Client.set_auth replaces fields) builds its own.
    copy = dataclasses.replace(spec, bearer="t")
    assert isinstance(copy.tls, ssl.SSLContext)


def test_an_ssl_context_is_used_as_given():
    context = ssl.create_default_context()
    assert mcp.Http("https://h/mcp", ssl=context).tls is context
    assert mcp.Http("https://h/mcp").tls is None


def test_the_ca_path_is_never_in_the_repr(certs):
    assert "ca.pem" not in repr(mcp.Http("https://127.0.0.1/mcp", verify=certs.ca))


def test_bad_tls_options_are_config_errors(certs, tmp_path):
    assert config_error(ssl="yes").reason == "http.ssl"
    assert config_error(verify=True).reason == "http.verify"
    assert config_error(verify=False).reason == "http.verify"
    both = config_error(ssl=ssl.create_default_context(), verify=certs.ca)
    assert (both.reason, "not both" in both.message) == ("http.verify", True)
    missing = config_error(verify=str(tmp_path / "nope.pem"))
    assert "FileNotFoundError" in missing.message
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    assert config_error(verify=garbage).reason == "http.verify"
    empty = tmp_path / "empty.pem"
    empty.write_bytes(b"")
    assert config_error(verify=empty).reason == "http.verify"
