"""Where a client keeps its unfinished tasks, so that a restarted process can resume them.

The Tasks extension says clients SHOULD persist task IDs to durable storage so polling can
resume after a crash or restart (ext-tasks, "Task Polling"). A store keeps one *record* per
task: a JSON-ready dict with what resuming needs and nothing more (docs/tasks.md, "Records"):

``task_id`` (a bearer-like secret: the reason the store is owner-only), ``endpoint`` and
``era`` (which server), ``credential`` (the identity of the credentials it was created
under, never the credentials), ``tool``, ``arguments_digest`` (a SHA-256 of the arguments,
never their values), ``created``/``ttl``/``poll`` (seconds), ``status`` and ``answered``
(the input keys already answered).

Two stores ship: :class:`MemoryTaskStore` (the default: the process's own tasks) and
:class:`SqliteTaskStore` (a file on the standard library's ``sqlite3``, safe for several
processes at once: WAL journal, a busy timeout, one transaction per write).
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from .errors import Error

__all__ = ["RECORD_FIELDS", "MemoryTaskStore", "SqliteTaskStore", "TaskStore", "check_store"]

#: The fields of a record (docs/tasks.md, "Records").
RECORD_FIELDS = (
    "task_id",
    "endpoint",
    "era",
    "credential",
    "tool",
    "arguments_digest",
    "created",
    "ttl",
    "poll",
    "status",
    "answered",
)
#: How long a write waits for another process holding the database (seconds).
BUSY_TIMEOUT = 5.0


@runtime_checkable
class TaskStore(Protocol):
    """What a client asks of a task store. Methods may be called from several threads.

    Any object with these three methods is one (a structural protocol):

    >>> class Nowhere:
    ...     def put(self, record): pass
    ...     def delete(self, task_id): pass
    ...     def records(self, endpoint): return []
    >>> isinstance(Nowhere(), TaskStore)
    True
    """

    def put(self, record: Mapping[str, Any]) -> None:
        """Insert or replace the record of ``record["task_id"]``."""
        ...

    def delete(self, task_id: str) -> None:
        """Forget a task (it ended, or was cancelled)."""
        ...

    def records(self, endpoint: str) -> list[dict[str, Any]]:
        """Every record of the server at ``endpoint``, oldest first."""
        ...


def check_store(store: Any) -> TaskStore:
    """``store`` if it is a :class:`TaskStore`, else ``Error("config", "task_store")``."""
    if not isinstance(store, TaskStore):
        raise Error(
            "config",
            "task_store",
            "option 'task_store' must be a TaskStore (put, delete, records), e.g. "
            "mcp.MemoryTaskStore() or mcp.SqliteTaskStore(path)",
        )
    return store


def _plain(record: Mapping[str, Any]) -> dict[str, Any]:
    out = {name: record.get(name) for name in RECORD_FIELDS}
    if type(out["task_id"]) is not str or not out["task_id"]:
        raise Error("argument", "record", "a task record needs its task_id string")
    out["answered"] = sorted(out["answered"] or ())
    return out


class MemoryTaskStore:
    """The records of this process only (the default ``task_store``): a lost process loses
    them; ``client.tasks.unfinished()`` lists those of the running process.

    >>> store = MemoryTaskStore()
    >>> store.put({"task_id": "t1", "endpoint": "e", "status": "working"})
    >>> [r["status"] for r in store.records("e")], store
    (['working'], <MemoryTaskStore 1 task(s)>)
    >>> store.delete("t1"); store.records("e")
    []
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[str, dict[str, Any]] = {}

    def __repr__(self) -> str:
        return f"<MemoryTaskStore {len(self._records)} task(s)>"

    def put(self, record: Mapping[str, Any]) -> None:
        """Insert or replace the record of ``record["task_id"]`` (its fields only).

        >>> store = MemoryTaskStore()
        >>> store.put({"task_id": "t", "endpoint": "e", "secret": "dropped"})
        >>> "secret" in store.records("e")[0]
        False
        """
        plain = _plain(record)
        with self._lock:
            self._records[plain["task_id"]] = plain

    def delete(self, task_id: str) -> None:
        """Forget a task; an unknown id is no error.

        >>> MemoryTaskStore().delete("never-stored")
        """
        with self._lock:
            self._records.pop(task_id, None)

    def records(self, endpoint: str) -> list[dict[str, Any]]:
        """Copies of the records of ``endpoint``, oldest first.

        >>> store = MemoryTaskStore()
        >>> store.put({"task_id": "a", "endpoint": "x"}); store.put({"task_id": "b", "endpoint": "y"})
        >>> [r["task_id"] for r in store.records("x")]
        ['a']
        """
        with self._lock:
            return [dict(r) for r in self._records.values() if r["endpoint"] == endpoint]


