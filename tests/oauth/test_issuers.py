"""Pre-registered credentials stay with one issuer: the pure check and the binding kept in
the store."""

from __future__ import annotations

from typing import Any

import pytest

from conduit_mcp import Error, MemoryTokenStore, OAuth
from conduit_mcp.oauth.issuers import bind_issuer, binding_key, check_issuer

AS1 = "https://as.example.com"
AS2 = "https://other.example.com"


def pre(**kw: Any) -> OAuth:
    return OAuth(client_id="app", client_secret="s3cret-9f", grant="client_credentials", **kw)


def refused(fn: Any, *args: Any, **kw: Any) -> Error:
    with pytest.raises(Error) as e:
        fn(*args, **kw)
    assert (e.value.kind, e.value.reason) == ("auth", "issuer_changed")
    return e.value


def test_the_first_issuer_binds_pre_registered_credentials():
    store = MemoryTokenStore()
    bind_issuer(store, pre(), AS1)
    assert store.get(binding_key("app")) == {"issuer": AS1}
    bind_issuer(store, pre(), AS1)  # the same one again: fine
    err = refused(bind_issuer, store, pre(), AS2)
    assert AS1 in err.message and AS2 in err.message and "confirm" in err.message
    assert "OAuth(issuer=" in err.message and "s3cret" not in err.message
    assert store.get(binding_key("app")) == {"issuer": AS1}  # unchanged by a refusal


def test_a_person_confirms_a_move_by_naming_the_new_issuer():
    store = MemoryTokenStore()
    bind_issuer(store, pre(), AS1)
    bind_issuer(store, pre(issuer=AS2), AS2)
    assert store.get(binding_key("app")) == {"issuer": AS2}
    bind_issuer(store, pre(), AS2)  # and later clients without issuer= follow it
    refused(bind_issuer, store, pre(), AS1)


def test_a_named_issuer_pins_every_kind_of_client_from_the_start():
    store = MemoryTokenStore()
    refused(bind_issuer, store, pre(issuer=AS2), AS1)
    assert store.get(binding_key("app")) is None
    dynamic = OAuth(loopback=True, issuer=AS1)
    bind_issuer(store, dynamic, AS1)
    err = refused(bind_issuer, store, dynamic, AS2)
    assert "allows only" in err.message


def test_a_dynamic_registration_follows_the_server_without_issuer():
    store = MemoryTokenStore()
    bind_issuer(store, OAuth(loopback=True), AS1)
    bind_issuer(store, OAuth(loopback=True), AS2)
    assert repr(store) == "MemoryTokenStore(records=0)"  # nothing to bind


def test_issuers_are_compared_exactly():
    refused(check_issuer, AS1 + "/", pinned=None, bound=AS1, client_id="app")
    refused(check_issuer, AS1.upper(), pinned=AS1, bound=None, client_id="app")


class Broken:
    def get(self, key: str) -> Any:
        raise OSError("disk gone")

    def put(self, key: str, record: Any) -> None:
        raise OSError("disk gone")

    def delete(self, key: str) -> None:
        raise OSError("disk gone")


def test_a_failing_store_is_logged_and_a_named_issuer_still_rules(caplog):
    bind_issuer(Broken(), pre(), AS1)  # nothing kept, nothing raised
    assert "the OAuth token store failed (OSError)" in caplog.text
    refused(bind_issuer, Broken(), pre(issuer=AS1), AS2)
