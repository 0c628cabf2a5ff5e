"""The handshake gate: at most so many connections of a process handshake at once, the rest
wait in ``connecting`` with no deadline running, and every turn comes back (docs/connection.md,
"Many connections at once")."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

import conduit_mcp as mcp
from conduit_mcp.actors import admission
from conduit_mcp.actors.admission import Gate
from conduit_mcp.testing import ScriptedServer
from conduit_mcp.testing.waiting import until

pytestmark = pytest.mark.timeout(60)

HANDSHAKING = ("discovering", "initializing")


def test_turns_are_given_in_order_and_a_gone_waiter_passes_its_turn_on() -> None:
    gate = Gate(1)
    woken: list[str] = []
    assert gate.enter("a", lambda: True)
    assert not gate.enter("b", lambda: False)  # its connection is gone by its turn
    assert not gate.enter("c", lambda: woken.append("c") or True)
    assert not gate.enter("d", lambda: woken.append("d") or True)
    gate.leave("d")  # left the line before its turn: never woken
    assert gate.waiting() == 2
    gate.leave("a")
    assert woken == ["c"] and gate.holds("c") and not gate.holds("b")
    assert gate.enter("c", lambda: True)  # asking again while holding: still its own
    gate.leave("c")
    gate.leave("c")  # idempotent
    assert (gate.holding(), gate.waiting(), woken) == (0, 0, ["c"])


def test_a_newcomer_does_not_jump_the_line() -> None:
    gate = Gate(1)
    assert gate.enter("a", lambda: True)
    assert not gate.enter("b", lambda: True)
    gate.leave("a")  # b holds it now
    assert not gate.enter("c", lambda: True)
    assert gate.holds("b") and not gate.holds("c")


def test_two_turns_five_clients_all_ready_none_timed_out_while_waiting(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each server takes 0.8 s before it reads its first line; with two turns the five
    handshakes run two at a time, and the last one waits longer than the clients' 1.5 s
    ``request_timeout``: had a waiting connection's deadline run, it would have timed out
    into ``reconnecting``."""
    monkeypatch.setattr(admission, "_PROCESS", Gate(2))
    server = ScriptedServer(tmp_path, extra_args=["--startup-delay", "0.8"])
    clients = [mcp.Client.start(server.stdio(), request_timeout=1.5) for _ in range(5)]
    most = [0]
    waited = threading.Event()
    seen: set[str] = set()
    try:
        deadline = time.monotonic() + 30
        while True:  # bounded: 30 s
            states = [c.status().state for c in clients]
            seen.update(states)
            running = sum(s in HANDSHAKING for s in states)
            most[0] = max(most[0], running)
            if running == 2 and "connecting" in states:
                waited.set()
            if all(s == "ready" for s in states) or time.monotonic() > deadline:
                break
            threading.Event().wait(0.005)
        assert [c.status().state for c in clients] == ["ready"] * 5
        assert most[0] == 2 and waited.is_set()
        assert "reconnecting" not in seen  # no deadline ran out while a client waited
        assert server.starts() == 5  # no connection timed out and started its server again
        assert admission._PROCESS.holding() == 0  # every turn came back
        assert all(c.call_tool("add", {"a": 1, "b": 2}).text == "3" for c in clients)
    finally:
        mcp.Client.stop_all(clients)


def test_a_client_stopped_while_it_waits_gives_its_place_back(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = Gate(1)
    monkeypatch.setattr(admission, "_PROCESS", gate)
    server = ScriptedServer(tmp_path, extra_args=["--startup-delay", "0.5"])
    first = mcp.Client.start(server.stdio())
    second = mcp.Client.start(server.stdio())
    try:
        until(lambda: gate.waiting() == 1, what="the second client in line")
        assert second.status().state == "connecting"
        second.stop()
        assert gate.waiting() == 0
        first.await_ready(timeout=20)
        assert gate.holding() == 0
        third = mcp.Client.start(server.stdio())  # the gate is whole: no turn was lost
        third.await_ready(timeout=20)
        third.stop()
        assert server.starts() == 2  # the stopped client never started its server
    finally:
        first.stop()
        second.stop()


def test_a_server_that_hangs_its_handshake_holds_its_turn_for_the_lease_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from conduit_mcp.actors import core

    gate = Gate(1)
    monkeypatch.setattr(admission, "_PROCESS", gate)
    monkeypatch.setattr(core, "LEASE_SECONDS", 0.5)
    hung = ScriptedServer(tmp_path / "hung", extra_args=["--startup-delay", "30"])
    fine = ScriptedServer(tmp_path / "fine")
    first = mcp.Client.start(hung.stdio(), probe_timeout=20)
    until(lambda: gate.holds(first._runtime().connection().actor_urn), what="the hung one's turn")
    second = mcp.Client.start(fine.stdio())
    try:
        started = time.monotonic()
        second.await_ready(timeout=10)  # after the hung one's lease, not its 20 s probe
        assert time.monotonic() - started < 10
        assert first.status().state == "discovering"  # its handshake goes on, turnless
        assert gate.holding() == 0
    finally:
        mcp.Client.stop_all([first, second])
