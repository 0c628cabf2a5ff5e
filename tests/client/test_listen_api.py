"""Listens and resource subscriptions (docs/connection.md) through the public API: the
modern ``subscriptions/listen`` (when it opens, its filter, replacing it, reopening it, at
most four) and resource subscriptions in both eras, against a real scripted server.

The server's log is the witness: it records every message it receives in order, and the
``listen`` / ``cancelled`` events in the order it handled them.
"""

from __future__ import annotations

import queue
from typing import Any

import pytest

import conduit_mcp as mcp
from conduit_mcp.testing.waiting import notes_before

pytestmark = pytest.mark.timeout(30)

SID = "io.modelcontextprotocol/subscriptionId"
TOOLS_CHANGED = "notifications/tools/list_changed"
PROMPTS_CHANGED = "notifications/prompts/list_changed"
RESOURCES_CHANGED = "notifications/resources/list_changed"
UPDATED = "notifications/resources/updated"
BARRIER = "test/barrier"
HELLO = "test://static/hello"
BLOB = "test://static/blob"


def ready(start_client: Any, server: Any, protocol: str = "auto", **options: Any) -> mcp.Client:
    client = start_client(server.stdio(), protocol=protocol, **options)
    status = client.await_ready(timeout=10)
    assert status.era == ("legacy" if protocol == "legacy" else "modern")
    return client


def notify(client: mcp.Client, method: str, count: int = 1, params: Any = None) -> None:
    args: dict[str, Any] = {"method": method, "count": count}
    if params is not None:
        args["params"] = params
    client.call_tool("notify", args)


def until_barrier(notes: Any, timeout: float = 5.0) -> list[Any]:
    """Every notification before the next barrier (deadline)."""
    return notes_before(notes, BARRIER, timeout)


def listens(server: Any) -> list[dict[str, Any]]:
    """The subscriptions/listen requests the server received, in order."""
    return server.received("subscriptions/listen")


def filter_of(entry: dict[str, Any]) -> dict[str, Any]:
    return entry["params"]["notifications"]


def wait_listen(server: Any, notifications: dict[str, Any], timeout: float = 5.0) -> Any:
    """The server's ``listen`` event for a listen with exactly that filter (it is logged just
    before the acknowledgement is sent)."""
    return server.wait_for(
        lambda e: e.get("event") == "listen" and e.get("notifications") == notifications,
        timeout=timeout,
    )


def cancelled(server: Any, rid: Any, timeout: float = 5.0) -> Any:
    return server.wait_for({"event": "cancelled", "id": rid}, timeout=timeout)


# -- when a listen opens, and its filter ---------------------------------------------------


def test_no_consumer_no_listen(make_server, start_client):
    server = make_server()
    client = ready(start_client, server)
    client.ping()  # entering ready had its chance to listen before this round trip
    assert listens(server) == []
    # a subscriber for other methods consumes no change notification
    client.subscribe_notifications(queue.Queue(), methods=["notifications/message"])
    client.ping()
    assert listens(server) == []
    client.list_all_tools()  # a cached list: a consumer of tools/list_changed
    wait_listen(server, {"toolsListChanged": True})
    assert [filter_of(e) for e in listens(server)] == [{"toolsListChanged": True}]


def test_a_subscriber_opens_a_listen_for_what_it_wants(make_server, start_client):
    server = make_server()
    client = ready(start_client, server)
    client.subscribe_notifications(queue.Queue(), methods=[PROMPTS_CHANGED])
    assert client.await_listening(timeout=5) == {"promptsListChanged": True}
    assert [filter_of(e) for e in listens(server)] == [{"promptsListChanged": True}]


def test_a_subscriber_of_everything_listens_for_every_advertised_kind(make_server, start_client):
    server = make_server()
    client = ready(start_client, server)
    client.subscribe_notifications(queue.Queue())
    everything = {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourcesListChanged": True,
    }
    assert client.await_listening(timeout=5) == everything


