"""No OAuth secret (access and refresh tokens, the authorization code, the PKCE verifier,
``state``, the client secret) in a repr, a log record, an exception text, a span or a crash
report (docs/connection.md, "Crash reports"; docs/actor-tree.md, "The OAuth actor").

A person's authorization with a confidential client runs against the real authorization
server; then a refresh, a revoked grant and a second authorization, a forged redirect, and the
OAuth actor is crashed while it holds the tokens. Everything captured is searched."""

from __future__ import annotations

import logging
import queue
import time
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import conduit_mcp as mcp
from conduit_mcp.actors import oauth as oauth_actor
from conduit_mcp.oauth import flow
from conduit_mcp.testing import AuthServerProcess

pytestmark = [pytest.mark.timeout(60), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

CLIENT_SECRET = "cs-planted-4c8e1f0a9b"
VERIFIER = "pkce-verifier-planted-" + "v" * 40
STATE = "state-planted-6d2b90e1f3"
REDIRECT = "http://127.0.0.1:9/callback"
ADD = {"a": 1, "b": 2}


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.texts: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record))  # with the formatted traceback
        self.texts.append(repr(record.args))


@pytest.fixture
def captured() -> Any:
    handler = _Capture()
    root = logging.getLogger()
    old = root.level
    root.setLevel(logging.DEBUG)
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)
    root.setLevel(old)


class _Boom:
    """Crashes the OAuth actor (fault injection)."""


def _span_texts(exporter: InMemorySpanExporter) -> list[str]:
    texts: list[str] = []
    for span in exporter.get_finished_spans():
        texts += [span.name, str(span.status.description), span.to_json()]
        for key, value in (span.attributes or {}).items():
            texts += [key, repr(value)]
        for event in span.events:
            texts += [event.name, repr(dict(event.attributes or {}))]
    return texts


def tokens_record(path: Any) -> dict[str, Any]:
    """The one tokens record of a FileTokenStore (it also keeps the client's issuer binding)."""
    (record,) = [v for k, v in orjson.loads(path.read_bytes()).items() if k.startswith("tokens ")]
    return record  # type: ignore[no-any-return]


