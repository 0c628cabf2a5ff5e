"""Legacy server requests at their edges, through the public API: cancellation, the
``max_server_requests`` cap, the GET stream, URL elicitation, requests outside any call
(docs/connection.md, "Server-to-client requests")."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import conduit_mcp as mcp

ELICIT = {
    "method": "elicitation/create",
    "params": {
        "message": "Your name?",
        "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
    },
}


def answers(result: mcp.CallToolResult) -> list[dict[str, Any]]:
    assert result.structured_content is not None, result.text
    return list(result.structured_content["answers"])


class Gate(mcp.Handler):
    """elicit blocks until released; counts who is inside."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.inside = 0
        self.entered = threading.Condition()
        self.cancelled: list[bool] = []

    def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
        with self.entered:
            self.inside += 1
            self.entered.notify_all()
        self.release.wait(20)
        self.cancelled.append(ctx.cancelled.is_set())
        return mcp.ElicitResult.accept({"name": "x"})

    def wait_inside(self, n: int, timeout: float = 10) -> bool:
        with self.entered:
            return self.entered.wait_for(lambda: self.inside >= n, timeout)


@pytest.fixture(params=["stdio", "http"])
def legacy(request: Any, make_server: Any, serve_http: Any, start_client: Any) -> Any:
    def start(handler: mcp.Handler | None, **options: Any) -> mcp.Client:
        if request.param == "stdio":
            spec: Any = make_server().stdio()
        else:
            _, proc = serve_http()
            spec = mcp.Http(proc.url)
        return start_client(spec, protocol="legacy", handler=handler, **options)  # type: ignore[no-any-return]

    return start


def test_a_server_cancellation_stops_the_work_and_nothing_is_answered(legacy: Any) -> None:
    handler = Gate()
    client = legacy(handler)
    request = {**ELICIT, "cancel_after": 0.5}
    try:
        (entry,) = answers(client.call_tool("ask", {"requests": [request], "cancel_grace": 0.5}))
    finally:
        handler.release.set()
    assert entry["outcome"] == "cancelled"
    assert entry["answered_after_cancel"] is False
    deadline = time.monotonic() + 10
    while not handler.cancelled and time.monotonic() < deadline:
        handler.release.wait(0.01)
    assert handler.cancelled == [True]  # the method saw ctx.cancelled set
    learned = client.call_tool("learned").structured_content
    assert learned is not None and learned["requests"][-1]["late"] == []


def test_max_server_requests_refuses_one_more_at_once(legacy: Any) -> None:
    handler = Gate()
    client = legacy(handler, max_server_requests=2)
    out: list[Any] = []
    asking = threading.Thread(
        target=lambda: out.append(
            client.call_tool("ask", {"requests": [ELICIT] * 3, "concurrent": True}, timeout=30)
        )
    )
    asking.start()
    try:
        assert handler.wait_inside(2)
        # two run; the third was refused without waiting for them
        assert not handler.wait_inside(3, timeout=0.3)
    finally:
        handler.release.set()
        asking.join(30)
    outcomes = answers(out[0])
    results = [a for a in outcomes if a["outcome"] == "result"]
    errors = [a for a in outcomes if a["outcome"] == "error"]
    assert len(results) == 2 and len(errors) == 1
    assert errors[0]["error"]["code"] == -32603
    assert "max_server_requests" in errors[0]["error"]["message"]


def test_a_flood_of_server_requests_is_bounded_and_answered(legacy: Any) -> None:
    class Quick(mcp.Handler):
        async def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
            return mcp.ElicitResult.decline()

    client = legacy(Quick(), max_server_requests=4)
    outcomes = answers(
        client.call_tool("ask", {"requests": [ELICIT] * 64, "concurrent": True}, timeout=60)
    )
    assert len(outcomes) == 64
    assert all(a["outcome"] in ("result", "error") for a in outcomes)
    assert any(a["outcome"] == "result" for a in outcomes)
    assert client.call_tool("echo", {"text": "after"}).text == "after"


def test_url_elicitation_and_its_completion(legacy: Any) -> None:
    seen: list[str] = []
    completed = threading.Event()

    class Browser(mcp.Handler):
        elicitation_modes = ("url",)

        def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
            seen.append(f"{request.mode} {request.url} {request.elicitation_id}")
            return mcp.ElicitResult.accept()

        def handle_notification(self, method: str, params: Any, ctx: mcp.HandlerContext) -> None:
            if method == "notifications/elicitation/complete":
                seen.append(f"complete {params['elicitationId']}")
                completed.set()

    client = legacy(Browser())
    url = {
        "method": "elicitation/create",
        "params": {
            "mode": "url",
            "message": "Sign in",
            "url": "https://example.test/auth",
            "elicitationId": "el-1",
        },
        "complete": True,
    }
    (entry,) = answers(client.call_tool("ask", {"requests": [url]}))
    assert entry["outcome"] == "result" and entry["result"] == {"action": "accept"}
    assert completed.wait(10)
    assert seen == ["url https://example.test/auth el-1", "complete el-1"]


