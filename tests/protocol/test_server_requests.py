"""The rules of server requests and input_required rounds, without threads."""

from __future__ import annotations

import pytest

from conduit_mcp.protocol import server_requests as sr

CAPS = {"sampling": {}, "elicitation": {}, "roots": {}}


@pytest.mark.parametrize(
    ("method", "params", "caps", "expected"),
    [
        ("ping", None, {}, "ping"),
        ("roots/list", None, CAPS, "serve"),
        ("roots/list", None, {}, (-32601, "Method not found")),
        ("sampling/createMessage", {}, {"roots": {}}, (-32601, "Method not found")),
        ("vendor/x", {}, CAPS, (-32601, "Method not found")),
        ("elicitation/create", {"message": "m"}, CAPS, "serve"),
        (
            "elicitation/create",
            {"mode": "form"},
            {"elicitation": {"url": {}}},
            (-32602, "Unsupported elicitation mode: 'form'"),
        ),
        (
            "elicitation/create",
            {"mode": "url"},
            CAPS,
            (-32602, "Unsupported elicitation mode: 'url'"),
        ),
        ("elicitation/create", {"mode": "url"}, {"elicitation": {"form": {}, "url": {}}}, "serve"),
    ],
)
def test_legacy_disposition(method, params, caps, expected):
    assert sr.legacy_disposition(method, params, caps) == expected


def test_empty_elicitation_capability_means_form_only():
    assert sr.elicitation_modes({"elicitation": {}}) == {"form"}
    assert sr.elicitation_modes({}) == frozenset()


@pytest.mark.parametrize("result", [{"content": []}, {"resultType": "complete"}, [], None, "x"])
def test_complete_results(result):
    assert sr.classify_result("tools/call", result) is None


def test_input_required_with_requests_and_state():
    result = {
        "resultType": "input_required",
        "inputRequests": {
            "a": {"method": "elicitation/create", "params": {"message": "m"}},
            "b": {"method": "roots/list"},
        },
        "requestState": "opaque==",
    }
    verdict = sr.classify_result("prompts/get", result)
    assert verdict == sr.InputRequired(
        {"a": ("elicitation/create", {"message": "m"}), "b": ("roots/list", None)}, "opaque=="
    )


@pytest.mark.parametrize(
    ("method", "result", "reason"),
    [
        ("tools/call", {"resultType": "task"}, "unknown_result_type"),
        (
            "tools/list",
            {"resultType": "input_required", "requestState": "s"},
            "unexpected_input_required",
        ),
        ("tools/call", {"resultType": "input_required"}, "bad_input_required"),
        ("tools/call", {"resultType": "input_required", "requestState": 5}, "bad_input_required"),
        ("tools/call", {"resultType": "input_required", "inputRequests": []}, "bad_input_required"),
        ("tools/call", {"resultType": "input_required", "inputRequests": {}}, "bad_input_required"),
        (
            "tools/call",
            {"resultType": "input_required", "inputRequests": {"k": {"method": "tools/call"}}},
            "bad_input_required",
        ),
        (
            "tools/call",
            {
                "resultType": "input_required",
                "inputRequests": {"k": {"method": "roots/list", "params": 3}},
            },
            "bad_input_required",
        ),
    ],
)
def test_bad_rounds(method, result, reason):
    verdict = sr.classify_result(method, result)
    assert isinstance(verdict, sr.BadResult) and verdict.reason == reason


def test_a_hostile_result_type_is_bounded_in_the_message():
    verdict = sr.classify_result("tools/call", {"resultType": "x" * 10_000})
    assert isinstance(verdict, sr.BadResult) and len(verdict.message) < 200


def test_retry_params_echo_the_state_and_carry_nothing_older():
    base = {"name": "t", "arguments": {"a": 1}}
    first = sr.retry_params(base, {"k": {"action": "accept"}}, "s1")
    assert first == {
        "name": "t",
        "arguments": {"a": 1},
        "inputResponses": {"k": {"action": "accept"}},
        "requestState": "s1",
    }
    second = sr.retry_params(base, None, None)
    assert second == base and second is not base
    assert "inputResponses" not in base  # the original is never changed


def test_state_only_backoff_grows_to_a_cap():
    delays = [sr.state_only_delay(n) for n in range(1, 10)]
    assert delays[0] == sr.STATE_ONLY_FIRST
    assert delays == sorted(delays) and delays[-1] == sr.STATE_ONLY_CAP