def test_no_oauth_secret_anywhere(tmp_path, make_server, captured, monkeypatch):
    monkeypatch.setattr(flow, "new_verifier", lambda: VERIFIER)
    monkeypatch.setattr(flow, "new_state", lambda: STATE)
    original = oauth_actor.OAuthActor.receive

    def receive(self: Any, message: Any) -> Any:
        if isinstance(message, _Boom):
            raise RuntimeError("injected OAuth actor crash")
        return original(self, message)

    monkeypatch.setattr(oauth_actor.OAuthActor, "receive", receive)
    confidential = {
        "client_id": "pre-conf",
        "client_secret": CLIENT_SECRET,
        "redirect_uris": [REDIRECT],
        "token_endpoint_auth_method": "client_secret_post",
    }
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    texts: list[str] = []
    secrets = [CLIENT_SECRET, VERIFIER, STATE]
    store_path = tmp_path / "tokens.json"
    urls: queue.Queue[str] = queue.Queue()
    with AuthServerProcess(
        tmp_path / "as", scopes="mcp,offline_access", client=[orjson.dumps(confidential).decode()]
    ) as auth:
        server = make_server()
        with server.http_server(require_oauth=auth.issuer) as srv:
            oauth = mcp.OAuth(
                client_id="pre-conf",
                client_secret=CLIENT_SECRET,
                token_endpoint_auth="client_secret_post",
                redirect_uri=REDIRECT,
                on_authorize=urls.put,
                store=mcp.FileTokenStore(store_path),
            )
            spec = mcp.Http(srv.url, auth=oauth)
            client = mcp.Client.start(spec, request_timeout=5, tracer_provider=provider)
            try:
                errors: list[BaseException] = []
                with pytest.raises(mcp.Error) as first:
                    client.call_tool("add", ADD)
                errors.append(first.value)
                url = urls.get(timeout=10)
                redirect = auth.approve(url)
                code = parse_qs(urlsplit(redirect).query)["code"][0]
                secrets.append(code)
                forged = redirect.replace(STATE, "another-state")
                with pytest.raises(mcp.Error) as bad:
                    client.authorize(forged)
                errors.append(bad.value)
                client.authorize(redirect)
                assert client.call_tool("add", ADD).text == "3"
                with pytest.raises(mcp.Error) as spent:
                    client.authorize(redirect)  # nothing waits for a redirect any more
                errors.append(spent.value)

                record = tokens_record(store_path)
                secrets += [record["access_token"], record["refresh_token"]]
                runtime = client._handle.tree()
                texts += [repr(runtime.shared.token), repr(runtime.shared.token.current)]

                auth.admin("expire")  # a 401, a refresh (rotated)
                assert client.call_tool("add", ADD).text == "3"
                record = tokens_record(store_path)
                secrets += [record["access_token"], record["refresh_token"]]

                # The OAuth actor crashes while it holds the tokens: a crash report is logged.
                before = runtime.registry.get("oauth")
                before.tell(_Boom())
                deadline = time.monotonic() + 10
                while runtime.registry.get("oauth") in (None, before):
                    assert time.monotonic() < deadline
                    time.sleep(0.02)
                assert client.call_tool("add", ADD).text == "3"  # the published token stays

                auth.admin("revoke", all=True)  # refresh refused: a person again
                with pytest.raises(mcp.Error) as again:
                    client.call_tool("add", ADD)
                errors.append(again.value)
                assert again.value.reason == "authorization_required"
                assert urls.get(timeout=10).startswith(auth.issuer)  # told the app again

                texts += [repr(client), str(client.status()), repr(spec), repr(oauth)]
                for err in errors:
                    texts += [str(err), repr(err), err.message]
            finally:
                client.stop()
    texts += captured.texts
    texts += _span_texts(exporter)
    assert any("injected OAuth actor crash" in t for t in captured.texts)  # it was logged
    for secret in secrets:
        for text in texts:
            assert secret not in text, (secret[:6], text[:200])


M2M = {
    "client_id": "m2m-dpop",
    "client_secret": "cs-dpop-planted-77aa",
    "token_endpoint_auth_method": "client_secret_basic",
    "grant_types": ["client_credentials"],
}


