"""The connection's state table (docs/connection.md, "States"), one test (or more) per row, through the public API against a real
scripted server subprocess."""

from __future__ import annotations

import os
import signal
import sys

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(30)


# A server that starts and exits at once: a failure the client retries (a missing command is
# not: it closes at once).
EXITS_AT_ONCE = mcp.Stdio(sys.executable, ["-c", "raise SystemExit(1)"])


def test_auto_reaches_ready_modern_through_the_probe(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio())
    status = client.await_ready(timeout=10)
    assert (status.state, status.era, status.version, status.origin) == (
        "ready",
        "modern",
        "2026-07-28",
        "probe",
    )
    assert client.server_info().name == "scripted"
    assert [m["method"] for m in server.log() if m.get("method")][:1] == ["server/discover"]
    assert not server.received("initialize")


def test_auto_falls_back_to_initialize_on_a_legacy_server(make_server, start_client):
    server = make_server(era="legacy")
    client = start_client(server.stdio())
    status = client.await_ready(timeout=10)
    assert (status.era, status.version, status.origin) == ("legacy", "2025-11-25", "probe")
    assert server.received("server/discover")
    assert server.received("initialize")
    assert server.wait_for("notifications/initialized")


def test_auto_falls_back_when_the_probe_times_out(make_server, start_client):
    server = make_server(rules=[{"match": {"method": "server/discover"}, "action": "drop"}])
    client = start_client(server.stdio(), probe_timeout=0.2)
    status = client.await_ready(timeout=10)
    assert status.era == "legacy"


def test_legacy_pin_goes_straight_to_initialize(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio(), protocol="legacy")
    status = client.await_ready(timeout=10)
    assert (status.era, status.version, status.origin) == ("legacy", "2025-11-25", "pinned")
    assert not server.received("server/discover")


def test_explicit_legacy_version_is_offered(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio(), protocol="2025-06-18")
    status = client.await_ready(timeout=10)
    assert (status.era, status.version) == ("legacy", "2025-06-18")
    assert server.received("initialize")[0]["params"]["protocolVersion"] == "2025-06-18"


def test_modern_pin_closes_on_a_legacy_server_instead_of_falling_back(make_server, start_client):
    server = make_server(era="legacy")
    client = start_client(server.stdio(), protocol="modern")
    status = client.wait_for_state("closed", timeout=10)
    assert status.reason == "legacy_server"
    assert not server.received("initialize")
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", {"a": 1, "b": 2})
    assert err.value.kind == "closed"


def test_prior_legacy_skips_the_probe_once(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio(), prior="legacy")
    status = client.await_ready(timeout=10)
    assert (status.era, status.origin) == ("legacy", "prior")
    assert not server.received("server/discover")
    # After a reconnect the probe runs again.
    os.kill(server.pids()[-1], signal.SIGKILL)
    client.wait_for_state(lambda s: s.state == "ready" and server.starts() == 2, timeout=10)
    assert server.received("server/discover")
    assert client.status().era == "modern"


def test_unsupported_version_at_discovery_rediscovers_once(make_server, start_client):
    refusal = {
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": "2026-07-28"},
        }
    }
    server = make_server(
        rules=[{"match": {"method": "server/discover"}, "action": refusal, "times": 1}]
    )
    client = start_client(server.stdio())
    status = client.await_ready(timeout=10)
    assert status.era == "modern"
    assert len(server.received("server/discover")) == 2
    assert not server.received("initialize")


def test_a_second_refusal_closes(make_server, start_client):
    refusal = {
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": "2026-07-28"},
        }
    }
    server = make_server(rules=[{"match": {"method": "server/discover"}, "action": refusal}])
    client = start_client(server.stdio())
    status = client.wait_for_state("closed", timeout=10)
    assert status.reason == "version_refused"
    assert not server.received("initialize")


def test_no_mutual_version_closes(make_server, start_client):
    refusal = {
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2099-01-01"], "requested": "2026-07-28"},
        }
    }
    server = make_server(rules=[{"match": {"method": "server/discover"}, "action": refusal}])
    client = start_client(server.stdio())
    assert client.wait_for_state("closed", timeout=10).reason == "no_mutual_version"


