"""No token, code, verifier, client secret, assertion or private key in any repr, log record
or exception text: each is planted, a whole flow runs (and fails in every way a hostile
server can make it fail, echoing the secrets back), and every record, repr and error is
searched."""

from __future__ import annotations

import logging
import traceback

import pytest
from aiohttp import web

import conduit_mcp as mcp
from conduit_mcp import Error, FileTokenStore, MemoryTokenStore, OAuth, TokenSet
from conduit_mcp.oauth.challenge import bearer_challenge
from conduit_mcp.oauth.discovery import discover
from conduit_mcp.oauth.flow import begin_authorization, finish_authorization
from conduit_mcp.oauth.records import ClientCredentials
from conduit_mcp.oauth.registration import register
from conduit_mcp.oauth.store import save_client, save_tokens
from conduit_mcp.oauth.tokens import client_credentials, exchange_code, refresh

from .conftest import as_metadata, pem, run

ACCESS = "planted-access-token-8f3a"
REFRESH = "planted-refresh-token-1c9d"
CODE = "planted-authorization-code-55e1"
SECRET = "planted-client-secret-a0b7"
DCR_SECRET = "planted-dcr-secret-77aa"
REDIRECT = "http://127.0.0.1:8765/callback"


def secret_parts(key) -> list[str]:
    """The private key in every form it could leak in: PEM lines and the JWK's private
    parameters."""
    text = pem(key)
    lines = [line for line in text.splitlines() if line and "-----" not in line]
    private = key.as_dict(private=True)
    return [
        text,
        *lines,
        *(str(private[p]) for p in ("d", "p", "q", "dp", "dq", "qi") if p in private),
    ]


class Evidence:
    """Everything a secret could leak into."""

    def __init__(self) -> None:
        self.texts: list[str] = []

    def error(self, err: BaseException) -> None:
        self.texts += [str(err), repr(err), "".join(traceback.format_exception(err))]
        self.texts += [str(a) for a in err.args]

    def expect_error(self, fn, *args, **kwargs) -> Error:
        with pytest.raises(Error) as e:
            fn(*args, **kwargs)
        self.error(e.value)
        return e.value

    def repr(self, *objects) -> None:
        self.texts += [repr(o) for o in objects] + [str(o) for o in objects]

    def check(self, secrets: list[str], caplog) -> None:
        self.texts += [r.getMessage() for r in caplog.records]
        self.texts += [caplog.text]
        for secret in secrets:
            for text in self.texts:
                assert secret not in text, f"a secret leaked into: {text[:200]!r}"


def hostile_echo(*secrets):
    """An error answer that repeats the secrets in every field a client might show."""
    return {
        "error": secrets[0],
        "error_description": " ".join(secrets),
        "error_uri": f"https://x/{secrets[0]}",
    }


