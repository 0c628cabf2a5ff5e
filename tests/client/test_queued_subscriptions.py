"""A ``subscribe``/``unsubscribe`` made before ``ready`` whose deadline passed before the
connection replays it is not applied: like any request, it fails ``timeout`` and changes
nothing (docs/connection.md, "Listens and resource subscriptions").

The deadline must pass while the ``ready`` step itself runs, between the call being
postponed and its replay, so the connection's own deadline timer cannot fail it first: a
log handler on the connection's ``initializing -> ready`` (``discovering -> ready``) record
holds the connection's thread until the call's deadline has passed, as a connection busy
with a large batch would."""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(60)

HELLO = "test://static/hello"
TIMEOUT = 3.0  # the subscribe's; the server is ready well before it, even under load


class _HoldReady(logging.Handler):
    """Holds the connection's thread in its transition to ``ready`` (the ``count``-th one)
    until ``until`` (a monotonic time, set by the test) has passed."""

    def __init__(self, count: int = 1) -> None:
        super().__init__(logging.DEBUG)
        self.count = count
        self.seen = 0
        self.until: float | None = None
        self.held_from: float | None = None
        self.released = threading.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if "-> ready" not in record.getMessage():
            return
        self.seen += 1
        if self.seen != self.count:
            return
        self.held_from = time.monotonic()
        for _ in range(1000):  # bounded: at most ~10 s
            until = self.until
            if until is not None and time.monotonic() > until:
                break
            time.sleep(0.01)
        self.released.set()


@pytest.fixture
def hold() -> Iterator[Any]:
    logger = logging.getLogger("conduit_mcp.connection")
    handlers: list[_HoldReady] = []
    old = logger.level

    def install(count: int = 1) -> _HoldReady:
        handler = _HoldReady(count)
        handlers.append(handler)
        logger.addHandler(handler)
        logger.setLevel(logging.DEBUG)
        return handler

    yield install
    for handler in handlers:
        handler.until = 0.0
        logger.removeHandler(handler)
    logger.setLevel(old)


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_subscribe_past_its_deadline_at_replay_is_not_applied(
    era: str, make_server: Any, start_client: Any, hold: Any
) -> None:
    server = make_server(era=era)
    held = hold()
    client = start_client(server.stdio(), protocol=era)
    before = time.monotonic()
    future = client.futures.subscribe(HELLO, timeout=TIMEOUT)
    held.until = before + TIMEOUT + 0.2  # past the call's deadline
    assert held.released.wait(20)
    assert held.held_from is not None and held.held_from < before + TIMEOUT, (
        "the server was not ready before the call's deadline: the test proves nothing"
    )
    with pytest.raises(mcp.Error) as err:
        future.get(timeout=10)
    assert (err.value.kind, err.value.reason) == ("timeout", "deadline")
    assert client.await_ready(timeout=10).state == "ready"
    if era == "modern":
        client.subscribe_notifications(
            lambda note: None, methods=["notifications/tools/list_changed"]
        )
        assert "resourceSubscriptions" not in client.await_listening(timeout=10)
        return
    # Legacy: not subscribed now, nor in a later session.
    os.kill(server.pids()[-1], signal.SIGKILL)
    server.wait_for("started", timeout=10, count=2)
    assert client.await_ready(timeout=10).state == "ready"
    client.ping(timeout=10)  # a re-subscription would have been sent before this
    assert server.received("resources/subscribe") == []


def test_an_unsubscribe_past_its_deadline_at_replay_is_not_applied(
    make_server: Any, start_client: Any, hold: Any
) -> None:
    server = make_server(era="legacy")
    held = hold(count=2)  # the second session's ready
    client = start_client(server.stdio(), protocol="legacy")
    client.await_ready(timeout=10)
    client.subscribe(HELLO, timeout=10)
    os.kill(server.pids()[-1], signal.SIGKILL)
    # Until the connection has seen the server go, a call would go to the old session.
    deadline = time.monotonic() + 10
    while client.status().state == "ready" and time.monotonic() < deadline:
        time.sleep(0.01)
    before = time.monotonic()
    future = client.futures.unsubscribe(HELLO, timeout=TIMEOUT)
    held.until = before + TIMEOUT + 0.2
    assert held.released.wait(20)
    assert held.held_from is not None and held.held_from < before + TIMEOUT
    with pytest.raises(mcp.Error) as err:
        future.get(timeout=10)
    assert (err.value.kind, err.value.reason) == ("timeout", "deadline")
    # Still subscribed: the second session subscribed it again, and a third does too.
    server.wait_for({"dir": "in", "method": "resources/subscribe"}, timeout=10, count=2)
    os.kill(server.pids()[-1], signal.SIGKILL)
    server.wait_for({"dir": "in", "method": "resources/subscribe"}, timeout=10, count=3)
    assert server.received("resources/unsubscribe") == []
