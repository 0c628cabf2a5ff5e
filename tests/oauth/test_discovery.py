"""Discovery over real HTTP on loopback: the PRM order, resource and issuer checks, RFC 8414
and OIDC order, PKCE, the 2025-03-26 fallbacks, and the limits (time, size, redirects)."""

from __future__ import annotations

import asyncio
import time

import pytest
from aiohttp import web

from conduit_mcp import Error
from conduit_mcp.oauth.challenge import Challenge
from conduit_mcp.oauth.discovery import discover, fetch_as_metadata

from .conftest import as_metadata, run

PRM_ROOT = "/.well-known/oauth-protected-resource"
AS_ROOT = "/.well-known/oauth-authorization-server"
OIDC_ROOT = "/.well-known/openid-configuration"


def prm(server, resource=None, servers=None, **extra):
    return {
        "resource": resource or f"{server.url}/mcp",
        "authorization_servers": servers or [server.url],
        **extra,
    }


def failure(fn, *args, **kwargs):
    with pytest.raises(Error) as e:
        run(fn, *args, **kwargs)
    assert e.value.kind == "auth"
    return e.value


def test_the_challenges_resource_metadata_comes_first(server):
    server.json("/custom-prm", prm(server, scopes_supported=["a", "b"]))
    server.json(AS_ROOT, as_metadata(server.url))
    found = run(discover, f"{server.url}/mcp", Challenge("bearer", f"{server.url}/custom-prm"))
    assert server.paths() == ["/custom-prm", AS_ROOT]
    assert found.resource == f"{server.url}/mcp"
    assert found.issuer == server.url
    assert found.resource_scopes == ("a", "b")
    assert found.token_endpoint == f"{server.url}/token"
    assert not found.legacy


def test_an_insecure_resource_metadata_url_from_another_origin_is_ignored(server):
    server.json(f"{PRM_ROOT}/mcp", prm(server))
    server.json(AS_ROOT, as_metadata(server.url))
    found = run(discover, f"{server.url}/mcp", Challenge("bearer", "http://evil.example.com/prm"))
    assert server.paths() == [f"{PRM_ROOT}/mcp", AS_ROOT] and not found.legacy


def test_path_aware_prm_then_root(server):
    server.json(PRM_ROOT, prm(server, resource=server.url))
    server.json(AS_ROOT, as_metadata(server.url))
    found = run(discover, f"{server.url}/mcp", Challenge("bearer", f"{server.url}/gone"))
    assert server.paths() == ["/gone", f"{PRM_ROOT}/mcp", PRM_ROOT, AS_ROOT]
    assert found.resource == server.url  # a root document names the origin


def test_the_path_aware_prm_stops_the_search(server):
    server.json(f"{PRM_ROOT}/mcp", prm(server))
    server.json(AS_ROOT, as_metadata(server.url))
    run(discover, f"{server.url}/mcp", None)
    assert PRM_ROOT not in server.paths()


def test_a_prm_for_another_resource_is_refused(server):
    server.json(f"{PRM_ROOT}/mcp", prm(server, resource="https://evil.example.com/mcp"))
    err = failure(discover, f"{server.url}/mcp", None)
    assert err.reason == "resource_mismatch"
    assert server.paths() == [f"{PRM_ROOT}/mcp"]  # nothing asked of any AS


@pytest.mark.parametrize("servers", [[], "x", [5]])
def test_a_prm_without_authorization_servers_is_a_discovery_failure(server, servers):
    server.json(
        f"{PRM_ROOT}/mcp", {"resource": f"{server.url}/mcp", "authorization_servers": servers}
    )
    assert failure(discover, f"{server.url}/mcp", None).reason == "discovery_failed"


def test_an_insecure_authorization_server_is_refused(server):
    server.json(f"{PRM_ROOT}/mcp", prm(server, servers=["http://as.example.com"]))
    assert failure(discover, f"{server.url}/mcp", None).reason == "discovery_failed"


def test_as_metadata_for_an_issuer_with_a_path_in_the_spec_order(server):
    issuer = f"{server.url}/tenant1"
    server.json(f"{PRM_ROOT}/mcp", prm(server, servers=[issuer]))
    server.json(f"/tenant1{OIDC_ROOT}", as_metadata(server.url, issuer=issuer))
    found = run(discover, f"{server.url}/mcp", None)
    assert found.issuer == issuer
    assert server.paths()[1:] == [
        f"{AS_ROOT}/tenant1",
        f"{OIDC_ROOT}/tenant1",
        f"/tenant1{OIDC_ROOT}",
    ]
    assert AS_ROOT not in server.paths() and OIDC_ROOT not in server.paths()  # never the root