def test_a_whole_flow_that_fails_everywhere_leaks_nothing(server, rsa_key, caplog, tmp_path):
    caplog.set_level(logging.DEBUG)
    ev = Evidence()
    assertions: list[str] = []

    server.json(
        "/.well-known/oauth-protected-resource/mcp",
        {"resource": f"{server.url}/mcp", "authorization_servers": [server.url]},
    )
    server.json(
        "/.well-known/oauth-authorization-server",
        as_metadata(server.url, authorization_response_iss_parameter_supported=True),
    )

    def token(seen):
        if "client_assertion" in seen.form:
            assertions.append(seen.form["client_assertion"])
        grant = seen.form.get("grant_type")
        if grant == "authorization_code" and seen.form.get("code") == CODE:
            return web.json_response(
                {"access_token": ACCESS, "refresh_token": REFRESH, "expires_in": 60}
            )
        echo = [
            seen.form.get(k, "")
            for k in ("code", "code_verifier", "refresh_token", "client_secret", "client_assertion")
        ]
        return web.json_response(hostile_echo(*[e for e in echo if e] or ["x"]), status=400)

    server.handle("POST", "/token", token)
    server.json(
        "/register", {"client_id": "dyn", "client_secret": DCR_SECRET}, status=201, method="POST"
    )

    store = FileTokenStore(tmp_path / "tokens.json")
    oauth = OAuth(redirect_uri=REDIRECT, store=store)
    key_oauth = OAuth(client_id="app", private_key=pem(rsa_key), redirect_uri=REDIRECT)
    secret_oauth = OAuth(client_id="app", client_secret=SECRET, redirect_uri=REDIRECT)
    ev.repr(oauth, key_oauth, secret_oauth, mcp.Http(f"{server.url}/mcp", auth=secret_oauth))

    challenge = bearer_challenge(['Bearer scope="a"'])
    found = run(discover, f"{server.url}/mcp", challenge)
    client = run(register, found, oauth, redirect_uri=REDIRECT)
    save_client(store, client)
    ev.repr(found, client, store)

    pending = begin_authorization(found, client, REDIRECT, ("a",))
    ev.repr(pending)
    verifier = pending.verifier
    # redirects that go wrong: a forged state, a wrong iss, the server's error with the code
    for url in (
        f"{REDIRECT}?code={CODE}&state=forged&iss={server.url}",
        f"{REDIRECT}?code={CODE}&state={pending.state}&iss=https://evil",
        f"{REDIRECT}?code={CODE}&state={pending.state}",
        f"{REDIRECT}?error={CODE}&error_description={verifier}&state={pending.state}&iss={server.url}",
        f"{REDIRECT}?code={CODE}&code={CODE}&state={pending.state}&iss={server.url}",
        f"{REDIRECT}?{CODE}&{CODE}&state={pending.state}&iss={server.url}",
    ):
        ev.expect_error(finish_authorization, pending, url)
    code = finish_authorization(
        pending, f"{REDIRECT}?code={CODE}&state={pending.state}&iss={server.url}"
    )

    # a wrong code: the server echoes the code and the verifier back
    ev.expect_error(run, exchange_code, found, client, oauth, pending, "planted-wrong-code-9")
    tokens = run(exchange_code, found, client, oauth, pending, code)
    save_tokens(store, "default", found.issuer, found.resource, tokens)
    ev.repr(tokens, store)
    # the refresh is refused, its token echoed back
    ev.expect_error(run, refresh, found, client, oauth, tokens)
    # client_secret_post and private_key_jwt refused, the secret and the assertion echoed back
    secret_client = ClientCredentials("app", SECRET, "client_secret_post", found.issuer)
    ev.expect_error(run, refresh, found, secret_client, secret_oauth, tokens)
    key_client = ClientCredentials("app", None, "private_key_jwt", found.issuer)
    ev.expect_error(run, refresh, found, key_client, key_oauth, tokens)
    cc = OAuth(grant="client_credentials", client_id="app", client_secret=SECRET)
    ev.expect_error(run, client_credentials, found, secret_client, cc)
    # a registration refused with the secrets echoed back
    server.json("/register", hostile_echo(SECRET, ACCESS), status=400, method="POST")
    ev.expect_error(run, register, found, OAuth(redirect_uri=REDIRECT), redirect_uri=REDIRECT)
    # a token answer that is not a Bearer token, echoing the access token as its type
    server.json("/token", {"access_token": ACCESS, "token_type": ACCESS}, method="POST")
    ev.expect_error(run, exchange_code, found, client, oauth, pending, code)

    assert len(assertions) == 1
    ev.repr(MemoryTokenStore(), TokenSet(ACCESS, REFRESH))
    ev.check(
        [ACCESS, REFRESH, CODE, verifier, SECRET, DCR_SECRET, *assertions, *secret_parts(rsa_key)],
        caplog,
    )


def test_reprs_of_every_value_hide_their_secrets(rsa_key):
    oauth = OAuth(
        client_id="app", client_secret=SECRET, private_key=pem(rsa_key), redirect_uri=REDIRECT
    )
    values = [
        oauth,
        TokenSet(ACCESS, REFRESH, 5.0, ("a",)),
        ClientCredentials("app", SECRET, "client_secret_basic", "https://as"),
    ]
    for value in values:
        for secret in (ACCESS, REFRESH, SECRET, *secret_parts(rsa_key)):
            assert secret not in repr(value) and secret not in str(value)


