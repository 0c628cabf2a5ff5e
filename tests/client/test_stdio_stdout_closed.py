"""A stdio server that closes its stdout but keeps running is a lost connection: noticed
with nothing pending too, and the old process is ended even when it ignores EOF and
SIGTERM (it can never answer again)."""

from __future__ import annotations

import os
import time

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(40)


def _gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        # a zombie counts as gone: it no longer runs
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except OSError:
            return True
        time.sleep(0.02)
    return False


def test_the_silent_server_is_killed_and_replaced(make_server, start_client) -> None:
    rules = [{"match": {"tool": "echo"}, "action": "close_stdout", "times": 1, "process": 1}]
    server = make_server(rules=rules, extra_args=["--ignore-eof", "--ignore-sigterm"])
    client = start_client(server.stdio(close_grace=0.3), backoff=lambda a: 0.01)
    client.await_ready(timeout=10)
    first = server.pids()[0]
    started = time.monotonic()
    with pytest.raises(mcp.Error) as info:
        client.call_tool("echo", {"text": "x"}, timeout=20)
    assert (info.value.kind, info.value.reason) == ("transport", "stdout_closed")
    assert time.monotonic() - started < 5  # at once, not at the 20 s deadline
    # SIGTERM is ignored: SIGKILL after close_grace ends it.
    assert _gone(first, 5)
    assert client.await_ready(timeout=10).state == "ready"
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    assert len(server.pids()) == 2


def test_an_idle_client_notices_too(make_server, start_client) -> None:
    # The stdout closes on a notification the client sends by itself, with no call
    # pending: the client still reconnects (a second process) instead of staying "ready".
    rules = [
        {
            "match": {"method": "notifications/initialized"},
            "action": "close_stdout",
            "times": 1,
            "process": 1,
        }
    ]
    server = make_server(era="legacy", rules=rules, extra_args=["--ignore-eof"])
    client = start_client(server.stdio(close_grace=0.3), protocol="legacy", backoff=lambda a: 0.01)
    server.wait_for("started", timeout=10, count=2)
    assert client.await_ready(timeout=10).state == "ready"
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
