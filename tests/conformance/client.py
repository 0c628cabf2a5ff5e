"""The client program the official MCP conformance harness drives (``conformance client
--command ...``), written on conduit-mcp's public API only, as a user would write it.

The harness runs the command through ``/bin/sh`` with the scenario server's URL appended as
the last argument, names the scenario in ``MCP_CONFORMANCE_SCENARIO``, hands out exact calls
in ``MCP_CONFORMANCE_CONTEXT`` (JSON) and, from 0.2.x on, the spec version under test in
``MCP_CONFORMANCE_PROTOCOL_VERSION``. It then judges what this program sent. Each scenario
expects some actions of a client (README, "Conformance"); this program does exactly those
and exits 0, or prints what went wrong and exits 1.

Run by hand: ``python tests/conformance/client.py http://localhost:PORT/mcp`` with
``MCP_CONFORMANCE_SCENARIO`` set.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import conduit_mcp as mcp

# Every step of a scenario is one short request against a local mock; a hang is a failure.
TIMEOUT = 20.0

Scenario = Callable[[mcp.Client, dict[str, Any]], None]


def stub_value(schema: Any) -> Any:
    """A value of the schema's type, for a tool's required arguments that the scenario does
    not care about (it checks what the client sends, not what the tool computes)."""
    kind = schema.get("type") if isinstance(schema, dict) else None
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), None)
    if isinstance(schema, dict) and "enum" in schema and schema["enum"]:
        return schema["enum"][0]
    return {
        "string": "x",
        "integer": 1,
        "number": 1,
        "boolean": True,
        "object": {},
        "array": [],
        "null": None,
    }.get(kind, "x")


def stub_arguments(tool: mcp.Tool) -> dict[str, Any]:
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    properties = schema.get("properties") or {}
    return {name: stub_value(properties.get(name)) for name in schema.get("required") or ()}


def schema_defaults(schema: Any) -> dict[str, Any]:
    """Each property's ``default``: what a user who accepts without typing anything answers
    (a form UI pre-fills the defaults)."""
    properties = (schema or {}).get("properties") or {}
    return {
        name: prop["default"]
        for name, prop in properties.items()
        if isinstance(prop, dict) and "default" in prop
    }


def make_handler() -> Any:
    """The user's side of what the server asks (``mcp.Handler``; README, "Handler"). A form
    elicitation is accepted with the schema's defaults, as a person who accepts a pre-filled
    form without typing answers (a boolean without a default is answered ``True``: the user
    confirms). Sampling and roots exist so that the client declares every capability
    (``request-metadata`` checks each one in ``_meta``); no scenario here calls them."""

    class ConformanceHandler(mcp.Handler):  # type: ignore[name-defined,misc]
        def elicit(self, request: Any, ctx: Any) -> Any:
            schema = request.requested_schema or {}
            content = schema_defaults(schema)
            for name, prop in (schema.get("properties") or {}).items():
                if name not in content and isinstance(prop, dict) and prop.get("type") == "boolean":
                    content[name] = True
            return mcp.ElicitResult.accept(content)  # type: ignore[attr-defined]

        def create_message(self, request: Any, ctx: Any) -> Any:
            return mcp.SamplingResult("conformance", model="none")  # type: ignore[attr-defined]

        def list_roots(self, ctx: Any) -> Any:
            return []

    return ConformanceHandler()


def expect_text(result: mcp.CallToolResult, what: str) -> None:
    if result.is_error:
        raise SystemExit(f"{what}: the tool answered an error: {result.text!r}")


# -- the scenarios ---------------------------------------------------------------------------


def initialize(client: mcp.Client, context: dict[str, Any]) -> None:
    """The handshake alone: ``await_ready`` in ``main`` has done it; list tools as a client
    that goes on to use the server would."""
    client.list_tools(timeout=TIMEOUT)


def tools_call(client: mcp.Client, context: dict[str, Any]) -> None:
    client.list_all_tools(timeout=TIMEOUT)
    expect_text(client.call_tool("add_numbers", {"a": 5, "b": 3}, timeout=TIMEOUT), "add_numbers")


def elicitation_defaults(client: mcp.Client, context: dict[str, Any]) -> None:
    client.list_all_tools(timeout=TIMEOUT)
    result = client.call_tool("test_client_elicitation_defaults", {}, timeout=TIMEOUT)
    expect_text(result, "test_client_elicitation_defaults")


def sse_retry(client: mcp.Client, context: dict[str, Any]) -> None:
    """The server closes the call's stream after a priming event (``retry: 500``); the
    answer comes on the resumed stream."""
    client.list_all_tools(timeout=TIMEOUT)
    expect_text(client.call_tool("test_reconnection", {}, timeout=TIMEOUT), "test_reconnection")


def request_state(client: mcp.Client, context: dict[str, Any]) -> None:
    client.list_all_tools(timeout=TIMEOUT)
    for name in (
        "test_mrtr_echo_state",
        "test_mrtr_unrelated",
        "test_mrtr_no_state",
        "test_mrtr_no_result_type",
    ):
        expect_text(client.call_tool(name, {}, timeout=TIMEOUT), name)


def standard_headers(client: mcp.Client, context: dict[str, Any]) -> None:
    """One request of each kind that carries ``Mcp-Method`` (and ``Mcp-Name``)."""
    tools = client.list_all_tools(timeout=TIMEOUT)
    for tool in tools[:1]:
        client.call_tool(tool.name, stub_arguments(tool), timeout=TIMEOUT)
    resources = client.list_all_resources(timeout=TIMEOUT)
    for resource in resources[:1]:
        client.read_resource(resource.uri, timeout=TIMEOUT)
    prompts = client.list_all_prompts(timeout=TIMEOUT)
    for prompt in prompts[:1]:
        arguments = {a["name"]: "x" for a in prompt.arguments if a.get("required")}
        client.get_prompt(prompt.name, arguments, timeout=TIMEOUT)


def custom_headers(client: mcp.Client, context: dict[str, Any]) -> None:
    """The context's exact calls, after listing tools (the client learns each tool's
    ``x-mcp-header`` annotations from the list)."""
    client.list_all_tools(timeout=TIMEOUT)
    for call in context.get("toolCalls") or ():
        client.call_tool(call["name"], call.get("arguments") or {}, timeout=TIMEOUT)


def invalid_tool_headers(client: mcp.Client, context: dict[str, Any]) -> None:
    """Every tool the client kept: the invalid annotations must have been left out."""
    for tool in client.list_all_tools(timeout=TIMEOUT):
        client.call_tool(tool.name, stub_arguments(tool), timeout=TIMEOUT)


def list_tools_only(client: mcp.Client, context: dict[str, Any]) -> None:
    client.list_all_tools(timeout=TIMEOUT)


def schema_preservation(client: mcp.Client, context: dict[str, Any]) -> None:
    """Round-trip the focal tool's ``inputSchema`` as received: nothing stripped."""
    tools = {tool.name: tool for tool in client.list_all_tools(timeout=TIMEOUT)}
    focal = tools.get("json_schema_2020_12_tool")
    if focal is None:
        raise SystemExit(f"no json_schema_2020_12_tool among {sorted(tools)}")
    result = client.call_tool("json_schema_echo", {"schema": focal.input_schema}, timeout=TIMEOUT)
    expect_text(result, "json_schema_echo")


