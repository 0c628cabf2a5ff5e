"""protocol.results and conduit_mcp.types: typed, immutable results."""

from __future__ import annotations

import dataclasses

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conduit_mcp.errors import Error
from conduit_mcp.protocol.results import (
    check_result_type,
    parse_call_tool,
    parse_complete,
    parse_get_prompt,
    parse_page,
    parse_progress,
    parse_read_resource,
    parse_server_info,
)
from conduit_mcp.types import (
    CallToolResult,
    Icon,
    Page,
    Progress,
    Prompt,
    Resource,
    ResourceTemplate,
    ServerInfo,
    Tool,
    ToolAnnotations,
)

pytestmark = pytest.mark.timeout(20)

TOOL = {
    "name": "add",
    "title": "Add",
    "description": "Adds two numbers",
    "inputSchema": {"type": "object", "properties": {"a": {"type": "integer"}}},
    "outputSchema": {"type": "object"},
    "annotations": {"readOnlyHint": True},
    "icons": [{"src": "https://x/icon.png"}],
}


def assert_bad(fn: object, *args: object, reason: str = "bad_result") -> Error:
    with pytest.raises(Error) as info:
        fn(*args)  # type: ignore[operator]
    assert (info.value.kind, info.value.reason) == ("protocol", reason)
    return info.value


# -- resultType ----------------------------------------------------------------------------


@pytest.mark.parametrize("result", [{}, {"resultType": "complete"}, {"resultType": None}])
def test_complete_result_types(result: dict) -> None:
    assert check_result_type(result) is None


def test_input_required_is_unsupported_for_now() -> None:
    assert_bad(
        check_result_type, {"resultType": "input_required"}, reason="input_required_unsupported"
    )
    assert_bad(
        parse_call_tool,
        {"resultType": "input_required", "inputRequests": {}},
        reason="input_required_unsupported",
    )


@pytest.mark.parametrize("value", ["task", "COMPLETE", "", 1, ["complete"]])
def test_unknown_result_type_is_invalid(value: object) -> None:
    assert_bad(check_result_type, {"resultType": value}, reason="unknown_result_type")
    assert_bad(
        parse_page, "tools", {"resultType": value, "tools": []}, reason="unknown_result_type"
    )


# -- pages -----------------------------------------------------------------------------------


def test_tools_page() -> None:
    result = {"resultType": "complete", "tools": [TOOL], "ttlMs": 300000, "cacheScope": "public"}
    page = parse_page("tools", result)
    assert isinstance(page, Page)
    assert page.next_cursor is None and page.is_last
    (tool,) = page.items
    assert tool == Tool(
        name="add",
        description="Adds two numbers",
        input_schema=TOOL["inputSchema"],
        output_schema={"type": "object"},
        title="Add",
        annotations=ToolAnnotations(read_only_hint=True),
        icons=(Icon("https://x/icon.png"),),
        raw=TOOL,
    )
    assert tool.raw["icons"] == TOOL["icons"]  # unnamed fields stay reachable
    assert page.raw["ttlMs"] == 300000 and page.raw["cacheScope"] == "public"


def test_tool_lenient_fields() -> None:
    page = parse_page("tools", {"tools": [{"name": "x", "annotations": {"title": "Old"}}]})
    tool = page.items[0]
    assert (tool.description, tool.input_schema, tool.output_schema) == (None, {}, None)
    assert tool.title == "Old"  # pre-2025-06-18 display name


@pytest.mark.parametrize(
    "tool",
    [
        {},
        {"name": 3},
        {"name": "x", "inputSchema": "object"},
        {"name": "x", "description": 5},
        {"name": "x", "outputSchema": True},
        "add",
    ],
)
def test_malformed_tool(tool: object) -> None:
    err = assert_bad(parse_page, "tools", {"tools": [tool]})
    assert "tools[0]" in err.message


@pytest.mark.parametrize("cursor", ["", "next-page-cursor", "0"])
def test_empty_string_cursor_is_not_the_end(cursor: str) -> None:
    page = parse_page("prompts", {"prompts": [], "nextCursor": cursor})
    assert page.next_cursor == cursor
    assert not page.is_last


def test_null_cursor_is_the_end() -> None:
    assert parse_page("resources", {"resources": [], "nextCursor": None}).is_last


@pytest.mark.parametrize(
    "result",
    [None, [], "x", {}, {"tools": {}}, {"tools": None}, {"tools": [], "nextCursor": 3}],
)
def test_malformed_page(result: object) -> None:
    assert_bad(parse_page, "tools", result)