def test_missing_client_capability_closes(make_server, start_client):
    refusal = {
        "error": {
            "code": -32021,
            "message": "needs elicitation",
            "data": {"requiredCapabilities": {"elicitation": {}}},
        }
    }
    server = make_server(rules=[{"match": {"method": "server/discover"}, "action": refusal}])
    client = start_client(server.stdio())
    status = client.wait_for_state("closed", timeout=10)
    assert status.reason and "capability" in status.reason


def test_server_exit_during_probe_reconnects_and_starts_with_initialize(make_server, start_client):
    server = make_server(
        rules=[
            {"match": {"method": "server/discover"}, "action": "exit", "first_process_only": True}
        ]
    )
    client = start_client(server.stdio())
    status = client.await_ready(timeout=10)
    assert (status.era, status.origin) == ("legacy", "prior")
    assert server.starts() == 2


def test_a_missing_command_closes_at_once_without_retrying(start_client):
    client = start_client(mcp.Stdio("/nonexistent/server-binary"), max_reconnects=2)
    status = client.wait_for_state("closed", timeout=10)
    assert status.reason == "spawn_failed"  # no retry can make the command exist
    with pytest.raises(mcp.Error) as err:
        client.await_ready(timeout=1)
    assert (err.value.kind, err.value.reason) == ("closed", "spawn_failed")


def test_a_server_that_keeps_exiting_closes_after_max_reconnects(start_client):
    client = start_client(EXITS_AT_ONCE, max_reconnects=2)
    status = client.wait_for_state("closed", timeout=10)
    assert status.reason == "max_reconnects"
    with pytest.raises(mcp.Error) as err:
        client.await_ready(timeout=1)
    assert err.value.kind == "closed"


def test_initialize_refused_closes(make_server, start_client):
    server = make_server(
        rules=[
            {
                "match": {"method": "initialize"},
                "action": {"error": {"code": -32600, "message": "no"}},
            }
        ]
    )
    client = start_client(server.stdio(), protocol="legacy")
    assert client.wait_for_state("closed", timeout=10).reason == "initialize_refused"


def test_initialize_timeout_reconnects(make_server, start_client):
    server = make_server(
        rules=[{"match": {"method": "initialize"}, "action": "drop", "first_process_only": True}]
    )
    client = start_client(server.stdio(), protocol="legacy", request_timeout=1.5)
    status = client.await_ready(timeout=10)
    assert status.state == "ready"
    assert server.starts() == 2