def test_a_dpop_key_and_its_proofs_are_in_no_repr_and_no_error():
    from conduit_mcp.oauth.dpop import Prover
    from conduit_mcp.transports.http_token import TokenSnapshot

    prover = Prover.generate()
    jwk = prover.private_jwk()
    d = __import__("json").loads(jwk)["d"]
    proof = prover.proof("POST", "https://mcp.example/mcp", ACCESS)
    tokens = TokenSet(ACCESS, REFRESH, token_type="DPoP", dpop_key=jwk)
    snap = TokenSnapshot(tokens.authorization(), 1, None, prover)
    shown = [repr(prover), str(prover), repr(tokens), str(tokens), repr(snap), str(snap)]
    damaged = jwk.replace('"crv":"P-256"', '"crv":"P-384"')
    with pytest.raises(Error) as e:
        Prover(damaged)
    shown += [str(e.value), repr(e.value), "".join(traceback.format_exception(e.value))]
    for text in shown:
        for secret in (d, jwk, proof, ACCESS):
            assert secret not in text


def test_a_bad_key_is_refused_without_showing_it(rsa_key):
    text = pem(rsa_key)
    broken = text.replace(text.splitlines()[3], "A" * len(text.splitlines()[3]))
    with pytest.raises(Error) as e:
        OAuth(client_id="app", private_key=broken, redirect_uri=REDIRECT)
    shown = str(e.value) + repr(e.value) + "".join(traceback.format_exception(e.value))
    for part in secret_parts(rsa_key):
        assert part not in shown


IDENTITY = "planted-identity-token-3b7e.x.y"
JAG = "planted-id-jag-90c2.x.y"
WORKLOAD = "planted-workload-token-61fd.x.y"


def test_assertion_grants_refused_with_their_secrets_echoed_leak_nothing(server, caplog, tmp_path):
    """A hostile identity provider and authorization server repeat the identity token, the
    ID-JAG and the workload token in every field of their refusals; a function that raises
    with the token in its message; none of it reaches an error, a log or a repr."""
    from conduit_mcp.oauth.assertions import exchange_identity, jwt_bearer, read_secret

    caplog.set_level(logging.DEBUG)
    ev = Evidence()
    server.json(
        "/.well-known/oauth-protected-resource/mcp",
        {"resource": f"{server.url}/mcp", "authorization_servers": [server.url]},
    )
    server.json("/.well-known/oauth-authorization-server", as_metadata(server.url))

    def refuse(seen):
        echo = [seen.form.get(k, "") for k in ("subject_token", "assertion", "client_secret")]
        return web.json_response(hostile_echo(*[e for e in echo if e]), status=400)

    server.handle("POST", "/idp/token", refuse)
    server.handle("POST", "/token", refuse)
    found = run(discover, f"{server.url}/mcp", bearer_challenge(["Bearer"]))
    cross = OAuth(
        grant="identity_assertion",
        identity_token=IDENTITY,
        idp_token_endpoint=f"{server.url}/idp/token",
        idp_client_id="idp-app",
        idp_client_secret=SECRET,
        client_id="app",
        client_secret=SECRET,
    )
    workload_file = tmp_path / "token"
    workload_file.write_text(WORKLOAD)
    workload = OAuth(grant="jwt_bearer", assertion_file=workload_file, client_id="ci")
    ev.repr(cross, workload, mcp.Http(f"{server.url}/mcp", auth=cross))
    client = ClientCredentials("app", SECRET, "client_secret_post", found.issuer)
    ev.expect_error(run, exchange_identity, found, cross, IDENTITY)
    ev.expect_error(run, jwt_bearer, found, client, cross, JAG)
    ev.expect_error(run, jwt_bearer, found, client, workload, read_secret(workload))
    # an answer that is not an ID-JAG, carrying the identity token as its type
    server.json("/idp/token", {"access_token": JAG, "issued_token_type": IDENTITY}, method="POST")
    ev.expect_error(run, exchange_identity, found, cross, IDENTITY)

    def leaky() -> str:
        raise RuntimeError(f"could not refresh {IDENTITY}")

    ev.expect_error(read_secret, OAuth(grant="jwt_bearer", assertion=leaky, client_id="ci"))
    ev.expect_error(
        read_secret,
        OAuth(grant="jwt_bearer", assertion=lambda: f"{WORKLOAD}\n{JAG}", client_id="c"),
    )
    assert [s.form["grant_type"] for s in server.requests("POST", "/token")] == [
        "urn:ietf:params:oauth:grant-type:jwt-bearer"
    ] * 2
    ev.check([IDENTITY, JAG, WORKLOAD, SECRET], caplog)
