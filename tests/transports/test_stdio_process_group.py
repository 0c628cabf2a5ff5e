"""A stdio server's children do not outlive it: the client signals the server's whole
process group (docs/connection.md, "Requests") when it stops the client, when the server
exits and is restarted, and when the server is killed. The scripted server's
``--fork-child`` forks a child that ignores SIGTERM and keeps the server's pipes."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from typing import Any

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(60)


def _running(pid: int) -> bool:
    """Whether ``pid`` is a live process (a zombie awaiting its reaper no longer runs)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def _gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not _running(pid):
            return True
        time.sleep(0.02)
    return not _running(pid)


@pytest.fixture
def clients() -> Iterator[list[mcp.Client]]:
    started: list[mcp.Client] = []
    yield started
    for client in started:
        client.stop()


@pytest.fixture
def children() -> Iterator[list[Any]]:
    """The scripted servers of a test: every child they forked is SIGKILLed at teardown,
    whatever the test found (a failing test must not leave them running)."""
    servers: list[Any] = []
    yield servers
    for server in servers:
        for event in server.events("child"):
            try:
                os.kill(int(event["child"]), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _child_of(server: Any, start: int) -> int:
    event = server.wait_for("child", timeout=10, count=start)
    pid = int(event["child"])
    assert _running(pid)
    return pid


def test_stop_ends_a_child_that_ignores_sigterm(make_server, clients, children) -> None:
    server = make_server(extra_args=["--fork-child"])
    children.append(server)
    client = mcp.Client.start(server.stdio(close_grace=0.3))
    clients.append(client)
    client.await_ready(timeout=10)
    child = _child_of(server, 1)
    leader = server.pids()[0]
    started = time.monotonic()
    client.stop()
    took = time.monotonic() - started
    # stop() returns once the whole group is gone: EOF ends the server, the child gets
    # SIGTERM (ignored), then SIGKILL after close_grace.
    assert not _running(child)
    assert not _running(leader)
    assert took < 4, took


def test_a_restart_ends_the_old_servers_child(make_server, clients, children) -> None:
    rules = [{"match": {"tool": "echo"}, "action": "exit", "times": 1, "process": 1}]
    server = make_server(rules=rules, extra_args=["--fork-child"])
    children.append(server)
    client = mcp.Client.start(server.stdio(close_grace=0.3), backoff=lambda attempt: 0.01)
    clients.append(client)
    client.await_ready(timeout=10)
    child = _child_of(server, 1)
    with pytest.raises(mcp.Error) as info:
        client.call_tool("echo", {"text": "x"}, timeout=10)
    assert info.value.kind == "transport"
    assert client.await_ready(timeout=10).state == "ready"
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    assert len(server.pids()) == 2
    assert _gone_within(child, 5), "the first server's child outlived its restart"
    assert _running(_child_of(server, 2))  # the new server's own child runs on


def test_a_killed_server_s_child_is_ended(make_server, clients, children) -> None:
    server = make_server(extra_args=["--fork-child"])
    children.append(server)
    client = mcp.Client.start(server.stdio(close_grace=0.3), backoff=lambda attempt: 0.01)
    clients.append(client)
    client.await_ready(timeout=10)
    child = _child_of(server, 1)
    os.kill(server.pids()[0], signal.SIGKILL)
    assert _gone_within(child, 5), "the killed server's child outlived it"
    server.wait_for("started", timeout=10, count=2)
    assert client.await_ready(timeout=10).state == "ready"
