"""The cache through the public API (docs/cache.md): the cache readers, freshness, private results
and point lookups, against a real scripted server subprocess.

Every wait has a deadline (a queue, ``server.wait_for``, ``client.wait_for_state``); nothing
sleeps to wait for an event.
"""

from __future__ import annotations

import queue
import random
import threading
import time
from typing import Any

import pykka
import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(30)

ERAS = [pytest.param("auto", id="modern"), pytest.param("legacy", id="legacy")]
TTL = ["--ttl-ms", "60000"]
TOOLS_CHANGED = "notifications/tools/list_changed"
REFRESHED = mcp.LIST_REFRESHED


def tool_names(items: Any) -> list[str]:
    return [t.name for t in items]


def lists(server: Any, method: str = "tools/list") -> int:
    return len(server.received(method))


def ready(start_client: Any, server: Any, protocol: str = "auto", **options: Any) -> mcp.Client:
    client = start_client(server.stdio(), protocol=protocol, **options)
    status = client.await_ready(timeout=10)
    assert status.era == ("legacy" if protocol == "legacy" else "modern")
    return client


def wait_note(notes: queue.Queue[Any], method: str, timeout: float = 5.0, **params: Any) -> Any:
    """The next notification of ``method`` (with those params) within the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        left = deadline - time.monotonic()
        assert left > 0, f"no {method} {params or ''} within {timeout} s"
        try:
            note = notes.get(timeout=left)
        except queue.Empty:
            continue
        if note.method == method and all(note.params.get(k) == v for k, v in params.items()):
            return note


# -- 1. readers ----------------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
def test_cached_reads_are_none_before_any_list_and_never_fetch(make_server, start_client, protocol):
    server = make_server(extra_args=TTL)
    # the output check would list the tools first (docs/validation.md): off here
    client = ready(start_client, server, protocol, validate_output=False)
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"  # a round trip
    assert client.cached_tools() is None
    assert client.cached_prompts() is None
    assert client.cached_resources() is None
    assert client.cached_resource_templates() is None
    assert client.tool("add") is None
    assert client.prompt("greet") is None
    assert client.resource("test://static/hello") is None
    assert client.resource_template("test://item/{id}") is None
    client.ping()  # another round trip: had a reader asked the server, it would be logged
    for method in ("tools/list", "prompts/list", "resources/list", "resources/templates/list"):
        assert server.received(method) == []


@pytest.mark.parametrize("protocol", ERAS)
def test_a_list_and_its_point_lookups_agree(make_server, start_client, protocol):
    server = make_server(page_size=4)  # several pages per list
    client = ready(start_client, server, protocol)
    tools = client.list_all_tools()
    prompts = client.list_all_prompts()
    resources = client.list_all_resources()
    templates = client.list_all_resource_templates()
    # list_all_* returns once its list is stored: the cache holds exactly what it returned
    assert client.cached_tools() == tools and len(tools) > 4
    assert client.cached_prompts() == prompts
    assert client.cached_resources() == resources
    assert client.cached_resource_templates() == templates
    for t in tools:
        assert client.tool(t.name) == t
    for p in prompts:
        assert client.prompt(p.name) == p
    for r in resources:
        assert client.resource(r.uri) == r
    for rt in templates:
        assert client.resource_template(rt.uri_template) == rt
    assert client.prompt("greet").name == "greet"
    assert client.resource("test://static/hello").uri == "test://static/hello"
    assert client.resource_template("test://item/{id}").uri_template == "test://item/{id}"
    assert client.tool("no_such_tool") is None
    assert client.prompt("no_such_prompt") is None


def test_readers_never_message_an_actor(make_server, start_client, monkeypatch):
    """Every read works with actor messaging disabled: no tell, no ask, no proxy."""
    server = make_server()
    client = ready(start_client, server)
    tools = client.list_all_tools()
    client.list_all_prompts()
    client.list_all_resources()
    client.list_all_resource_templates()

    def refused(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a cache read messaged an actor")

    for name in ("tell", "ask", "proxy"):
        monkeypatch.setattr(pykka.ActorRef, name, refused)
    assert client.cached_tools() == tools
    assert client.tool("add") is not None
    assert client.cached_prompts() and client.prompt("greet") is not None
    assert client.cached_resources() and client.resource("test://static/hello") is not None
    assert client.cached_resource_templates()
    assert client.resource_template("test://item/{id}") is not None
    assert client.status().state == "ready"
    monkeypatch.undo()


def test_a_stopped_clients_cache_is_gone(make_server, start_client):
    """What a user observes once the connection is gone for good: the handle ``start``
    returned (which keeps its runtime) raises ``unavailable``/``cache_gone`` on every read;
    a handle looked up by name finds no client (``closed``/``not_started``)."""
    server = make_server()
    client = ready(start_client, server, name="cache-gone")
    client.list_all_tools()
    client.list_all_prompts()
    assert client.tool("add") is not None
    client.stop()
    reads = [
        client.cached_tools,
        client.cached_prompts,
        client.cached_resources,
        client.cached_resource_templates,
        lambda: client.tool("add"),
        lambda: client.prompt("greet"),
        lambda: client.resource("test://static/hello"),
        lambda: client.resource_template("test://item/{id}"),
    ]
    for read in reads:
        with pytest.raises(mcp.Error) as err:
            read()
        assert (err.value.kind, err.value.reason) == ("unavailable", "cache_gone")
    with pytest.raises(mcp.Error) as err:
        mcp.Client.whereis("cache-gone").cached_tools()
    assert (err.value.kind, err.value.reason) == ("closed", "not_started")


def test_a_crashed_connections_cache_dies_with_it(crashable, make_server, start_client):
    """The cache is the connection's: after a crash the restarted connection starts empty
    (reads answer None, never the dead incarnation's lists) and a listing fetches again."""
    server = make_server(extra_args=TTL)
    client = ready(start_client, server)
    client.list_all_tools()
    assert client.tool("add") is not None
    runtime = client._runtime()
    old = runtime.registry.get("connection")
    old.tell(crashable())
    client.wait_for_state(lambda s: s.state == "ready" and server.starts() == 2, timeout=10)
    assert runtime.registry.get("connection") is not old
    assert client.cached_tools() is None
    assert client.tool("add") is None
    assert "add" in tool_names(client.list_all_tools())
    assert lists(server) == 2
    assert client.tool("add") is not None


# -- 2. freshness --------------------------------------------------------------------------


def test_a_fresh_list_is_served_without_asking_the_server(make_server, start_client):
    server = make_server(extra_args=TTL)
    client = ready(start_client, server)
    first = client.list_all_tools()
    assert lists(server) == 1
    assert client.list_all_tools() == first
    assert client.list_all_tools() == first
    assert lists(server) == 1
    # refresh=True always asks
    assert client.list_all_tools(refresh=True) == first
    assert lists(server) == 2


def test_the_asyncio_front_end_serves_fresh_lists_too(make_server, start_client):
    import asyncio

    server = make_server(extra_args=TTL)
    client = ready(start_client, server)

    async def main() -> None:
        first = await client.aio.list_all_tools()
        assert client.tool("add") is not None  # stored before it returned
        assert await client.aio.list_all_tools() == first
        assert lists(server) == 1
        await client.aio.list_all_tools(refresh=True)
        assert lists(server) == 2

    asyncio.run(main())


@pytest.mark.parametrize("protocol", ERAS)
def test_ttl_0_is_never_fresh(make_server, start_client, protocol):
    """The default ttl (0), and every legacy result (no ttlMs at all)."""
    server = make_server(extra_args=TTL if protocol == "legacy" else [])
    client = ready(start_client, server, protocol)
    client.list_all_tools()
    client.list_all_tools()
    assert lists(server) == 2
    assert client.cached_tools() is not None  # stored, just never fresh


def test_the_ttl_is_the_minimum_over_the_pages(make_server, start_client):
    # 22 tools in pages of 10: the third (last) page says ttlMs 0
    last_page = {
        "tools": [{"name": "last", "inputSchema": {"type": "object"}}],
        "ttlMs": 0,
        "cacheScope": "public",
        "resultType": "complete",
    }
    server = make_server(
        page_size=10,
        extra_args=TTL,
        rules=[{"match": {"method": "tools/list", "nth": 3}, "action": {"result": last_page}}],
    )
    client = ready(start_client, server)
    assert tool_names(client.list_all_tools())[-1] == "last"
    assert lists(server) == 3
    client.list_all_tools()
    assert lists(server) == 6  # not fresh: every page asked again

    # the same server without the rule: every page says 60000, so it is fresh
    server = make_server(page_size=10, extra_args=TTL)
    client = ready(start_client, server)
    client.list_all_tools()
    client.list_all_tools()
    assert lists(server) == 3


@pytest.mark.parametrize(("max_cache_ttl", "fetches"), [(0, 3), (None, 1), (300.0, 1)])
def test_max_cache_ttl_clamps_the_servers_ttl(make_server, start_client, max_cache_ttl, fetches):
    server = make_server(extra_args=TTL)
    client = ready(start_client, server, max_cache_ttl=max_cache_ttl)
    for _ in range(3):
        client.list_all_tools()
    assert lists(server) == fetches


def test_list_changed_makes_the_list_stale_at_once(make_server, start_client):
    """A list_changed marks the list stale as soon as it arrives, so a listing
    made after the change was announced includes it (the server sends the notification
    before the add_tool answer, on the same pipe)."""
    server = make_server(extra_args=TTL)
    client = ready(start_client, server)  # legacy lists are never fresh (no ttlMs)
    client.list_all_tools()
    client.await_listening(timeout=5)  # changes are announced on the listen
    for i in range(300):  # the race is lost a few % of the time: 300 tries lose it surely
        name = f"dyn_{i}"
        assert client.call_tool("add_tool", {"name": name}).text == f"added {name}"
        assert name in tool_names(client.list_all_tools()), f"stale list after {name}"


def test_list_changed_makes_the_list_stale(make_server, start_client):
    """The part of the rule that holds today: once the list_changed has reached the
    connection (a subscriber got it), the next listing fetches and includes the change."""
    server = make_server(extra_args=TTL)
    client = ready(start_client, server)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[TOOLS_CHANGED])
    client.list_all_tools()
    client.await_listening(timeout=5)
    client.call_tool("add_tool", {"name": "dyn_0"})
    wait_note(notes, TOOLS_CHANGED)
    assert "dyn_0" in tool_names(client.list_all_tools())
    assert lists(server) >= 2


