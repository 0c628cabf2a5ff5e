"""The assertion grants' pure parts: where the assertion comes from (a string, a function, a
file read at each use) and its bound; the token exchange and the JWT-bearer requests as they
go over the wire, against a scripted loopback server."""

from __future__ import annotations

import pytest
from aiohttp import web

from conduit_mcp import Error, OAuth
from conduit_mcp.oauth.assertions import (
    ID_JAG,
    JWT_BEARER,
    MAX_ASSERTION,
    TOKEN_EXCHANGE,
    exchange_identity,
    jwt_bearer,
    read_secret,
)
from conduit_mcp.oauth.challenge import bearer_challenge
from conduit_mcp.oauth.discovery import discover
from conduit_mcp.oauth.records import ClientCredentials

from .conftest import as_metadata, run


def workload(**kw) -> OAuth:
    return OAuth(grant="jwt_bearer", client_id="ci", **kw)


def test_the_assertion_file_is_read_at_each_use(tmp_path):
    path = tmp_path / "token"
    path.write_text("eyJ.first.x\n")
    oauth = workload(assertion_file=path)
    assert read_secret(oauth) == "eyJ.first.x"
    path.write_text("eyJ.second.y")  # rotated by the platform
    assert read_secret(oauth) == "eyJ.second.y"


def test_the_function_is_asked_at_each_use():
    answers = iter(["eyJ.a.1", "eyJ.b.2"])
    oauth = workload(assertion=lambda: next(answers))
    assert [read_secret(oauth), read_secret(oauth)] == ["eyJ.a.1", "eyJ.b.2"]


def test_an_assertion_is_at_most_max_assertion_bytes(tmp_path):
    path = tmp_path / "token"
    path.write_text("a" * MAX_ASSERTION)
    assert len(read_secret(workload(assertion_file=path))) == MAX_ASSERTION  # the edge: taken
    path.write_text("a" * (MAX_ASSERTION + 1))
    with pytest.raises(Error) as err:
        read_secret(workload(assertion_file=path))
    assert (err.value.kind, err.value.reason) == ("auth", "assertion_unavailable")
    assert str(MAX_ASSERTION) in err.value.message
    with pytest.raises(Error) as err:
        read_secret(workload(assertion=lambda: "a" * (MAX_ASSERTION + 1)))
    assert err.value.reason == "assertion_unavailable"


@pytest.mark.parametrize(
    ("source", "why"),
    [
        (lambda: None, "non-string"),
        (lambda: "   ", "non-string"),
        (lambda: 1 / 0, "ZeroDivisionError"),
        (lambda: "a b", "compact token"),
    ],
)
def test_a_function_without_a_token_is_assertion_unavailable(source, why):
    with pytest.raises(Error) as err:
        read_secret(workload(assertion=source))
    assert (err.value.kind, err.value.reason) == ("auth", "assertion_unavailable")
    assert why in err.value.message


def test_an_empty_or_binary_file_is_assertion_unavailable(tmp_path):
    path = tmp_path / "token"
    for content, why in ((b"\n", "empty"), (b"\xff\xfe", "not ASCII")):
        path.write_bytes(content)
        with pytest.raises(Error) as err:
            read_secret(workload(assertion_file=path))
        assert err.value.reason == "assertion_unavailable" and why in err.value.message


def test_the_wire_of_the_token_exchange_and_the_jwt_bearer_grant(server):
    server.json(
        "/.well-known/oauth-protected-resource/mcp",
        {"resource": f"{server.url}/mcp", "authorization_servers": [server.url]},
    )
    server.json("/.well-known/oauth-authorization-server", as_metadata(server.url))
    server.json(
        "/idp/token",
        {"access_token": "eyJ.jag.z", "issued_token_type": ID_JAG, "token_type": "N_A"},
        method="POST",
    )
    server.json("/token", {"access_token": "at-1", "token_type": "Bearer"}, method="POST")
    found = run(discover, f"{server.url}/mcp", bearer_challenge(["Bearer"]))
    oauth = OAuth(
        grant="identity_assertion",
        identity_token="eyJ.id.t",
        idp_token_endpoint=f"{server.url}/idp/token",
        idp_client_id="idp-app",
        client_id="app",
        client_secret="s",
    )
    grant = run(exchange_identity, found, oauth, "eyJ.id.t", ("mcp",))
    assert grant == "eyJ.jag.z"
    (sent,) = server.requests("POST", "/idp/token")
    assert sent.form == {
        "grant_type": TOKEN_EXCHANGE,
        "requested_token_type": ID_JAG,
        "audience": found.issuer,
        "resource": f"{server.url}/mcp",
        "subject_token": "eyJ.id.t",
        "subject_token_type": "urn:ietf:params:oauth:token-type:id_token",
        "client_id": "idp-app",
        "scope": "mcp",
    }
    client = ClientCredentials("app", "s", "client_secret_basic", found.issuer)
    tokens = run(jwt_bearer, found, client, oauth, grant)
    assert tokens.access_token == "at-1"
    (sent,) = server.requests("POST", "/token")
    assert sent.form == {
        "grant_type": JWT_BEARER,
        "assertion": "eyJ.jag.z",
        "resource": f"{server.url}/mcp",
    }
    assert sent.headers["Authorization"].startswith("Basic ")


def test_an_answer_that_is_no_id_jag_is_refused(server):
    server.json(
        "/.well-known/oauth-protected-resource/mcp",
        {"resource": f"{server.url}/mcp", "authorization_servers": [server.url]},
    )
    server.json("/.well-known/oauth-authorization-server", as_metadata(server.url))
    server.handle(
        "POST",
        "/idp/token",
        lambda _s: web.json_response({"access_token": "x", "issued_token_type": "access_token"}),
    )
    found = run(discover, f"{server.url}/mcp", bearer_challenge(["Bearer"]))
    oauth = OAuth(
        grant="identity_assertion",
        identity_token="eyJ.id.t",
        idp_token_endpoint=f"{server.url}/idp/token",
        idp_client_id="idp-app",
        client_id="app",
    )
    with pytest.raises(Error) as err:
        run(exchange_identity, found, oauth, "eyJ.id.t")
    assert (err.value.kind, err.value.reason) == ("auth", "token_exchange_failed")
    assert "not an ID-JAG" in err.value.message
