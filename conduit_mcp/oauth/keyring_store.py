"""``KeyringTokenStore``: OAuth records in the operating system's keychain, through the
``keyring`` library (the ``keyring`` extra): macOS Keychain, Windows Credential Locker, the
freedesktop Secret Service (GNOME Keyring, KWallet), or any backend ``keyring`` is told to use.

For desktop applications that should not keep tokens (and a DPoP private key) in a file:
each record is one keychain item, its service this store's ``service`` and its user name the
record's key, its secret the record as JSON. The keychain decides who may read it (the user's
login, and on macOS the application); the library never shows what it holds.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Mapping
from typing import Any

import orjson

from ..errors import Error

__all__ = ["KeyringTokenStore"]


def _failed(action: str, exc: Exception) -> Error:
    # The class only: a backend's message may quote what it was given.
    return Error(
        "config",
        "oauth.store",
        f"the keychain could not {action} a record ({type(exc).__name__}); is a keyring "
        "backend available (python -m keyring diagnose)?",
    )


class KeyringTokenStore:
    """Records in the OS keychain (docs/oauth.md, "Token stores"): a
    :class:`~conduit_mcp.TokenStore` on ``keyring``.

    ``service`` names this application's items in the keychain (two applications with two
    names never see each other's tokens); ``backend``: a ``keyring.backend.KeyringBackend``
    to use instead of the one ``keyring`` chooses (its configuration, or
    ``keyring.set_keyring``). Without the ``keyring`` extra it is
    ``Error("config", "oauth.store")`` at once, not at the first token.

    >>> import keyring.backend
    >>> class Memory(keyring.backend.KeyringBackend):
    ...     priority = 1
    ...     def __init__(self):
    ...         self.items = {}
    ...     def get_password(self, service, username):
    ...         return self.items.get((service, username))
    ...     def set_password(self, service, username, password):
    ...         self.items[(service, username)] = password
    ...     def delete_password(self, service, username):
    ...         self.items.pop((service, username))
    >>> store = KeyringTokenStore("my-app", backend=Memory())
    >>> store.put("k", {"access_token": "secret"}); store.get("k"), store
    ({'access_token': 'secret'}, KeyringTokenStore(service='my-app'))
    """

    def __init__(self, service: str = "conduit-mcp", *, backend: Any = None) -> None:
        if importlib.util.find_spec("keyring") is None:
            raise Error(
                "config",
                "oauth.store",
                "KeyringTokenStore needs the keyring extra: pip install -e '.[keyring]' in a "
                "clone of conduit-mcp, or pip install 'conduit-mcp[keyring]' once it is "
                "published",
            )
        if not isinstance(service, str) or not service:
            raise Error("config", "oauth.store", "KeyringTokenStore needs a non-empty service")
        if backend is not None and not all(
            callable(getattr(backend, m, None))
            for m in ("get_password", "set_password", "delete_password")
        ):
            raise Error(
                "config",
                "oauth.store",
                "KeyringTokenStore backend must be a keyring.backend.KeyringBackend",
            )
        self.service = service
        self._backend = backend
        self._lock = threading.Lock()  # one keychain call at a time from this store

    def __repr__(self) -> str:
        return f"KeyringTokenStore(service={self.service!r})"

    def _keyring(self) -> Any:
        if self._backend is not None:
            return self._backend
        import keyring

        return keyring.get_keyring()

    def get(self, key: str) -> dict[str, Any] | None:
        """The record under ``key``, or None (an item that is not a record reads as none).

        >>> from keyring.backends import null  # a keychain that keeps nothing
        >>> KeyringTokenStore(backend=null.Keyring()).get("k") is None
        True
        """
        try:
            with self._lock:
                text = self._keyring().get_password(self.service, key)
        except Exception as exc:
            raise _failed("read", exc) from None
        if not isinstance(text, str):
            return None
        try:
            record = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        return record if isinstance(record, dict) else None

    def put(self, key: str, record: Mapping[str, Any]) -> None:
        """Keep ``record`` under ``key`` (one keychain item, replaced), as JSON.

        >>> from keyring.backends import null
        >>> KeyringTokenStore(backend=null.Keyring()).put("k", {"access_token": "t"})
        """
        text = orjson.dumps(dict(record)).decode()
        try:
            with self._lock:
                self._keyring().set_password(self.service, key, text)
        except Exception as exc:
            raise _failed("write", exc) from None

    def delete(self, key: str) -> None:
        """Forget ``key`` (nothing happens when the keychain has no such item).

        >>> from keyring.backends import null
        >>> KeyringTokenStore(backend=null.Keyring()).delete("k")
        """
        from keyring.errors import PasswordDeleteError

        try:
            with self._lock:
                self._keyring().delete_password(self.service, key)
        except PasswordDeleteError:
            return  # absent
        except Exception as exc:
            raise _failed("delete", exc) from None
