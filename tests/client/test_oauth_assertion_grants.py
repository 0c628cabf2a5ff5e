"""The grants without a person that present an assertion, end to end through the public API,
against the test authorization server (two of them for cross-app access: the enterprise
identity provider and the MCP server's authorization server) and the scripted MCP server.

Cross-app access (``grant="identity_assertion"``): the user's identity token is exchanged at
the identity provider for an ID-JAG naming the MCP server's authorization server and the MCP
server, which the client presents with the JWT-bearer grant. Workload identity
(``grant="jwt_bearer"``): a platform-issued token, read from a file that rotates. Refusals are
clear ``auth`` errors; no person, no client secret for the workload; the client declares the
extension its grant is."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest

import conduit_mcp as mcp
from conduit_mcp.testing import AuthServerProcess, JwtIssuer

from .conftest import ADD

pytestmark = [pytest.mark.timeout(60), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

SSO = "https://sso.example.test"  # the single sign-on that issued the user's identity token
PLATFORM = "https://k8s.example.test"  # the workload platform
IDP_CLIENT = {"client_id": "idp-app", "token_endpoint_auth_method": "none"}
MCP_CLIENT = {"client_id": "mcp-app", "client_secret": "s3cret-mcp-app-77"}
WORKLOAD = {"client_id": "ci-workload", "token_endpoint_auth_method": "none"}
EMA = "io.modelcontextprotocol/enterprise-managed-authorization"
WIF = "io.modelcontextprotocol/auth/wif"
TASKS = "io.modelcontextprotocol/tasks"


def tokens(auth: Any) -> list[dict[str, Any]]:
    return list(auth.events("token"))


def sent_capabilities(server: Any) -> dict[str, Any]:
    """The capabilities of the client's last request (modern ``_meta``, or legacy
    ``initialize``)."""
    calls = server.received("tools/call")
    if calls and "_meta" in calls[-1]["params"]:
        meta = calls[-1]["params"]["_meta"]
        return dict(meta["io.modelcontextprotocol/clientCapabilities"])
    return dict(server.received("initialize")[-1]["params"]["capabilities"])


def of(events: list[dict[str, Any]], sub: str) -> list[dict[str, Any]]:
    """The events of one test's subject (the servers are shared by the module's tests)."""
    return [e for e in events if e.get("sub") == sub]


@pytest.fixture(scope="module")
def cross_app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """An identity provider (signs ID-JAGs, trusts the single sign-on's keys) and the MCP
    server's authorization server (trusts the identity provider's keys), for the module."""
    work = tmp_path_factory.mktemp("cross_app")
    sso, idp_keys = JwtIssuer(SSO, work), JwtIssuer("https://idp.example.test", work)
    with (
        AuthServerProcess(
            work / "idp",
            client=[orjson.dumps(IDP_CLIENT).decode()],
            signing_key=idp_keys.key_file,
            trust=[sso.trust],
            jag_client_id=MCP_CLIENT["client_id"],
        ) as idp,
        AuthServerProcess(
            work / "as",
            client=[orjson.dumps(MCP_CLIENT).decode()],
            trust=[idp_keys.trusted_as(idp.issuer)],
        ) as auth,
    ):
        yield {"idp": idp, "auth": auth, "sso": sso}


def identity_oauth(idp: Any, identity_token: Any, **kw: Any) -> mcp.OAuth:
    return mcp.OAuth(
        grant="identity_assertion",
        identity_token=identity_token,
        idp_token_endpoint=idp.endpoint("token"),
        idp_client_id=IDP_CLIENT["client_id"],
        client_id=MCP_CLIENT["client_id"],
        client_secret=MCP_CLIENT["client_secret"],
        **kw,
    )


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_cross_app_access_exchanges_the_identity_token_and_presents_the_id_jag(
    cross_app: dict[str, Any], make_server: Any, start_client: Any, era: str
) -> None:
    idp, auth, sso = cross_app["idp"], cross_app["auth"], cross_app["sso"]
    asked: list[int] = []
    user = f"alice-{era}@corp"

    def identity_token() -> str:  # the application's single sign-on, asked at each use
        asked.append(1)
        return sso.sign(sub=user, aud=IDP_CLIENT["client_id"])

    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(
            mcp.Http(srv.url, auth=identity_oauth(idp, identity_token)),
            protocol=era,
            request_timeout=5,
        )
        assert client.call_tool("add", ADD).text == "3"  # no person anywhere
        (exchange,) = of(idp.events("token_exchange"), user)
        assert exchange["audience"] == auth.issuer and exchange["resource"] == srv.url
        assert exchange["client_id"] == "idp-app"
        (issued,) = of(tokens(auth), user)
        assert issued["grant"] == "jwt-bearer:id-jag"
        assert issued["client_id"] == "mcp-app" and issued["auth_method"] == "client_secret_basic"
        assert issued["resource"] == srv.url
        assert asked == [1]
        # The grant's extension (Tasks may be declared beside it, once the scripted server's
        # discover advertised it).
        declared = sent_capabilities(server)["extensions"]
        assert declared[EMA] == {} and set(declared) - {TASKS} == {EMA}
        # A token the server no longer accepts: the grant runs again, asking for a fresh one.
        auth.admin("expire")
        assert client.call_tool("add", ADD).text == "3"
        assert len(of(idp.events("token_exchange"), user)) == 2
        assert len(of(tokens(auth), user)) == 2
        assert asked == [1, 1]


def test_an_identity_token_the_identity_provider_refuses_is_token_exchange_failed(
    cross_app: dict[str, Any], make_server: Any, start_client: Any
) -> None:
    idp, auth, sso = cross_app["idp"], cross_app["auth"], cross_app["sso"]
    # Issued for another application: the identity provider refuses to exchange it.
    stolen = sso.sign(sub="mallory@corp", aud="another-app")
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(
            mcp.Http(srv.url, auth=identity_oauth(idp, stolen)), request_timeout=5
        )
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
    assert (err.value.kind, err.value.reason) == ("auth", "token_exchange_failed")
    assert "invalid_grant" in err.value.message and stolen not in repr(err.value)
    assert of(tokens(auth), "mallory@corp") == []  # nothing reached the MCP server's AS


def test_an_id_jag_for_another_client_is_assertion_refused(
    auth_server: Any, tmp_path: Path, make_server: Any, start_client: Any
) -> None:
    sso, idp_keys = JwtIssuer(SSO, tmp_path), JwtIssuer("https://idp.example.test", tmp_path)
    idp = auth_server(  # names "someone-else" in its ID-JAGs: not the client that presents it
        client=[orjson.dumps(IDP_CLIENT).decode()],
        signing_key=idp_keys.key_file,
        trust=[sso.trust],
        jag_client_id="someone-else",
    )
    auth = auth_server(
        client=[orjson.dumps(MCP_CLIENT).decode()], trust=[idp_keys.trusted_as(idp.issuer)]
    )
    token = sso.sign(sub="alice@corp", aud=IDP_CLIENT["client_id"])
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        client = start_client(mcp.Http(srv.url, auth=identity_oauth(idp, token)), request_timeout=5)
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
    assert (err.value.kind, err.value.reason) == ("auth", "assertion_refused")
    assert "ID-JAG" in err.value.message and auth.issuer in err.value.message
    assert len(idp.events("token_exchange")) == 1 and tokens(auth) == []


@pytest.fixture(scope="module")
def platform(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The MCP server's authorization server, trusting the workload platform's keys, for the
    module."""
    work = tmp_path_factory.mktemp("platform")
    issuer = JwtIssuer(PLATFORM, work)
    with AuthServerProcess(
        work / "as", client=[orjson.dumps(WORKLOAD).decode()], trust=[issuer.trust]
    ) as auth:
        yield {"auth": auth, "platform": issuer}