def test_the_filter_is_the_union_and_a_change_replaces_the_listen(make_server, start_client):
    server = make_server()
    client = ready(start_client, server)
    client.list_all_tools()  # a cached list consumes its list_changed
    first = wait_listen(server, {"toolsListChanged": True})
    client.subscribe_notifications(queue.Queue(), methods=[PROMPTS_CHANGED])
    second = wait_listen(server, {"toolsListChanged": True, "promptsListChanged": True})
    cancelled(server, first["id"])
    client.subscribe(HELLO)
    union = {"toolsListChanged": True, "promptsListChanged": True, "resourceSubscriptions": [HELLO]}
    third = wait_listen(server, union)
    cancelled(server, second["id"])
    assert [filter_of(e) for e in listens(server)] == [
        {"toolsListChanged": True},
        {"toolsListChanged": True, "promptsListChanged": True},
        union,
    ]
    # the old listen is closed only once the new one is acknowledged (the server logs the
    # new listen, then acknowledges it, then hears the old one's cancellation)
    log = server.log()
    for old, new in ((first, second), (second, third)):
        opened = log.index(new)
        closed = log.index(server.find({"event": "cancelled", "id": old["id"]})[0])
        assert opened < closed
    assert server.find({"event": "cancelled", "id": third["id"]}) == []
    # a resource subscription is carried by the listen, never sent on its own
    assert server.received("resources/subscribe") == []


def test_a_server_that_advertises_nothing_gets_no_listen(make_server, start_client):
    discover = {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {}, "prompts": {}, "resources": {}},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "quiet", "version": "1"}},
    }
    server = make_server(
        rules=[{"match": {"method": "server/discover"}, "action": {"result": discover}}]
    )
    client = ready(start_client, server)
    client.subscribe_notifications(queue.Queue())
    client.list_all_tools()
    client.list_all_prompts()
    with pytest.raises(mcp.Error) as refused:
        client.subscribe(HELLO)  # resources.subscribe is not advertised either
    assert (refused.value.kind, refused.value.reason) == ("unavailable", "not_supported")
    client.ping()
    assert listens(server) == []
    with pytest.raises(mcp.Error) as err:
        client.await_listening(timeout=0.2)
    assert err.value.kind == "timeout"


def test_legacy_never_listens(make_server, start_client):
    server = make_server()
    client = ready(start_client, server, "legacy")
    client.subscribe_notifications(queue.Queue())
    client.list_all_tools()
    client.ping()
    assert listens(server) == []
    assert client.await_listening(timeout=1) == {}


# -- a listen's life -----------------------------------------------------------------------


@pytest.mark.parametrize("how", ["result", "cancelled"])
def test_a_listen_ended_by_the_server_is_reopened_after_the_backoff(make_server, start_client, how):
    server = make_server()
    client = ready(start_client, server, backoff=lambda attempt: 0.3)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[TOOLS_CHANGED, BARRIER])
    first = wait_listen(server, {"toolsListChanged": True})
    ended = client.call_tool("end_listens", {"how": how})
    assert ended.structured_content == {"ended": [first["id"]]}
    ended_at = server.received("tools/call")[-1]["t"]
    server.wait_for("subscriptions/listen", timeout=5, count=2)
    again = listens(server)[1]
    assert filter_of(again) == {"toolsListChanged": True}
    assert again["id"] != first["id"]
    assert again["t"] - ended_at >= 0.3 * 0.9  # after the backoff, not at once
    # the reopened listen works: a change reaches the subscriber
    server.wait_for(lambda e: e.get("event") == "listen" and e.get("id") == again["id"])
    assert client.await_listening(timeout=5)
    client.call_tool("changed", {"kind": "tools"})
    notify(client, BARRIER)
    assert [n.method for n in until_barrier(notes)] == [TOOLS_CHANGED]
    assert server.find({"event": "cancelled", "id": first["id"]}) == []  # it had ended


def test_at_most_four_listens_at_once(make_server, start_client):
    """Six filter changes while the server is slow to acknowledge: the client never has
    more than four listens open, and ends with one listen carrying the whole union."""
    server = make_server(
        rules=[{"match": {"method": "subscriptions/listen"}, "action": {"delay": 0.4}}]
    )
    client = ready(start_client, server)
    client.subscribe_notifications(queue.Queue(), methods=[TOOLS_CHANGED])
    client.subscribe_notifications(queue.Queue(), methods=[PROMPTS_CHANGED])
    client.subscribe_notifications(queue.Queue(), methods=[RESOURCES_CHANGED])
    client.subscribe(HELLO)
    client.subscribe(BLOB)
    client.subscribe("test://item/1")
    union = {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourcesListChanged": True,
        "resourceSubscriptions": sorted([HELLO, BLOB, "test://item/1"]),
    }
    final = wait_listen(server, union, timeout=10)
    # every listen but the final one is closed in the end
    opened = [e["id"] for e in listens(server)]
    assert opened[-1] == final["id"]
    for rid in opened[:-1]:
        cancelled(server, rid)
    # replay what the server received, in order: never more than four open
    open_ids: set[Any] = set()
    peak = 0
    for e in server.log():
        if e.get("dir") != "in":
            continue
        if e.get("method") == "subscriptions/listen":
            open_ids.add(e["id"])
            peak = max(peak, len(open_ids))
        elif e.get("method") == "notifications/cancelled":
            open_ids.discard(e["params"]["requestId"])
    assert peak == 4
    assert open_ids == {final["id"]}


