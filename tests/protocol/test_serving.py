"""Serving a server request with the handler, as pure functions: params -> request values,
answers -> JSON results, and each refusal's JSON-RPC code and reason. No threads."""

from __future__ import annotations

from typing import Any

import pytest

from conduit_mcp.handler_types import ElicitResult, Root, SamplingResult
from conduit_mcp.protocol import serving
from conduit_mcp.protocol.serving import Refusal

SECRET = "s3cret-answer-771"

TEXT = {"type": "text", "text": "What is the capital of France?"}
SAMPLING = {"messages": [{"role": "user", "content": TEXT}], "maxTokens": 100}


def refusal(fn: Any, *args: Any) -> Refusal:
    with pytest.raises(Refusal) as info:
        fn(*args)
    return info.value


# -- sampling ------------------------------------------------------------------------------


def test_sampling_params_become_a_request_value() -> None:
    params = {
        **SAMPLING,
        "systemPrompt": "brief",
        "temperature": 1,
        "stopSequences": ["\n"],
        "modelPreferences": {"hints": [{"name": "claude"}]},
        "includeContext": "none",
        "metadata": {"a": 1},
        "tools": [{"name": "t", "inputSchema": {"type": "object"}}],
        "toolChoice": {"mode": "auto"},
    }
    r = serving.sampling_request(params)
    assert r.messages == SAMPLING["messages"]
    assert (r.max_tokens, r.system_prompt, r.temperature) == (100, "brief", 1.0)
    assert r.stop_sequences == ["\n"] and r.include_context == "none"
    assert r.tools == params["tools"] and r.tool_choice == {"mode": "auto"}
    assert r.raw is params
    assert "capital" not in repr(r)


@pytest.mark.parametrize(
    "params",
    [
        None,
        [],
        {"maxTokens": 1},
        {"messages": [1], "maxTokens": 1},
        {"messages": [], "maxTokens": "1"},
        {"messages": [], "maxTokens": True},
        {"messages": [], "maxTokens": 1, "temperature": "hot"},
        {"messages": [], "maxTokens": 1, "temperature": True},
        {"messages": [], "maxTokens": 1, "stopSequences": [1]},
        {"messages": [], "maxTokens": 1, "tools": ["t"]},
        {"messages": [], "maxTokens": 1, "systemPrompt": {"s": SECRET}},
    ],
)
def test_malformed_sampling_params_are_refused_as_invalid_params(params: Any) -> None:
    r = refusal(serving.sampling_request, params)
    assert (r.code, r.reason) == (-32602, "bad_params")
    assert SECRET not in r.message


def test_a_sampling_result_becomes_the_protocol_result() -> None:
    assert serving.sampling_result(SamplingResult("Paris", model="m", stop_reason=None)) == {
        "role": "assistant",
        "content": {"type": "text", "text": "Paris"},
        "model": "m",
    }
    tool_use = [{"type": "tool_use", "id": "1", "name": "t", "input": {}}]
    out = serving.sampling_result(
        SamplingResult(content=tool_use, model="m", stop_reason="toolUse")
    )
    assert out["content"] == tool_use and out["stopReason"] == "toolUse"
    as_dict = {"role": "assistant", "content": TEXT, "model": "m", "stopReason": "maxTokens"}
    assert serving.sampling_result(as_dict) == as_dict


@pytest.mark.parametrize(
    ("value", "says"),
    [
        (SECRET, "a str"),
        ({"role": "bot", "content": TEXT, "model": "m"}, "role"),
        ({"role": "assistant", "content": SECRET, "model": "m"}, "content"),
        ({"role": "assistant", "content": [], "model": "m"}, "content"),
        ({"role": "assistant", "content": [{"text": SECRET}], "model": "m"}, "content"),
        ({"role": "assistant", "content": TEXT}, "model"),
        ({"role": "assistant", "content": TEXT, "model": "m", "stopReason": 1}, "stopReason"),
        ({"role": "assistant", "content": {"type": "text", "text": b"x"}, "model": "m"}, "JSON"),
        ({"role": "assistant", "content": {"type": "n", "v": float("nan")}, "model": "m"}, "JSON"),
    ],
)
def test_a_bad_sampling_answer_is_a_bad_result_that_never_quotes_it(value: Any, says: str) -> None:
    r = refusal(serving.sampling_result, value)
    assert (r.code, r.reason) == (-32603, "bad_result")
    assert says in r.message and "create_message" in r.message
    assert SECRET not in r.message and "capital" not in r.message


# -- elicitation ---------------------------------------------------------------------------

FORM = {"message": "Your name?", "requestedSchema": {"type": "object", "properties": {}}}
URL = {"mode": "url", "message": "Sign in", "url": "https://auth.example/x", "elicitationId": "e1"}


def test_form_and_url_params_become_request_values() -> None:
    form = serving.elicit_request(FORM)
    assert (form.mode, form.message, form.requested_schema) == (
        "form",
        "Your name?",
        FORM["requestedSchema"],
    )
    url = serving.elicit_request(URL, ("form", "url"))
    assert (url.mode, url.url, url.elicitation_id) == ("url", URL["url"], "e1")
    assert repr(url) == "<ElicitRequest url>"
    modern = serving.elicit_request(
        {k: v for k, v in URL.items() if k != "elicitationId"}, ("url",)
    )
    assert modern.elicitation_id is None