def test_no_dpop_key_or_proof_anywhere(tmp_path, make_server, captured, monkeypatch):
    """DPoP (docs/oauth.md, "DPoP"): the private key (its ``d``, and the whole JWK), every
    proof sent (to the token endpoint and the MCP server, nonce retries included) and the
    bound tokens, in no repr, log record, error, span or crash report, with the OAuth actor
    crashed while it holds them."""
    original = oauth_actor.OAuthActor.receive

    def receive(self: Any, message: Any) -> Any:
        if isinstance(message, _Boom):
            raise RuntimeError("injected OAuth actor crash")
        return original(self, message)

    monkeypatch.setattr(oauth_actor.OAuthActor, "receive", receive)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    texts: list[str] = []
    errors: list[BaseException] = []
    store_path = tmp_path / "tokens.json"
    with AuthServerProcess(
        tmp_path / "as", scopes="mcp", client=[orjson.dumps(M2M).decode()], dpop_nonce=True
    ) as auth:
        server = make_server()
        with server.http_server(
            require_oauth=auth.issuer, require_dpop=True, dpop_nonce=True
        ) as srv:
            oauth = mcp.OAuth(
                client_id=M2M["client_id"],
                client_secret=M2M["client_secret"],
                grant="client_credentials",
                store=mcp.FileTokenStore(store_path),
            )
            spec = mcp.Http(srv.url, auth=oauth)
            client = mcp.Client.start(spec, request_timeout=5, tracer_provider=provider)
            try:
                assert client.call_tool("add", ADD).text == "3"
                runtime = client._handle.tree()
                snap = runtime.shared.token.current
                texts += [repr(runtime.shared.token), repr(snap), repr(snap.dpop), str(snap)]
                before = runtime.registry.get("oauth")
                before.tell(_Boom())  # a crash report while it holds the key
                deadline = time.monotonic() + 10
                while runtime.registry.get("oauth") in (None, before):
                    assert time.monotonic() < deadline
                    time.sleep(0.02)
                auth.admin("revoke", all=True)  # the bound token refused: a new one
                assert client.call_tool("add", ADD).text == "3"
                with pytest.raises(mcp.Error) as unknown:
                    client.call_tool("no-such-tool", {})
                errors.append(unknown.value)
                texts += [repr(client), str(client.status()), repr(spec), repr(oauth)]
            finally:
                client.stop()
        record = tokens_record(store_path)
        key = orjson.loads(record["dpop_key"])
        secrets = [key["d"], record["dpop_key"], record["access_token"]]
        sent = [r["headers"] for r in auth.requests() if r["path"].endswith("/token")]
        sent += [e["headers"] for e in server.events("http") if e["path"] == "/mcp"]
        proofs = [h["dpop"] for h in sent if "dpop" in h]
        assert len(proofs) >= 6  # token requests, their nonce retries, MCP requests
        secrets += proofs
        secrets += [h["authorization"].split()[1] for h in sent if "authorization" in h]
    for err in errors:
        texts += [str(err), repr(err), err.message]
    texts += captured.texts
    texts += _span_texts(exporter)
    assert any("injected OAuth actor crash" in t for t in captured.texts)  # it was logged
    for secret in secrets:
        for text in texts:
            assert secret not in text, (secret[:6], text[:200])