def test_an_older_fetch_never_replaces_a_newer_list(make_server, start_client):
    """A refresh that started before a caller's listing but answers after it must not
    overwrite the caller's newer list (it would be served, fresh, for the whole ttl)."""
    old = {
        "tools": [{"name": "old_only", "inputSchema": {"type": "object"}}],
        "ttlMs": 60000,
        "cacheScope": "public",
        "resultType": "complete",
    }
    server = make_server(
        extra_args=TTL,
        rules=[
            {"match": {"method": "tools/list", "nth": 2}, "action": {"delay": 0.5, "result": old}}
        ],
    )
    client = ready(start_client, server)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[REFRESHED])
    current = client.list_all_tools()
    client.await_listening(timeout=5)
    client.call_tool("changed", {"kind": "tools"})  # stale; the refresher asks (nth 2)
    server.wait_for("tools/list", timeout=5, count=2)
    assert client.list_all_tools() == current  # asked after the refresh: nth 3, current
    wait_note(notes, REFRESHED, kind="tools", stored=False)  # the older answer: dropped
    assert client.tool("old_only") is None
    assert client.cached_tools() == current
    assert client.list_all_tools() == current
    assert lists(server) == 3


def test_losing_the_connection_makes_every_list_stale(make_server, start_client):
    server = make_server(extra_args=TTL)
    client = ready(start_client, server)
    tools = client.list_all_tools()
    client.list_all_prompts()
    client.list_all_tools()
    assert (lists(server), lists(server, "prompts/list")) == (1, 1)
    with pytest.raises(mcp.Error) as err:
        client.call_tool("crash")
    assert err.value.kind == "transport"
    server.wait_for("started", timeout=10, count=2)
    client.await_ready(timeout=10)
    assert client.cached_tools() == tools  # still readable while stale
    assert client.list_all_tools() == tools
    client.list_all_prompts()
    assert (lists(server), lists(server, "prompts/list")) == (2, 2)
    client.list_all_tools()  # fresh again
    assert lists(server) == 2


