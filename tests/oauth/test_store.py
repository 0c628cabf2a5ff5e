"""Token stores: memory and file (owner-only, atomic, shared between threads and processes)."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import threading

import pytest

from conduit_mcp import Error, FileTokenStore, MemoryTokenStore, TokenSet, TokenStore
from conduit_mcp.oauth.records import ClientCredentials
from conduit_mcp.oauth.store import (
    client_key,
    delete_tokens,
    load_client,
    load_tokens,
    save_client,
    save_tokens,
    tokens_key,
)


@pytest.fixture(params=["memory", "file"])
def store(request, tmp_path):
    return MemoryTokenStore() if request.param == "memory" else FileTokenStore(tmp_path / "t.json")


def test_both_stores_are_token_stores(store):
    assert isinstance(store, TokenStore)


def test_get_put_delete(store):
    assert store.get("k") is None
    store.put("k", {"a": 1, "b": [1, 2]})
    assert store.get("k") == {"a": 1, "b": [1, 2]}
    store.put("k", {"a": 2})
    assert store.get("k") == {"a": 2}
    store.delete("k")
    store.delete("k")
    assert store.get("k") is None


def test_records_are_copies(store):
    record = {"a": [1]}
    store.put("k", record)
    record["a"].append(2)
    got = store.get("k")
    got["a"].append(3)
    assert store.get("k") == {"a": [1]}


def test_tokens_are_keyed_by_principal_issuer_and_resource(store):
    t = TokenSet("A", "R", expires_at=10.0, scope=("s",), issued_at=1.0)
    save_tokens(store, "alice", "https://as", "https://mcp/x", t)
    assert load_tokens(store, "alice", "https://as", "https://mcp/x") == t
    assert load_tokens(store, "bob", "https://as", "https://mcp/x") is None
    assert load_tokens(store, "alice", "https://as2", "https://mcp/x") is None
    assert load_tokens(store, "alice", "https://as", "https://mcp/y") is None
    delete_tokens(store, "alice", "https://as", "https://mcp/x")
    assert load_tokens(store, "alice", "https://as", "https://mcp/x") is None
    # keys cannot be confused by a separator inside a part
    assert tokens_key("a b", "c", "d") != tokens_key("a", "b c", "d")


def test_registrations_are_kept_per_issuer_and_never_cross(store):
    c = ClientCredentials("id", "sec", "client_secret_basic", "https://as", "dcr")
    save_client(store, c)
    assert load_client(store, "https://as") == c
    assert load_client(store, "https://moved-as") is None
    # a record filed under one issuer but naming another is never used
    store.put(client_key("https://as3"), c.to_record())
    assert load_client(store, "https://as3") is None
    # pre-registered credentials live in the config, never in a store
    save_client(store, ClientCredentials("pre", "sec", issuer="https://as4"))
    assert store.get(client_key("https://as4")) is None


def test_the_file_is_owner_only_and_written_atomically(tmp_path):
    path = tmp_path / "tokens.json"
    store = FileTokenStore(path)
    store.put("k", {"access_token": "A"})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert json.loads(path.read_text()) == {"k": {"access_token": "A"}}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tokens.json", "tokens.json.lock"]
    assert stat.S_IMODE(os.stat(tmp_path / "tokens.json.lock").st_mode) == 0o600


def test_a_file_readable_by_others_is_warned_about_and_made_private(tmp_path, caplog):
    path = tmp_path / "tokens.json"
    path.write_text('{"k": {"a": 1}}')
    os.chmod(path, 0o644)
    store = FileTokenStore(path)
    with caplog.at_level(logging.WARNING, logger="conduit_mcp.oauth"):
        assert store.get("k") == {"a": 1}
    assert "readable by others" in caplog.text
    store.put("j", {"b": 2})
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


def test_a_restarted_process_finds_the_tokens(tmp_path):
    path = tmp_path / "tokens.json"
    save_tokens(FileTokenStore(path), "p", "https://as", "https://r", TokenSet("A", "R", 9.0))
    code = (
        "import sys; from conduit_mcp.oauth.store import FileTokenStore, load_tokens;"
        "t = load_tokens(FileTokenStore(sys.argv[1]), 'p', 'https://as', 'https://r');"
        "print(t.expires_at, t.refresh_token is not None)"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    assert out.stdout.split() == ["9.0", "True"]


def test_a_damaged_file_is_a_config_error_and_is_not_overwritten(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text("[1, 2")
    store = FileTokenStore(path)
    for call in (lambda: store.get("k"), lambda: store.put("k", {})):
        with pytest.raises(Error) as e:
            call()
        assert (e.value.kind, e.value.reason) == ("config", "oauth.store")
    assert path.read_text() == "[1, 2"


def test_an_empty_file_is_an_empty_store(tmp_path):
    path = tmp_path / "tokens.json"
    path.write_text("")
    assert FileTokenStore(path).get("k") is None


def test_a_missing_directory_is_a_config_error(tmp_path):
    store = FileTokenStore(tmp_path / "nope" / "tokens.json")
    with pytest.raises(Error) as e:
        store.put("k", {})
    assert e.value.reason == "oauth.store"
    with pytest.raises(Error):
        FileTokenStore("")


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "tokens.json"
    stores = [FileTokenStore(path) for _ in range(4)]

    def write(i):
        for j in range(25):
            stores[i].put(f"{i}-{j}", {"v": j})

    threads = [threading.Thread(target=write, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(json.loads(path.read_text())) == 100


def test_reprs_show_no_records(tmp_path):
    m = MemoryTokenStore()
    m.put("k", {"access_token": "SECRET"})
    f = FileTokenStore(tmp_path / "t.json")
    assert "SECRET" not in repr(m) and repr(m) == "MemoryTokenStore(records=1)"
    assert repr(f) == f"FileTokenStore(path={str(tmp_path / 't.json')!r})"


def test_a_home_relative_path(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path))
    store = FileTokenStore("~/tokens.json")
    store.put("k", {"a": 1})
    assert store.path == tmp_path / "tokens.json" and (tmp_path / "tokens.json").exists()
