"""A URL's password and query are credentials: never shown; URL credentials that aiohttp
would refuse to send next to another Authorization are refused at start, as ``config``."""

from __future__ import annotations

import logging
from urllib.parse import urlsplit, urlunsplit

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(30)

PASSWORD = "pw-7f3a9c"
QUERY_KEY = "qk-51d2e8"


def with_secrets(url: str) -> str:
    parts = urlsplit(url)
    netloc = f"user:{PASSWORD}@{parts.netloc}"
    return urlunsplit((parts.scheme, netloc, parts.path, f"api_key={QUERY_KEY}", ""))


def test_the_repr_of_http_shows_origin_and_path_only() -> None:
    spec = mcp.Http("https://user:" + PASSWORD + "@mcp.example.com:8443/mcp?api_key=" + QUERY_KEY)
    assert repr(spec) == "Http(url='https://mcp.example.com:8443/mcp', credential_id=None)"
    fallback = mcp.Http("https://mcp.example.com:8443/mcp?key=s3cret", sse_fallback=True)
    assert repr(fallback) == (
        "Http(url='https://mcp.example.com:8443/mcp', credential_id=None, sse_fallback=True)"
    )


@pytest.mark.parametrize(
    "extra",
    [{"bearer": "tok"}, {"headers": {"Authorization": "Basic eA=="}}, {"auth": lambda: {}}],
    ids=["bearer", "authorization-header", "auth-callable"],
)
def test_url_credentials_with_other_credentials_are_refused_at_start(extra: dict) -> None:
    with pytest.raises(mcp.Error) as info:
        mcp.Http(f"http://user:{PASSWORD}@127.0.0.1:1/mcp", **extra)
    assert (info.value.kind, info.value.reason) == ("config", "http.url")
    assert "one way only" in str(info.value)
    assert PASSWORD not in str(info.value)


def test_a_bad_port_is_a_config_error() -> None:
    with pytest.raises(mcp.Error) as info:
        mcp.Http("http://127.0.0.1:99999/mcp")
    assert (info.value.kind, info.value.reason) == ("config", "http.url")


def test_url_secrets_never_reach_a_repr_a_log_or_an_error(
    serve_http, start_client, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="conduit_mcp")
    _server, srv = serve_http()
    client = start_client(mcp.Http(with_secrets(srv.url)), request_timeout=5.0)
    status = client.await_ready(timeout=5)
    assert status.state == "ready"
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    seen = [repr(client), repr(status), repr(client.status())]
    srv.kill()
    with pytest.raises(mcp.Error) as info:
        client.call_tool("add", {"a": 1, "b": 2}, timeout=2.0)
    seen += [str(info.value), repr(info.value), repr(info.value.data)]
    seen += [r.getMessage() for r in caplog.records]
    seen += [repr(r.args) for r in caplog.records]
    for text in seen:
        assert PASSWORD not in text and QUERY_KEY not in text, text