def test_notifications_of_a_closed_listen_are_not_delivered(make_server, start_client):
    server = make_server()
    client = ready(start_client, server)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes)
    everything = {
        "toolsListChanged": True,
        "promptsListChanged": True,
        "resourcesListChanged": True,
    }
    old = wait_listen(server, everything)
    client.subscribe(HELLO)  # a new filter: a new listen, and the old one is closed
    new = wait_listen(server, {**everything, "resourceSubscriptions": [HELLO]})
    cancelled(server, old["id"])
    notify(client, "test/stray", 1, {"_meta": {SID: old["id"]}, "x": 0})
    notify(client, "test/never_opened", 1, {"_meta": {SID: 987654321}, "x": 0})
    notify(client, "test/live", 1, {"_meta": {SID: new["id"], "other": 1}, "x": 1})
    notify(client, BARRIER)
    got = until_barrier(notes)
    assert [n.method for n in got] == ["test/live"]
    # routed with its subscriptionId removed (and the rest of _meta kept)
    assert dict(got[0].params) == {"x": 1, "_meta": {"other": 1}}


def test_await_listening_waits_for_the_listen_of_the_new_filter(make_server, start_client):
    """``await_listening`` promises that a change made after it returns is not missed: after
    a filter change it waits for the new listen, not the old one's acknowledgement."""
    server = make_server(
        rules=[{"match": {"method": "subscriptions/listen", "nth": 2}, "action": {"delay": 0.3}}]
    )
    client = ready(start_client, server)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[TOOLS_CHANGED, UPDATED, BARRIER])
    assert client.await_listening(timeout=5) == {"toolsListChanged": True}
    client.subscribe(HELLO)  # answered once the new listen is sent; acknowledged 0.3 s later
    assert client.await_listening(timeout=5) == {
        "toolsListChanged": True,
        "resourceSubscriptions": [HELLO],
    }
    client.call_tool("changed", {"kind": "resource", "uri": HELLO})
    notify(client, BARRIER)
    assert [n.method for n in until_barrier(notes)] == [UPDATED]


def test_await_listening_waits_while_an_ended_listen_is_reopened(make_server, start_client):
    server = make_server(
        rules=[{"match": {"method": "subscriptions/listen", "nth": 2}, "action": {"delay": 0.5}}]
    )
    client = ready(start_client, server)
    client.subscribe_notifications(queue.Queue(), methods=[TOOLS_CHANGED])
    assert client.await_listening(timeout=5) == {"toolsListChanged": True}
    client.call_tool("end_listens", {"how": "result"})
    server.wait_for("subscriptions/listen", timeout=5, count=2)  # the client saw the end
    with pytest.raises(mcp.Error) as err:
        client.await_listening(timeout=0.1)  # no listen is acknowledged now
    assert err.value.kind == "timeout"
    assert client.await_listening(timeout=5) == {"toolsListChanged": True}


# -- resource subscriptions ----------------------------------------------------------------


def test_legacy_subscribe_is_sent_and_survives_reconnects(make_server, start_client):
    server = make_server()
    client = ready(start_client, server, "legacy")
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[UPDATED, BARRIER])
    client.subscribe(HELLO)
    assert [e["params"]["uri"] for e in server.received("resources/subscribe")] == [HELLO]
    client.call_tool("changed", {"kind": "resource", "uri": HELLO})
    client.call_tool("changed", {"kind": "resource", "uri": BLOB})  # not subscribed
    notify(client, BARRIER)
    got = until_barrier(notes)
    assert [(n.method, dict(n.params)) for n in got] == [(UPDATED, {"uri": HELLO})]

    with pytest.raises(mcp.Error) as err:
        client.call_tool("crash")
    assert err.value.kind == "transport"
    server.wait_for("started", timeout=10, count=2)
    client.await_ready(timeout=10)
    # the new session was subscribed again before anything else could be asked
    server.wait_for("resources/subscribe", timeout=5, count=2)
    assert server.received("resources/subscribe")[1]["params"]["uri"] == HELLO
    client.call_tool("changed", {"kind": "resource", "uri": HELLO})
    notify(client, BARRIER)
    assert [n.method for n in until_barrier(notes)] == [UPDATED]

    client.unsubscribe(HELLO)
    assert [e["params"]["uri"] for e in server.received("resources/unsubscribe")] == [HELLO]
    client.call_tool("changed", {"kind": "resource", "uri": HELLO})
    notify(client, BARRIER)
    assert until_barrier(notes) == []