def test_no_assertion_secret_anywhere(tmp_path, make_server, captured, monkeypatch):
    """The grants that present an assertion: the user's identity token, the ID-JAG the
    identity provider exchanges it for, the workload token and the access tokens they buy
    never reach a repr, a log record, an exception text, a span or the OAuth actor's crash
    report, through a cross-app access, a renewal, a crash, a token exchange the identity
    provider refuses and a workload token the authorization server refuses."""
    from conduit_mcp.oauth import acquire
    from conduit_mcp.testing import JwtIssuer

    from .test_oauth_assertion_grants import IDP_CLIENT, MCP_CLIENT, PLATFORM, SSO, WORKLOAD

    original = oauth_actor.OAuthActor.receive

    def receive(self: Any, message: Any) -> Any:
        if isinstance(message, _Boom):
            raise RuntimeError("injected OAuth actor crash")
        return original(self, message)

    monkeypatch.setattr(oauth_actor.OAuthActor, "receive", receive)
    secrets: list[str] = [MCP_CLIENT["client_secret"]]
    exchange = acquire.exchange_identity

    async def recorded(*args: Any, **kwargs: Any) -> str:
        grant = await exchange(*args, **kwargs)
        secrets.append(grant)  # the ID-JAG
        return grant

    monkeypatch.setattr(acquire, "exchange_identity", recorded)
    idp_client = {  # confidential at the identity provider: its secret is one more to hide
        **IDP_CLIENT,
        "client_secret": "idp-secret-planted-0e4f",
        "token_endpoint_auth_method": "client_secret_post",
    }
    sso, idp_keys = JwtIssuer(SSO, tmp_path), JwtIssuer("https://idp.example.test", tmp_path)
    platform = JwtIssuer(PLATFORM, tmp_path)

    def identity_token() -> str:
        token = sso.sign(sub="alice@corp", aud=IDP_CLIENT["client_id"])
        secrets.append(token)
        return token

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    texts: list[str] = []
    errors: list[BaseException] = []
    with (
        AuthServerProcess(
            tmp_path / "idp",
            client=[orjson.dumps(idp_client).decode()],
            signing_key=idp_keys.key_file,
            trust=[sso.trust],
            jag_client_id=MCP_CLIENT["client_id"],
        ) as idp,
        AuthServerProcess(
            tmp_path / "as",
            client=[orjson.dumps(MCP_CLIENT).decode(), orjson.dumps(WORKLOAD).decode()],
            trust=[
                idp_keys.trusted_as(idp.issuer),
                platform.trust,
            ],
        ) as auth,
    ):
        server = make_server()
        with server.http_server(require_oauth=auth.issuer) as srv:

            def start(oauth: mcp.OAuth) -> mcp.Client:
                spec = mcp.Http(srv.url, auth=oauth)
                texts.extend([repr(spec), str(spec), repr(oauth)])
                return mcp.Client.start(spec, request_timeout=5, tracer_provider=provider)

            cross = mcp.OAuth(
                grant="identity_assertion",
                identity_token=identity_token,
                idp_token_endpoint=idp.endpoint("token"),
                idp_client_id=IDP_CLIENT["client_id"],
                idp_client_secret="idp-secret-planted-0e4f",
                client_id=MCP_CLIENT["client_id"],
                client_secret=MCP_CLIENT["client_secret"],
            )
            secrets.append("idp-secret-planted-0e4f")
            client = start(cross)
            try:
                assert client.call_tool("add", ADD).text == "3"
                runtime = client._handle.tree()
                secrets.append(runtime.shared.token.current.header.split()[1])
                auth.admin("expire")  # a 401: a new exchange, a new ID-JAG, a new token
                assert client.call_tool("add", ADD).text == "3"
                secrets.append(runtime.shared.token.current.header.split()[1])
                before = runtime.registry.get("oauth")
                before.tell(_Boom())  # a crash report while it holds them
                deadline = time.monotonic() + 10
                while runtime.registry.get("oauth") in (None, before):
                    assert time.monotonic() < deadline
                    time.sleep(0.02)
                assert client.call_tool("add", ADD).text == "3"
                texts += [repr(client), str(client.status()), repr(runtime.shared.token)]
            finally:
                client.stop()
            stolen = sso.sign(sub="alice@corp", aud="another-app")
            untrusted = JwtIssuer(PLATFORM, tmp_path).sign(sub="ci", aud=auth.issuer)
            workload_file = tmp_path / "workload-token"
            workload_file.write_text(untrusted)
            secrets += [stolen, untrusted]
            refused = [
                mcp.OAuth(
                    grant="identity_assertion",
                    identity_token=stolen,
                    idp_token_endpoint=idp.endpoint("token"),
                    idp_client_id=IDP_CLIENT["client_id"],
                    idp_client_secret="idp-secret-planted-0e4f",
                    client_id=MCP_CLIENT["client_id"],
                    client_secret=MCP_CLIENT["client_secret"],
                ),
                mcp.OAuth(
                    grant="jwt_bearer",
                    assertion_file=workload_file,
                    client_id=WORKLOAD["client_id"],
                ),
                mcp.OAuth(grant="jwt_bearer", assertion=untrusted, client_id="ci-workload"),
            ]
            for oauth in refused:
                client = start(oauth)
                try:
                    with pytest.raises(mcp.Error) as err:
                        client.call_tool("add", ADD)
                    errors.append(err.value)
                finally:
                    client.stop()
    assert [e.reason for e in errors] == [  # type: ignore[attr-defined]
        "token_exchange_failed",
        "assertion_refused",
        "assertion_refused",
    ]
    for err in errors:
        texts += [str(err), repr(err), repr(err.args), repr(getattr(err, "data", None))]
    texts += captured.texts
    texts += _span_texts(exporter)
    assert any("injected OAuth actor crash" in t for t in captured.texts)
    assert len(secrets) >= 8  # two identity tokens and two ID-JAGs at least
    for secret in secrets:
        for text in texts:
            assert secret not in text, (secret[:6], text[:200])
