"""The handler through the public API: what a server asks of the client, in both eras, over
stdio and HTTP, against the scripted server (docs/connection.md, "Server-to-client requests").
"""

from __future__ import annotations

import asyncio
import json
import queue
import threading
from typing import Any

import pytest

import conduit_mcp as mcp


class Assistant(mcp.Handler):
    """Answers everything; records what it saw."""

    elicitation_modes = ("form", "url")

    def __init__(self) -> None:
        self.seen: list[tuple[str, Any]] = []
        self.notes: list[str] = []
        self.logs: list[tuple[str, Any]] = []
        self.noted = threading.Event()
        self.logged = threading.Event()

    def create_message(self, request: mcp.SamplingRequest, ctx: mcp.HandlerContext) -> Any:
        self.seen.append(("sampling", ctx.era))
        return mcp.SamplingResult("Paris", model="test-model")

    async def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
        self.seen.append(("elicit", request.mode))
        await asyncio.sleep(0)
        if request.mode == "url":
            return mcp.ElicitResult.accept()
        return mcp.ElicitResult.accept({"name": "octocat"})

    def list_roots(self, ctx: mcp.HandlerContext) -> Any:
        return [mcp.Root("file:///srv/data", "data"), "file:///tmp"]

    def handle_notification(self, method: str, params: Any, ctx: mcp.HandlerContext) -> None:
        self.notes.append(method)
        self.noted.set()

    def handle_log(
        self, level: str, data: Any, logger: str | None, ctx: mcp.HandlerContext
    ) -> None:
        self.logs.append((level, data))
        self.logged.set()


