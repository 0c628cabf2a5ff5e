"""The HTTP transport's stream API for the listen actor, against the scripted server on
loopback: a listen's messages go to its sink, not to the connection; closing it is a
cancellation at the server; a stream whose sink is dead closes itself."""

from __future__ import annotations

import queue
from collections.abc import Iterator
from typing import Any

import pykka
import pytest

from conduit_mcp.otp.base import SafeActor
from conduit_mcp.protocol import messages as msgs
from conduit_mcp.protocol.listen import ACKNOWLEDGED, LISTEN, SUBSCRIPTION_ID
from conduit_mcp.transports.base import StreamMessages, TransportUp
from conduit_mcp.transports.http import HttpTransport

pytestmark = pytest.mark.timeout(20)

MODERN = "2026-07-28"


class Recorder(SafeActor):
    def __init__(self, out: queue.Queue[Any]) -> None:
        super().__init__()
        self._out = out

    def receive(self, message: Any) -> Any:
        self._out.put(message)
        return None


@pytest.fixture
def http(make_server: Any) -> Iterator[tuple[Any, HttpTransport, queue.Queue[Any]]]:
    server = make_server()
    proc = server.http_server()
    owner_out: queue.Queue[Any] = queue.Queue()
    owner = Recorder.start(owner_out)
    transport = HttpTransport(proc.spec(), owner, 1, max_frame=1 << 20, max_in_flight=8)
    transport.connect()
    assert isinstance(owner_out.get(timeout=5), TransportUp)
    yield server, transport, owner_out
    transport.close()
    transport.wait_closed(5)
    owner.stop()
    proc.kill()


def listen(tag: str) -> dict[str, Any]:
    return msgs.request(
        tag,
        LISTEN,
        {"notifications": {"toolsListChanged": True}},
        era="modern",
        version=MODERN,
        client_info={"name": "t", "version": "1"},
        capabilities={},
    )


def test_a_listens_messages_go_to_its_sink_and_closing_it_cancels(http):
    server, transport, owner_out = http
    sink_out: queue.Queue[Any] = queue.Queue()
    sink = Recorder.start(sink_out)
    try:
        transport.open_stream("listen-t1", listen("listen-t1"), sink)
        got = sink_out.get(timeout=5)
        assert isinstance(got, StreamMessages) and got.tag == "listen-t1"
        (ack,) = got.messages
        assert ack.method == ACKNOWLEDGED
        assert ack.params["_meta"][SUBSCRIPTION_ID] == "listen-t1"
        assert owner_out.empty()  # nothing of it reached the connection
        transport.close_stream("listen-t1")
        server.wait_for({"event": "stream_closed_by_client", "id": "listen-t1"}, timeout=5)
        server.wait_for({"event": "cancelled", "id": "listen-t1"}, timeout=5)
    finally:
        sink.stop()


def test_a_stream_whose_sink_is_dead_closes_itself(http):
    server, transport, _ = http
    sink = Recorder.start(queue.Queue())
    sink.stop()
    with pytest.raises(pykka.ActorDeadError):
        sink.tell("dead")
    transport.open_stream("listen-t2", listen("listen-t2"), sink)
    # its acknowledgement finds nobody: the stream is closed, the server cancels the listen
    server.wait_for({"event": "stream_closed_by_client", "id": "listen-t2"}, timeout=5)
    server.wait_for({"event": "cancelled", "id": "listen-t2"}, timeout=5)