def test_server_requests_on_the_get_stream_are_answered(serve_http: Any, start_client: Any) -> None:
    class Roots(mcp.Handler):
        def list_roots(self, ctx: mcp.HandlerContext) -> Any:
            return ["file:///work"]

    _, proc = serve_http()
    client = start_client(mcp.Http(proc.url), protocol="legacy", handler=Roots())
    ask = {"requests": [{"method": "roots/list"}, {"method": "ping"}], "via": "get"}
    first, second = answers(client.call_tool("ask", ask, timeout=30))
    assert first["result"] == {"roots": [{"uri": "file:///work"}]}
    assert second["result"] == {}


def test_a_request_outside_any_call_is_answered(make_server: Any, start_client: Any) -> None:
    """Like server-filesystem: roots/list right after initialized."""

    class Roots(mcp.Handler):
        def list_roots(self, ctx: mcp.HandlerContext) -> Any:
            assert ctx.related_method is None
            return [mcp.Root("file:///data", "data")]

    server = make_server(extra_args=["--ask-roots"])
    client = start_client(server.stdio(), protocol="legacy", handler=Roots())
    deadline = time.monotonic() + 10
    while True:
        last = client.call_tool("last_roots").structured_content
        assert last is not None
        if last["answered"] or time.monotonic() > deadline:
            break
    assert last["roots"] == [{"uri": "file:///data", "name": "data"}]


def test_a_call_ended_by_its_deadline_withdraws_the_questions_its_stream_carried(
    serve_http: Any, start_client: Any
) -> None:
    """Legacy HTTP: the server cancels what it asked on the call's stream, but on the stream
    the client just closed; the client stops that work itself and answers nothing."""
    withdrawn = threading.Event()

    class Patient(mcp.Handler):
        def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
            if ctx.cancelled.wait(10):
                withdrawn.set()
            return mcp.ElicitResult.decline()

    _, proc = serve_http()
    client = start_client(mcp.Http(proc.url), protocol="legacy", handler=Patient())
    client.call_tool("echo", {"text": "warm"}, timeout=20)  # past the wait for the GET stream
    with pytest.raises(mcp.Error) as err:
        client.call_tool("ask", {"requests": [ELICIT]}, timeout=1.0, max_total_timeout=2.0)
    assert (err.value.kind, err.value.reason) == ("timeout", "max_total_timeout")
    assert withdrawn.wait(5)
    learned = client.call_tool("learned").structured_content
    assert learned is not None
    (asked,) = [r for r in learned["requests"] if r["method"] == "elicitation/create"]
    assert asked["outcome"] != "result" and asked["late"] == []  # never answered


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_roots_changed_makes_the_server_ask_again(
    transport: str, make_server: Any, serve_http: Any, start_client: Any
) -> None:
    roots = ["file:///first"]

    class Roots(mcp.Handler):
        def list_roots(self, ctx: mcp.HandlerContext) -> Any:
            return list(roots)

    if transport == "stdio":
        spec: Any = make_server(extra_args=["--ask-roots"]).stdio()
    else:
        _, proc = serve_http(ask_roots=True)
        spec = mcp.Http(proc.url)
    client = start_client(spec, protocol="legacy", handler=Roots())

    def last_roots(until: Any) -> dict[str, Any]:
        deadline = time.monotonic() + 10
        while True:
            last = client.call_tool("last_roots").structured_content
            assert last is not None
            if until(last) or time.monotonic() > deadline:
                return dict(last)

    assert last_roots(lambda r: r["answered"] >= 1)["roots"] == [{"uri": "file:///first"}]
    roots[:] = ["file:///second"]
    client.roots_changed()
    last = last_roots(lambda r: r["list_changed"] >= 1 and r["answered"] >= 2)
    assert last["list_changed"] == 1
    assert last["roots"] == [{"uri": "file:///second"}]


@pytest.mark.parametrize("protocol", ["legacy", "modern"])
def test_roots_changed_tells_only_a_legacy_server_that_was_promised_it(
    protocol: str, make_server: Any, start_client: Any
) -> None:
    class Roots(mcp.Handler):
        def list_roots(self, ctx: mcp.HandlerContext) -> Any:
            return []

    promised = make_server()
    client = start_client(promised.stdio(), protocol=protocol, handler=Roots())
    client.await_ready(timeout=10)
    client.roots_changed()
    client.call_tool("echo", {"text": "after"})  # stdio is ordered: sent before this call
    told = promised.received("notifications/roots/list_changed")
    assert len(told) == (1 if protocol == "legacy" else 0)

    unpromised = make_server()
    client = start_client(
        unpromised.stdio(),
        protocol=protocol,
        handler=Roots(),
        capabilities={"roots": {"listChanged": False}},
    )
    client.await_ready(timeout=10)
    client.roots_changed()
    client.call_tool("echo", {"text": "after"})
    assert unpromised.received("notifications/roots/list_changed") == []
