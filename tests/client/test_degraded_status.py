"""A legacy HTTP client whose GET stream was given up says so in its status (``degraded``),
while its requests keep working; a new session clears it."""

from __future__ import annotations

import pytest

import conduit_mcp as mcp
from conduit_mcp import tree
from conduit_mcp.actors.listen import StreamGaveUp

pytestmark = pytest.mark.timeout(30)


def test_a_given_up_get_stream_is_visible_in_the_status(serve_http, start_client) -> None:
    _server, srv = serve_http(era="legacy")
    client = start_client(
        srv.spec(), request_timeout=5.0, max_reconnects=None, backoff=lambda attempt: 0.1
    )
    assert client.await_ready(timeout=10).degraded is None
    runtime = tree.lookup(client.name)
    assert runtime is not None
    conn = runtime.registry.get("connection")
    gen = runtime.shared.transport.gen
    # What the listen actor tells after the GET stream failed 5 times in a row (the count
    # itself: tests/actors/test_listen_stream.py).
    conn.tell(StreamGaveUp(gen - 1))  # a stale attempt's news: ignored
    conn.tell(StreamGaveUp(gen))
    status = client.wait_for_state(lambda s: s.degraded is not None, timeout=5)
    assert (status.state, status.degraded) == ("ready", "get_stream_given_up")
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"  # requests still work
    srv.kill()
    srv.restart()
    # A new session clears it. (Waiting to see the client leave ready first raced: the new
    # initialize can go and come back between two looks at the status.)
    client.wait_for_state(lambda s: s.degraded is None, timeout=10)
    status = client.await_ready(timeout=10)
    assert status.degraded is None  # a new session, a new GET stream
    assert client.call_tool("add", {"a": 2, "b": 2}).text == "4"
    assert isinstance(status, mcp.Status)
