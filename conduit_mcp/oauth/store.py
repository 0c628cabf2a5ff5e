"""Token stores: where tokens and client registrations live between requests and processes.

A store maps a string key to a JSON-ready record (a dict of str, numbers, lists, None).
Two kinds of records (docs/oauth.md, "Token stores"):

* tokens, keyed by principal, issuer and resource (:func:`tokens_key`): a person's (or a
  service's) access and refresh tokens for one MCP server from one authorization server,
  with their expiry, so that a restarted process refreshes instead of asking again;
* client registrations, keyed by issuer (:func:`client_key`): what CIMD or dynamic
  registration gave this client at that authorization server. A server that moved to another
  authorization server has another issuer, so it gets a registration of its own.

The methods are synchronous and may do file I/O: an acquisition (``acquire.py``) calls them
on a worker thread, never on the I/O loop.
"""

from __future__ import annotations

import contextlib
import copy
import fcntl
import logging
import os
import stat
import tempfile
import threading
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import orjson

from ..errors import Error
from .records import ClientCredentials, TokenSet

log = logging.getLogger("conduit_mcp.oauth")

#: The largest token store file read (bytes): a store holds a few records per principal.
MAX_STORE_FILE = 16 * 1024 * 1024


@runtime_checkable
class TokenStore(Protocol):
    """Where OAuth records are kept. Implementations must be safe to call from several
    threads; a record given to :meth:`put` must not be changed by the caller afterwards and
    :meth:`get` must return a record the caller may keep (a copy). The client calls it from
    one of the library's worker threads, never from the I/O loop or an actor, so a store may
    do file or network I/O.

    Any object with these three methods is one (a ``typing.Protocol``); here, one in a dict:

    >>> import conduit_mcp as mcp
    >>> class DictStore:
    ...     def __init__(self):
    ...         self.records = {}
    ...     def get(self, key):
    ...         return dict(self.records[key]) if key in self.records else None
    ...     def put(self, key, record):
    ...         self.records[key] = dict(record)
    ...     def delete(self, key):
    ...         self.records.pop(key, None)
    >>> oauth = mcp.OAuth(loopback=True, store=DictStore())
    """

    def get(self, key: str) -> dict[str, Any] | None:
        """The record stored under ``key``, or None.

        >>> from conduit_mcp import MemoryTokenStore
        >>> MemoryTokenStore().get("tokens [...]") is None
        True
        """
        ...

    def put(self, key: str, record: Mapping[str, Any]) -> None:
        """Store ``record`` under ``key``, replacing any earlier one.

        >>> from conduit_mcp import MemoryTokenStore
        >>> store = MemoryTokenStore()
        >>> store.put("k", {"n": 1}); store.put("k", {"n": 2}); store.get("k")
        {'n': 2}
        """
        ...

    def delete(self, key: str) -> None:
        """Forget ``key`` (nothing happens when it is absent).

        >>> from conduit_mcp import MemoryTokenStore
        >>> store = MemoryTokenStore()
        >>> store.put("k", {"n": 1}); store.delete("k"); store.delete("k"); store.get("k")
        """
        ...


def tokens_key(principal: str, issuer: str, resource: str) -> str:
    """The key of a principal's tokens for one resource from one authorization server.

    >>> tokens_key("alice", "https://as.example", "https://mcp.example/mcp")
    'tokens ["alice","https://as.example","https://mcp.example/mcp"]'
    """
    return "tokens " + orjson.dumps([principal, issuer, resource]).decode()


def tokens_key_parts(key: str) -> tuple[str, str, str] | None:
    """The principal, issuer and resource of a :func:`tokens_key`; None for another key.

    >>> tokens_key_parts(tokens_key("alice", "https://as.example", "https://mcp.example/mcp"))
    ('alice', 'https://as.example', 'https://mcp.example/mcp')
    >>> tokens_key_parts(client_key("https://as.example")) is None
    True
    """
    if not key.startswith("tokens "):
        return None
    try:
        parts = orjson.loads(key[len("tokens ") :])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(parts, list) or len(parts) != 3 or not all(isinstance(p, str) for p in parts):
        return None
    return parts[0], parts[1], parts[2]


