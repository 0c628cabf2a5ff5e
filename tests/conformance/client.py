"""The client program the official MCP conformance harness drives (``conformance client
--command ...``), written on conduit-mcp's public API only, as a user would write it.

The harness runs the command through ``/bin/sh`` with the scenario server's URL appended as
the last argument, names the scenario in ``MCP_CONFORMANCE_SCENARIO``, hands out exact calls
in ``MCP_CONFORMANCE_CONTEXT`` (JSON) and, from 0.2.x on, the spec version under test in
``MCP_CONFORMANCE_PROTOCOL_VERSION``. It then judges what this program sent. Each scenario
expects some actions of a client (docs/development.md, "Conformance"); this program does exactly those
and exits 0, or prints what went wrong and exits 1.

The ``auth/*`` scenarios (tests/conformance/AUTH_SCENARIOS.md says what each checks) run
through ``mcp.Http(url, auth=mcp.OAuth(...))`` the way a headless service does it: the
library hands the authorization URL to ``on_authorize``; a stand-in for the person fetches it
without following the redirect (the harness's authorization server answers with a 302 at
once) and pastes the ``Location`` back with ``client.authorize``. Calls made while a person
must act fail with ``auth``/``authorization_required`` and are made again once the person is
done. The client-credentials, enterprise-managed authorization (cross-app access) and
workload identity scenarios have no person at all: the context's credentials go into
``mcp.OAuth`` and the library performs every grant. The DPoP ones need no option: the library
binds its tokens because the authorization server advertises DPoP and the MCP server
challenges with the DPoP scheme.

Run by hand: ``python tests/conformance/client.py http://localhost:PORT/mcp`` with
``MCP_CONFORMANCE_SCENARIO`` set.
"""

from __future__ import annotations

import json
import os
import queue
import sys
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any, TypeVar

import conduit_mcp as mcp

# Every step of a scenario is one short request against a local mock; a hang is a failure.
TIMEOUT = 20.0

Scenario = Callable[[mcp.Client, dict[str, Any]], None]
T = TypeVar("T")


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
    }.get(kind if isinstance(kind, str) else "", "x")


def stub_arguments(tool: mcp.Tool) -> dict[str, Any]:
    schema = tool.input_schema if isinstance(tool.input_schema, dict) else {}
    properties = schema.get("properties") or {}
    return {name: stub_value(properties.get(name)) for name in schema.get("required") or ()}


def make_handler() -> Any:
    """The user's side of what the server asks (``mcp.Handler``; docs/handler.md). A form
    elicitation is accepted as a person who accepts a pre-filled form without typing: the
    handler answers only the booleans that have no default (``True``: the user confirms),
    and the library fills in the schema's defaults for every field left out (SEP-1034, the
    ``elicitation-sep1034-client-defaults`` scenario). Sampling and roots exist so that the
    client declares every capability (``request-metadata`` checks each one in ``_meta``); no
    scenario here calls them."""

    class ConformanceHandler(mcp.Handler):
        def elicit(self, request: Any, ctx: Any) -> Any:
            schema = request.requested_schema or {}
            confirmed = {
                name: True
                for name, prop in (schema.get("properties") or {}).items()
                if isinstance(prop, dict)
                and prop.get("type") == "boolean"
                and "default" not in prop
            }
            return mcp.ElicitResult.accept(confirmed)

        def create_message(self, request: Any, ctx: Any) -> Any:
            return mcp.SamplingResult("conformance", model="none")

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


def list_skills_only(client: mcp.Client, context: dict[str, Any]) -> None:
    """List the skills and load none: the listing must read no skill file."""
    skills = client.list_skills(timeout=TIMEOUT)
    print(f"conformance client: {len(skills)} skill(s), none loaded", file=sys.stderr)


def load_tampered_skill(client: mcp.Client, context: dict[str, Any]) -> None:
    """Load every listed skill: the server tampers with one, whose load must be refused
    (``protocol``/``skill_mismatch``) with nothing read after the file that failed."""
    for skill in client.list_skills(timeout=TIMEOUT):
        try:
            client.load_skill(skill, timeout=TIMEOUT)
        except mcp.Error as error:
            if (error.kind, error.reason) != ("protocol", "skill_mismatch"):
                raise
            print(f"{REFUSED_MARK} protocol/{error.reason}: {error.message}", file=sys.stderr)
            return
    raise SystemExit("conformance client: every skill loaded; a refusal was expected")


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
    "sep-2640-client-no-prefetch": list_skills_only,
    "sep-2640-client-verify-digest": load_tampered_skill,
    "sep-2640-client-verify-size": load_tampered_skill,
    "sep-2640-client-verify-frontmatter": load_tampered_skill,
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


# -- the auth scenarios ----------------------------------------------------------------------