def test_prompts_page() -> None:
    item = {"name": "p", "description": "d", "arguments": [{"name": "city", "required": True}]}
    page = parse_page("prompts", {"prompts": [item, {"name": "q"}]})
    assert page.items == (
        Prompt("p", "d", ({"name": "city", "required": True},), item),
        Prompt("q", None, (), {"name": "q"}),
    )
    assert_bad(parse_page, "prompts", {"prompts": [{"name": "p", "arguments": [1]}]})
    assert_bad(parse_page, "prompts", {"prompts": [{"name": "p", "arguments": {}}]})


def test_resources_page() -> None:
    item = {"uri": "file:///a", "name": "a", "mimeType": "text/plain", "size": 3}
    page = parse_page("resources", {"resources": [item], "nextCursor": "c"})
    assert page.items == (Resource("file:///a", "a", None, "text/plain", item, size=3),)
    assert page.next_cursor == "c"
    assert_bad(parse_page, "resources", {"resources": [{"name": "a"}]})
    assert_bad(parse_page, "resources", {"resources": [{"uri": "file:///a"}]})


def test_resource_templates_page() -> None:
    item = {"uriTemplate": "demo://{id}", "name": "t", "description": "d"}
    page = parse_page("resource_templates", {"resourceTemplates": [item]})
    assert page.items == (ResourceTemplate("demo://{id}", "t", "d", None, item),)
    assert_bad(parse_page, "resource_templates", {"resources": [item]})


def test_unknown_page_kind() -> None:
    with pytest.raises(Error) as info:
        parse_page("widgets", {"widgets": []})  # type: ignore[arg-type]
    assert (info.value.kind, info.value.reason) == ("argument", "kind")


# -- tools/call ------------------------------------------------------------------------------


def test_call_tool_result() -> None:
    result = {
        "content": [
            {"type": "text", "text": "one"},
            {"type": "image", "data": "AAA", "mimeType": "image/png"},
            {"type": "text", "text": "two"},
        ],
        "structuredContent": {"sum": 3},
        "isError": False,
        "_meta": {"k": 1},
    }
    got = parse_call_tool(result)
    assert isinstance(got, CallToolResult)
    assert got.text == "one\ntwo"
    assert got.structured_content == {"sum": 3}
    assert got.is_error is False
    assert got.meta == {"k": 1}
    assert len(got.content) == 3 and got.raw is result


def test_call_tool_error_is_a_result() -> None:
    got = parse_call_tool({"content": [{"type": "text", "text": "boom"}], "isError": True})
    assert got.is_error is True and got.text == "boom"


def test_call_tool_lenient_absent_fields() -> None:
    got = parse_call_tool({"structuredContent": [1]})
    assert (got.content, got.is_error, got.meta, got.text) == ((), False, None, "")
    assert parse_call_tool({"content": [], "isError": None}).is_error is False


@pytest.mark.parametrize(
    "result",
    [
        None,
        [],
        {"content": "text"},
        {"content": ["text"]},
        {"content": [], "isError": "yes"},
        {"content": [], "isError": 1},
        {"content": [], "_meta": []},
    ],
)
def test_call_tool_malformed(result: object) -> None:
    assert_bad(parse_call_tool, result)


def test_text_ignores_odd_blocks() -> None:
    got = parse_call_tool({"content": [{"type": "text"}, {"type": "text", "text": 1}, {}]})
    assert got.text == ""


# -- prompts/get, resources/read, completion/complete ---------------------------------------


def test_get_prompt() -> None:
    msg = {"role": "user", "content": {"type": "text", "text": "hi"}}
    got = parse_get_prompt({"description": "d", "messages": [msg]})
    assert (got.description, got.messages) == ("d", (msg,))
    assert_bad(parse_get_prompt, {"description": "d"})
    assert_bad(parse_get_prompt, {"messages": [1]})
    assert_bad(parse_get_prompt, {"messages": [], "description": 3})


def test_read_resource() -> None:
    content = {"uri": "file:///a", "text": "x"}
    got = parse_read_resource({"contents": [content], "ttlMs": 10, "cacheScope": "private"})
    assert got.contents == (content,)
    assert got.raw["ttlMs"] == 10 and got.raw["cacheScope"] == "private"
    assert_bad(parse_read_resource, {})
    assert_bad(parse_read_resource, {"contents": ["x"]})


