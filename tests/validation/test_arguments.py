"""``validate_arguments=True``: a call's arguments checked against the tool's cached
``inputSchema`` before anything is sent (docs/validation.md)."""

from __future__ import annotations

import asyncio

import pytest

import conduit_mcp as mcp

from .conftest import add_tool

pytestmark = pytest.mark.timeout(60)

SECRET = "SECRET-argument-5d1c"


def test_bad_arguments_fail_before_anything_is_sent(scripted, start_client):
    client = start_client(scripted.stdio(), validate_arguments=True)
    pid = client.call_tool("pid").text
    # crash's inputSchema: code is an integer in 0..255; a string never reaches the server
    with pytest.raises(mcp.Error) as caught:
        client.call_tool("crash", {"code": SECRET})
    error = caught.value
    assert (error.kind, error.reason) == ("argument", "invalid_arguments")
    assert error.data == {"tool": "crash", "path": "/code", "keyword": "type"}
    for text in (str(error), repr(error), repr(error.data)):
        assert SECRET not in text
    assert [e for e in scripted.received("tools/call") if e["params"]["name"] == "crash"] == []
    assert client.call_tool("pid").text == pid  # the server never crashed
    assert client.status().state == "ready"


def test_a_missing_required_argument_names_the_top_level(scripted, start_client):
    client = start_client(scripted.stdio(), validate_arguments=True)
    with pytest.raises(mcp.Error) as caught:
        client.call_tool("add", {"a": 1})
    assert caught.value.data == {"tool": "add", "path": "", "keyword": "required"}
    with pytest.raises(mcp.Error) as caught:
        client.call_tool("slow", {"seconds": -1})
    assert caught.value.data == {"tool": "slow", "path": "/seconds", "keyword": "minimum"}


def test_good_arguments_are_sent(scripted, start_client):
    client = start_client(scripted.stdio(), validate_arguments=True)
    assert client.call_tool("add", {"a": 2, "b": 3}).text == "5"


def test_off_by_default_the_server_judges(scripted, start_client):
    client = start_client(scripted.stdio())
    result = client.call_tool("add", {"a": 1, "b": "two"})
    assert result.is_error  # the server's own refusal, after a round trip
    assert len(scripted.received("tools/call")) == 1


def test_every_front_end_checks(scripted, start_client):
    client = start_client(scripted.stdio(), validate_arguments=True, validate_output=False)
    # never listed: the list is fetched first, then the arguments checked
    with pytest.raises(mcp.Error) as caught:
        client.futures.call_tool("add", {"a": "x", "b": 1}).get(timeout=20)
    assert caught.value.reason == "invalid_arguments"
    # listed now: the futures front end raises at once
    with pytest.raises(mcp.Error) as caught:
        client.futures.call_tool("add", {"a": "x", "b": 1})
    assert caught.value.reason == "invalid_arguments"

    async def main() -> mcp.Error:
        try:
            await client.aio.call_tool("add", {"a": 1, "b": []})
        except mcp.Error as exc:
            return exc
        raise AssertionError("no error")

    assert asyncio.run(main()).data["path"] == "/b"
    assert scripted.received("tools/call") == []


def test_an_input_schema_that_does_not_compile_leaves_the_server_to_judge(scripted, start_client):
    client = start_client(scripted.stdio(), validate_arguments=True)
    name = add_tool(client, input_schema={"type": "object", "properties": {"a": {"type": 7}}})
    result = client.call_tool(name, {"a": 1})
    assert result.structured_content == {"arguments": {"a": 1}}
