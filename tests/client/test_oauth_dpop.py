"""DPoP (RFC 9449) through the public API (docs/oauth.md, "DPoP"): the test authorization
server with ``--dpop`` (proofs checked, tokens bound to the proof's key, ``--dpop-nonce``)
and the scripted MCP server protected by it with ``--require-dpop`` (``--dpop-nonce``),
both real subprocesses on loopback.

What a user observes: a resource that requires DPoP gets bound tokens without any DPoP
setting (the authorization server advertises it); every request, in both HTTP eras and on
the listen stream, carries a fresh proof of the client's key; nonces asked for by either
server are sent back after one retry and remembered; a replayed proof is refused by the
server; the key survives a restart with a ``FileTokenStore`` (the bound refresh token is
spent with it)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import orjson
import pytest
from joserfc import jws

import conduit_mcp as mcp
from conduit_mcp.testing import AuthServerProcess
from conduit_mcp.testing.waiting import until

from .conftest import ADD, Person, m2m_oauth, mcp_posts, person_oauth

pytestmark = [pytest.mark.timeout(60), pytest.mark.filterwarnings("ignore::DeprecationWarning")]


def claims(proof: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """A proof's header and claims, read without verifying (the servers verify)."""
    token = jws.extract_compact(proof.encode())
    return token.protected, json.loads(token.payload)


def authenticated(server: Any, verb: str = "POST") -> list[dict[str, Any]]:
    return [
        e
        for e in server.events("http")
        if e["verb"] == verb and e["path"] == "/mcp" and "authorization" in e["headers"]
    ]


def token_requests(auth: AuthServerProcess) -> list[dict[str, Any]]:
    return [r for r in auth.requests() if r["path"].endswith("/token")]


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_a_resource_that_requires_dpop_gets_bound_tokens_and_a_fresh_proof_per_request(
    auth_server, make_server, start_client, protocol
):
    auth = auth_server(dpop=True)
    server = make_server()
    with server.http_server(require_oauth=auth.issuer, require_dpop=True) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), protocol=protocol)
        for _ in range(3):
            assert client.call_tool("add", ADD).text == "3"
        (issued,) = auth.events("token")
        assert issued["dpop"] is True  # bound to the client's key, no DPoP setting given
        posts = authenticated(server)
        assert len(posts) >= 4 and all(p["status"] in (200, 202) for p in posts)
        assert all(p["headers"]["authorization"].startswith("DPoP ") for p in posts)
        assert all(p["oauth"]["dpop"] for p in posts if "oauth" in p)
        proofs = [claims(p["headers"]["dpop"]) for p in posts]
        assert len({c["jti"] for _, c in proofs}) == len(proofs)  # never the same proof twice
        assert {h["jwk"]["crv"] for h, _ in proofs} == {"P-256"}  # one EC P-256 key
        assert all(c["htu"] == srv.url and c["htm"] == "POST" and "ath" in c for _, c in proofs)
        (token_proof,) = [r["headers"]["dpop"] for r in token_requests(auth)]
        assert "ath" not in claims(token_proof)[1]
        if protocol == "legacy":  # the session's GET stream is proved too
            until(lambda: any(g["status"] == 200 for g in authenticated(server, "GET")))
            gets = authenticated(server, "GET")
            assert all(claims(g["headers"]["dpop"])[1]["htm"] == "GET" for g in gets)
        else:  # a cached list opens the listen stream: proved like any request
            client.list_all_tools()

            def listens() -> list[dict[str, Any]]:
                return [
                    p
                    for p in authenticated(server)
                    if p["headers"].get("mcp-method") == "subscriptions/listen"
                ]

            until(lambda: any(p["status"] == 200 for p in listens()))
            assert all(p["headers"]["authorization"].startswith("DPoP ") for p in listens())
            assert all("ath" in claims(p["headers"]["dpop"])[1] for p in listens())


def test_nonces_of_the_authorization_server_and_the_resource_are_sent_back_and_kept(
    auth_server, make_server, start_client
):
    auth = auth_server(dpop_nonce=True)
    server = make_server()
    with server.http_server(require_oauth=auth.issuer, require_dpop=True, dpop_nonce=True) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        for _ in range(3):
            assert client.call_tool("add", ADD).text == "3"
        # The token endpoint: 400 use_dpop_nonce, then the same grant with the nonce.
        tokens = token_requests(auth)
        assert [r["status"] for r in tokens] == [400, 200]
        assert tokens[0]["error"] == "use_dpop_nonce"
        assert "nonce" not in claims(tokens[0]["headers"]["dpop"])[1]
        assert "nonce" in claims(tokens[1]["headers"]["dpop"])[1]
        # The resource: one 401 use_dpop_nonce, answered at once; the nonce is kept after.
        posts = authenticated(server)
        refused = [p for p in posts if p.get("oauth_refused") == "use_dpop_nonce"]
        assert len(refused) == 1 and refused[0] is posts[0]
        assert all("nonce" in claims(p["headers"]["dpop"])[1] for p in posts[1:])
        assert all(p["status"] in (200, 202) for p in posts[1:])
        # A new nonce at the resource: one more 401, then on again.
        urllib.request.urlopen(
            urllib.request.Request(
                srv.url.replace("/mcp", "/admin/oauth"),
                data=orjson.dumps({"dpop_nonce": "rotate"}),
                method="POST",
            ),
            timeout=5,
        ).read()
        assert client.call_tool("add", ADD).text == "3"
        again = [p for p in authenticated(server) if p.get("oauth_refused") == "use_dpop_nonce"]
        assert len(again) == 2


