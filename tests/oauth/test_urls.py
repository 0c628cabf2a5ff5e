"""The discovery URLs in the spec's order and the canonical resource URI (pure)."""

from __future__ import annotations

import pytest

from conduit_mcp.oauth.discovery import (
    as_metadata_urls,
    canonical_resource,
    prm_urls,
    resource_matches,
)
from conduit_mcp.oauth.urls import is_loopback, is_secure


@pytest.mark.parametrize(
    ("url", "canonical"),
    [
        ("https://mcp.example.com/mcp", "https://mcp.example.com/mcp"),
        ("HTTPS://MCP.EXAMPLE.COM/mcp/", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com:443/mcp", "https://mcp.example.com/mcp"),
        ("https://mcp.example.com:8443/mcp#frag", "https://mcp.example.com:8443/mcp"),
        ("https://user:pw@mcp.example.com/mcp?api_key=1", "https://mcp.example.com/mcp"),
        ("http://[::1]:80/", "http://[::1]"),
        ("https://mcp.example.com/Path/Case", "https://mcp.example.com/Path/Case"),
    ],
)
def test_canonical_resource(url, canonical):
    assert canonical_resource(url) == canonical


def test_prm_urls_challenge_first_then_path_aware_then_root():
    assert prm_urls("https://h/a/mcp", "https://h/custom") == [
        "https://h/custom",
        "https://h/.well-known/oauth-protected-resource/a/mcp",
        "https://h/.well-known/oauth-protected-resource",
    ]
    assert prm_urls("https://h/") == ["https://h/.well-known/oauth-protected-resource"]
    # the challenge's URL is one of the well-known ones: asked once
    assert prm_urls("https://h/mcp", "https://h/.well-known/oauth-protected-resource") == [
        "https://h/.well-known/oauth-protected-resource",
        "https://h/.well-known/oauth-protected-resource/mcp",
    ]


def test_as_metadata_urls_in_the_spec_order():
    assert as_metadata_urls("https://auth.example.com/tenant1/") == [
        "https://auth.example.com/.well-known/oauth-authorization-server/tenant1",
        "https://auth.example.com/.well-known/openid-configuration/tenant1",
        "https://auth.example.com/tenant1/.well-known/openid-configuration",
    ]
    assert as_metadata_urls("http://127.0.0.1:9000") == [
        "http://127.0.0.1:9000/.well-known/oauth-authorization-server",
        "http://127.0.0.1:9000/.well-known/openid-configuration",
    ]


@pytest.mark.parametrize(
    ("advertised", "server", "ok"),
    [
        ("https://h/mcp", "https://h/mcp", True),
        ("https://H/mcp/", "https://h/mcp", True),
        ("https://h", "https://h/mcp", True),
        ("https://h/", "https://h/a/mcp", True),
        ("https://h/a", "https://h/a/mcp", True),
        ("https://h/a/mcp/x", "https://h/a/mcp", False),
        ("https://h/mc", "https://h/mcp", False),
        ("http://h/mcp", "https://h/mcp", False),
        ("https://h:8443/mcp", "https://h/mcp", False),
        ("https://evil.example.com/mcp", "https://h/mcp", False),
    ],
)
def test_resource_matches(advertised, server, ok):
    assert resource_matches(advertised, server) is ok


def test_secure_urls_are_https_or_loopback_http():
    assert is_secure("https://as.example.com/token")
    for url in (
        "http://127.0.0.1:1/t",
        "http://localhost/t",
        "http://[::1]:8/t",
        "http://127.9.9.9/",
    ):
        assert is_secure(url), url
    for url in (
        "http://as.example.com/t",
        "http://10.0.0.1/t",
        "ftp://127.0.0.1/",
        "https:///x",
        "",
    ):
        assert not is_secure(url), url
    assert not is_loopback("localhost.example.com")