def test_complete() -> None:
    got = parse_complete({"completion": {"values": ["a", "b"], "total": 10, "hasMore": True}})
    assert (got.values, got.total, got.has_more) == (("a", "b"), 10, True)
    minimal = parse_complete({"completion": {"values": []}})
    assert (minimal.values, minimal.total, minimal.has_more) == ((), None, False)


@pytest.mark.parametrize(
    "result",
    [
        {},
        {"completion": []},
        {"completion": {}},
        {"completion": {"values": [1]}},
        {"completion": {"values": [], "total": "3"}},
        {"completion": {"values": [], "hasMore": "no"}},
    ],
)
def test_complete_malformed(result: object) -> None:
    assert_bad(parse_complete, result)


# -- progress ------------------------------------------------------------------------------


def test_parse_progress() -> None:
    params = {"progressToken": "abc", "progress": 50, "total": 100, "message": "half"}
    assert parse_progress(params) == ("abc", Progress(50.0, 100.0, "half"))
    assert parse_progress({"progressToken": 7, "progress": 0.5}) == (7, Progress(0.5, None, None))
    odd = {"progressToken": 7, "progress": 1, "total": "x", "message": 3}
    assert parse_progress(odd) == (7, Progress(1.0, None, None))


@pytest.mark.parametrize(
    "params",
    [
        None,
        [],
        {},
        {"progress": 1},
        {"progressToken": None, "progress": 1},
        {"progressToken": True, "progress": 1},
        {"progressToken": 1.5, "progress": 1},
        {"progressToken": "t"},
        {"progressToken": "t", "progress": "1"},
        {"progressToken": "t", "progress": True},
    ],
)
def test_parse_progress_malformed_is_none(params: object) -> None:
    assert parse_progress(params) is None


# -- server info and the value types --------------------------------------------------------


def test_parse_server_info() -> None:
    raw = {"name": "s", "version": "1", "title": "S", "websiteUrl": "https://s"}
    assert parse_server_info(raw) == ServerInfo("s", "1", "S", raw, website_url="https://s")
    assert parse_server_info({"name": 1}) == ServerInfo("", "", None, {"name": 1})
    assert parse_server_info(None) is None
    assert parse_server_info("s") is None


def test_values_are_frozen_and_repr_hides_raw() -> None:
    tool = parse_page("tools", {"tools": [TOOL]}).items[0]
    with pytest.raises(dataclasses.FrozenInstanceError):
        tool.name = "x"  # type: ignore[misc]
    assert "icon.png" not in repr(tool)
    assert not hasattr(tool, "__dict__")  # slotted
    progress = Progress(1.0)
    with pytest.raises(dataclasses.FrozenInstanceError):
        progress.progress = 2.0  # type: ignore[misc]


def test_raw_stays_serialisable() -> None:
    page = parse_page("tools", {"tools": [TOOL], "nextCursor": ""})
    assert orjson.loads(orjson.dumps(page.raw)) == {"tools": [TOOL], "nextCursor": ""}
    assert orjson.loads(orjson.dumps(page.items[0].raw)) == TOOL


def test_parsers_never_leak_key_or_type_errors() -> None:
    junk: list[object] = [None, 0, "x", [], {}, {"a": None}, [None], {"tools": [None]}]
    parsers = [
        lambda r: parse_page("tools", r),
        lambda r: parse_page("prompts", r),
        lambda r: parse_page("resources", r),
        lambda r: parse_page("resource_templates", r),
        parse_call_tool,
        parse_get_prompt,
        parse_read_resource,
        parse_complete,
    ]
    for parse in parsers:
        for value in junk:
            try:
                parse(value)
            except Error as e:
                assert e.kind == "protocol"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "tools",
                    "content",
                    "name",
                    "uri",
                    "messages",
                    "contents",
                    "completion",
                    "values",
                    "isError",
                    "resultType",
                    "nextCursor",
                    "inputSchema",
                    "arguments",
                    "text",
                    "type",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(json_values)
def test_parsers_raise_only_protocol_errors(value: object) -> None:
    parsers = [
        lambda r: parse_page("tools", r),
        lambda r: parse_page("prompts", r),
        lambda r: parse_page("resources", r),
        lambda r: parse_page("resource_templates", r),
        parse_call_tool,
        parse_get_prompt,
        parse_read_resource,
        parse_complete,
    ]
    for parse in parsers:
        try:
            parse(value)
        except Error as e:
            assert e.kind == "protocol"
    parse_progress(value)
    parse_server_info(value)
