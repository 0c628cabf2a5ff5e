"""The task stores (conduit_mcp/task_store.py): what a record keeps, the SQLite file's
permissions, several writers at once, and the option's check."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest

import conduit_mcp as mcp

RECORD = {
    "task_id": "secret-task-id",
    "endpoint": "http:http://127.0.0.1:1/mcp",
    "era": "modern",
    "credential": None,
    "tool": "build",
    "arguments_digest": "0" * 64,
    "created": 1.0,
    "ttl": 60.0,
    "poll": 0.5,
    "status": "working",
    "answered": ["b", "a"],
}


@pytest.mark.parametrize("kind", ["memory", "sqlite"])
def test_a_record_keeps_its_fields_only(kind: str, tmp_path: Path) -> None:
    store = mcp.MemoryTaskStore() if kind == "memory" else mcp.SqliteTaskStore(tmp_path / "t.db")
    store.put({**RECORD, "arguments": {"password": "hunter2"}})
    [kept] = store.records(RECORD["endpoint"])
    assert kept == {**RECORD, "answered": ["a", "b"]}  # no argument values, keys sorted
    assert store.records("http:elsewhere") == []
    store.put({**RECORD, "status": "input_required"})
    assert [r["status"] for r in store.records(RECORD["endpoint"])] == ["input_required"]
    store.delete(RECORD["task_id"])
    assert store.records(RECORD["endpoint"]) == []
    with pytest.raises(mcp.Error) as err:
        store.put({"endpoint": "e"})
    assert (err.value.kind, err.value.reason) == ("argument", "record")
    assert "secret-task-id" not in repr(store)


def test_the_sqlite_file_is_owner_only_and_a_shared_one_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "new" / "deeper" / "tasks.db"
    mcp.SqliteTaskStore(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    os.chmod(path, 0o644)
    with pytest.raises(mcp.Error) as err:
        mcp.SqliteTaskStore(path)
    assert (err.value.kind, err.value.reason) == ("config", "task_store")
    assert "chmod 600" in err.value.message


def test_several_writers_at_once(tmp_path: Path) -> None:
    path = tmp_path / "tasks.db"
    stores = [mcp.SqliteTaskStore(path) for _ in range(4)]  # one per process, as it were
    errors: list[BaseException] = []

    def write(n: int) -> None:
        try:
            for i in range(40):
                stores[n].put({**RECORD, "task_id": f"t{n}-{i}"})
                if i % 2:
                    stores[n].delete(f"t{n}-{i}")
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(n,)) for n in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not errors
    kept = {r["task_id"] for r in mcp.SqliteTaskStore(path).records(RECORD["endpoint"])}
    assert kept == {f"t{n}-{i}" for n in range(4) for i in range(0, 40, 2)}


def test_the_option_wants_a_task_store() -> None:
    with pytest.raises(mcp.Error) as err:
        mcp.Client.start(mcp.Stdio("true"), task_store={"not": "a store"})
    assert (err.value.kind, err.value.reason) == ("config", "task_store")
    with pytest.raises(mcp.Error) as err:
        mcp.Client.start(mcp.Stdio("true"), tasks="on")
    assert (err.value.kind, err.value.reason) == ("config", "tasks")