#: The client ID metadata document URL the harness expects (``auth/basic-cimd``); it is never
#: fetched. Given wherever no client is pre-registered: the library uses it only where the
#: authorization server says it supports such documents, and registers dynamically elsewhere.
CIMD_URL = "https://conformance-test.local/client-metadata.json"
#: Where the authorization server sends the person back. Nothing listens there: the harness
#: answers ``/authorize`` with a 302 at once, and the ``Location`` is pasted back.
REDIRECT_URI = "http://localhost:3000/callback"
#: How many times one step waits for a person before giving up. Above the harness's own bound
#: of 3 authorizations (``auth/scope-retry-limit``), so that the library's limit is what the
#: harness measures, not this program's.
MAX_ROUNDS = 6
#: Scenarios where the right outcome is a refusal (the harness allows a failing client there),
#: and the ``auth`` reasons that name it. Anything else, or no refusal, is a failure here.
REFUSALS: dict[str, frozenset[str]] = {
    "auth/resource-mismatch": frozenset({"resource_mismatch"}),
    "auth/iss-supported-missing": frozenset({"issuer_mismatch"}),
    "auth/iss-wrong-issuer": frozenset({"issuer_mismatch"}),
    "auth/iss-unexpected": frozenset({"issuer_mismatch"}),
    "auth/iss-normalized": frozenset({"issuer_mismatch"}),
    "auth/metadata-issuer-mismatch": frozenset({"issuer_mismatch", "discovery_failed"}),
    "auth/scope-retry-limit": frozenset({"step_up_limit", "insufficient_scope"}),
    # The skills extension: the server tampers with a skill (load_tampered_skill).
    "sep-2640-client-verify-digest": frozenset({"skill_mismatch"}),
    "sep-2640-client-verify-size": frozenset({"skill_mismatch"}),
    "sep-2640-client-verify-frontmatter": frozenset({"skill_mismatch"}),
}
#: What the test looks for on stderr, after which the reason follows.
REFUSED_MARK = "conformance client: refused as expected:"
CLIENT_CREDENTIALS = frozenset({"auth/client-credentials-basic", "auth/client-credentials-jwt"})
#: Enterprise-managed authorization (cross-app access): the harness hands out the user's ID
#: token from their single sign-on and the identity provider's token endpoint.
IDENTITY_ASSERTION = frozenset(
    {"auth/cross-app-access-complete-flow", "auth/enterprise-managed-authorization"}
)
#: Workload identity: the harness hands out the platform-issued token.
WORKLOAD = frozenset({"auth/wif-jwt-bearer"})
#: Every scenario with no person.
NO_PERSON = CLIENT_CREDENTIALS | IDENTITY_ASSERTION | WORKLOAD


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


def follow_once(url: str) -> str:
    """The ``Location`` the authorization endpoint answers with: what a browser would be sent
    to after the person approved. Not followed (nothing listens at the redirect URI)."""
    opener = urllib.request.build_opener(_NoRedirect)
    try:
        with opener.open(url, timeout=TIMEOUT) as response:
            status = response.status
            location = response.headers.get("Location")
    except urllib.error.HTTPError as exc:
        status = exc.code
        location = exc.headers.get("Location")
    if status not in (301, 302, 303, 307, 308) or not location:
        raise SystemExit(f"the authorization endpoint answered {status} without a redirect")
    return str(location)