class SqliteTaskStore:
    """Records in an SQLite file, shared by every process that opens the same ``path``.

    The file is created owner-only (0600) in a folder created owner-only (0700) when it does
    not exist; a file others can read is refused (``Error("config", "task_store")``), as it
    holds task ids. WAL journal and a busy timeout let several processes write at once.

    >>> import tempfile, os
    >>> folder = tempfile.mkdtemp()
    >>> store = SqliteTaskStore(os.path.join(folder, "tasks", "tasks.db"))
    >>> store.put({"task_id": "t1", "endpoint": "e", "status": "working", "answered": ["k"]})
    >>> [(r["status"], r["answered"]) for r in store.records("e")]
    [('working', ['k'])]
    >>> oct(os.stat(os.path.join(folder, "tasks", "tasks.db")).st_mode & 0o777)
    '0o600'
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self._path = Path(path)
        self._local = threading.local()
        folder = self._path.parent
        if not folder.exists():
            folder.mkdir(mode=0o700, parents=True)
        if not self._path.exists():
            fd = os.open(self._path, os.O_CREAT | os.O_RDWR, 0o600)
            os.close(fd)
        mode = stat.S_IMODE(os.stat(self._path).st_mode)
        if mode & 0o077:
            raise Error(
                "config",
                "task_store",
                f"the task store file is readable by others (mode {oct(mode)}); it holds task "
                "ids, which are bearer-like secrets: chmod 600 it",
            )
        with self._connect() as db:
            db.execute(
                "CREATE TABLE IF NOT EXISTS tasks (task_id TEXT PRIMARY KEY, endpoint TEXT, "
                "record TEXT NOT NULL, seq INTEGER)"
            )

    def __repr__(self) -> str:
        return "<SqliteTaskStore>"

    def _connect(self) -> sqlite3.Connection:
        db: sqlite3.Connection | None = getattr(self._local, "db", None)
        if db is None:
            db = sqlite3.connect(self._path, timeout=BUSY_TIMEOUT, isolation_level=None)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA busy_timeout={int(BUSY_TIMEOUT * 1000)}")
            self._local.db = db
        return db

    def put(self, record: Mapping[str, Any]) -> None:
        """Insert or replace the record of ``record["task_id"]``, in one transaction.

        >>> import tempfile, os
        >>> store = SqliteTaskStore(os.path.join(tempfile.mkdtemp(), "t.db"))
        >>> store.put({"task_id": "t", "endpoint": "e", "status": "working"})
        >>> store.put({"task_id": "t", "endpoint": "e", "status": "input_required"})
        >>> [r["status"] for r in store.records("e")]
        ['input_required']
        """
        plain = _plain(record)
        db = self._connect()
        db.execute(
            "INSERT INTO tasks (task_id, endpoint, record, seq) VALUES (?, ?, ?, "
            "(SELECT COALESCE(MAX(seq), 0) + 1 FROM tasks)) ON CONFLICT(task_id) DO UPDATE "
            "SET record = excluded.record, endpoint = excluded.endpoint",
            (plain["task_id"], plain["endpoint"], json.dumps(plain)),
        )

    def delete(self, task_id: str) -> None:
        """Forget a task; an unknown id is no error.

        >>> import tempfile, os
        >>> store = SqliteTaskStore(os.path.join(tempfile.mkdtemp(), "t.db"))
        >>> store.put({"task_id": "t", "endpoint": "e"}); store.delete("t"); store.records("e")
        []
        """
        self._connect().execute("DELETE FROM tasks WHERE task_id = ?", (task_id,))

    def records(self, endpoint: str) -> list[dict[str, Any]]:
        """The records of ``endpoint``, oldest first, as every process sees them.

        >>> import tempfile, os
        >>> path = os.path.join(tempfile.mkdtemp(), "t.db")
        >>> SqliteTaskStore(path).put({"task_id": "t", "endpoint": "e"})
        >>> [r["task_id"] for r in SqliteTaskStore(path).records("e")]  # another opener
        ['t']
        """
        rows = self._connect().execute(
            "SELECT record FROM tasks WHERE endpoint = ? ORDER BY seq", (endpoint,)
        )
        return [json.loads(row[0]) for row in rows]
