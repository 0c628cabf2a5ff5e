"""The host protocol without an engine: specs and messages are plain data (callables and
literal credentials refused, naming the key, never the value), errors cross as data, and a
host (``HostCore``) driven on a plain asyncio loop runs batches, sends progress, redacts the
values it expanded, and cancels the calls of a caller that stopped polling."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.cluster import protocol as p
from conduit_mcp.cluster.host import HostCore

SERVER = {"command": sys.executable, "args": ["-m", "conduit_mcp.testing"]}
PLANTED = "pl4nted-s3cret-Zq81"


def spec(config: Any, **options: Any) -> p.HostSpec:
    return p.HostSpec("h-0", "t", config, options)


# -- specs --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "options", "reason"),
    [
        ({**SERVER, "conduit": {"on_give_up": print}}, {}, "servers.a.conduit.on_give_up"),
        ({**SERVER, "conduit": {"backoff": lambda n: 0.1}}, {}, "servers.a.conduit.backoff"),
        (SERVER, {"qualify": lambda s, n: n}, "options.qualify"),
        (SERVER, {"on_authorize": print}, "options.on_authorize"),
        (SERVER, {"handler": mcp.Handler()}, "options.handler"),
        (SERVER, {"meta": {"deep": [1, object()]}}, "options.meta.deep[1]"),
    ],
)
def test_a_spec_refuses_anything_that_is_not_plain_data(
    entry: Any, options: Any, reason: str
) -> None:
    with pytest.raises(mcp.Error) as caught:
        p.check_spec(spec({"mcpServers": {"a": entry}}, **options))
    assert (caught.value.kind, caught.value.reason) == ("config", reason)
    assert "cross" in caught.value.message


def test_a_plain_spec_passes_and_round_trips_as_data() -> None:
    s = spec({"mcpServers": {"a": SERVER}}, separator="__", request_timeout=5)
    p.check_spec(s)
    assert p.HostSpec.from_data(s.to_data()) == s


@pytest.mark.parametrize("bad", ["", "a b", "x" * 101, 7])
def test_a_host_name_must_be_short_and_plain(bad: Any) -> None:
    with pytest.raises(mcp.Error) as caught:
        p.check_spec(p.HostSpec(bad, "t", {"mcpServers": {}}))
    assert caught.value.reason == "name"


def test_a_call_refuses_a_callable_argument() -> None:
    with pytest.raises(mcp.Error) as caught:
        p.call(1, "call_tool", {"name": "a.add", "arguments": {"f": print}})
    assert (caught.value.kind, caught.value.reason) == ("argument", "call_tool.arguments.f")
    with pytest.raises(mcp.Error):
        p.call(1, "stop", {})


# -- secrets ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("entry", "reason"),
    [
        ({"url": "http://127.0.0.1:1/mcp", "headers": {"X-Key": PLANTED}}, "servers.s.headers"),
        ({**SERVER, "env": {"API_KEY": PLANTED}}, "servers.s.env"),
        ({**SERVER, "env": {"API_KEY": "${KEY:-" + PLANTED + "}"}}, "servers.s.env"),
        ({"url": "http://127.0.0.1:1/mcp", "conduit": {"bearer": PLANTED}}, "servers.s.conduit"),
        (
            {"url": "http://127.0.0.1:1/mcp", "conduit": {"auth": {"bearer": PLANTED}}},
            "servers.s.conduit.auth",
        ),
    ],
)
def test_a_literal_credential_is_refused_naming_the_key_never_the_value(
    entry: Any, reason: str
) -> None:
    with pytest.raises(mcp.Error) as caught:
        p.check_secrets({"mcpServers": {"s": entry}}, secure=False)
    error = caught.value
    assert (error.kind, error.reason) == ("config", reason)
    assert PLANTED not in str(error) and PLANTED not in repr(error)
    assert "${" in error.message  # it says what to write instead


def test_references_pass_and_a_secure_engine_takes_literals() -> None:
    entry = {"url": "u", "headers": {"Authorization": "Bearer ${T42_GITHUB}"}}
    p.check_secrets({"mcpServers": {"gh": entry}}, secure=False)
    p.check_secrets({"mcpServers": {"gh": {"url": "u", "headers": {"K": PLANTED}}}}, secure=True)


def test_errors_cross_as_redacted_data() -> None:
    error = mcp.Error(
        "server", "tool_failed", f"bad key {PLANTED}", code=-32000, data={"k": PLANTED}
    )
    data = p.failure(7, error, (PLANTED,))
    assert PLANTED not in repr(data)
    back = p.error_of(data["error"])
    assert (back.kind, back.reason, back.code) == ("server", "tool_failed", -32000)
    assert back.message == "bad key ***" and back.data == {"k": "***"}
    unknown = p.error_of({"kind": "nonsense", "reason": "x", "message": "m"})
    assert (unknown.kind, unknown.reason) == ("protocol", "host_reply")


def test_host_lost_says_the_call_is_never_sent_again() -> None:
    error = p.host_lost("t-0", 123)
    assert (error.kind, error.reason) == ("unavailable", "host_lost")
    assert "never sent again" in error.message and error.data == {"host": "t-0", "pid": 123}


def test_placement_is_stable_and_spreads_tenants() -> None:
    nodes = ["n2", "n1"]
    chosen = {p.placement(f"tenant-{i}", nodes) for i in range(20)}
    assert chosen == {"n1", "n2"}
    assert p.placement("x", nodes) == p.placement("x", list(reversed(nodes)))


@pytest.mark.parametrize(
    "entry",
    [
        {"resources": {}},
        {"resources": {"a": -1}},
        {"resources": {"a": True}},
        {"resources": {"a": float("nan")}},
        {"resources": ["a"]},
        {"hosts": 0},
        {"hosts": 1.5},
        {"clients_per_host": 0},
        {"nodes": ["n1"]},
        {"resources": {"a": print}},
        "tenant_a",
    ],
)
def test_a_placement_entry_is_plain_data_and_checked(entry: Any) -> None:
    with pytest.raises(mcp.Error) as caught:
        p.check_placement(entry, "placement.t")
    assert caught.value.kind == "config"
    assert caught.value.reason in ("placement", "placement.t.resources.a")


def test_a_placement_table_and_its_override() -> None:
    table = p.check_placements({"a": {"hosts": 2}, "*": {"resources": {"pool": 0.5}}})
    assert p.placement_of("a", table, None) == {"hosts": 2}
    assert p.placement_of("z", table, None) == {"resources": {"pool": 0.5}}
    assert p.placement_of("a", table, {"clients_per_host": 3}) == {"clients_per_host": 3}
    assert p.placement_of("z", {}, None) == {}
    with pytest.raises(mcp.Error) as caught:
        mcp.RayEngine(placement={"a": {"hosts": -1}})
    assert (caught.value.kind, caught.value.reason) == ("config", "placement")
    with pytest.raises(mcp.Error) as caught:
        mcp.RayEngine(placement_timeout=0)
    assert (caught.value.kind, caught.value.reason) == ("config", "placement_timeout")


def test_servers_split_over_a_pinned_number_of_hosts() -> None:
    names = [f"s{i}" for i in range(7)]
    assert p.split(names, 1000, hosts=3) == [names[0:3], names[3:5], names[5:7]]
    assert p.split(names, 3) == [names[0:3], names[3:6], names[6:7]]
    assert p.split(names[:2], 1000, hosts=5) == [["s0"], ["s1"]]  # at most one per server
    assert [n for chunk in p.split(names, 1000, hosts=4) for n in chunk] == names  # in order


def test_fit_refuses_what_no_node_can_take_now() -> None:
    nodes = {"n1": {"CPU": 1.0, "a": 1.0}, "n2": {"CPU": 1.0, "a": 1.0, "b": 2.0}}
    free = {"a": 2.0, "b": 2.0}
    assert p.fit([{"a": 1.0}, {"a": 1.0}], nodes, free) is None
    assert p.fit([{"a": 1.0, "b": 1.0}, {"b": 1.0}], nodes, free) is None
    for demands in ([{"c": 1.0}], [{"a": 2.0}], [{"a": 1.0}] * 3, [{"a": 1.0, "b": 1.0}] * 2):
        error = p.fit(demands, nodes, free)
        assert error is not None and (error.kind, error.reason) == (
            "unavailable",
            "placement_infeasible",
        ), demands
    error = p.fit([{"b": 1.0}], nodes, {"b": 0.5})
    assert error is not None and error.reason == "placement_busy" and "0.5" in error.message
    assert p.fit([{}, {}], {}, {}) is None  # placed by tenant: nothing to fit
    spec0 = p.HostSpec("h-0", "t", {"mcpServers": {}}, {}, {"a": 1.0})
    assert p.HostSpec.from_data(spec0.to_data()) == spec0


def test_set_logging_level_outcomes_cross_as_data() -> None:
    crossed = p.levels(
        {"a": None, "b": mcp.Error("timeout", "deadline", f"no answer from {PLANTED}")},
        (PLANTED,),
    )
    json.dumps(crossed)  # plain
    assert PLANTED not in repr(crossed)
    back = p.decode("set_logging_level", crossed)
    assert back["a"] is None and (back["b"].kind, back["b"].reason) == ("timeout", "deadline")
    with pytest.raises(mcp.Error):
        p.decode("set_logging_level", ["a"])


# -- the host, driven without an engine ---------------------------------------------------------


def _events_until(core: HostCore, caller: str, want: int, seconds: float = 20.0) -> list[Any]:
    async def run() -> list[Any]:
        found: list[Any] = []
        deadline = time.monotonic() + seconds
        while len([e for e in found if "ok" in e or "error" in e]) < want:
            assert time.monotonic() < deadline, found
            found += await core.poll(caller, 0.5)
        return found

    return asyncio.get_event_loop().run_until_complete(run())


@pytest.fixture(scope="module")
def loop() -> Any:
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    loop.close()


@pytest.fixture(scope="module")
def core(loop: Any) -> Any:
    import os

    os.environ["CLUSTER_TEST_PLANTED"] = PLANTED
    config = {
        "mcpServers": {
            "a": {**SERVER, "env": {"SECRET_TOKEN": "${CLUSTER_TEST_PLANTED}"}},
        }
    }
    host = loop.run_until_complete(_make(spec(config).to_data(), lease=0.6))
    assert host.error is None
    loop.run_until_complete(host.await_ready(20.0, "all"))
    yield host
    host.stop()
    loop.run_until_complete(asyncio.sleep(0.05))  # the cancelled tasks finish


async def _make(data: Any, lease: float) -> HostCore:
    host = HostCore(data, lease=lease)
    host.begin()
    return host


def test_a_batch_runs_and_fast_calls_come_back_in_its_reply(loop: Any, core: HostCore) -> None:
    calls = [
        p.call(i, "call_tool", {"name": "a.add", "arguments": {"a": i, "b": 1}}) for i in range(8)
    ]
    events = loop.run_until_complete(core.submit("c1", calls, 2.0))
    events += _events_until(core, "c1", 8 - len(events)) if len(events) < 8 else []
    texts = sorted(int(p.decode("call_tool", e["ok"]).text) for e in events if "ok" in e)
    assert texts == [i + 1 for i in range(8)]


def test_progress_and_errors_are_events(loop: Any, core: HostCore) -> None:
    calls = [
        p.call(1, "call_tool", {"name": "a.progress", "arguments": {"steps": 2}}, progress=True),
        p.call(2, "call_tool", {"name": "a.nope", "arguments": {}}),
    ]
    events = loop.run_until_complete(core.submit("c2", calls, 0.0))
    events += _events_until(core, "c2", 2)
    assert [e["progress"]["progress"] for e in events if "progress" in e] == [1.0, 2.0]
    (failed,) = [e for e in events if "error" in e]
    assert failed["id"] == 2 and failed["error"]["reason"] == "unknown_tool"


def test_a_host_redacts_the_values_it_expanded(loop: Any, core: HostCore) -> None:
    call = p.call(1, "call_tool", {"name": "a.env", "arguments": {"name": "SECRET_TOKEN"}})
    events = loop.run_until_complete(core.submit("c3", [call], 5.0))
    events += _events_until(core, "c3", 1) if not events else []
    assert PLANTED not in repr(events)
    assert "***" in repr(events)  # the server did see it: the host expanded the reference


def test_a_caller_that_stops_polling_has_its_calls_cancelled(loop: Any, core: HostCore) -> None:
    call = p.call(1, "call_tool", {"name": "a.never", "arguments": {}})
    loop.run_until_complete(core.submit("gone", [call], 0.0))
    assert core.info()["in_flight"] >= 1

    async def wait_cancelled() -> None:
        deadline = time.monotonic() + 5.0
        while "gone" in core._callers:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)

    loop.run_until_complete(wait_cancelled())
    assert core.info()["in_flight"] == 0


def test_a_spec_the_hub_refuses_is_a_plain_error_not_a_crash(loop: Any) -> None:
    bad = spec({"mcpServers": {"a.b": SERVER}}).to_data()
    host = loop.run_until_complete(_make(bad, lease=5.0))
    assert host.error is not None and host.error["kind"] == "config"
    events = loop.run_until_complete(
        host.submit("c", [p.call(1, "call_tool", {"name": "a.add", "arguments": {}})], 1.0)
    )
    assert events[0]["error"]["kind"] == "config"
    host.stop()
    loop.run_until_complete(asyncio.sleep(0.05))


def test_a_secrets_file_the_host_cannot_read_is_a_plain_error(loop: Any, tmp_path: Any) -> None:
    bad = tmp_path / "t42.json"
    bad.write_text(json.dumps({"K": 1, "L": PLANTED}), encoding="utf-8")
    for path in (str(tmp_path / "missing.json"), str(bad)):
        host = HostCore(spec({"mcpServers": {"a": SERVER}}).to_data(), secrets_file=path)
        assert host.hub is None and host.error is not None
        assert (host.error["kind"], host.error["reason"]) == ("config", "secrets_file")
        assert PLANTED not in repr(host.error)
        host.stop()
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"FROM_FILE": PLANTED}), encoding="utf-8")
    env = p.host_environ(str(good), {"HOME": "/h"})
    assert env == {"HOME": "/h", "FROM_FILE": PLANTED}


def test_a_lingering_submit_carries_its_result_while_a_poll_waits(
    loop: Any, core: HostCore
) -> None:
    """A fast call's result comes back in its lingering submit's reply, and the caller's
    standing poll is not woken for it (it answered empty, and the caller polled again: a
    message each way more per call, which made a sequential call 0.8 ms slower on Ray)."""

    async def both() -> tuple[list[Any], bool, list[Any]]:
        poll = asyncio.ensure_future(core.poll("c9", 5.0))
        await asyncio.sleep(0)  # a turn of the loop: the poll is waiting now
        call = p.call(1, "call_tool", {"name": "a.add", "arguments": {"a": 1, "b": 2}})
        submitted = await core.submit("c9", [call], 5.0)
        for _ in range(20):  # bounded turns of the loop: a woken poll would finish in these
            await asyncio.sleep(0)
        woken = poll.done()
        return submitted, woken, await asyncio.wait_for(poll, 5.0)

    submitted, woken, polled = loop.run_until_complete(both())
    assert [e["id"] for e in submitted if "ok" in e] == [1]
    assert not woken and polled == []


def test_set_logging_level_on_a_host_gives_each_member_s_outcome(loop: Any) -> None:
    config = {
        "mcpServers": {
            "a": SERVER,
            "quiet": {**SERVER, "args": [*SERVER["args"], "--no-logging"]},
            "gone": {"command": "/no/such/command"},
        }
    }
    host = loop.run_until_complete(
        _make(p.HostSpec("h-0", "t", config, {"protocol": "legacy"}).to_data(), lease=5.0)
    )
    try:
        loop.run_until_complete(host.await_ready(20.0, ["a", "quiet"]))
        call = p.call(1, "set_logging_level", {"level": "warning", "timeout": 10})
        events = loop.run_until_complete(host.submit("c", [call], 5.0))
        events += _events_until(host, "c", 1) if not events else []
        (answer,) = [e for e in events if e.get("id") == 1]
        json.dumps(answer)  # plain data
        outcomes = p.decode("set_logging_level", answer["ok"])
        assert list(outcomes) == ["a", "quiet", "gone"]  # config order
        assert outcomes["a"] is None
        assert (outcomes["quiet"].kind, outcomes["quiet"].reason) == (
            "unavailable",
            "not_supported",
        )
        assert (outcomes["gone"].kind, outcomes["gone"].reason) == (
            "unavailable",
            "server_not_ready",
        )
        bad = p.call(2, "set_logging_level", {"level": "loud", "timeout": None})
        events = loop.run_until_complete(host.submit("c", [bad], 5.0))
        events += _events_until(host, "c", 1) if not events else []
        (refused,) = [e for e in events if e.get("id") == 2]
        assert (refused["error"]["kind"], refused["error"]["reason"]) == ("argument", "level")
    finally:
        host.stop()
        loop.run_until_complete(asyncio.sleep(0.05))