# -- 3. private results (HTTP) -------------------------------------------------------------


def http_client(start_client, srv, **spec: Any) -> mcp.Client:
    client = start_client(mcp.Http(srv.url, **spec))
    client.await_ready(timeout=10)
    return client


def test_private_lists_are_served_only_to_the_same_credentials(make_server, start_client):
    server = make_server()
    with server.http_server(ttl_ms=60000, cache_scope="private") as srv:
        client = http_client(start_client, srv, bearer="alice")
        tools = client.list_all_tools()
        client.list_all_tools()
        assert lists(server) == 1  # cached while the same bearer is sent
        assert client.cached_tools() == tools

        client.set_auth(bearer="bob")
        assert client.cached_tools() is None  # deleted at once
        assert client.tool("add") is None
        client.list_all_tools()
        assert lists(server) == 2
        client.list_all_tools()
        assert lists(server) == 2  # bob's own list is cached in turn

        client.set_auth(bearer="alice")  # back: alice's list was deleted, not hidden
        assert client.cached_tools() is None
        client.list_all_tools()
        assert lists(server) == 3
        bearers = [
            e["headers"].get("authorization")
            for e in server.events("http")
            if e.get("verb") == "POST"
        ]
        assert {"Bearer alice", "Bearer bob"} <= set(bearers)


