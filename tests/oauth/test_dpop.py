"""DPoP proofs (RFC 9449) as the library makes them, checked by the test servers' checker
(``conduit_mcp.testing.common.dpop_proofs``, written from RFC 9449 section 4.3), and the rule
that says when a client uses DPoP."""

from __future__ import annotations

import json

import pytest
from joserfc import jws

from conduit_mcp import Error, TokenSet
from conduit_mcp.oauth.dpop import MAX_NONCE, MAX_ORIGINS, Prover, use_dpop
from conduit_mcp.testing.common.dpop_proofs import ProofChecker, ProofRefused

TOKEN = "bound-access-token"


def payload(proof: str) -> dict:
    return json.loads(jws.extract_compact(proof.encode()).payload)


def test_a_proof_passes_the_servers_checks_and_names_the_key_the_token_is_bound_to():
    prover = Prover.generate()
    checker = ProofChecker()
    proof = prover.proof("POST", "http://127.0.0.1:1/mcp?x=1#f", TOKEN)
    assert checker.check([proof], "POST", "http://127.0.0.1:1/mcp", TOKEN) == prover.thumbprint
    with pytest.raises(ProofRefused, match="used before"):  # a replay
        checker.check([proof], "POST", "http://127.0.0.1:1/mcp", TOKEN)


@pytest.mark.parametrize(
    ("method", "url", "token", "why"),
    [
        ("GET", "http://127.0.0.1:1/mcp", TOKEN, "htm"),
        ("POST", "http://127.0.0.1:2/mcp", TOKEN, "htu"),
        ("POST", "http://127.0.0.1:1/mcp", "another-token", "ath"),
    ],
)
def test_a_proof_is_for_one_method_url_and_token(method, url, token, why):
    proof = Prover.generate().proof("POST", "http://127.0.0.1:1/mcp", TOKEN)
    with pytest.raises(ProofRefused, match=why):
        ProofChecker().check([proof], method, url, token)


def test_every_proof_has_its_own_jti_and_the_clock_given():
    prover = Prover.generate(clock=lambda: 1234.9)
    proofs = [payload(prover.proof("POST", "https://as.example/token")) for _ in range(200)]
    assert len({p["jti"] for p in proofs}) == 200
    assert {p["iat"] for p in proofs} == {1234}
    assert all("ath" not in p and "nonce" not in p for p in proofs)


def test_a_nonce_is_kept_per_origin_and_only_when_it_is_one():
    prover = Prover.generate()
    assert prover.remember("https://as.example/token", "n1")
    assert payload(prover.proof("POST", "https://as.example/other"))["nonce"] == "n1"
    assert "nonce" not in payload(prover.proof("POST", "https://mcp.example/mcp"))
    for bad in ("", "x" * (MAX_NONCE + 1), 'a"b', "a b", "caf\u00e9", None, 7):
        assert not prover.remember("https://mcp.example/mcp", bad)
    assert prover.remember("https://mcp.example/mcp", "x" * MAX_NONCE)  # the edge holds
    for n in range(MAX_ORIGINS + 1):  # bounded: the oldest origin is forgotten
        prover.remember(f"https://h{n}.example/", "n")
    assert "nonce" not in payload(prover.proof("POST", "https://as.example/token"))


def test_the_nonce_a_server_asks_for_is_checked():
    prover, checker = Prover.generate(), ProofChecker(require_nonce=True)
    url = "http://127.0.0.1:1/token"
    with pytest.raises(ProofRefused) as err:
        checker.check([prover.proof("POST", url)], "POST", url)
    assert err.value.error == "use_dpop_nonce"
    prover.remember(url, checker.nonce)
    assert checker.check([prover.proof("POST", url)], "POST", url) == prover.thumbprint


def test_the_key_round_trips_through_a_store_record_and_a_bad_one_says_why():
    prover = Prover.generate("ES384")
    again = Prover(prover.private_jwk())
    assert (again.alg, again.thumbprint) == ("ES384", prover.thumbprint)
    tokens = TokenSet("t", token_type="DPoP", dpop_key=prover.private_jwk())
    kept = TokenSet.from_record(tokens.to_record())
    assert kept is not None and kept.dpop_key == prover.private_jwk()
    assert kept.authorization() == "DPoP t"
    assert TokenSet.from_record({"access_token": "t", "token_type": "DPoP"}) is None  # no key
    public = json.dumps({**json.loads(prover.private_jwk()), "d": None})
    for bad in ("{", "[]", public, json.dumps({"kty": "EC", "alg": "ES256"})):
        with pytest.raises(Error) as err:
            Prover(bad)
        assert (err.value.kind, err.value.reason) == ("auth", "dpop_failed")
        assert '"d"' not in err.value.message


def test_when_a_client_uses_dpop():
    listed = {"dpop_signing_alg_values_supported": ["ES256", "RS256"]}
    required = {"dpop_bound_access_tokens_required": True}
    assert use_dpop(None, "ES256", listed, required, False)
    assert use_dpop(None, "ES256", listed, None, True)  # a DPoP-only challenge
    assert not use_dpop(None, "ES256", listed, {}, False)  # not required
    assert not use_dpop(None, "ES384", listed, required, False)  # no algorithm in common
    assert not use_dpop(
        None, "ES256", {"dpop_signing_alg_values_supported": "ES256"}, required, True
    )
    assert use_dpop(True, "ES256", {}, None, False)  # asked for: sent, whatever is advertised
    with pytest.raises(Error) as err:
        use_dpop(True, "ES384", listed, None, False)
    assert (err.value.kind, err.value.reason) == ("auth", "dpop_failed")
    assert "ES256" in err.value.message and "RS256" not in err.value.message