def test_workload_identity_reads_the_rotating_token_file_at_each_request(
    platform: dict[str, Any], make_server: Any, start_client: Any, tmp_path: Path
) -> None:
    auth, issuer = platform["auth"], platform["platform"]
    token_file = tmp_path / "token"  # what the platform mounts and rotates
    token_file.write_text(issuer.sign(sub="ci:job-1", aud=auth.issuer) + "\n")
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        oauth = mcp.OAuth(
            grant="jwt_bearer", assertion_file=token_file, client_id=WORKLOAD["client_id"]
        )
        client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=5)
        assert client.call_tool("add", ADD).text == "3"
        (first,) = of(tokens(auth), "ci:job-1")
        assert first["grant"] == "jwt-bearer:jwt"
        assert first["auth_method"] == "none" and first["resource"] == srv.url
        declared = sent_capabilities(server)["extensions"]
        assert declared[WIF] == {} and set(declared) - {TASKS} == {WIF}
        # The platform rotates the token; the next token request presents the new one.
        token_file.write_text(issuer.sign(sub="ci:job-2", aud=auth.issuer))
        auth.admin("expire")
        assert client.call_tool("add", ADD).text == "3"
        assert [t["sub"] for t in tokens(auth) if t["sub"].startswith("ci:job-")][-2:] == [
            "ci:job-1",
            "ci:job-2",
        ]
        assert len(of(tokens(auth), "ci:job-2")) == 1


@pytest.mark.parametrize("flaw", ["untrusted_key", "wrong_audience", "expired"])
def test_a_refused_workload_token_is_assertion_refused(
    platform: dict[str, Any], make_server: Any, start_client: Any, flaw: str, tmp_path: Path
) -> None:
    auth, issuer = platform["auth"], platform["platform"]
    aud, ttl = auth.issuer, 600.0
    if flaw == "untrusted_key":  # the platform's name, another key
        issuer = JwtIssuer(PLATFORM, tmp_path)
    elif flaw == "wrong_audience":
        aud = "https://another-as.example.test"
    else:
        ttl = -60.0
    workload_token = issuer.sign(sub="ci:job", aud=aud, ttl=ttl)
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        oauth = mcp.OAuth(
            grant="jwt_bearer",
            assertion=lambda: workload_token,
            client_id=WORKLOAD["client_id"],
        )
        client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=5)
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
        assert (err.value.kind, err.value.reason) == ("auth", "assertion_refused")
        assert "workload identity token" in err.value.message
        assert workload_token not in repr(err.value) + str(err.value.data)
        requests = auth.requests("/token")
        sent = [r for r in requests if (r.get("form") or {}).get("assertion") == workload_token]
        assert [r["status"] for r in sent] == [400]  # refused once, never retried
        assert [r for r in requests if r["t"] > sent[0]["t"]] == []  # nor another grant tried
        assert client.status().reason == "auth_failed"


def test_a_missing_token_file_is_assertion_unavailable(
    platform: dict[str, Any], make_server: Any, start_client: Any, tmp_path: Path
) -> None:
    auth = platform["auth"]
    started = time.time()
    server = make_server()
    with server.http_server(require_oauth=auth.issuer) as srv:
        oauth = mcp.OAuth(
            grant="jwt_bearer",
            assertion_file=tmp_path / "not-mounted",
            client_id=WORKLOAD["client_id"],
        )
        client = start_client(mcp.Http(srv.url, auth=oauth), request_timeout=5)
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", ADD)
    assert (err.value.kind, err.value.reason) == ("auth", "assertion_unavailable")
    assert "assertion_file" in err.value.message and "FileNotFoundError" in err.value.message
    assert not [r for r in auth.requests("/token") if r["t"] >= started]