def test_a_public_list_survives_set_auth(make_server, start_client):
    server = make_server()
    with server.http_server(ttl_ms=60000, cache_scope="public") as srv:
        client = http_client(start_client, srv, bearer="alice")
        tools = client.list_all_tools()
        client.set_auth(bearer="bob")
        assert client.cached_tools() == tools
        assert client.list_all_tools() == tools
        assert lists(server) == 1


def test_an_unidentified_auth_callable_never_stores_private_lists(make_server, start_client):
    server = make_server()
    with server.http_server(ttl_ms=60000, cache_scope="private") as srv:
        client = http_client(start_client, srv, auth=lambda: {"Authorization": "Bearer anyone"})
        for n in range(1, 4):
            client.list_all_tools()
            assert lists(server) == n
            assert client.cached_tools() is None
            assert client.tool("add") is None


def test_an_auth_callable_with_a_credential_id_stores_private_lists(make_server, start_client):
    server = make_server()
    with server.http_server(ttl_ms=60000, cache_scope="private") as srv:
        client = http_client(
            start_client, srv, credential_id="alice", auth=lambda: {"Authorization": "Bearer alice"}
        )
        tools = client.list_all_tools()
        client.list_all_tools()
        assert lists(server) == 1
        assert client.cached_tools() == tools
        client.set_auth(auth=lambda: {"Authorization": "Bearer bob"}, credential_id="bob")
        assert client.cached_tools() is None
        client.list_all_tools()
        assert lists(server) == 2


def test_legacy_results_count_as_private(make_server, start_client):
    """A legacy result has no cacheScope: private, so set_auth deletes it (and it has no
    ttlMs: never fresh)."""
    server = make_server(era="legacy")
    with server.http_server() as srv:
        client = http_client(start_client, srv, bearer="alice")
        assert client.status().era == "legacy"
        tools = client.list_all_tools()
        assert client.cached_tools() == tools
        client.set_auth(bearer="bob")
        assert client.cached_tools() is None
        client.list_all_tools()
        assert lists(server) == 2


def test_set_auth_needs_http(make_server, start_client):
    client = ready(start_client, make_server())
    with pytest.raises(mcp.Error) as err:
        client.set_auth(bearer="x")
    assert (err.value.kind, err.value.reason) == ("argument", "transport")


# -- 4. tool_definition_changed ------------------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
def test_a_tool_redefined_under_the_same_name_is_announced(make_server, start_client, protocol):
    changed_add = {
        "name": "add",
        "description": "Add two numbers, differently.",
        "inputSchema": {"type": "object", "properties": {"a": {"type": "number"}}},
    }
    echo = {"name": "echo", "description": "A new echo.", "inputSchema": {"type": "object"}}
    second: dict[str, Any] = {"tools": [changed_add, echo]}
    if protocol != "legacy":  # the same scope as the first list (public), else no "change"
        second.update(ttlMs=0, cacheScope="public", resultType="complete")
    server = make_server(
        rules=[{"match": {"method": "tools/list", "nth": 2}, "action": {"result": second}}]
    )
    client = ready(start_client, server, protocol)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(
        notes, methods=[mcp.TOOL_DEFINITION_CHANGED, REFRESHED, TOOLS_CHANGED]
    )
    before = client.list_all_tools()
    assert client.tool("add").description == "Add two numbers."
    client.await_listening(timeout=5)
    client.call_tool("changed", {"kind": "tools"})  # the refresher fetches the 2nd list
    changed = [wait_note(notes, mcp.TOOL_DEFINITION_CHANGED)]
    wait_note(notes, REFRESHED, kind="tools")
    assert [dict(n.params) for n in changed] == [{"name": "add"}]  # echo changed too
    while True:
        try:
            note = notes.get_nowait()
        except queue.Empty:
            break
        assert note.method != mcp.TOOL_DEFINITION_CHANGED or note.params["name"] == "echo"
    assert client.tool("add").description == "Add two numbers, differently."
    assert [t.name for t in client.cached_tools()] == ["add", "echo"]
    assert len(before) > 2  # the removed tools are not "changed"


# -- 5. the refresher ----------------------------------------------------------------------


