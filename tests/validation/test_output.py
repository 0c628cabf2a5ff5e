"""structuredContent checked against the tool's outputSchema, through the public API against
the scripted server (docs/validation.md).

Each test adds its own tools to the scripted server (``add_tool`` with an ``output_schema``
and the ``result`` the tool answers), so the schema and the lie are both scripted.
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

import pykka
import pytest

import conduit_mcp as mcp
import conduit_mcp.testing
from conduit_mcp.validation import VALIDATORS

from .conftest import add_tool, structured

pytestmark = pytest.mark.timeout(60)

SECRET = "SECRET-value-9f3a"


def count_schema(title: str = "Count") -> dict[str, Any]:
    return {
        "title": title,
        "type": "object",
        "properties": {
            "count": {"type": "integer"},
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"id": {"type": "integer"}}},
            },
        },
        "required": ["count"],
    }


def tool_calls(scripted: Any, name: str) -> list[dict[str, Any]]:
    return [e for e in scripted.received("tools/call") if e["params"]["name"] == name]


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_a_result_that_matches_is_returned(scripted, start_client, protocol):
    client = start_client(scripted.stdio(), protocol=protocol)
    value = {"count": 2, "items": [{"id": 1}, {"id": 2}]}
    name = add_tool(client, output_schema=count_schema(), result=structured(value))
    result = client.call_tool(name)
    assert result.structured_content == value
    assert client.call_tool("add", {"a": 1, "b": 2}).structured_content == {"sum": 3}


@pytest.mark.parametrize("protocol", ["modern", "legacy"])
def test_a_mismatch_names_the_first_failing_path_never_the_value(scripted, start_client, protocol):
    client = start_client(scripted.stdio(), protocol=protocol)
    bad = {"count": 2, "items": [{"id": 1}, {"id": SECRET}, {"id": "second-bad"}]}
    name = add_tool(client, output_schema=count_schema(), result=structured(bad))
    with pytest.raises(mcp.Error) as caught:
        client.call_tool(name)
    error = caught.value
    assert (error.kind, error.reason) == ("protocol", "invalid_structured_content")
    assert error.data == {"tool": name, "path": "/items/1/id", "keyword": "type"}
    assert "/items/1/id" in error.message and name in error.message
    for text in (str(error), repr(error), error.message, repr(error.data)):
        assert SECRET not in text
    # the call was sent and answered: the server ran it once
    assert len(tool_calls(scripted, name)) == 1
    # the client is still fine
    assert client.call_tool("echo", {"text": "x"}).text == "x"


def test_no_structured_content_for_a_declared_schema_is_a_mismatch(scripted, start_client):
    client = start_client(scripted.stdio())
    name = add_tool(
        client,
        output_schema=count_schema(),
        result={"content": [{"type": "text", "text": "no structure"}]},
    )
    with pytest.raises(mcp.Error) as caught:
        client.call_tool(name)
    assert (caught.value.kind, caught.value.reason) == ("protocol", "invalid_structured_content")
    assert caught.value.data["path"] == ""
    assert "no structuredContent" in caught.value.message


def test_a_tool_error_result_is_not_checked(scripted, start_client):
    client = start_client(scripted.stdio())
    name = add_tool(
        client,
        output_schema=count_schema(),
        result={"content": [{"type": "text", "text": "it failed"}], "isError": True},
    )
    result = client.call_tool(name)
    assert result.is_error and result.text == "it failed"


def test_validate_output_false_accepts_what_the_server_sends(scripted, start_client):
    client = start_client(scripted.stdio(), validate_output=False)
    bad = {"count": "many"}
    name = add_tool(client, output_schema=count_schema(), result=structured(bad))
    assert client.call_tool(name).structured_content == bad
    # nothing extra is sent for checks that are off: no tools/list before the first call
    assert scripted.received("tools/list") == []


def test_a_tool_never_listed_has_the_list_fetched_first(scripted, start_client):
    client = start_client(scripted.stdio())
    assert client.cached_tools() is None
    result = client.call_tool("env", {"name": "HOME"})
    assert result.structured_content["name"] == "HOME"
    inbound = [e["method"] for e in scripted.log() if e.get("dir") == "in" and "method" in e]
    assert inbound.index("tools/list") < inbound.index("tools/call")
    assert "env" in {tool.name for tool in client.cached_tools() or ()}
    # once listed, no more listing for a listed tool
    lists = len(scripted.received("tools/list"))
    client.call_tool("env", {"name": "HOME"})
    client.call_tool("add", {"a": 1, "b": 1})
    assert len(scripted.received("tools/list")) == lists


def test_a_tool_added_after_listing_is_found_by_listing_again(scripted, start_client):
    client = start_client(scripted.stdio())
    client.list_all_tools()
    # add_tool announces list_changed; the new tool is missing from the cached list
    name = add_tool(client, output_schema=count_schema(), result=structured({"count": "x"}))
    with pytest.raises(mcp.Error) as caught:
        client.call_tool(name)
    assert caught.value.reason == "invalid_structured_content"


def test_a_tool_the_server_does_not_list_is_sent_unchecked(scripted, start_client):
    client = start_client(scripted.stdio())
    with pytest.raises(mcp.Error) as caught:
        client.call_tool("no_such_tool")
    # the server's own answer, not a validation error
    assert caught.value.reason != "invalid_structured_content"
    assert len(tool_calls(scripted, "no_such_tool")) == 1


def test_validators_are_compiled_once_per_definition(scripted, start_client):
    client = start_client(scripted.stdio())
    schema = count_schema(title=f"unique-{uuid.uuid4()}")
    name = add_tool(client, output_schema=schema, result=structured({"count": 1}))
    before = VALIDATORS.compiled
    for _ in range(5):
        client.call_tool(name)
    assert VALIDATORS.compiled == before + 1
    # a re-fetched list holds new schema objects with the same definition: nothing compiles
    client.list_all_tools(refresh=True)
    client.call_tool(name)
    assert VALIDATORS.compiled == before + 1


def test_an_output_schema_that_does_not_compile_refuses_before_sending(scripted, start_client):
    client = start_client(scripted.stdio())
    name = add_tool(client, output_schema={"type": "no-such-type"}, result=structured({}))
    with pytest.raises(mcp.Error) as caught:
        client.call_tool(name)
    assert (caught.value.kind, caught.value.reason) == ("protocol", "invalid_output_schema")
    assert "validate_output=False" in caught.value.message
    assert tool_calls(scripted, name) == []  # never sent: its result could never be checked
    unchecked = start_client(scripted.stdio(), validate_output=False)
    # a second process of the scripted server has no dynamic tools: the built-in one serves
    assert unchecked.call_tool("add", {"a": 1, "b": 2}).text == "3"


def test_asyncio_front_end_checks_the_same(scripted, start_client):
    client = start_client(scripted.stdio())
    good = add_tool(client, output_schema=count_schema(), result=structured({"count": 1}))
    bad = add_tool(client, output_schema=count_schema(), result=structured({"count": SECRET}))

    async def main() -> tuple[Any, mcp.Error]:
        result = await client.aio.call_tool(good)
        try:
            await client.aio.call_tool(bad)
        except mcp.Error as exc:
            return result, exc
        raise AssertionError("no error")

    result, error = asyncio.run(main())
    assert result.structured_content == {"count": 1}
    assert (error.reason, error.data["path"]) == ("invalid_structured_content", "/count")


def test_futures_front_end_checks_the_same_and_lists_first_off_the_caller(scripted, start_client):
    client = start_client(scripted.stdio())
    # never listed: the futures front end fetches the list in a worker, not in the caller
    future = client.futures.call_tool("env", {"name": "HOME"})
    assert isinstance(future, pykka.Future)
    assert future.get(timeout=20).structured_content["name"] == "HOME"
    bad = add_tool(client, output_schema=count_schema(), result=structured({"count": SECRET}))
    with pytest.raises(mcp.Error) as caught:
        client.futures.call_tool(bad).get(timeout=20)
    assert (caught.value.reason, caught.value.data["path"]) == (
        "invalid_structured_content",
        "/count",
    )
    assert SECRET not in str(caught.value)


def test_a_tool_list_the_client_cannot_take_leaves_calls_unchecked(scripted, start_client):
    # the tool list's response is over max_frame: the calls go on unchecked, listed once
    client = start_client(scripted.stdio(), max_frame=4096)
    for _ in range(3):
        assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    assert len(scripted.received("tools/list")) == 1
    with pytest.raises(mcp.Error) as caught:
        client.list_all_tools()
    assert caught.value.reason == "response_too_large"


def test_a_listing_that_times_out_leaves_the_call_unchecked(scripted, start_client):
    scripted.set_rules([{"match": {"method": "tools/list"}, "action": {"drop": True}, "times": 1}])
    client = start_client(scripted.stdio())
    # the listing gets the call's timeout, then the call its own: it goes on unchecked
    assert client.call_tool("add", {"a": 1, "b": 2}, timeout=0.5).text == "3"
    # and the connection's next calls do not wait on a listing again
    assert client.call_tool("add", {"a": 1, "b": 2}, timeout=0.5).text == "3"
    assert len(scripted.received("tools/list")) == 1
    # a list cached meanwhile is used: the user lists (answered now), the checks apply
    client.list_all_tools()
    name = add_tool(client, output_schema={"type": "integer"}, result=structured("x"))
    with pytest.raises(mcp.Error) as caught:
        client.call_tool(name)
    assert caught.value.reason == "invalid_structured_content"


def test_many_first_calls_from_an_actor_each_list_first_without_waiting_on_each_other(
    tmp_path, start_client
):
    # Eight futures calls from one actor on a client that never listed: each lists the tools
    # first in a worker. The listing is slow, so all eight wait for one at once; before, the
    # walk was a second job on the same four-worker pool and they waited on each other until
    # their deadline.
    server = mcp.testing.ScriptedServer(
        tmp_path, rules=[{"match": {"method": "tools/list"}, "action": {"delay": 0.3}}]
    )
    client = start_client(server.stdio())

    class Caller(pykka.ThreadingActor):
        def on_receive(self, message: Any) -> Any:
            futures = [client.futures.call_tool("add", {"a": n, "b": 1}) for n in range(8)]
            return [f.text for f in pykka.get_all(futures, timeout=15)]

    caller = Caller.start()
    try:
        assert caller.ask("go", timeout=20) == [str(n + 1) for n in range(8)]
    finally:
        caller.stop()