def test_a_replayed_proof_is_refused_by_the_server(auth_server, make_server, start_client):
    auth = auth_server(dpop=True)
    server = make_server()
    with server.http_server(require_oauth=auth.issuer, require_dpop=True) as srv:
        client = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        assert client.call_tool("add", ADD).text == "3"
        seen = authenticated(server)[-1]["headers"]
        replay = urllib.request.Request(
            srv.url,
            data=b'{"jsonrpc":"2.0","id":99,"method":"tools/list","params":{}}',
            headers={k: seen[k] for k in ("authorization", "dpop", "content-type", "accept")},
            method="POST",
        )
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(replay, timeout=5)
        assert err.value.code == 401
        challenge = err.value.headers["WWW-Authenticate"]
        assert challenge.startswith("DPoP ") and 'error="invalid_dpop_proof"' in challenge
        assert client.call_tool("add", ADD).text == "3"  # the client's own proofs still pass


def test_the_key_survives_a_restart_with_a_file_store(
    auth_server, make_server, start_client, tmp_path
):
    auth = auth_server(dpop=True)
    server = make_server()
    person = Person()
    path = tmp_path / "tokens.json"
    with server.http_server(require_oauth=auth.issuer, require_dpop=True) as srv:
        oauth = person_oauth(person, store=mcp.FileTokenStore(path))
        client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=5)
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert (err.value.kind, err.value.reason) == ("auth", "authorization_required")
        client.authorize(auth.approve(person.next_url()))
        assert client.call_tool("add", ADD).text == "3"
        client.stop()
        first = claims(authenticated(server)[-1]["headers"]["dpop"])[0]["jwk"]
        (record,) = [
            v for k, v in orjson.loads(path.read_bytes()).items() if k.startswith("tokens")
        ]
        assert record["token_type"] == "DPoP" and "dpop_key" in record
        auth.admin("expire")  # the stored access token is dead: the bound refresh token is spent
        later = person_oauth(person, store=mcp.FileTokenStore(path))
        again = start_client(mcp.Http(srv.url, auth=later), request_timeout=5)
        assert again.call_tool("add", ADD).text == "3"
        assert person.count == 1  # nobody asked again
        refreshed = [e for e in auth.events("token") if e["grant"] == "refresh_token"]
        assert len(refreshed) == 1 and refreshed[0]["dpop"] is True  # same key, or invalid_grant
        assert claims(authenticated(server)[-1]["headers"]["dpop"])[0]["jwk"] == first


def test_dpop_true_binds_where_nothing_requires_it_and_none_does_not(
    auth_server, make_server, start_client
):
    auth = auth_server(dpop=True)
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        bound = start_client(mcp.Http(srv.url, auth=m2m_oauth(dpop=True)), request_timeout=5)
        assert bound.call_tool("add", ADD).text == "3"
        plain = start_client(mcp.Http(srv.url, auth=m2m_oauth()), request_timeout=5)
        assert plain.call_tool("add", ADD).text == "3"
        assert [e["dpop"] for e in auth.events("token")] == [True, False]
        schemes = {p["headers"]["authorization"].split()[0] for p in authenticated(server)}
        assert schemes == {"DPoP", "Bearer"}


def test_dpop_alg_chooses_the_key_and_an_unknown_one_is_a_config_error(
    auth_server, make_server, start_client
):
    auth = auth_server(dpop=True)
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        oauth = m2m_oauth(dpop=True, dpop_alg="ES384")
        client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=5)
        assert client.call_tool("add", ADD).text == "3"  # ES384 is listed: a P-384 key
        proof = [p for p in mcp_posts(server) if "dpop" in p["headers"]][-1]["headers"]["dpop"]
        assert claims(proof)[0]["alg"] == "ES384"
    with pytest.raises(mcp.Error) as err:
        mcp.OAuth(client_id="a", client_secret="b", grant="client_credentials", dpop_alg="HS256")
    assert (err.value.kind, err.value.reason) == ("config", "oauth.dpop_alg")


def test_a_stored_key_that_cannot_be_read_gets_new_tokens_with_a_new_key(
    auth_server, make_server, start_client, tmp_path, caplog
):
    auth = auth_server(dpop=True)
    server = make_server()
    path = tmp_path / "tokens.json"
    with server.http_server(require_oauth=auth.issuer, require_dpop=True) as srv:
        first = start_client(mcp.Http(srv.url, auth=m2m_oauth(store=mcp.FileTokenStore(path))))
        assert first.call_tool("add", ADD).text == "3"
        first.stop()
        records = orjson.loads(path.read_bytes())
        (key,) = [k for k in records if k.startswith("tokens")]
        jwk = orjson.loads(records[key]["dpop_key"])
        records[key]["dpop_key"] = orjson.dumps({**jwk, "crv": "P-384"}).decode()  # damaged
        path.write_bytes(orjson.dumps(records))
        later = start_client(mcp.Http(srv.url, auth=m2m_oauth(store=mcp.FileTokenStore(path))))
        assert later.call_tool("add", ADD).text == "3"
        assert [e["dpop"] for e in auth.events("token")] == [True, True]  # a new grant
        assert "stored DPoP key cannot be read" in caplog.text
        assert jwk["d"] not in caplog.text
        kept = orjson.loads(orjson.loads(path.read_bytes())[key]["dpop_key"])
        assert kept["crv"] == "P-256" and kept["d"] != jwk["d"]  # a new key, stored