def test_oidc_discovery_when_rfc8414_has_nothing(server):
    server.json(f"{PRM_ROOT}/mcp", prm(server))
    server.json(OIDC_ROOT, as_metadata(server.url))
    found = run(discover, f"{server.url}/mcp", None)
    assert server.paths()[1:] == [AS_ROOT, OIDC_ROOT]
    assert found.issuer == server.url


def test_a_document_naming_another_issuer_is_never_used(server):
    server.json(f"{PRM_ROOT}/mcp", prm(server))
    server.json(AS_ROOT, as_metadata(server.url, issuer=f"{server.url}/"))
    assert failure(discover, f"{server.url}/mcp", None).reason == "issuer_mismatch"
    # ...but a good document at the next URL is
    server.json(OIDC_ROOT, as_metadata(server.url))
    assert run(discover, f"{server.url}/mcp", None).issuer == server.url


@pytest.mark.parametrize("methods", [None, [], ["plain"]])
def test_no_s256_refuses_to_proceed(server, methods):
    server.json(f"{PRM_ROOT}/mcp", prm(server))
    doc = as_metadata(server.url)
    if methods is None:
        del doc["code_challenge_methods_supported"]
    else:
        doc["code_challenge_methods_supported"] = methods
    server.json(AS_ROOT, doc)
    assert failure(discover, f"{server.url}/mcp", None).reason == "no_pkce"


@pytest.mark.parametrize(
    "broken",
    [
        {"issuer": 5},
        {"token_endpoint": 5},
        {"token_endpoint": None},
        {"registration_endpoint": ["x"]},
        {"authorization_endpoint": 5},
        {"token_endpoint_auth_methods_supported": "none"},
        {"scopes_supported": 5},
        {"code_challenge_methods_supported": "S256"},
        {"token_endpoint": "https://as.example.com/t#f"},
    ],
)
def test_a_malformed_metadata_document_is_a_discovery_failure(server, broken):
    server.json(f"{PRM_ROOT}/mcp", prm(server))
    doc = as_metadata(server.url)
    doc.update(broken)
    if broken.get("issuer") == 5:
        server.json(AS_ROOT, doc)  # an issuer that is not the one asked for: never used
        assert failure(discover, f"{server.url}/mcp", None).reason == "issuer_mismatch"
        return
    server.json(AS_ROOT, {k: v for k, v in doc.items() if v is not None})
    assert failure(discover, f"{server.url}/mcp", None).reason == "discovery_failed"


def test_an_insecure_endpoint_in_the_metadata_is_refused(server):
    server.json(f"{PRM_ROOT}/mcp", prm(server))
    server.json(AS_ROOT, as_metadata(server.url, token_endpoint="http://as.example.com/token"))
    assert failure(discover, f"{server.url}/mcp", None).reason == "discovery_failed"


def test_no_metadata_for_the_listed_server_is_a_discovery_failure(server):
    server.json(f"{PRM_ROOT}/mcp", prm(server))
    assert failure(discover, f"{server.url}/mcp", None).reason == "discovery_failed"


def test_2025_03_26_metadata_at_the_servers_origin(server):
    server.json(
        AS_ROOT, as_metadata(server.url, authorization_endpoint=f"{server.url}/oauth/authorize")
    )
    found = run(discover, f"{server.url}/mcp", None)
    assert found.legacy and found.prm is None
    assert found.issuer == server.url and found.resource == f"{server.url}/mcp"
    assert found.authorization_endpoint == f"{server.url}/oauth/authorize"


def test_2025_03_26_metadata_at_the_origin_may_name_an_issuer_on_that_origin(server):
    # 2025-03-26 servers named their endpoints' path in it: no issuer was asked for there
    server.json(AS_ROOT, as_metadata(server.url, issuer=f"{server.url}/oauth"))
    found = run(discover, f"{server.url}/mcp", None)
    assert found.legacy and found.issuer == f"{server.url}/oauth"


def test_2025_03_26_metadata_naming_another_origin_is_never_used(server):
    server.json(AS_ROOT, as_metadata(server.url, issuer="https://as.example.com"))
    assert failure(discover, f"{server.url}/mcp", None).reason == "issuer_mismatch"


def test_the_prms_resource_is_sent_as_it_names_it(server):
    server.json(f"{PRM_ROOT}/mcp", prm(server, resource=f"{server.url}/"))
    server.json(AS_ROOT, as_metadata(server.url))
    assert run(discover, f"{server.url}/mcp", None).resource == f"{server.url}/"