@pytest.mark.parametrize("protocol", ERAS)
def test_list_changed_refreshes_a_fetched_list_without_anyone_asking(
    make_server, start_client, protocol
):
    server = make_server()
    client = ready(start_client, server, protocol)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[REFRESHED])
    client.list_all_tools()
    client.await_listening(timeout=5)
    assert client.tool("fresh_tool") is None
    client.call_tool("add_tool", {"name": "fresh_tool"})
    wait_note(notes, REFRESHED, kind="tools")
    assert client.tool("fresh_tool") is not None
    assert "fresh_tool" in tool_names(client.cached_tools())
    assert lists(server) == 2
    # never fetched, never refreshed: prompts changed too, but nobody listed them
    client.call_tool("changed", {"kind": "prompts"})
    client.call_tool("remove_tool", {"name": "fresh_tool"})
    wait_note(notes, REFRESHED, kind="tools")
    assert client.tool("fresh_tool") is None
    assert server.received("prompts/list") == []


def test_a_burst_costs_at_most_two_refreshes_a_second_apart(make_server, start_client):
    server = make_server()
    client = ready(start_client, server)
    notes: queue.Queue[Any] = queue.Queue()
    client.subscribe_notifications(notes, methods=[REFRESHED, TOOLS_CHANGED])
    client.list_all_tools()
    client.call_tool("notify", {"method": TOOLS_CHANGED, "count": 20})
    wait_note(notes, REFRESHED)
    wait_note(notes, REFRESHED)  # the one follow-up owed to the rest of the burst
    starts = [e["t"] for e in server.received("tools/list")]
    assert len(starts) == 3  # the caller's, then two refreshes
    assert starts[2] - starts[1] >= 0.95  # at most one per second per list


# -- acceptance: readers on 8 threads while the list changes -------------------------------


def test_eight_reader_threads_never_see_a_torn_list(make_server, start_client):
    """Eight threads read ``cached_tools()`` and ``tool(name)`` while one thread adds tools
    and re-lists (each ``list_all_tools(refresh=True)`` rewrites the list; the refresher
    rewrites it on every list_changed too), with several pages per list.

    Every snapshot a reader gets must be one whole list: the static tools followed by
    ``dyn_0 .. dyn_{k-1}`` for some k (no duplicate, no gap, no mix of two versions). Tools
    are only ever added and an older fetch never replaces a newer list, so a reader never
    sees the list shrink, and a point lookup of a name it saw listed always finds it."""
    server = make_server(page_size=7)
    client = ready(start_client, server)
    static = tool_names(client.list_all_tools())
    rounds, budget = 100, 3.0  # whichever ends first (a loaded machine does fewer rounds)
    expected = [*static, *(f"dyn_{i}" for i in range(rounds))]
    stop = threading.Event()
    problems: list[str] = []
    seen_lists = [0] * 8

    def reader(index: int) -> None:
        rng = random.Random(index)
        last = -1
        while not stop.is_set():
            items = client.cached_tools()
            names = tool_names(items)
            k = len(names) - len(static)
            if names != expected[: len(names)] or k < 0:
                problems.append(f"torn list: {names[len(static) :]}")
                return
            if k < last:
                problems.append(f"went back from {last} to {k} dynamic tools")
                return
            last = k
            seen_lists[index] += 1
            for name in rng.sample(names, min(5, len(names))):
                found = client.tool(name)
                if found is None or found.name != name:
                    problems.append(f"{name} listed but tool({name!r}) is {found!r}")
                    return
            for item in items[-3:]:
                if client.tool(item.name) is None:
                    problems.append(f"{item.name} vanished")
                    return
            # Pacing, not waiting: eight readers spinning on the GIL would starve the
            # connection and the I/O loop that the writes go through.
            time.sleep(0.0005)

    threads = [threading.Thread(target=reader, args=(i,), daemon=True) for i in range(8)]
    for t in threads:
        t.start()
    added = rewrites = 0
    end = time.monotonic() + budget
    try:
        while added < rounds and time.monotonic() < end and not problems:
            client.call_tool("add_tool", {"name": f"dyn_{added}"})
            added += 1
            if added % 2 == 0:
                client.list_all_tools(refresh=True)
                rewrites += 1
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=5)
    assert not problems, problems[:3]
    assert added >= 10 and rewrites >= 5
    assert all(n > 0 for n in seen_lists)
    final = tool_names(client.list_all_tools(refresh=True))
    assert final == expected[: len(static) + added]
    assert tool_names(client.cached_tools()) == final