def test_modern_subscribe_rides_on_the_listen_and_survives_reconnects(make_server, start_client):
    server = make_server()
    # no tool list cached (the output check would list first): the listen carries only this
    client = ready(start_client, server, validate_output=False)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[UPDATED, BARRIER])
    client.subscribe(HELLO)
    wait_listen(server, {"resourceSubscriptions": [HELLO]})
    assert server.received("resources/subscribe") == []
    assert client.await_listening(timeout=5) == {"resourceSubscriptions": [HELLO]}
    client.call_tool("changed", {"kind": "resource", "uri": HELLO})
    notify(client, BARRIER)
    got = until_barrier(notes)
    assert [(n.method, dict(n.params)) for n in got] == [(UPDATED, {"uri": HELLO})]

    with pytest.raises(mcp.Error):
        client.call_tool("crash")
    server.wait_for("started", timeout=10, count=2)
    client.await_ready(timeout=10)
    relisten = server.wait_for(
        lambda e: e.get("event") == "listen" and e.get("pid") == server.pids()[-1], timeout=5
    )
    assert relisten["notifications"] == {"resourceSubscriptions": [HELLO]}
    client.await_listening(timeout=5)
    client.call_tool("changed", {"kind": "resource", "uri": HELLO})
    notify(client, BARRIER)
    assert [n.method for n in until_barrier(notes)] == [UPDATED]

    client.unsubscribe(HELLO)
    # no consumer of anything left: the listen is closed, nothing reopens
    cancelled(server, relisten["id"])
    client.call_tool("changed", {"kind": "resource", "uri": HELLO})
    notify(client, BARRIER)
    assert until_barrier(notes) == []


@pytest.mark.parametrize("protocol", ["auto", "legacy"])
def test_resource_subscriptions_survive_a_connection_crash(
    crashable, make_server, start_client, protocol
):
    server = make_server()
    # validate_output=False: the call below would list the tools first, and the listen that
    # then adds toolsListChanged may overlap the old one (each sends the update once)
    client = ready(start_client, server, protocol, validate_output=False)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[UPDATED, BARRIER])
    client.subscribe(HELLO)
    runtime = client._runtime()
    old = runtime.registry.get("connection")
    old.tell(crashable())
    client.wait_for_state(lambda s: s.state == "ready" and server.starts() == 2, timeout=10)
    assert runtime.registry.get("connection") is not old
    if protocol == "legacy":
        server.wait_for("resources/subscribe", timeout=2, count=2)
    else:
        server.wait_for(
            lambda e: (
                e.get("event") == "listen"
                and e.get("pid") == server.pids()[-1]
                and HELLO in e["notifications"].get("resourceSubscriptions", ())
            ),
            timeout=2,
        )
    client.call_tool("changed", {"kind": "resource", "uri": HELLO})
    notify(client, BARRIER)
    assert [n.method for n in until_barrier(notes)] == [UPDATED]


def test_subscribe_checks_its_uri(make_server, start_client):
    client = ready(start_client, make_server())
    for bad in ("", None, 3):
        with pytest.raises(mcp.Error) as err:
            client.subscribe(bad)  # type: ignore[arg-type]
        assert (err.value.kind, err.value.reason) == ("argument", "uri")


def test_modern_subscribe_refused_when_the_server_does_not_advertise_it(make_server, start_client):
    # A modern server whose discover result advertises no resources.subscribe: a resource
    # subscription could never be honoured, so it is refused instead of silently kept.
    discover = {
        "resultType": "complete",
        "supportedVersions": ["2026-07-28"],
        "capabilities": {"tools": {"listChanged": True}, "resources": {}},
        "_meta": {"io.modelcontextprotocol/serverInfo": {"name": "nosub", "version": "1"}},
    }
    server = make_server(
        rules=[{"match": {"method": "server/discover"}, "action": {"result": discover}}]
    )
    client = start_client(server.stdio())
    assert client.await_ready(timeout=10).era == "modern"
    with pytest.raises(mcp.Error) as err:
        client.subscribe("test://static/hello", timeout=5)
    assert (err.value.kind, err.value.reason) == ("unavailable", "not_supported")
    assert server.received("subscriptions/listen") == []