def client_key(issuer: str) -> str:
    """The key of this client's registration at one authorization server.

    >>> client_key("https://as.example")
    'client ["https://as.example"]'
    """
    return "client " + orjson.dumps([issuer]).decode()


class MemoryTokenStore:
    """Records in this process's memory: the default. A restart forgets them (a person is
    asked again, unless a refresh token is kept elsewhere).

    >>> store = MemoryTokenStore()
    >>> store.put("k", {"access_token": "secret"})
    >>> store.get("k")["access_token"], store
    ('secret', MemoryTokenStore(records=1))
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"MemoryTokenStore(records={len(self._records)})"

    def get(self, key: str) -> dict[str, Any] | None:
        """The record under ``key`` (a copy: changing it changes nothing here), or None.

        >>> store = MemoryTokenStore()
        >>> store.put("k", {"scopes": ["mcp"]})
        >>> store.get("k")["scopes"].append("write"); store.get("k")
        {'scopes': ['mcp']}
        """
        with self._lock:
            record = self._records.get(key)
            return copy.deepcopy(record) if record is not None else None

    def put(self, key: str, record: Mapping[str, Any]) -> None:
        """Keep a copy of ``record`` under ``key``.

        >>> store = MemoryTokenStore()
        >>> store.put("k", {"access_token": "t"}); store.keys()
        ['k']
        """
        with self._lock:
            self._records[key] = copy.deepcopy(dict(record))

    def delete(self, key: str) -> None:
        """Forget ``key``, if held.

        >>> store = MemoryTokenStore()
        >>> store.put("k", {}); store.delete("k"); store.keys()
        []
        """
        with self._lock:
            self._records.pop(key, None)

    def keys(self) -> list[str]:
        """Every key held (not part of :class:`TokenStore`: a store need not list them).

        >>> store = MemoryTokenStore()
        >>> store.put("a", {}); store.put("b", {}); store.keys()
        ['a', 'b']
        """
        with self._lock:
            return list(self._records)


class FileTokenStore:
    """Records in one JSON file, readable and writable by its owner only (0600). A
    leading ``~`` is the user's home directory; the directory must exist.

    Every write replaces the file atomically (a temporary file in the same directory, then
    ``os.replace``), under an advisory lock on ``<path>.lock`` so that processes sharing the
    file do not lose each other's writes. A file that cannot be read as a store is an
    ``Error("config", "oauth.store")`` (it is never silently overwritten).

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "tokens.json")
    >>> store = FileTokenStore(path)
    >>> store.put("k", {"access_token": "secret"})
    >>> oct(os.stat(path).st_mode & 0o777), store.get("k") == {"access_token": "secret"}
    ('0o600', True)
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        if not isinstance(path, (str, os.PathLike)) or not os.fspath(path):
            raise Error("config", "oauth.store", "FileTokenStore needs a file path")
        self.path = Path(os.fspath(path)).expanduser()
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"FileTokenStore(path={str(self.path)!r})"

    @contextlib.contextmanager
    def _locked(self, exclusive: bool) -> Iterator[None]:
        with self._lock:
            lock_path = self.path.with_name(self.path.name + ".lock")
            try:
                fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            except OSError as e:
                raise Error(
                    "config",
                    "oauth.store",
                    f"cannot open the token store's lock file {str(lock_path)!r} "
                    f"({type(e).__name__}); is its directory writable?",
                ) from None
            try:
                fcntl.flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
                yield
            finally:
                os.close(fd)  # closing releases the lock

    def _read(self) -> dict[str, Any]:
        try:
            fd = os.open(self.path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        except FileNotFoundError:
            return {}
        except OSError as e:
            raise Error(
                "config",
                "oauth.store",
                f"cannot read the token store {str(self.path)!r} ({type(e).__name__})",
            ) from None
        with os.fdopen(fd, "rb") as f:
            info = os.fstat(f.fileno())
            if info.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
                log.warning(
                    "token store %s is readable by others; its next write makes it 0600",
                    self.path,
                )
            data = f.read(MAX_STORE_FILE + 1)
        if len(data) > MAX_STORE_FILE:
            raise Error(
                "config", "oauth.store", f"the token store is larger than {MAX_STORE_FILE} bytes"
            )
        if not data.strip():
            return {}
        try:
            value = orjson.loads(data)
        except orjson.JSONDecodeError:
            value = None
        if not isinstance(value, dict):
            raise Error(
                "config",
                "oauth.store",
                f"the token store {str(self.path)!r} is not a JSON object; move it away "
                "or give another path",
            )
        return value

    def _write(self, records: dict[str, Any]) -> None:
        directory = self.path.parent
        data = orjson.dumps(records, option=orjson.OPT_SORT_KEYS)
        fd, tmp = tempfile.mkstemp(prefix=f".{self.path.name}.", dir=directory)
        try:
            os.fchmod(fd, 0o600)
            with os.fdopen(fd, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise

    def get(self, key: str) -> dict[str, Any] | None:
        """The record under ``key`` in the file, or None (read under a shared lock).

        >>> import tempfile
        >>> store = FileTokenStore(f"{tempfile.mkdtemp()}/tokens.json")
        >>> store.get("k") is None
        True
        """
        with self._locked(exclusive=False):
            record = self._read().get(key)
        return record if isinstance(record, dict) else None

    def put(self, key: str, record: Mapping[str, Any]) -> None:
        """Write ``record`` under ``key``: the whole file is replaced atomically, under an
        exclusive lock, so processes sharing the file lose nothing.

        >>> import os, tempfile
        >>> path = f"{tempfile.mkdtemp()}/tokens.json"
        >>> FileTokenStore(path).put("k", {"access_token": "t"})
        >>> FileTokenStore(path).get("k"), oct(os.stat(path).st_mode & 0o777)
        ({'access_token': 't'}, '0o600')
        """
        with self._locked(exclusive=True):
            records = self._read()
            records[key] = dict(record)
            self._write(records)

    def delete(self, key: str) -> None:
        """Remove ``key`` from the file (the file is rewritten only when it held the key).

        >>> import tempfile
        >>> store = FileTokenStore(f"{tempfile.mkdtemp()}/tokens.json")
        >>> store.put("k", {}); store.delete("k"); store.keys()
        []
        """
        with self._locked(exclusive=True):
            records = self._read()
            if records.pop(key, None) is not None:
                self._write(records)

    def keys(self) -> list[str]:
        """Every key in the file (not part of :class:`TokenStore`: a store need not list
        them); ``conduit-mcp logout`` finds a server's tokens with it.

        >>> import tempfile
        >>> store = FileTokenStore(f"{tempfile.mkdtemp()}/tokens.json")
        >>> store.put("a", {}); store.keys()
        ['a']
        """
        with self._locked(exclusive=False):
            return list(self._read())


def load_tokens(store: TokenStore, principal: str, issuer: str, resource: str) -> TokenSet | None:
    """The kept tokens of ``principal`` for ``resource`` from ``issuer``, or None."""
    record = store.get(tokens_key(principal, issuer, resource))
    return TokenSet.from_record(record) if isinstance(record, Mapping) else None


def save_tokens(
    store: TokenStore, principal: str, issuer: str, resource: str, tokens: TokenSet
) -> None:
    store.put(tokens_key(principal, issuer, resource), tokens.to_record())


def delete_tokens(store: TokenStore, principal: str, issuer: str, resource: str) -> None:
    store.delete(tokens_key(principal, issuer, resource))


def load_client(store: TokenStore, issuer: str) -> ClientCredentials | None:
    """The registration kept for ``issuer`` (CIMD or dynamic), or None. A record naming
    another issuer is ignored: credentials never cross authorization servers."""
    record = store.get(client_key(issuer))
    if not isinstance(record, Mapping):
        return None
    client = ClientCredentials.from_record(record)
    return client if client is not None and client.issuer == issuer else None


def delete_client(store: TokenStore, issuer: str) -> None:
    """Forget the registration kept for ``issuer`` (the server forgot it: invalid_client)."""
    store.delete(client_key(issuer))


def save_client(store: TokenStore, client: ClientCredentials) -> None:
    """Keep a CIMD or dynamic registration under its issuer (pre-registered credentials
    live in the OAuth config and are never written)."""
    if client.registration != "pre-registered":
        store.put(client_key(client.issuer), client.to_record())
