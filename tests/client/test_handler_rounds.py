"""Modern input_required rounds at their edges, through the public API, against the scripted
server's ``rounds`` tool, prompt and resource, which check every retry (a new id,
``requestState`` byte for byte, the keys asked) and report them (docs/testing.md, "Input
rounds"; docs/connection.md, "Server-to-client requests")."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.testing.scripted.rounds import rounds_prompt_arguments, rounds_uri


def elicit(message: str = "Name?") -> dict[str, Any]:
    return {
        "method": "elicitation/create",
        "params": {
            "message": message,
            "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
        },
    }


SAMPLE = {
    "method": "sampling/createMessage",
    "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": "2+2?"}}],
        "maxTokens": 5,
    },
}
STATE = "eyJzdGVwIjogMX0=\u00e9 \u2603 exact"  # any bytes: echoed exactly

THREE_ROUNDS = {
    "rounds": [
        {"inputRequests": {"who": elicit(), "math": SAMPLE}, "requestState": STATE},
        {"requestState": "state-only"},
        {"inputRequests": {"roots": {"method": "roots/list"}}},
    ]
}


class Helper(mcp.Handler):
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.both = threading.Barrier(2, timeout=10)

    def create_message(self, request: mcp.SamplingRequest, ctx: mcp.HandlerContext) -> Any:
        return mcp.SamplingResult("4", model="m")

    async def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
        return mcp.ElicitResult.accept({"name": "ada"})

    def list_roots(self, ctx: mcp.HandlerContext) -> Any:
        return ["file:///r"]


def report_of(result: mcp.CallToolResult) -> dict[str, Any]:
    assert result.structured_content is not None, result.text
    return dict(result.structured_content)


@pytest.fixture(params=["stdio", "http"])
def modern(request: Any, make_server: Any, serve_http: Any, start_client: Any) -> Any:
    def start(handler: mcp.Handler | None, **options: Any) -> mcp.Client:
        if request.param == "stdio":
            spec: Any = make_server().stdio()
        else:
            _, proc = serve_http()
            spec = mcp.Http(proc.url)
        return start_client(spec, protocol="modern", handler=handler, **options)  # type: ignore[no-any-return]

    return start


def test_three_rounds_with_state_only_and_concurrent_entries(modern: Any) -> None:
    client = modern(Helper())
    report = report_of(client.call_tool("rounds", THREE_ROUNDS, timeout=20))
    assert report["ok"] is True, report
    assert report["rounds"] == 3
    requests = report["requests"]
    assert [r["carried"] for r in requests] == [
        [],
        ["inputResponses", "requestState"],
        ["requestState"],
        ["inputResponses"],
    ]
    second = requests[1]
    assert second["requestState"] == STATE
    assert second["inputResponses"]["who"] == {"action": "accept", "content": {"name": "ada"}}
    assert second["inputResponses"]["math"]["content"] == {"type": "text", "text": "4"}
    # the state-only round was retried after a backoff, not at once
    assert requests[2]["after"] >= 0.04
    assert requests[3]["inputResponses"] == {"roots": {"roots": [{"uri": "file:///r"}]}}
    assert len({r["id"] for r in requests}) == 4  # a new id each time


def test_rounds_never_leak_onto_other_requests(modern: Any) -> None:
    client = modern(Helper())
    client.call_tool("rounds", THREE_ROUNDS, timeout=20)
    client.call_tool("echo", {"text": "unrelated"})
    log = client.call_tool("rounds_log").structured_content
    assert log is not None
    assert log["stray"] == []
    assert all(c.get("name", "rounds") == "rounds" for c in log["carriers"]), log["carriers"]


def test_the_prompt_and_the_resource_run_rounds_too(modern: Any) -> None:
    client = modern(Helper())
    script = {"rounds": [{"inputRequests": {"who": elicit()}, "requestState": "p"}]}
    prompt = client.get_prompt("rounds", rounds_prompt_arguments(script), timeout=20)
    report = json.loads(prompt.messages[0]["content"]["text"])
    assert report["ok"] is True and report["rounds"] == 1
    resource = client.read_resource(rounds_uri(script), timeout=20)
    report = json.loads(resource.contents[0]["text"])
    assert report["ok"] is True and report["rounds"] == 1


def test_a_final_result_without_result_type_is_complete(modern: Any) -> None:
    client = modern(Helper())
    script = {"rounds": [{"requestState": "s"}], "final_result_type": None}
    assert report_of(client.call_tool("rounds", script, timeout=20))["ok"] is True


def test_an_unknown_result_type_is_a_protocol_error(modern: Any) -> None:
    # ("task" is known since the Tasks extension: docs/tasks.md)
    client = modern(Helper())
    script = {"rounds": [{"requestState": "s"}], "final_result_type": "deferred"}
    with pytest.raises(mcp.Error) as err:
        client.call_tool("rounds", script, timeout=20)
    assert (err.value.kind, err.value.reason) == ("protocol", "unknown_result_type")


def test_max_input_rounds_at_its_edge(modern: Any) -> None:
    client = modern(Helper(), max_input_rounds=3)
    three = {"rounds": [{"requestState": f"s{i}"} for i in range(3)]}
    assert report_of(client.call_tool("rounds", three, timeout=20))["rounds"] == 3
    endless = {"rounds": [{"inputRequests": {"who": elicit()}}], "endless": True}
    with pytest.raises(mcp.Error) as err:
        client.call_tool("rounds", endless, timeout=20)
    assert (err.value.kind, err.value.reason) == ("protocol", "too_many_rounds")
    assert "max_input_rounds=3" in err.value.message


def test_without_the_method_elicitation_declines_and_sampling_fails_clearly(modern: Any) -> None:
    client = modern(None)
    script = {"rounds": [{"inputRequests": {"who": elicit()}}], "check_capabilities": False}
    report = report_of(client.call_tool("rounds", script, timeout=20))
    assert report["requests"][1]["inputResponses"] == {"who": {"action": "decline"}}
    hostile = {"rounds": [{"inputRequests": {"m": SAMPLE}}], "check_capabilities": False}
    with pytest.raises(mcp.Error) as err:
        client.call_tool("rounds", hostile, timeout=20)
    assert (err.value.kind, err.value.reason) == ("handler", "no_method")
    assert "create_message" in err.value.message


def test_entries_of_one_round_run_concurrently(modern: Any) -> None:
    both = threading.Barrier(2, timeout=10)

    class Pair(mcp.Handler):
        def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
            both.wait()  # passes only if the two entries run at the same time
            return mcp.ElicitResult.accept({"name": request.message})

    client = modern(Pair())
    script = {"rounds": [{"inputRequests": {"a": elicit("a"), "b": elicit("b")}}]}
    report = report_of(client.call_tool("rounds", script, timeout=20))
    assert report["requests"][1]["inputResponses"] == {
        "a": {"action": "accept", "content": {"name": "a"}},
        "b": {"action": "accept", "content": {"name": "b"}},
    }


def test_a_caller_that_gives_up_mid_round_stops_the_handler(
    make_server: Any, start_client: Any
) -> None:
    cancelled = threading.Event()
    entered = threading.Event()

    class Waiting(mcp.Handler):
        async def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
            entered.set()
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                cancelled.set()
                raise
            return mcp.ElicitResult.decline()

    client = start_client(make_server().stdio(), protocol="modern", handler=Waiting())
    script = {"rounds": [{"inputRequests": {"who": elicit()}}]}

    async def go() -> None:
        task = asyncio.ensure_future(client.aio.call_tool("rounds", script, timeout=20))
        assert await asyncio.to_thread(entered.wait, 10)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task

    asyncio.run(go())
    assert cancelled.wait(10)
    assert client.call_tool("echo", {"text": "next"}).text == "next"


def test_a_handler_past_handler_timeout_fails_the_round(modern: Any) -> None:
    class Hung(mcp.Handler):
        async def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
            await asyncio.sleep(30)

    client = modern(Hung(), handler_timeout=0.3)
    script = {"rounds": [{"inputRequests": {"who": elicit()}}]}
    with pytest.raises(mcp.Error) as err:
        client.call_tool("rounds", script, timeout=20)
    assert (err.value.kind, err.value.reason) == ("timeout", "handler_timeout")


def test_a_bad_answer_fails_the_round_without_echoing_it(modern: Any) -> None:
    class Wrong(mcp.Handler):
        def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
            return {"action": "maybe", "content": {"pin": "1234-secret"}}

    client = modern(Wrong())
    script = {"rounds": [{"inputRequests": {"who": elicit()}}]}
    with pytest.raises(mcp.Error) as err:
        client.call_tool("rounds", script, timeout=20)
    assert (err.value.kind, err.value.reason) == ("handler", "bad_result")
    assert "1234-secret" not in str(err.value)


class Counting(mcp.Handler):
    """Counts the elicitations running at once; each waits for a partner (a barrier of
    ``pair``), so the entries of a round must really run side by side."""

    def __init__(self, pair: int) -> None:
        self.lock = threading.Lock()
        self.running = 0
        self.most = 0
        self.calls = 0
        self.pair = threading.Barrier(pair, timeout=10) if pair > 1 else None

    def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
        with self.lock:
            self.running += 1
            self.calls += 1
            self.most = max(self.most, self.running)
        try:
            if self.pair is not None:
                self.pair.wait()
            return mcp.ElicitResult.accept({"name": request.message})
        finally:
            with self.lock:
                self.running -= 1


def wide_round(count: int, prefix: str = "k") -> dict[str, Any]:
    return {
        "rounds": [
            {"inputRequests": {f"{prefix}{i}": elicit(f"{prefix}{i}") for i in range(count)}}
        ]
    }


def test_a_round_wider_than_max_server_requests_waits_for_slots(modern: Any) -> None:
    # 12 entries against the default max_server_requests=8: the last 4 wait for a slot
    # instead of failing the call handler/busy.
    handler = Counting(pair=1)
    client = modern(handler)
    report = report_of(client.call_tool("rounds", wide_round(12), timeout=20))
    assert report["ok"] is True, report
    answers = report["requests"][1]["inputResponses"]
    assert answers == {
        f"k{i}": {"action": "accept", "content": {"name": f"k{i}"}} for i in range(12)
    }
    assert handler.calls == 12 and handler.most <= 8


def test_queued_entries_never_run_past_max_server_requests(modern: Any) -> None:
    # Two calls of 4 entries each, at most 2 methods at once: every entry runs, two by two
    # (the barrier needs a partner), never three.
    handler = Counting(pair=2)
    client = modern(handler, max_server_requests=2)

    async def both() -> list[Any]:
        return list(
            await asyncio.gather(
                client.aio.call_tool("rounds", wide_round(4, "a"), timeout=20),
                client.aio.call_tool("rounds", wide_round(4, "b"), timeout=20),
            )
        )

    for result in asyncio.run(both()):
        assert report_of(result)["ok"] is True
    assert handler.calls == 8
    assert handler.most == 2


def test_max_round_inputs_at_its_edge(modern: Any) -> None:
    client = modern(Counting(pair=1), max_round_inputs=3)
    assert report_of(client.call_tool("rounds", wide_round(3), timeout=20))["ok"] is True
    with pytest.raises(mcp.Error) as err:
        client.call_tool("rounds", wide_round(4), timeout=20)
    assert (err.value.kind, err.value.reason) == ("protocol", "too_many_inputs")
    assert "max_round_inputs=3" in err.value.message
    assert err.value.data == {"limit": 3, "asked": 4}


def test_an_entry_refused_busy_by_a_stuck_method_waits_for_the_next_slot(modern: Any) -> None:
    # A plain method past handler_timeout keeps its slot (its thread cannot be stopped):
    # the connection then thinks a slot free that is not. The entry the handler refuses
    # busy waits for the next answer instead of failing the call.
    release = threading.Event()

    class Stuck(mcp.Handler):
        def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
            if request.message == "stuck":
                release.wait(30)  # ignores ctx.cancelled on purpose
            return mcp.ElicitResult.accept({"name": request.message})

    client = modern(Stuck(), max_server_requests=2, handler_timeout=0.3)
    try:
        stuck = {"rounds": [{"inputRequests": {"s": elicit("stuck")}}]}
        with pytest.raises(mcp.Error) as err:
            client.call_tool("rounds", stuck, timeout=20)
        assert (err.value.kind, err.value.reason) == ("timeout", "handler_timeout")
        report = report_of(client.call_tool("rounds", wide_round(3), timeout=20))
        assert report["ok"] is True, report
        assert sorted(report["requests"][1]["inputResponses"]) == ["k0", "k1", "k2"]
    finally:
        release.set()