def test_ready_reconnects_after_the_server_dies(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    os.kill(server.pids()[-1], signal.SIGKILL)
    client.wait_for_state("reconnecting", timeout=5)
    client.wait_for_state("ready", timeout=10)
    assert server.starts() == 2
    assert client.call_tool("add", {"a": 2, "b": 3}).text == "5"


def test_backoff_function_gets_the_attempt_number(make_server, start_client):
    attempts: list[int] = []

    def backoff(attempt: int) -> float:
        attempts.append(attempt)
        return 0.0

    client = start_client(EXITS_AT_ONCE, max_reconnects=3, backoff=backoff)
    client.wait_for_state("closed", timeout=10)
    assert attempts == [1, 2, 3]


@pytest.mark.parametrize("bad", [lambda a: -1, lambda a: "soon", lambda a: 1 / 0])
def test_a_bad_backoff_function_is_replaced_by_full_jitter(start_client, bad):
    client = start_client(
        EXITS_AT_ONCE,
        max_reconnects=2,
        backoff=bad,
        backoff_base=0.001,
        backoff_max=0.01,
    )
    assert client.wait_for_state("closed", timeout=10).reason == "max_reconnects"


def test_stable_after_resets_the_attempt_count(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio(), max_reconnects=1, stable_after=0.05)
    client.await_ready(timeout=10)
    for n in (2, 3):
        pid = server.pids()[-1]
        # A call that takes longer than stable_after: its answer reaches the connection
        # after the stable timer did, so the attempt count is back to zero by then.
        client.call_tool("slow", {"seconds": 0.15})
        os.kill(pid, signal.SIGKILL)
        client.wait_for_state(lambda s, n=n: s.state == "ready" and server.starts() == n, 10)
    assert client.status().state == "ready"


def test_without_stability_the_attempts_add_up_to_closed(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio(), max_reconnects=1, stable_after=60)
    client.await_ready(timeout=10)
    os.kill(server.pids()[-1], signal.SIGKILL)
    client.wait_for_state(lambda s: s.state == "ready" and server.starts() == 2, timeout=10)
    os.kill(server.pids()[-1], signal.SIGKILL)
    assert client.wait_for_state("closed", timeout=10).reason == "max_reconnects"


def test_health_check_reconnects_a_server_that_stopped_answering(make_server, start_client):
    server = make_server(
        rules=[{"match": {"method": "ping"}, "action": "drop", "first_process_only": True}]
    )
    client = start_client(server.stdio(), protocol="legacy", health_check=0.1, health_timeout=0.2)
    client.await_ready(timeout=10)
    client.wait_for_state(lambda s: s.state == "ready" and server.starts() == 2, timeout=10)
    assert server.received("ping")


def test_closed_answers_at_once_and_reconnect_leaves_it(make_server, start_client):
    server = make_server(
        rules=[
            {
                "match": {"method": "server/discover"},
                "action": {
                    "error": {"code": -32021, "message": "x", "data": {"requiredCapabilities": {}}}
                },
                "first_process_only": True,
            }
        ]
    )
    client = start_client(server.stdio())
    client.wait_for_state("closed", timeout=10)
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", {"a": 1, "b": 1}, timeout=5)
    assert err.value.kind == "closed"
    client.reconnect()
    status = client.await_ready(timeout=10)
    assert status.state == "ready"
    assert client.call_tool("add", {"a": 1, "b": 1}).text == "2"


def test_ready_modern_rediscovers_on_unsupported_version_and_retries_once(
    make_server, start_client
):
    refusal = {
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": "2026-07-28"},
        }
    }
    server = make_server(rules=[{"match": {"method": "tools/call"}, "action": refusal, "times": 1}])
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    assert client.call_tool("add", {"a": 4, "b": 5}).text == "9"
    assert len(server.received("tools/call")) == 2
    assert len(server.received("server/discover")) == 2


def test_a_second_unsupported_version_fails_the_request(make_server, start_client):
    refusal = {
        "error": {
            "code": -32022,
            "message": "Unsupported protocol version",
            "data": {"supported": ["2026-07-28"], "requested": "2026-07-28"},
        }
    }
    server = make_server(rules=[{"match": {"method": "tools/call"}, "action": refusal}])
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", {"a": 4, "b": 5})
    assert (err.value.kind, err.value.code) == ("server", -32022)
    assert len(server.received("tools/call")) == 2


def test_start_never_blocks(make_server, start_client):
    server = make_server(rules=[{"match": {"method": "server/discover"}, "action": {"delay": 1.0}}])
    client = start_client(server.stdio())
    assert client.status().state in ("connecting", "discovering")
    assert client.await_ready(timeout=10).state == "ready"


def test_stop_closes_the_server_process(make_server):
    server = make_server()
    client = mcp.Client.start(server.stdio())
    client.await_ready(timeout=10)
    pid = server.pids()[-1]
    client.stop()
    assert client.status().state == "closed"
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", {"a": 1, "b": 1})
    assert err.value.kind == "closed"


@pytest.mark.parametrize(
    ("extra", "signals"),
    [
        ((), []),
        (("--ignore-eof",), ["sigterm"]),
        (("--ignore-eof", "--ignore-sigterm"), ["sigterm"]),
    ],
)
def test_close_escalates_stdin_then_sigterm_then_sigkill(make_server, extra, signals):
    server = make_server(extra_args=extra)
    client = mcp.Client.start(server.stdio(close_grace=0.3))
    client.await_ready(timeout=10)
    pid = server.pids()[-1]
    client.stop()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # gone (and reaped) by the time stop() returns
    events = [e["event"] for e in server.log() if e.get("pid") == pid and "event" in e]
    assert "eof" in events
    assert [e for e in events if e == "sigterm"] == signals