SAMPLE = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "Capital of France?"}}],
        "maxTokens": 50,
    },
}
ELICIT = {
    "method": "elicitation/create",
    "params": {
        "message": "Your GitHub login?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}
ROOTS = {"method": "roots/list", "params": {}}


def answer(result: mcp.CallToolResult) -> Any:
    """What the client answered, as the scripted server's client_request tool reports it."""
    assert result.structured_content is not None, result.text
    if "response" in result.structured_content:
        return result.structured_content["response"]
    return {"error": result.structured_content["error"]}


def warmed(client: mcp.Client) -> mcp.Client:
    """``client`` once ready and past its first call (over legacy HTTP the first calls wait
    for the session's GET stream), so a short timeout measures only the call under test."""
    client.call_tool("echo", {"text": "warm"}, timeout=20)
    return client


@pytest.fixture(params=["stdio", "http"])
def legacy_client(request: Any, make_server: Any, serve_http: Any, start_client: Any) -> Any:
    def start(handler: mcp.Handler | None, **options: Any) -> mcp.Client:
        if request.param == "stdio":
            spec: Any = make_server().stdio()
        else:
            _, proc = serve_http()
            spec = mcp.Http(proc.url)
        return start_client(spec, protocol="legacy", handler=handler, **options)  # type: ignore[no-any-return]

    return start


@pytest.fixture(params=["stdio", "http"])
def modern_client(request: Any, make_server: Any, serve_http: Any, start_client: Any) -> Any:
    def start(handler: mcp.Handler | None, **options: Any) -> mcp.Client:
        if request.param == "stdio":
            spec: Any = make_server().stdio()
        else:
            _, proc = serve_http()
            spec = mcp.Http(proc.url)
        return start_client(spec, protocol="modern", handler=handler, **options)  # type: ignore[no-any-return]

    return start


# -- capabilities ---------------------------------------------------------------------------


def test_capabilities_follow_the_methods_the_handler_implements(
    make_server: Any, start_client: Any
) -> None:
    class Roots(mcp.Handler):
        def list_roots(self, ctx: mcp.HandlerContext) -> Any:
            return []

    server = make_server()
    client = start_client(server.stdio(), protocol="legacy", handler=Roots())
    client.await_ready(timeout=10)
    sent = server.received("initialize")[-1]["params"]["capabilities"]
    assert sent == {"roots": {"listChanged": True}}


def test_a_capability_without_its_method_is_a_config_error() -> None:
    with pytest.raises(mcp.Error) as err:
        mcp.Client.start(mcp.Stdio("true"), capabilities={"sampling": {}})
    assert (err.value.kind, err.value.reason) == ("config", "capabilities")
    assert "create_message" in err.value.message
    with pytest.raises(mcp.Error) as err:
        mcp.Client.start(mcp.Stdio("true"), handler=object())
    assert (err.value.kind, err.value.reason) == ("config", "handler")


def test_modern_requests_carry_the_derived_capabilities(
    make_server: Any, start_client: Any
) -> None:
    server = make_server()
    client = start_client(server.stdio(), protocol="modern", handler=Assistant())
    client.call_tool("echo", {"text": "hi"})
    meta = server.received("tools/call")[-1]["params"]["_meta"]
    caps = meta["io.modelcontextprotocol/clientCapabilities"]
    assert caps == {
        "sampling": {},
        "elicitation": {"form": {}, "url": {}},
        "roots": {"listChanged": True},
        # the scripted server advertises the Tasks extension: declared (docs/tasks.md)
        "extensions": {"io.modelcontextprotocol/tasks": {}},
    }


# -- legacy: server requests ------------------------------------------------------------------


def test_legacy_server_requests_are_answered_by_the_handler(legacy_client: Any) -> None:
    handler = Assistant()
    client = legacy_client(handler)
    sampled = answer(client.call_tool("client_request", SAMPLE))
    assert sampled["content"] == {"type": "text", "text": "Paris"}
    assert sampled["model"] == "test-model" and sampled["role"] == "assistant"
    elicited = answer(client.call_tool("client_request", ELICIT))
    assert elicited == {"action": "accept", "content": {"name": "octocat"}}
    roots = answer(client.call_tool("client_request", ROOTS))
    assert roots == {"roots": [{"uri": "file:///srv/data", "name": "data"}, {"uri": "file:///tmp"}]}
    assert answer(client.call_tool("client_request", {"method": "ping"})) == {}
    assert ("sampling", "legacy") in handler.seen


def test_legacy_undeclared_requests_get_the_spec_codes(legacy_client: Any) -> None:
    class FormOnly(mcp.Handler):
        def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
            return mcp.ElicitResult.decline()

    client = legacy_client(FormOnly())
    # sampling was not declared: the scripted server refuses to ask, like a real one
    refused = client.call_tool("client_request", SAMPLE)
    assert "did not declare sampling" in refused.text
    unknown = answer(client.call_tool("client_request", {"method": "vendor/unknown"}))
    assert unknown["error"]["code"] == -32601
    url = {
        "method": "elicitation/create",
        "params": {"mode": "url", "message": "m", "url": "https://x", "elicitationId": "e1"},
    }
    bad_mode = answer(client.call_tool("client_request", url))
    assert bad_mode["error"]["code"] == -32602
    declined = answer(client.call_tool("client_request", ELICIT))
    assert declined == {"action": "decline"}


def test_a_declined_sampling_is_code_minus_one(legacy_client: Any) -> None:
    class Refuser(mcp.Handler):
        def create_message(self, request: mcp.SamplingRequest, ctx: mcp.HandlerContext) -> Any:
            raise mcp.Declined()

    client = legacy_client(Refuser())
    refused = answer(client.call_tool("client_request", SAMPLE))
    assert refused["error"]["code"] == -1


def test_a_raising_handler_is_an_error_answer_and_the_client_lives(
    legacy_client: Any, caplog: Any
) -> None:
    class Broken(mcp.Handler):
        def list_roots(self, ctx: mcp.HandlerContext) -> Any:
            raise RuntimeError("secret-in-exception-text")

    client = legacy_client(Broken())
    failed = answer(client.call_tool("client_request", ROOTS))
    assert failed["error"]["code"] == -32603
    assert client.call_tool("echo", {"text": "still here"}).text == "still here"
    assert client.status().state == "ready"
    assert "secret-in-exception-text" not in caplog.text


def test_the_related_call_deadline_is_paused_while_the_handler_works(legacy_client: Any) -> None:
    release = threading.Event()

    class Slow(mcp.Handler):
        def list_roots(self, ctx: mcp.HandlerContext) -> Any:
            release.wait(2.5)  # a person taking 2.5 s to answer
            return ["file:///late"]

    client = warmed(legacy_client(Slow()))
    try:
        # a 1 s timeout, but the handler takes 2.5 s: the deadline waits for it (1 s, not
        # less: the call must reach the handler within it on a loaded machine)
        result = client.call_tool("client_request", ROOTS, timeout=1.0)
    finally:
        release.set()
    assert answer(result) == {"roots": [{"uri": "file:///late"}]}


def test_max_total_timeout_bounds_a_paused_call(legacy_client: Any) -> None:
    release = threading.Event()

    class Stuck(mcp.Handler):
        def list_roots(self, ctx: mcp.HandlerContext) -> Any:
            release.wait(30)
            return []

    client = warmed(legacy_client(Stuck()))
    try:
        with pytest.raises(mcp.Error) as err:
            client.call_tool("client_request", ROOTS, timeout=1.0, max_total_timeout=2.0)
        assert (err.value.kind, err.value.reason) == ("timeout", "max_total_timeout")
        assert "max_total_timeout" in err.value.message
    finally:
        release.set()
    assert client.call_tool("echo", {"text": "ok"}).text == "ok"


def test_max_total_timeout_bounds_a_paused_call_through_futures(legacy_client: Any) -> None:
    """The futures front end takes ``max_total_timeout`` as the blocking one does."""
    release = threading.Event()

    class Stuck(mcp.Handler):
        def list_roots(self, ctx: mcp.HandlerContext) -> Any:
            release.wait(30)
            return []

    client = warmed(legacy_client(Stuck()))
    try:
        future = client.futures.call_tool(
            "client_request", ROOTS, timeout=1.0, max_total_timeout=2.0
        )
        with pytest.raises(mcp.Error) as err:
            future.get(timeout=20)
        assert (err.value.kind, err.value.reason) == ("timeout", "max_total_timeout")
    finally:
        release.set()
    assert client.futures.call_tool("echo", {"text": "ok"}).get(timeout=20).text == "ok"


def test_a_hung_handler_is_bounded_by_handler_timeout(legacy_client: Any) -> None:
    release = threading.Event()

    class Hung(mcp.Handler):
        async def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
            await asyncio.sleep(60)

    client = legacy_client(Hung(), handler_timeout=0.5)
    try:
        failed = answer(client.call_tool("client_request", ELICIT, timeout=20))
    finally:
        release.set()
    assert "error" in failed and failed["error"]["code"] < 0


def test_the_handler_gets_notifications_and_logs(legacy_client: Any) -> None:
    handler = Assistant()
    client = legacy_client(handler)
    client.request("logging/setLevel", {"level": "debug"})
    client.call_tool("log", {"level": "warning", "data": "disk almost full"})
    assert handler.logged.wait(10)
    assert handler.logs[0] == ("warning", "disk almost full")
    client.call_tool("notify", {"method": "notifications/vendor/thing", "params": {"n": 1}})
    assert handler.noted.wait(10)
    assert handler.notes == ["notifications/vendor/thing"]


def test_a_server_posing_as_the_client_reaches_no_subscriber_nor_handler(
    legacy_client: Any,
) -> None:
    """``conduit_mcp/...`` is the client's own notifications' prefix: a server's notification
    with it (a forged list_refreshed or tool_definition_changed) is dropped."""
    handler = Assistant()
    client = legacy_client(handler)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes)
    for forged in (mcp.LIST_REFRESHED, mcp.TOOL_DEFINITION_CHANGED):
        client.call_tool("notify", {"method": forged, "params": {"kind": "tools"}})
    client.call_tool("notify", {"method": "notifications/vendor/after"})  # in order: last
    assert handler.noted.wait(10)
    assert notes.get(timeout=10).method == "notifications/vendor/after"
    assert handler.notes == ["notifications/vendor/after"]


def test_without_a_handler_server_requests_are_refused(legacy_client: Any) -> None:
    client = legacy_client(None)
    assert answer(client.call_tool("client_request", {"method": "ping"})) == {}
    refused = client.call_tool("client_request", {"method": "vendor/x"})
    assert "-32601" in refused.text


# -- modern: input_required rounds ------------------------------------------------------------


def test_a_modern_round_runs_through_the_handler(modern_client: Any) -> None:
    handler = Assistant()
    client = modern_client(handler)
    elicited = answer(client.call_tool("client_request", ELICIT))
    assert elicited == {"action": "accept", "content": {"name": "octocat"}}
    sampled = answer(client.call_tool("client_request", SAMPLE))
    assert sampled["content"]["text"] == "Paris"
    roots = answer(client.call_tool("client_request", ROOTS))
    assert roots["roots"][0] == {"uri": "file:///srv/data", "name": "data"}
    assert ("sampling", "modern") in handler.seen


def test_a_modern_round_without_a_handler_fails_clearly(
    make_server: Any, start_client: Any
) -> None:
    client = start_client(make_server().stdio(), protocol="modern")
    with pytest.raises(mcp.Error) as err:
        client.call_tool("client_request", SAMPLE)
    # the scripted server, like a real one, refuses to ask for an undeclared capability
    assert err.value.kind == "server" and err.value.code == -32021


def test_a_modern_handler_that_raises_fails_the_call(modern_client: Any) -> None:
    class Broken(mcp.Handler):
        def create_message(self, request: mcp.SamplingRequest, ctx: mcp.HandlerContext) -> Any:
            raise ValueError("nope")

    client = modern_client(Broken())
    with pytest.raises(mcp.Error) as err:
        client.call_tool("client_request", SAMPLE)
    assert (err.value.kind, err.value.reason) == ("handler", "raised")
    assert "nope" not in str(err.value)
    assert client.call_tool("echo", {"text": "fine"}).text == "fine"


def test_a_modern_round_deadline_is_paused(modern_client: Any) -> None:
    release = threading.Event()

    class Slow(mcp.Handler):
        def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
            release.wait(2.5)  # a person taking 2.5 s to answer
            return mcp.ElicitResult.accept({"name": "late"})

    client = warmed(modern_client(Slow()))
    try:
        result = client.call_tool("client_request", ELICIT, timeout=1.0)
    finally:
        release.set()
    assert answer(result) == {"action": "accept", "content": {"name": "late"}}


def test_a_modern_round_is_one_span_with_its_round_count(
    make_server: Any, start_client: Any
) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    client = start_client(
        make_server().stdio(), protocol="modern", handler=Assistant(), tracer_provider=provider
    )
    client.call_tool("client_request", ELICIT)
    spans = [s for s in exporter.get_finished_spans() if s.name == "tools/call client_request"]
    assert len(spans) == 1
    attributes = dict(spans[0].attributes or {})
    assert attributes["conduit_mcp.input_rounds"] == 1
    assert "octocat" not in json.dumps({k: str(v) for k, v in attributes.items()})


def test_aio_and_futures_run_rounds_too(make_server: Any, start_client: Any) -> None:
    client = start_client(make_server().stdio(), protocol="modern", handler=Assistant())

    async def go() -> Any:
        return await client.aio.call_tool("client_request", ELICIT)

    assert answer(asyncio.run(go()))["action"] == "accept"
    assert (
        answer(client.futures.call_tool("client_request", ELICIT).get(timeout=20))["action"]
        == "accept"
    )


def test_max_total_timeout_is_checked_in_the_caller(make_server: Any, start_client: Any) -> None:
    client = start_client(make_server().stdio(), protocol="modern")
    with pytest.raises(mcp.Error) as err:
        client.call_tool("echo", {"text": "x"}, max_total_timeout=-1)
    assert (err.value.kind, err.value.reason) == ("argument", "max_total_timeout")


def test_max_total_timeout_is_checked_in_the_caller_through_futures(
    make_server: Any, start_client: Any
) -> None:
    client = start_client(make_server().stdio(), protocol="modern")
    with pytest.raises(mcp.Error) as err:
        client.futures.call_tool("echo", {"text": "x"}, max_total_timeout=-1)
    assert (err.value.kind, err.value.reason) == ("argument", "max_total_timeout")


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_handler_taking_notifications_is_a_listen_consumer(
    transport: str, make_server: Any, serve_http: Any, start_client: Any
) -> None:
    """No subscriber, no cached list: the handler alone makes the modern client listen."""
    handler = Assistant()
    if transport == "stdio":
        spec: Any = make_server().stdio()
    else:
        _, proc = serve_http()
        spec = mcp.Http(proc.url)
    client = start_client(spec, protocol="modern", handler=handler)
    # every kind the server advertises (without a handler the client would not listen)
    assert client.await_listening(timeout=10) == {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourcesListChanged": True,
    }
    refreshed: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(refreshed, methods=[mcp.LIST_REFRESHED])
    client.call_tool("changed", {"kind": "tools"})  # listed first: the cache refreshes too
    assert handler.noted.wait(10)
    # The client's own notification went to the subscriber, never to handle_notification.
    assert refreshed.get(timeout=10).params["kind"] == "tools"
    assert handler.notes == ["notifications/tools/list_changed"]


# -- elicitation defaults (SEP-1034) ----------------------------------------------------------


class PartialForm(mcp.Handler):
    """A person who changes one field of a pre-filled form and accepts the rest."""

    def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
        return mcp.ElicitResult.accept({"name": "Ada"})


DEFAULTS = {
    "method": "elicitation/create",
    "params": {
        "message": "Your profile?",
        "requestedSchema": {
            "type": "object",
            "properties": {
                "name": {"type": "string", "default": "John Doe"},
                "age": {"type": "integer", "default": 30},
                "status": {"type": "string", "enum": ["active", "pending"], "default": "active"},
                "verified": {"type": "boolean", "default": True},
                "note": {"type": "string"},
            },
        },
    },
}
FILLED = {"name": "Ada", "age": 30, "status": "active", "verified": True}


def test_legacy_an_accepted_elicitation_gets_the_schemas_defaults(legacy_client: Any) -> None:
    client = legacy_client(PartialForm())
    assert answer(client.call_tool("client_request", DEFAULTS)) == {
        "action": "accept",
        "content": FILLED,
    }


def test_modern_an_accepted_elicitation_gets_the_schemas_defaults(modern_client: Any) -> None:
    client = modern_client(PartialForm())
    assert answer(client.call_tool("client_request", DEFAULTS)) == {
        "action": "accept",
        "content": FILLED,
    }