def test_2025_03_26_default_endpoints_when_nothing_is_published(server):
    found = run(discover, f"{server.url}/mcp", None)
    assert found.legacy
    assert (found.authorization_endpoint, found.token_endpoint, found.registration_endpoint) == (
        f"{server.url}/authorize",
        f"{server.url}/token",
        f"{server.url}/register",
    )
    assert server.paths() == [f"{PRM_ROOT}/mcp", PRM_ROOT, AS_ROOT, OIDC_ROOT]


def test_redirects_are_not_followed(server):
    server.handle(
        "GET",
        f"{PRM_ROOT}/mcp",
        lambda _: web.Response(status=302, headers={"Location": "/elsewhere"}),
    )
    server.json("/elsewhere", prm(server))
    found = run(discover, f"{server.url}/mcp", None)
    assert "/elsewhere" not in server.paths() and found.legacy


def test_a_stalled_server_is_bounded_by_the_timeout(server):
    async def stall(_seen):
        await server.release.wait()
        return web.json_response({})

    server.handle("GET", AS_ROOT, stall)
    started = time.monotonic()
    # every metadata URL is tried; the stalled one costs one timeout, and a stalled origin
    # is no reason to use the default endpoints: try again later
    err = failure(discover, f"{server.url}/mcp", None, timeout=0.3)
    assert err.reason == "discovery_failed" and err.data["unreachable"] is True
    assert time.monotonic() - started < 5
    assert "/token" not in server.paths()


def test_a_body_over_the_limit_is_not_read(server):
    doc = as_metadata(server.url)
    server.json(AS_ROOT, doc)
    size = len(web.json_response(doc).body)  # the exact bytes sent
    assert run(fetch_as_metadata, server.url, limit=size) is not None
    err = failure(fetch_as_metadata, server.url, limit=size - 1)
    assert err.reason == "discovery_failed" and f"more than {size - 1} bytes" in err.message


def test_a_huge_streamed_body_is_cut_at_the_limit(server):
    async def endless(seen):
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(seen.request)
        try:
            while not server.release.is_set():
                await resp.write(b" " * 65536)
        except (ConnectionResetError, ConnectionError):
            pass
        return resp

    server.handle("GET", f"{PRM_ROOT}/mcp", endless)
    started = time.monotonic()
    err = failure(discover, f"{server.url}/mcp", None, limit=1024)
    assert err.reason == "discovery_failed" and "more than 1024 bytes" in err.message
    assert time.monotonic() - started < 10
    assert server.paths() == [f"{PRM_ROOT}/mcp"]  # no fallback to the 2025-03-26 rules


# -- a failed fetch is no "no metadata" -----------------------------------------------------


def unavailable(_seen):
    return web.Response(status=503, text="down for a moment")


@pytest.mark.parametrize("named", [True, False])
def test_prm_answering_503_is_retried_later_never_the_2025_03_26_rules(server, named):
    server.handle("GET", "/prm", unavailable)
    server.handle("GET", f"{PRM_ROOT}/mcp", unavailable)
    server.handle("GET", PRM_ROOT, unavailable)
    challenge = Challenge("bearer", f"{server.url}/prm") if named else None
    err = failure(discover, f"{server.url}/mcp", challenge)
    assert err.reason == "discovery_failed" and err.data["unreachable"] is True
    assert "HTTP 503" in err.message and "trying again later" in err.message
    assert AS_ROOT not in server.paths()  # nothing asked of the MCP server as an AS


def test_one_failed_well_known_url_is_enough_to_retry(server):
    server.handle("GET", f"{PRM_ROOT}/mcp", unavailable)  # the root one is a 404
    err = failure(discover, f"{server.url}/mcp", None)
    assert err.data["unreachable"] is True
    assert server.paths() == [f"{PRM_ROOT}/mcp", PRM_ROOT]


def test_a_failed_challenge_url_still_tries_the_well_known_ones(server):
    server.handle("GET", "/prm", unavailable)
    server.json(f"{PRM_ROOT}/mcp", prm(server))
    server.json(AS_ROOT, as_metadata(server.url))
    found = run(discover, f"{server.url}/mcp", Challenge("bearer", f"{server.url}/prm"))
    assert not found.legacy and server.paths()[:2] == ["/prm", f"{PRM_ROOT}/mcp"]