def test_stop_answers_calls_in_flight_and_queued_with_closed(make_server):
    from concurrent.futures import ThreadPoolExecutor

    server = make_server()
    client = mcp.Client.start(server.stdio())
    client.await_ready(timeout=10)
    with ThreadPoolExecutor(2) as pool:
        in_flight = pool.submit(client.call_tool, "never", {}, timeout=30)
        server.wait_for("tools/call", timeout=5)
        client.stop()
        with pytest.raises(mcp.Error) as err:
            in_flight.result(timeout=5)
    assert (err.value.kind, err.value.reason) == ("closed", "stopped")


def test_a_spawn_that_raises_something_else_than_oserror_is_a_spawn_failure(start_client):
    # Popen raises ValueError for a NUL byte in an argument: still a clean spawn failure.
    client = start_client(mcp.Stdio(sys.executable, ["-c", "pass\0"]), max_reconnects=1)
    status = client.wait_for_state("closed", timeout=10)
    assert status.reason == "max_reconnects"


def test_a_server_that_closes_its_stdin_cannot_break_the_client(start_client):
    # A server that stops reading (closes stdin) but stays alive: the client's direct
    # writes fail quietly, the call times out, and the client still answers and stops.
    script = (
        "import os, sys, json\n"
        "line = sys.stdin.readline()\n"
        "req = json.loads(line)\n"
        "os.close(0)\n"
        "print(json.dumps({'jsonrpc': '2.0', 'id': req['id'], 'result': {"
        "'protocolVersion': '2025-11-25', 'capabilities': {}, "
        "'serverInfo': {'name': 'deaf', 'version': '1'}}}), flush=True)\n"
        "import time\n"
        "time.sleep(60)\n"
    )
    # close_grace: it never reads an EOF on stdin, so the stop signals it after 0.2 s, not 2
    spec = mcp.Stdio(sys.executable, ["-c", script], close_grace=0.2)
    client = start_client(spec, protocol="legacy")
    client.await_ready(timeout=10)
    for _ in range(3):
        with pytest.raises(mcp.Error) as err:
            client.call_tool("add", {"a": 1, "b": 1}, timeout=0.2)
        assert err.value.kind == "timeout"
    assert client.status().state == "ready"


def test_an_idle_client_costs_no_thread_of_its_own_nor_one_per_server_process(make_server):
    """The supervisor and the connection borrow threads of the shared actor pool only while
    they have messages (otp/pooled.py); the server processes are watched by pidfd."""
    import threading

    first = mcp.Client.start(make_server().stdio())  # starts the shared I/O and timer threads
    first.await_ready(timeout=10)
    before = threading.active_count()
    clients = [mcp.Client.start(make_server().stdio()) for _ in range(6)]
    try:
        for client in clients:
            client.await_ready(timeout=10)
        # Before the actor pool: two threads per client (12 here).
        assert threading.active_count() - before < len(clients)
    finally:
        mcp.Client.stop_all([first, *clients])


@pytest.mark.parametrize("max_reconnects", [10, 0])
def test_a_call_failed_by_a_lost_server_never_sees_a_stale_ready(
    make_server, start_client, max_reconnects
):
    # The failed caller's next look at the client already shows the loss: status() is not
    # "ready", so await_ready() waits for the reconnection instead of returning at once.
    server = make_server()
    client = start_client(
        server.stdio(), max_reconnects=max_reconnects, backoff=lambda attempt: 0.5
    )
    client.await_ready(timeout=10)
    with pytest.raises(mcp.Error) as err:
        client.call_tool("crash", {"code": 9})
    assert err.value.kind == "transport"
    after = client.status()
    assert after.state == ("reconnecting" if max_reconnects else "closed")
    assert after.reason in ("exit", "max_reconnects")
    if max_reconnects:
        assert client.await_ready(timeout=10).state == "ready"
        assert server.starts() == 2