SCENARIOS: dict[str, Scenario] = {
    "initialize": initialize,
    "tools_call": tools_call,
    "elicitation-sep1034-client-defaults": elicitation_defaults,
    "sse-retry": sse_retry,
    "request-metadata": list_tools_only,
    "sep-2322-client-request-state": request_state,
    "http-standard-headers": standard_headers,
    "http-custom-headers": custom_headers,
    "http-invalid-tool-headers": invalid_tool_headers,
    "json-schema-ref-no-deref": list_tools_only,
    "json-schema-2020-12-preservation": schema_preservation,
}
#: Scenarios that need a handler: the server asks for an elicitation, or (``request-metadata``)
#: checks that every client capability is declared, which takes the methods that serve them.
NEEDS_HANDLER = frozenset(
    {"elicitation-sep1034-client-defaults", "sep-2322-client-request-state", "request-metadata"}
)


def options(scenario: str) -> dict[str, Any]:
    chosen: dict[str, Any] = {"request_timeout": TIMEOUT, "max_reconnects": 2}
    if scenario in NEEDS_HANDLER:
        chosen["handler"] = make_handler()
    return chosen


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: client.py [...] SERVER_URL (the harness appends it)", file=sys.stderr)
        return 2
    url = argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    run = SCENARIOS.get(scenario)
    if run is None:
        print(f"unknown scenario {scenario!r}; known: {sorted(SCENARIOS)}", file=sys.stderr)
        return 2
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with mcp.Client.start(mcp.Http(url), protocol="auto", **options(scenario)) as client:
        client.await_ready(timeout=TIMEOUT)
        run(client, context)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except mcp.Error as error:
        print(f"conformance client: {error!r}", file=sys.stderr)
        sys.exit(1)
