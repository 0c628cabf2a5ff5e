"""The scripted server's task state machine, as pure functions of a plan, the clock and the
client's messages (conduit_mcp.testing.scripted.task_state): no server, no threads."""

from __future__ import annotations

import os
import stat

import pytest

from conduit_mcp.testing.scripted.options import config_from_args
from conduit_mcp.testing.scripted.rules import ConfigError
from conduit_mcp.testing.scripted.task_state import (
    TaskTable,
    TaskTableError,
    advance,
    answer,
    cancel,
    iso,
    legacy_view,
    modern_view,
    new_task,
    next_change,
)
from conduit_mcp.testing.scripted.tasks import parse_job

T0 = 1_800_000_000.0


def job(**kw):
    plan = parse_job(kw)
    assert isinstance(plan, dict), plan
    return new_task("modern", "task_job", T0, **plan)


def test_a_task_works_for_its_seconds_then_completes():
    task = job(seconds=1.0, poll_ms=25, ttl_ms=5000, text="fine")
    assert task.status == "working" and next_change(task) == T0 + 1.0
    assert not advance(task, T0 + 0.999)
    assert advance(task, T0 + 1.0)
    view = modern_view(task, detailed=True)
    assert view["status"] == "completed"
    assert view["result"] == {"content": [{"type": "text", "text": "fine"}], "isError": False}
    assert (view["ttlMs"], view["pollIntervalMs"]) == (5000, 25)
    assert view["createdAt"] == iso(T0) and view["lastUpdatedAt"] == iso(T0 + 1.0)
    assert "result" not in modern_view(task, detailed=False)


def test_rounds_split_the_work_and_wait_for_every_answer():
    task = job(seconds=0.2, rounds=2, text="done")
    advance(task, T0 + 0.1)
    assert task.status == "input_required" and list(task.pending) == ["answer-1"]
    asked = modern_view(task, detailed=True)["inputRequests"]["answer-1"]
    assert asked["method"] == "elicitation/create"
    assert asked["params"]["requestedSchema"]["required"] == ["answer"]
    # An unknown or repeated key is ignored; the task waits on.
    assert answer(task, {"nope": {"action": "accept"}}, T0 + 0.15) == []
    assert task.status == "input_required"
    reply = {"action": "accept", "content": {"answer": "blue"}}
    assert answer(task, {"answer-1": reply}, T0 + 0.2) == ["answer-1"]
    assert task.status == "working" and next_change(task) == pytest.approx(T0 + 0.2 + 0.2 / 3)
    assert answer(task, {"answer-1": reply}, T0 + 0.21) == []  # answered already
    advance(task, T0 + 0.3)
    assert list(task.pending) == ["answer-2"]  # keys are never reused
    answer(task, {"answer-2": {"action": "decline"}}, T0 + 0.31)
    advance(task, T0 + 1)
    assert task.result is not None
    assert task.result["content"][0]["text"] == "done (answers: blue, <decline>)"


@pytest.mark.parametrize(
    ("outcome", "status", "field"),
    [
        ("error_result", "completed", "result"),
        ("failed", "failed", "error"),
        ("cancelled", "cancelled", None),
    ],
)
def test_outcomes(outcome, status, field):
    task = job(seconds=0, outcome=outcome)
    view = modern_view(task, detailed=True)
    assert view["status"] == status
    assert {"result", "error", "inputRequests"} & set(view) == ({field} if field else set())
    if outcome == "error_result":
        assert view["result"]["isError"] is True
    if outcome == "failed":
        assert view["error"] == {"code": -32603, "message": "task failed"}


def test_cancel_ends_a_running_task_but_not_an_ended_one():
    task = job(seconds=5)
    assert cancel(task, T0 + 1) and task.status == "cancelled"
    assert not cancel(task, T0 + 2)
    done = job(seconds=0)
    assert not cancel(done, T0) and done.status == "completed"


def test_legacy_view_uses_the_2025_11_25_names():
    view = legacy_view(job(seconds=1, poll_ms=70, ttl_ms=900))
    assert (view["ttl"], view["pollInterval"], view["status"]) == (900, 70, "working")
    assert "ttlMs" not in view and "resultType" not in view


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"seconds": -1}, "seconds must be a number in [0, 3600]"),
        ({"seconds": 3600.5}, "seconds must be a number in [0, 3600]"),
        ({"poll_ms": 0}, "poll_ms must be an integer in [1, 60000]"),
        ({"poll_ms": 60001}, "poll_ms must be an integer in [1, 60000]"),
        ({"ttl_ms": 0}, "ttl_ms must be an integer in [1, 86400000]"),
        ({"rounds": 17}, "rounds must be an integer in [0, 16]"),
        ({"rounds": True}, "rounds must be an integer in [0, 16]"),
        ({"outcome": "maybe"}, "outcome must be one of"),
        ({"text": 3}, "text must be a string"),
    ],
)
def test_bad_plans_say_what_is_wrong(args, problem):
    assert problem in parse_job(args)


def test_plan_limits_are_inclusive():
    assert isinstance(parse_job({"seconds": 3600, "poll_ms": 60000, "rounds": 16}), dict)
    assert isinstance(parse_job({"seconds": 0, "poll_ms": 1, "ttl_ms": 1, "rounds": 0}), dict)


def test_table_expires_tasks_and_holds_at_most_max_tasks():
    table = TaskTable(max_tasks=2)
    a, b = job(seconds=0, ttl_ms=1000), job(seconds=0, ttl_ms=5000)
    table.add(a, T0)
    table.add(b, T0)
    with pytest.raises(TaskTableError, match="holds 2 tasks already"):
        table.add(job(seconds=0), T0 + 0.5)
    assert table.find(a.task_id, "modern", T0 + 0.999) is a
    assert table.find(a.task_id, "legacy", T0) is None  # served in its own era only
    assert table.find(a.task_id, "modern", T0 + 1.0) == "expired"
    assert table.find(a.task_id, "modern", T0 + 1.0) is None  # forgotten
    table.add(job(seconds=0), T0 + 1.0)  # room again
    assert a.task_id not in repr(table) and b.task_id not in repr(table)


def test_durable_table_is_owner_only_and_survives_a_reload(tmp_path):
    path = tmp_path / "tasks.json"
    table = TaskTable(str(path))
    task = job(seconds=2, rounds=1)
    table.add(task, T0)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    again = TaskTable(str(path))
    found = again.find(task.task_id, "modern", T0 + 1.5)
    assert found is not None and not isinstance(found, str)
    assert found.status == "input_required"  # advanced by wall-clock time across the reload


def test_a_bad_durable_file_is_refused_at_start(tmp_path):
    bad = tmp_path / "tasks.json"
    bad.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read the durable task file"):
        config_from_args(["--tasks-durable", str(bad)])
    with pytest.raises(ConfigError, match="does not exist"):
        config_from_args(["--tasks-durable", str(tmp_path / "no" / "tasks.json")])