@pytest.mark.parametrize(
    ("params", "modes"),
    [(URL, ("form",)), (FORM, ("url",)), ({**FORM, "mode": "sms"}, ("form", "url"))],
)
def test_an_undeclared_mode_is_refused_with_invalid_params(params: Any, modes: Any) -> None:
    r = refusal(serving.elicit_request, params, modes)
    assert (r.code, r.reason) == (-32602, "bad_mode")


@pytest.mark.parametrize(
    "params",
    [None, {"requestedSchema": {}}, {"message": "m"}, {"message": "m", "requestedSchema": []}],
)
def test_malformed_form_params_are_invalid_params(params: Any) -> None:
    assert refusal(serving.elicit_request, params).reason == "bad_params"


def test_malformed_url_params_are_invalid_params() -> None:
    r = refusal(serving.elicit_request, {"mode": "url", "message": "m"}, ("url",))
    assert (r.code, r.reason) == (-32602, "bad_params")


def test_elicit_answers_become_the_protocol_result() -> None:
    assert serving.elicit_result(
        ElicitResult.accept({"n": "o", "k": 1, "b": True, "l": ["a"]})
    ) == {
        "action": "accept",
        "content": {"n": "o", "k": 1, "b": True, "l": ["a"]},
    }
    assert serving.elicit_result(ElicitResult.accept()) == {"action": "accept"}
    assert serving.elicit_result(ElicitResult.decline()) == {"action": "decline"}
    assert serving.elicit_result({"action": "cancel"}) == {"action": "cancel"}


@pytest.mark.parametrize(
    "value",
    [
        None,
        SECRET,
        {"action": SECRET},
        {"action": "decline", "content": {"name": SECRET}},
        {"action": "accept", "content": SECRET},
        {"action": "accept", "content": {"nested": {"x": SECRET}}},
        {"action": "accept", "content": {"l": [SECRET, 1]}},
        {"action": "accept", "content": {"f": float("inf")}},
        {"action": "accept", "content": {"n": SECRET}, "extra": SECRET},
    ],
)
def test_a_bad_elicit_answer_is_a_bad_result_that_never_quotes_it(value: Any) -> None:
    r = refusal(serving.elicit_result, value)
    assert (r.code, r.reason) == (-32603, "bad_result")
    assert SECRET not in r.message and "elicit" in r.message


# -- roots ---------------------------------------------------------------------------------


def test_roots_in_every_accepted_form() -> None:
    value = [Root("file:///a", "a"), "file:///b", {"uri": "file:///c", "name": "c"}]
    expected = {
        "roots": [
            {"uri": "file:///a", "name": "a"},
            {"uri": "file:///b"},
            {"uri": "file:///c", "name": "c"},
        ]
    }
    assert serving.roots_result(value) == expected
    assert serving.roots_result(iter(value)) == expected
    assert serving.roots_result(expected) == expected
    assert serving.roots_result(()) == {"roots": []}


@pytest.mark.parametrize(
    "value",
    [
        None,
        "file:///a",
        {"uri": "file:///a"},
        [1],
        ["/home/" + SECRET],
        [{"uri": "https://x/" + SECRET}],
        [Root("file:///a", 3)],  # type: ignore[arg-type]
    ],
)
def test_bad_roots_are_a_bad_result_that_never_quotes_them(value: Any) -> None:
    r = refusal(serving.roots_result, value)
    assert (r.code, r.reason) == (-32603, "bad_result")
    assert SECRET not in r.message and "list_roots" in r.message


# -- codes ---------------------------------------------------------------------------------


def test_the_legacy_codes_and_reasons() -> None:
    assert (serving.declined("sampling/createMessage").code, serving.declined("x").message) == (
        -1,
        "User rejected sampling request",
    )
    assert serving.declined("roots/list").message == "User rejected roots request"
    cases = {
        "no_method": serving.no_method("x"),
        "bad_mode": serving.bad_mode("url"),
        "busy": serving.busy(8),
        "timeout": serving.timed_out("elicitation/create", 2.5),
        "raised": serving.raised("roots/list", ValueError(SECRET)),
    }
    assert {r.reason: r.code for r in cases.values()} == {
        "no_method": -32601,
        "bad_mode": -32602,
        "busy": -32603,
        "timeout": -32603,
        "raised": -32603,
    }
    assert all(reason == r.reason for reason, r in cases.items())
    assert "ValueError" in cases["raised"].message and SECRET not in cases["raised"].message
    assert "2.5 s" in cases["timeout"].message
    assert serving.bad_mode(SECRET).message.count(SECRET) == 0
    assert serving.encode_result("roots/list", ["file:///x"]) == {"roots": [{"uri": "file:///x"}]}
    assert refusal(serving.encode_result, "ping", {}).reason == "no_method"


def test_value_reprs_never_show_what_they_carry() -> None:
    values = [
        SamplingResult(SECRET, model="m"),
        ElicitResult.accept({"k": SECRET}),
        Root("file:///" + SECRET, "n"),
        serving.sampling_request(
            {
                "messages": [{"role": "user", "content": {"type": "text", "text": SECRET}}],
                "maxTokens": 1,
            }
        ),
        serving.elicit_request({"message": SECRET, "requestedSchema": {"s": SECRET}}),
    ]
    for value in values:
        assert SECRET not in repr(value) and SECRET not in str(value)
