"""The client as a supervised tree: what a user sees when an actor dies, and a client run
under an application's own supervisor."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import conduit_mcp as mcp
from conduit_mcp import tree
from conduit_mcp.otp.supervisor import WhichChildren
from conduit_mcp.testing.waiting import notes_before

pytestmark = pytest.mark.timeout(30)


def test_a_crashed_connection_fails_its_calls_and_comes_back(crashable, make_server, start_client):
    server = make_server()
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    first_pid = server.pids()[-1]
    runtime = client._runtime()
    old = runtime.registry.get("connection")
    with ThreadPoolExecutor(1) as pool:
        call = pool.submit(client.call_tool, "never", {}, timeout=10)
        server.wait_for("tools/call", timeout=5)
        old.tell(crashable())
        with pytest.raises(mcp.Error) as err:
            call.result(timeout=5)
    assert (err.value.kind, err.value.reason) == ("transport", "connection_crashed")
    # The supervisor started a new connection (a new actor), which spawned a new server.
    status = client.wait_for_state(
        lambda s: s.state == "ready" and server.starts() == 2, timeout=10
    )
    assert status.state == "ready"
    assert runtime.registry.get("connection") is not old
    assert client.call_tool("add", {"a": 1, "b": 1}).text == "2"
    # The crashed incarnation's server was closed (its stdin reached EOF), not leaked.
    assert server.wait_for(
        lambda e: e.get("event") == "eof" and e.get("pid") == first_pid, timeout=5
    )


def test_too_many_crashes_close_the_client(crashable, make_server, start_client):
    server = make_server()
    client = start_client(server.stdio())
    runtime = client._runtime()
    for n in range(4):  # max_restarts=3 in 5 s: the fourth crash gives up
        client.await_ready(timeout=10)
        runtime.registry.get("connection").tell(crashable())
        if n < 3:
            client.wait_for_state(lambda s, n=n: server.starts() == n + 2, timeout=10)
    assert runtime.stopped.wait(10)
    assert client.status().state == "closed"
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", {"a": 1, "b": 1})
    assert err.value.kind == "closed"


# -- what outlives a connection crash -----------------------------------------------------

HELLO = "test://static/hello"
UPDATED = "notifications/resources/updated"
BARRIER = "test/barrier"


def _until_barrier(notes, timeout=5.0):
    """The methods of the notifications before the next barrier (deadline)."""
    return [n.method for n in notes_before(notes, BARRIER, timeout)]


def _error_of(future):
    with pytest.raises(mcp.Error) as err:
        future.get(timeout=10)
    return err.value.kind, err.value.reason


def test_a_restarted_connection_never_falls_back_to_legacy(crashable, make_server, start_client):
    """Once modern, never legacy, across a connection crash: the restarted connection
    discovers, and legacy evidence closes it instead of sending initialize."""
    server = make_server(
        rules=[
            # The second server process answers the probe as a legacy server would.
            {
                "match": {"method": "server/discover"},
                "action": {"error": {"code": -32601, "message": "Method not found"}},
                "process": 2,
            }
        ]
    )
    client = start_client(server.stdio(), protocol="auto")
    assert client.await_ready(timeout=10).era == "modern"
    client._runtime().registry.get("connection").tell(crashable())
    status = client.wait_for_state(
        lambda s: (
            server.starts() == 2
            and (s.state == "ready" or (s.state == "closed" and s.reason == "legacy_server"))
        ),
        timeout=10,
    )
    assert (status.state, status.reason) == ("closed", "legacy_server")
    assert server.received("initialize") == []
    assert len(server.received("server/discover")) == 2


def test_a_connection_crash_costs_what_the_tree_says(crashable, make_server, start_client):
    """Crash the connection with calls in flight and calls queued: in flight ones fail
    transport/connection_crashed (they may have run), queued ones unavailable/
    connection_crashed (never sent: safe to retry); the client is ready again, in the modern
    era, its notification subscriber still gets notifications and its resource
    subscriptions are made again."""
    server = make_server(
        rules=[
            # The echo call is refused with -32022: the ready connection re-discovers, and
            # the call waits (queued) to be retried once ready ...
            {
                "match": {"tool": "echo"},
                "action": {
                    "error": {
                        "code": -32022,
                        "message": "Unsupported protocol version",
                        "data": {"supported": ["2026-07-28"]},
                    }
                },
                "first_process_only": True,
            },
            # ... which it never is: that second probe is never answered.
            {
                "match": {"method": "server/discover", "nth": 2},
                "action": "drop",
                "first_process_only": True,
            },
        ]
    )
    client = start_client(server.stdio(), protocol="auto")
    assert client.await_ready(timeout=10).era == "modern"
    import queue

    notes = queue.Queue()
    client.subscribe_notifications(notes, methods=[UPDATED, BARRIER])
    client.subscribe(HELLO)
    client.await_listening(timeout=5)
    first_pid = server.pids()[-1]

    in_flight = [client.futures.call_tool("never", {}, timeout=20) for _ in range(2)]
    server.wait_for("tools/call", count=2, timeout=5)
    refused = client.futures.call_tool("echo", {"text": "x"}, timeout=20)
    server.wait_for("server/discover", count=2, timeout=5)
    client.wait_for_state("discovering", timeout=5)
    # Told from this thread, so they are in the connection's mailbox before the crash.
    queued = [client.futures.call_tool("add", {"a": 1, "b": n}, timeout=20) for n in range(3)]
    client._runtime().registry.get("connection").tell(crashable())

    assert [_error_of(f) for f in in_flight] == [("transport", "connection_crashed")] * 2
    assert [_error_of(f) for f in [refused, *queued]] == [("unavailable", "connection_crashed")] * 4
    status = client.wait_for_state(
        lambda s: s.state == "ready" and server.starts() == 2, timeout=10
    )
    assert status.era == "modern"
    second_pid = server.pids()[-1]
    assert second_pid != first_pid
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    # The resource subscription is made again (modern: on the new listen's filter) ...
    relisten = server.wait_for(
        lambda e: e.get("event") == "listen" and e.get("pid") == second_pid, timeout=5
    )
    assert relisten["notifications"] == {"resourceSubscriptions": [HELLO]}
    client.await_listening(timeout=5)
    # ... and the subscriber, kept by the notifier, gets what the new connection routes.
    client.call_tool("changed", {"kind": "resource", "uri": HELLO})
    client.call_tool("notify", {"method": BARRIER})
    assert _until_barrier(notes) == [UPDATED]
    assert server.received("initialize") == []


def test_on_give_up_stop_lets_the_application_supervisor_restart_the_client(make_server):
    server = make_server(
        rules=[
            {"match": {"method": "server/discover"}, "action": "exit", "first_process_only": True}
        ]
    )
    spec = mcp.Client.child_spec(
        server.stdio(), name="app-child", max_reconnects=0, on_give_up="stop"
    )
    app = mcp.Supervisor.start([spec], strategy="one_for_one")
    try:
        app.ask(WhichChildren(), timeout=10)  # the supervisor's init has run
        first = tree.lookup("app-child")
        server.wait_for(lambda e: e.get("event") == "started" and server.starts() == 2, timeout=10)
        client = mcp.Client.whereis("app-child")
        status = client.await_ready(timeout=10)
        # A fresh client tree, started by the application's supervisor (not a restart of
        # the connection inside the old tree).
        assert tree.lookup("app-child") is not first
        assert first is not None and first.stopped.is_set()
        assert status.state == "ready"
        assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    finally:
        app.stop()
    assert mcp.Client.whereis("app-child").status().state == "closed"


def test_on_give_up_close_keeps_the_client_to_show_why(make_server, start_client):
    server = make_server()
    client = start_client(server.stdio(), max_reconnects=0)
    client.await_ready(timeout=10)
    os.kill(server.pids()[-1], signal.SIGKILL)
    status = client.wait_for_state("closed", timeout=10)
    assert status.reason == "max_reconnects"
    assert client._runtime().alive()


def test_start_refuses_a_duplicate_name(make_server, start_client):
    server = make_server()
    start_client(server.stdio(), name="dup")
    with pytest.raises(mcp.Error) as err:
        mcp.Client.start(server.stdio(), name="dup")
    assert (err.value.kind, err.value.reason) == ("config", "name")


@pytest.mark.parametrize(
    ("options", "name"),
    [
        ({"max_in_flight": 0}, "max_in_flight"),
        ({"max_queued": -1}, "max_queued"),
        ({"request_timeout": 0}, "request_timeout"),
        ({"protocol": "2019-01-01"}, "protocol"),
        ({"prior": "modern"}, "prior"),
        ({"on_give_up": "explode"}, "on_give_up"),
        ({"backoff": 3}, "backoff"),
        ({"max_reconnects": 1.5}, "max_reconnects"),
        ({"health_check": -1}, "health_check"),
        ({"client_info": {"name": 1}}, "client_info"),
        ({"bogus": 1}, "unknown_option"),
    ],
)
def test_every_option_is_validated_at_start(options, name):
    with pytest.raises(mcp.Error) as err:
        mcp.Client.start(mcp.Stdio("true"), **options)
    assert (err.value.kind, err.value.reason) == ("config", name)


def test_the_transport_is_validated_at_start():
    with pytest.raises(mcp.Error) as err:
        mcp.Client.start("python -m server")
    assert (err.value.kind, err.value.reason) == ("config", "transport")
    with pytest.raises(mcp.Error) as err:
        mcp.Stdio("")
    assert err.value.kind == "config"


@pytest.mark.parametrize("round_", range(5))
def test_the_readme_supervisor_example_works_every_time(make_server, round_):
    server = make_server()
    name = f"files-{round_}"
    app = mcp.Supervisor.start(
        [mcp.Client.child_spec(server.stdio(), name=name, on_give_up="stop")],
        strategy="one_for_one",
        max_restarts=3,
        max_seconds=5.0,
    )
    try:
        client = mcp.Client.whereis(name)  # at once: the client may not be registered yet
        status = client.await_ready(timeout=10)
        assert status.state == "ready"
        assert f"{status.state}>" in repr(client)
        assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    finally:
        app.stop()


def test_a_whereis_handle_waits_through_start_on_every_front_end(make_server):
    import asyncio

    server = make_server()
    app = mcp.Supervisor.start([mcp.Client.child_spec(server.stdio(), name="fronts")])
    try:
        client = mcp.Client.whereis("fronts")
        future = client.futures.call_tool("add", {"a": 2, "b": 2}, timeout=10)

        async def main() -> str:
            return (await client.aio.call_tool("add", {"a": 1, "b": 1}, timeout=10)).text

        assert asyncio.run(main()) == "2"
        assert future.get(timeout=10).text == "4"
    finally:
        app.stop()


def test_a_whereis_handle_waits_through_a_supervised_restart(make_server):
    # The first server process exits at once, the client gives up (max_reconnects=0) and
    # stops; the application supervisor starts a fresh client under the same name.
    server = make_server(
        rules=[
            {"match": {"method": "server/discover"}, "action": "exit", "first_process_only": True}
        ]
    )
    app = mcp.Supervisor.start(
        [
            mcp.Client.child_spec(
                server.stdio(), name="restarting", max_reconnects=0, on_give_up="stop"
            )
        ]
    )
    try:
        client = mcp.Client.whereis("restarting")
        # Made while the first incarnation is connecting, failing, stopping and being
        # replaced: each waits through the window instead of failing `closed`.
        future_ready = client.futures.await_ready(timeout=10)
        with ThreadPoolExecutor(5) as pool:
            calls = [
                pool.submit(client.call_tool, "add", {"a": i, "b": 1}, timeout=10) for i in range(4)
            ]
            aio_ready = pool.submit(asyncio.run, client.aio.await_ready(timeout=10))
            ready = client.await_ready(timeout=10)
            assert aio_ready.result(timeout=15).state == "ready"
            assert future_ready.get(timeout=15).state == "ready"
            texts = []
            for call in calls:
                try:
                    texts.append(call.result(timeout=15).text)
                except mcp.Error as exc:
                    # A call queued in the incarnation that gave up fails with why.
                    texts.append(exc.kind)
        assert ready.state == "ready"
        assert server.starts() == 2
        assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
        assert all(t in {"1", "2", "3", "4", "closed"} for t in texts)
    finally:
        app.stop()


def test_a_handle_on_a_stopped_client_fails_at_once(make_server, start_client):
    client = start_client(make_server().stdio(), name="gone")
    client.await_ready(timeout=10)
    client.stop()
    started = time.monotonic()
    for handle in (client, mcp.Client.whereis("gone")):
        with pytest.raises(mcp.Error) as err:
            handle.call_tool("add", {"a": 1, "b": 1}, timeout=5)
        assert err.value.kind == "closed"
    assert time.monotonic() - started < 1  # not waited until the deadline


def test_a_handle_on_a_name_nobody_starts_waits_until_its_deadline(make_server):
    client = mcp.Client.whereis("never-started")
    assert client.status().state == "closed"
    started = time.monotonic()
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", {"a": 1, "b": 1}, timeout=0.3)
    elapsed = time.monotonic() - started
    assert (err.value.kind, err.value.reason) == ("closed", "not_started")
    assert "deadline" in err.value.message
    assert 0.3 <= elapsed < 2  # the call's own deadline, not the default 30 s


def test_request_ids_are_never_reused_after_a_connection_crash(
    crashable, make_server, start_client
):
    # The id counter is never reset (docs/connection.md, "Requests"): the restarted
    # connection goes on from where the crashed one stopped.
    server = make_server()
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    for n in range(5):
        client.call_tool("add", {"a": n, "b": 1})
    runtime = client._runtime()
    old = runtime.registry.get("connection")
    old.tell(crashable())
    client.wait_for_state(lambda s: s.state == "ready" and server.starts() == 2, timeout=10)
    client.call_tool("add", {"a": 1, "b": 1})
    pids = server.pids()
    ids = [
        [e["id"] for e in server.log() if e.get("dir") == "in" and "id" in e and e["pid"] == pid]
        for pid in pids
    ]
    first = [i for i in ids[0] if isinstance(i, int)]
    second = [i for i in ids[1] if isinstance(i, int)]
    assert len(first) >= 6 and second, ids
    assert min(second) > max(first), ids


def test_a_connection_crash_ends_the_old_servers_forked_child(crashable, make_server, start_client):
    # The crashed incarnation's server is closed with its whole process group: a child it
    # forked that ignores SIGTERM is killed too (docs/connection.md, "Requests").
    server = make_server(extra_args=["--fork-child"])
    try:
        client = start_client(server.stdio(close_grace=0.3))
        client.await_ready(timeout=10)
        child = int(server.wait_for("child", timeout=10)["child"])
        client._runtime().registry.get("connection").tell(crashable())
        client.wait_for_state(lambda s: s.state == "ready" and server.starts() == 2, timeout=10)
        deadline = time.monotonic() + 5
        while _running(child) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not _running(child), "the crashed incarnation's server left its child running"
    finally:
        for event in server.events("child"):
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(event["child"]), signal.SIGKILL)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def test_a_connection_that_crashes_sending_from_the_callers_thread_fails_that_call(
    make_server, start_client, monkeypatch
):
    """A lone call is sent by its caller's own thread (``Connection._handle_here``); what the
    send raises there crashes the connection as it would on a pool worker: the call fails
    with ``connection_crashed`` at once, and the supervisor brings the connection back."""
    from conduit_mcp.transports.stdio import StdioTransport

    server = make_server()
    client = start_client(server.stdio())
    client.await_ready(timeout=10)
    assert client.call_tool("add", {"a": 1, "b": 1}).text == "2"
    registry = client._runtime().registry
    old = registry.get("connection")
    original = StdioTransport.send_call

    def send_call(self, message, reply):
        if message["params"].get("arguments", {}).get("a") == 41:
            raise RuntimeError("injected send crash")
        return original(self, message, reply)

    monkeypatch.setattr(StdioTransport, "send_call", send_call)
    started = time.monotonic()
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", {"a": 41, "b": 1}, timeout=20)
    assert (err.value.kind, err.value.reason) == ("transport", "connection_crashed")
    assert time.monotonic() - started < 10  # failed at the crash, not at its deadline
    status = client.wait_for_state(
        lambda s: s.state == "ready" and server.starts() == 2, timeout=10
    )
    assert status.state == "ready"
    assert registry.get("connection") is not old
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
