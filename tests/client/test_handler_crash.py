"""Killing the handler actor, through the public API: what the server and the caller see
(docs/actor-tree.md, "The tree")."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.actors.handler import HandlerActor


class _Boom:
    """A message the patched handler actor crashes on."""


@pytest.fixture
def crashable(monkeypatch: pytest.MonkeyPatch) -> type[_Boom]:
    original = HandlerActor.receive

    def receive(self: Any, message: Any) -> Any:
        if isinstance(message, _Boom):
            raise RuntimeError("injected crash")
        return original(self, message)

    monkeypatch.setattr(HandlerActor, "receive", receive)
    return _Boom


class Blocking(mcp.Handler):
    def __init__(self) -> None:
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls = 0

    def elicit(self, request: mcp.ElicitRequest, ctx: mcp.HandlerContext) -> Any:
        self.calls += 1
        if self.calls == 1:
            self.entered.set()
            self.release.wait(20)
        return mcp.ElicitResult.accept({"name": f"call {self.calls}"})


ELICIT = {
    "method": "elicitation/create",
    "params": {"message": "Name?", "requestedSchema": {"type": "object", "properties": {}}},
}


def _restarted(client: mcp.Client, old: Any) -> Any:
    registry = client._runtime().registry
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        ref = registry.get("handler")
        if ref is not None and ref is not old and ref.is_alive():
            return ref
        time.sleep(0.01)  # poll, bounded by the deadline
    raise AssertionError("the handler actor was not restarted")


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_a_crashed_handler_fails_its_work_and_the_next_incarnation_serves(
    crashable: type[_Boom], make_server: Any, start_client: Any, era: str
) -> None:
    handler = Blocking()
    client = start_client(make_server().stdio(), protocol=era, handler=handler)
    client.await_ready(timeout=10)
    out: list[Any] = []

    def call() -> None:
        try:
            out.append(client.call_tool("client_request", ELICIT, timeout=20))
        except mcp.Error as exc:
            out.append(exc)

    caller = threading.Thread(target=call)
    caller.start()
    try:
        assert handler.entered.wait(10)
        old = client._runtime().registry.get("handler")
        old.tell(crashable())
        _restarted(client, old)
        caller.join(15)
    finally:
        handler.release.set()
    (outcome,) = out
    if era == "legacy":  # the server was answered an error for the lost work
        assert isinstance(outcome, mcp.CallToolResult)
        assert outcome.structured_content["error"]["code"] == -32603
    else:  # the round's call failed, saying why
        assert isinstance(outcome, mcp.Error)
        assert (outcome.kind, outcome.reason) == ("handler", "stopped")
    # the new incarnation serves the next request; the client never left ready
    again = client.call_tool("client_request", ELICIT, timeout=20)
    assert again.structured_content["response"]["action"] == "accept"
    assert client.status().state == "ready"
