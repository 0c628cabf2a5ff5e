"""``KeyringTokenStore`` on a real ``keyring`` backend: a file-based one of this test's own,
written on keyring's ``keyring.backend.KeyringBackend`` API and installed with
``keyring.set_keyring`` (there is no OS keychain here), driven through the public API."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path

import keyring
import keyring.backend
import keyring.errors
import pytest

import conduit_mcp as mcp
from conduit_mcp import TokenSet
from conduit_mcp.oauth.store import load_tokens, save_tokens


class FileKeyring(keyring.backend.KeyringBackend):
    """Passwords in one JSON file: a real backend, as a keychain would hold them."""

    priority = 1  # type: ignore[assignment]

    def __init__(self, path: Path) -> None:
        super().__init__()
        self.path = path
        self.lock = threading.Lock()

    def _read(self) -> dict[str, str]:
        return json.loads(self.path.read_text()) if self.path.exists() else {}

    def get_password(self, service: str, username: str) -> str | None:
        with self.lock:
            return self._read().get(f"{service}\0{username}")

    def set_password(self, service: str, username: str, password: str) -> None:
        with self.lock:
            items = self._read()
            items[f"{service}\0{username}"] = password
            self.path.write_text(json.dumps(items))

    def delete_password(self, service: str, username: str) -> None:
        with self.lock:
            items = self._read()
            if items.pop(f"{service}\0{username}", None) is None:
                raise keyring.errors.PasswordDeleteError("no such item")
            self.path.write_text(json.dumps(items))


class Broken(keyring.backend.KeyringBackend):
    priority = 1  # type: ignore[assignment]

    def get_password(self, service, username):
        raise keyring.errors.KeyringLocked(f"locked while reading {username}")

    def set_password(self, service, username, password):
        raise keyring.errors.PasswordSetError(f"cannot store {password}")

    def delete_password(self, service, username):
        raise keyring.errors.KeyringError("nope")


@pytest.fixture
def backend(tmp_path):
    before = keyring.get_keyring()
    chosen = FileKeyring(tmp_path / "keychain.json")
    keyring.set_keyring(chosen)
    yield chosen
    keyring.set_keyring(before)


def test_records_round_trip_through_the_keychain_and_survive_a_new_store(backend):
    store = mcp.KeyringTokenStore("test-app")
    assert isinstance(store, mcp.TokenStore)
    tokens = TokenSet("acc-5ecret", "ref-5ecret", expires_at=2e9, scope=("mcp",))
    save_tokens(store, "alice", "https://as.example", "https://mcp.example/mcp", tokens)
    again = mcp.KeyringTokenStore("test-app")  # a restarted process
    loaded = load_tokens(again, "alice", "https://as.example", "https://mcp.example/mcp")
    assert loaded == tokens
    assert mcp.KeyringTokenStore("other-app").get(next(iter(keys(backend)))) is None
    assert "5ecret" not in repr(store) and repr(store) == "KeyringTokenStore(service='test-app')"


def keys(backend: FileKeyring) -> list[str]:
    return [k.split("\0", 1)[1] for k in backend._read()]


def test_put_replaces_delete_forgets_and_deleting_nothing_is_fine(backend):
    store = mcp.KeyringTokenStore("test-app")
    store.put("k", {"n": 1})
    store.put("k", {"n": 2})
    assert store.get("k") == {"n": 2}
    store.delete("k")
    store.delete("k")
    assert store.get("k") is None and keys(backend) == []
    backend.set_password("test-app", "junk", "not json")
    backend.set_password("test-app", "list", "[1]")
    assert store.get("junk") is None and store.get("list") is None


def test_a_backend_given_directly_is_used_instead_of_the_chosen_one(backend, tmp_path):
    own = FileKeyring(tmp_path / "own.json")
    store = mcp.KeyringTokenStore(backend=own)
    store.put("k", {"n": 1})
    assert keys(own) == ["k"] and keys(backend) == []
    with pytest.raises(mcp.Error) as err:
        mcp.KeyringTokenStore(backend=object())
    assert (err.value.kind, err.value.reason) == ("config", "oauth.store")
    with pytest.raises(mcp.Error):
        mcp.KeyringTokenStore("")


def test_a_failing_keychain_is_a_config_error_that_quotes_nothing_it_was_given():
    store = mcp.KeyringTokenStore(backend=Broken())
    for action in (lambda: store.get("tokens-key"), lambda: store.put("k", {"t": "s3cr3t"})):
        with pytest.raises(mcp.Error) as err:
            action()
        assert (err.value.kind, err.value.reason) == ("config", "oauth.store")
        assert "s3cr3t" not in str(err.value) and "tokens-key" not in str(err.value)
        assert "KeyringLocked" in str(err.value) or "PasswordSetError" in str(err.value)


def test_without_the_keyring_extra_it_says_which_extra_to_install(tmp_path):
    script = (
        "import sys, importlib.util\n"
        "real = importlib.util.find_spec\n"
        "importlib.util.find_spec = lambda n, *a: None if n == 'keyring' else real(n, *a)\n"
        "import conduit_mcp as mcp\n"
        "try:\n    mcp.KeyringTokenStore()\n"
        "except mcp.Error as e:\n    print(e.kind, e.reason, e.message)\n"
    )
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=30)
    assert out.stdout.startswith("config oauth.store "), out.stderr
    assert "keyring extra" in out.stdout and "conduit-mcp[keyring]" in out.stdout