def test_a_named_prm_that_nobody_serves_is_no_2025_03_26_server(server):
    err = failure(discover, f"{server.url}/mcp", Challenge("bearer", f"{server.url}/gone"))
    assert err.reason == "discovery_failed" and err.data is None  # 404s: definite
    assert "not falling back" in err.message
    assert AS_ROOT not in server.paths()


def test_an_insecure_named_prm_still_rules_out_the_2025_03_26_rules(server):
    challenge = Challenge("bearer", "http://evil.example.com/prm")
    assert failure(discover, f"{server.url}/mcp", challenge).reason == "discovery_failed"
    assert AS_ROOT not in server.paths()


@pytest.mark.parametrize("status", [500, 502, 503, 504, 408, 429])
def test_a_try_again_status_at_the_origins_as_metadata_is_no_default_endpoints(server, status):
    server.handle("GET", AS_ROOT, lambda _seen: web.Response(status=status))
    err = failure(discover, f"{server.url}/mcp", None)
    assert err.data["unreachable"] is True and f"HTTP {status}" in err.message


def test_a_try_again_status_at_a_listed_servers_metadata_is_retried(server):
    server.json(f"{PRM_ROOT}/mcp", prm(server))
    server.handle("GET", AS_ROOT, unavailable)  # the OpenID one is a 404
    err = failure(discover, f"{server.url}/mcp", None)
    assert err.reason == "discovery_failed" and err.data["unreachable"] is True


def test_a_json_prm_that_does_not_parse_is_retried_an_html_page_is_absent(server):
    bad = web.Response(body=b'{"resource": "http://', content_type="application/json")
    server.handle("GET", f"{PRM_ROOT}/mcp", lambda _seen: bad)
    assert failure(discover, f"{server.url}/mcp", None).data["unreachable"] is True
    page = web.Response(text="<!doctype html><p>app</p>", content_type="text/html")
    server.handle("GET", f"{PRM_ROOT}/mcp", lambda _seen: page)
    assert run(discover, f"{server.url}/mcp", None).legacy  # a catch-all page: no PRM


# -- bodies are read to their end --------------------------------------------------------------


def segments(body: bytes, parts: int, *, length: bool = True):
    """A handler writing ``body`` in ``parts`` flushed writes, 50 ms apart (chunked when
    ``length`` is False)."""

    async def answer(seen):
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        if length:
            resp.content_length = len(body)
        await resp.prepare(seen.request)
        step = -(-len(body) // parts)
        for i in range(0, len(body), step):
            await resp.write(body[i : i + step])
            await asyncio.sleep(0.05)
        await resp.write_eof()
        return resp

    return answer


@pytest.mark.parametrize("length", [True, False])
def test_a_document_written_in_segments_is_read_whole(server, length):
    import orjson

    server.handle("GET", f"{PRM_ROOT}/mcp", segments(orjson.dumps(prm(server)), 2, length=length))
    server.handle("GET", AS_ROOT, segments(orjson.dumps(as_metadata(server.url)), 5, length=length))
    found = run(discover, f"{server.url}/mcp", None)
    assert not found.legacy and found.token_endpoint == f"{server.url}/token"


@pytest.mark.parametrize("length", [True, False])
def test_the_size_limit_at_its_edge_in_segments(server, length):
    import orjson

    from conduit_mcp.oauth._http import MAX_BODY

    doc = as_metadata(server.url)
    raw = orjson.dumps(doc)
    exact = raw[:-1] + b" " * (MAX_BODY - len(raw)) + b"}"  # valid JSON, MAX_BODY bytes
    assert len(exact) == MAX_BODY
    server.handle("GET", AS_ROOT, segments(exact, 4, length=length))
    assert run(fetch_as_metadata, server.url)["issuer"] == server.url
    server.handle("GET", AS_ROOT, segments(exact + b" ", 4, length=length))
    err = failure(fetch_as_metadata, server.url)
    assert f"more than {MAX_BODY} bytes" in err.message


def test_a_body_that_trickles_past_the_deadline_is_bounded(server):
    async def trickle(seen):
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        resp.content_length = 10_000
        await resp.prepare(seen.request)
        try:
            while not server.release.is_set():
                await resp.write(b" ")
                await asyncio.sleep(0.05)
        except (ConnectionResetError, ConnectionError):
            pass
        return resp

    server.handle("GET", AS_ROOT, trickle)
    started = time.monotonic()
    err = failure(fetch_as_metadata, server.url, timeout=0.3)
    assert err.data["unreachable"] is True and "within 0.3 s" in err.message
    assert time.monotonic() - started < 3
