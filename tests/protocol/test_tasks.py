"""The client's task rules (conduit_mcp/protocol/tasks.py), without threads."""

from __future__ import annotations

import pytest

from conduit_mcp import Error
from conduit_mcp.protocol import tasks as t

MODERN = {
    "resultType": "task",
    "taskId": "secret-id-123",
    "status": "working",
    "createdAt": "2025-11-25T10:30:00Z",
    "lastUpdatedAt": "2025-11-25T10:30:00Z",
    "ttlMs": 60000,
    "pollIntervalMs": 5000,
}


def test_modern_create_task_result_is_parsed() -> None:
    info = t.parse_created(MODERN, "modern")
    assert info.task_id == "secret-id-123"
    assert info.status == "working"
    assert info.ttl == 60.0 and info.poll == 5.0
    assert info.created == t.parse_iso("2025-11-25T10:30:00+00:00")
    assert "secret-id-123" not in repr(info)


def test_legacy_create_task_result_is_parsed_from_its_task_field() -> None:
    answer = {"task": {"taskId": "x", "status": "working", "ttl": None, "pollInterval": 250}}
    assert t.is_task_answer(answer, "legacy")
    info = t.parse_created(answer, "legacy")
    assert info.ttl is None and info.poll == 0.25


@pytest.mark.parametrize(
    ("answer", "era"),
    [
        ({"content": [], "isError": False}, "modern"),
        ({"resultType": "complete", "content": []}, "modern"),
        ({"content": [], "task": {"taskId": "x"}}, "legacy"),
        ([], "legacy"),
    ],
)
def test_a_tool_result_is_not_a_task(answer: object, era: t.Era) -> None:
    assert not t.is_task_answer(answer, era)


@pytest.mark.parametrize(
    "bad",
    [
        {**MODERN, "taskId": ""},
        {**MODERN, "status": "running"},
        {**MODERN, "ttlMs": -1},
        {**MODERN, "pollIntervalMs": "soon"},
        {k: v for k, v in MODERN.items() if k != "resultType"},
    ],
)
def test_a_malformed_task_is_a_protocol_error_without_its_id(bad: dict[str, object]) -> None:
    with pytest.raises(Error) as info:
        t.parse_created(bad, "modern")
    assert (info.value.kind, info.value.reason) == ("protocol", "bad_task")
    assert "secret-id-123" not in str(info.value)


@pytest.mark.parametrize(
    ("status", "missing"),
    [("completed", "result"), ("failed", "error"), ("input_required", "inputRequests")],
)
def test_a_modern_status_must_carry_its_payload(status: str, missing: str) -> None:
    with pytest.raises(Error) as info:
        t.parse_status({"taskId": "a", "status": status}, "modern")
    assert info.value.reason == "bad_task"
    assert missing in str(info.value)


def test_poll_interval_is_floored_capped_and_defaulted() -> None:
    assert t.poll_delay(0.0) == t.POLL_FLOOR
    assert t.poll_delay(t.POLL_FLOOR) == t.POLL_FLOOR
    assert t.poll_delay(0.2) == 0.2
    assert t.poll_delay(t.POLL_CAP) == t.POLL_CAP
    assert t.poll_delay(t.POLL_CAP + 0.001) == t.POLL_CAP
    assert t.poll_delay(None) == t.DEFAULT_POLL


def test_ttl_backstop_at_its_edge() -> None:
    assert not t.expired(100.0, 60.0, 160.0)
    assert t.expired(100.0, 60.0, 160.001)
    assert not t.expired(100.0, None, 10**12)
    assert not t.expired(None, 60.0, 10**12)


def test_outcome_completed_with_is_error_stays_a_result() -> None:
    info = t.parse_status(
        {"taskId": "a", "status": "completed", "result": {"content": [], "isError": True}},
        "modern",
    )
    assert t.outcome(info) == t.Completed({"content": [], "isError": True})


def test_outcome_failed_is_the_json_rpc_error() -> None:
    info = t.parse_status(
        {"taskId": "a", "status": "failed", "error": {"code": -32603, "message": "boom"}},
        "modern",
    )
    out = t.outcome(info)
    assert isinstance(out, t.Failed)
    assert (out.error.kind, out.error.code, out.error.message) == ("server", -32603, "boom")


def test_outcome_cancelled_and_running() -> None:
    out = t.outcome(t.parse_status({"taskId": "a", "status": "cancelled"}, "modern"))
    assert isinstance(out, t.Cancelled) and out.error.kind == "cancelled"
    assert t.outcome(t.parse_status({"taskId": "a", "status": "working"}, "modern")) is None


def test_input_keys_are_answered_once_across_polls() -> None:
    book = t.InputBook()
    first = {"q1": {"method": "elicitation/create"}}
    assert list(book.fresh(first)) == ["q1"]
    book.mark(["q1"])
    assert book.fresh(first) == {}  # the same snapshot polled again
    second = {"q1": {"method": "elicitation/create"}, "q2": {"method": "roots/list"}}
    assert list(book.fresh(second)) == ["q2"]
    assert t.InputBook(["q1", "q2"]).fresh(second) == {}


def test_errors_for_lost_and_expired_tasks() -> None:
    lost = t.lost_error()
    assert (lost.kind, lost.reason, lost.code) == ("unavailable", "task_lost", -32602)
    gone = t.expired_error()
    assert (gone.kind, gone.reason) == ("timeout", "task_expired")


def test_argument_digest_hides_values() -> None:
    digest = t.argument_digest({"password": "hunter2"})
    assert "hunter2" not in digest and len(digest) == 64
    assert digest != t.argument_digest({"password": "hunter3"})


def test_extension_declaration_and_offer() -> None:
    caps = t.with_extension({"extensions": {"other/x": {"a": 1}}})
    assert caps["extensions"] == {"other/x": {"a": 1}, t.EXTENSION: {}}
    assert t.server_offers({"extensions": {t.EXTENSION: {}}})
    assert not t.server_offers({"extensions": []})


def test_a_created_task_carries_no_payload_and_may_need_details() -> None:
    created = t.parse_created({**MODERN, "status": "completed"}, "modern")
    assert t.needs_details(created, "modern")
    assert not t.needs_details(created, "legacy")
    assert not t.needs_details(
        t.parse_created({**MODERN, "status": "cancelled"}, "modern"), "modern"
    )