class Person:
    """The person at the browser, on a thread of their own as in a headless service: the
    library only hands over the URL (``on_authorize`` must not block, it may be called on the
    client's I/O thread); the person opens it and pastes the redirect back."""

    def __init__(self) -> None:
        self._urls: queue.Queue[str | None] = queue.Queue()
        self._done = threading.Condition()
        self.completed = 0
        self.failure: BaseException | None = None
        self._thread: threading.Thread | None = None

    def on_authorize(self, url: str) -> None:
        self._urls.put(url)

    def start(self, client: mcp.Client) -> None:
        self._thread = threading.Thread(target=self._serve, args=(client,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._urls.put(None)
        if self._thread is not None:
            self._thread.join(TIMEOUT)

    def _serve(self, client: mcp.Client) -> None:
        while (url := self._urls.get()) is not None:
            try:
                client.authorize(follow_once(url))
            except BaseException as exc:  # handed to the main thread, which reports it
                with self._done:
                    self.failure = exc
                    self._done.notify_all()
                # This program gives up then: stopping the client ends a step that waits for
                # the authorization (``await_ready`` waits through ``authorizing``).
                client.stop()
                return
            with self._done:
                self.completed += 1
                self._done.notify_all()

    def wait_past(self, seen: int, what: str) -> None:
        """Until an authorization finished after ``seen`` of them had; a refusal the person
        met (``client.authorize`` raised) is raised here."""
        with self._done:
            finished = self._done.wait_for(
                lambda: self.failure is not None or self.completed > seen, TIMEOUT
            )
            if self.failure is not None:
                raise self.failure
            if not finished:
                raise SystemExit(f"{what}: authorization_required, and no authorization came")


def authorized(person: Person | None, what: str, step: Callable[[], T]) -> T:
    """``step()``, made again after the person authorized each time it fails because a person
    must act, ``MAX_ROUNDS`` times at most."""
    for _ in range(MAX_ROUNDS):
        seen = person.completed if person is not None else 0
        try:
            return step()
        except mcp.Error as error:
            if person is not None and person.failure is not None:
                raise person.failure from None  # what ended the step: the person's refusal
            if person is None or (error.kind, error.reason) != ("auth", "authorization_required"):
                raise
        person.wait_past(seen, what)
    raise SystemExit(f"{what}: still authorization_required after {MAX_ROUNDS} authorizations")


def make_oauth(scenario: str, context: dict[str, Any], person: Person | None) -> Any:
    """The ``mcp.OAuth`` a user would configure for the scenario: pre-registered credentials
    where the harness hands some out, else the CIMD URL (or dynamic registration)."""
    if scenario in CLIENT_CREDENTIALS:
        if context.get("private_key_pem"):
            return mcp.OAuth(
                grant="client_credentials",
                client_id=context["client_id"],
                private_key=context["private_key_pem"],
                signing_alg=context.get("signing_algorithm") or "RS256",
            )
        return mcp.OAuth(
            grant="client_credentials",
            client_id=context["client_id"],
            client_secret=context["client_secret"],
        )
    if scenario in IDENTITY_ASSERTION:
        return mcp.OAuth(
            grant="identity_assertion",
            identity_token=context["idp_id_token"],
            idp_token_endpoint=context["idp_token_endpoint"],
            idp_client_id=context["idp_client_id"],
            client_id=context["client_id"],
            client_secret=context["client_secret"],
        )
    if scenario in WORKLOAD:
        return mcp.OAuth(
            grant="jwt_bearer", assertion=context["valid_jwt"], client_id=context["client_id"]
        )
    assert person is not None
    if context.get("client_id"):
        registered: dict[str, Any] = {
            "client_id": context["client_id"],
            "client_secret": context.get("client_secret"),
        }
    else:
        registered = {"client_metadata_url": CIMD_URL}
    return mcp.OAuth(**registered, redirect_uri=REDIRECT_URI, on_authorize=person.on_authorize)


def use_server(client: mcp.Client, person: Person | None) -> None:
    """What a client that goes on to use the server does: list the tools and call the first
    (``auth/scope-step-up`` answers the call with a 403 that asks for more scope;
    ``auth/authorization-server-migration`` refuses the second token-bearing request)."""
    authorized(person, "handshake", lambda: client.await_ready(timeout=TIMEOUT))
    tools = authorized(person, "tools/list", lambda: client.list_all_tools(timeout=TIMEOUT))
    if not tools:
        return
    tool = tools[0]
    arguments = stub_arguments(tool)
    result = authorized(
        person, "tools/call", lambda: client.call_tool(tool.name, arguments, timeout=TIMEOUT)
    )
    expect_text(result, tool.name)


def run_auth(url: str, scenario: str, context: dict[str, Any]) -> int:
    if not hasattr(mcp, "OAuth"):
        print("conformance client: this conduit-mcp has no mcp.OAuth", file=sys.stderr)
        return 2
    person = None if scenario in NO_PERSON else Person()
    auth = make_oauth(scenario, context, person)
    expected = REFUSALS.get(scenario)
    try:
        with mcp.Client.start(
            mcp.Http(url, auth=auth),
            protocol="auto",
            **options(scenario),
        ) as client:
            if person is not None:
                person.start(client)
            try:
                use_server(client, person)
            finally:
                if person is not None:
                    person.stop()
    except mcp.Error as error:
        if expected is not None and error.kind == "auth" and error.reason in expected:
            print(f"{REFUSED_MARK} auth/{error.reason}", file=sys.stderr)
            return 0
        raise
    if expected is not None:
        wanted = " or ".join(f"auth/{reason}" for reason in sorted(expected))
        print(f"conformance client: expected a refusal ({wanted}); none came", file=sys.stderr)
        return 1
    return 0


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: client.py [...] SERVER_URL (the harness appends it)", file=sys.stderr)
        return 2
    url = argv[-1]
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "")
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    if scenario.startswith("auth/"):
        return run_auth(url, scenario, context)
    run = SCENARIOS.get(scenario)
    if run is None:
        print(f"unknown scenario {scenario!r}; known: {sorted(SCENARIOS)}", file=sys.stderr)
        return 2
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
