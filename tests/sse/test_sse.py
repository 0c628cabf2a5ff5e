"""conduit_mcp.Sse, the HTTP+SSE transport of 2024-11-05, against tests/sse/sse_server.py (a
real aiohttp server on 127.0.0.1): the handshake, the endpoint's origin check, a lost stream
(reconnect, re-initialize), the limits, server requests, cancellation, credentials and the
redaction of secrets, and ``Http(sse_fallback=True)``."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import orjson
import pytest

import conduit_mcp as mcp

from .sse_server import SseServer

pytestmark = pytest.mark.timeout(30)

ADD = {"a": 1, "b": 2}


@pytest.fixture
def serve() -> Iterator[Callable[..., SseServer]]:
    servers: list[SseServer] = []

    def start(**kw: Any) -> SseServer:
        server = SseServer(**kw)
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()


@pytest.fixture
def start_client() -> Iterator[Callable[..., mcp.Client]]:
    clients: list[mcp.Client] = []

    def start(transport: Any, **options: Any) -> mcp.Client:
        client = mcp.Client.start(transport, **options)
        clients.append(client)
        return client

    yield start
    for client in reversed(clients):
        client.stop()


def test_handshake_is_legacy_without_a_probe_and_calls_work(serve, start_client):
    server = serve()
    client = start_client(mcp.Sse(server.url))
    status = client.await_ready(timeout=10)
    assert (status.state, status.era, status.version) == ("ready", "legacy", "2025-11-25")
    assert client.call_tool("add", ADD, timeout=5).text == "3"
    methods = server.methods()
    # straight to initialize: no server/discover probe, whatever protocol="auto" says
    assert methods[:2] == ["initialize", "notifications/initialized"]
    assert "server/discover" not in methods
    assert server.streams == 1
    # every POST went to the endpoint the stream named; the stream was the one GET
    assert {r for r in server.requests if r[0] == "POST"} == {("POST", "/messages/")}


def test_requests_wait_for_the_initialized_notification_to_be_taken(serve, start_client):
    server = serve(initialized_delay=0.3)
    client = start_client(mcp.Sse(server.url))
    assert client.call_tool("add", ADD, timeout=5).text == "3"  # sent as soon as it is ready
    taken = server.events.index(("202", "notifications/initialized"))
    assert server.events.index(("in", "tools/call")) > taken


def test_an_oldest_version_pin_is_offered_and_kept(serve, start_client):
    server = serve()
    client = start_client(mcp.Sse(server.url), protocol="2024-11-05")
    assert client.await_ready(timeout=10).version == "2024-11-05"
    assert server.messages[0]["params"]["protocolVersion"] == "2024-11-05"


def test_a_modern_protocol_option_is_refused_at_start():
    with pytest.raises(mcp.Error) as err:
        mcp.Client.start(mcp.Sse("http://127.0.0.1:9/sse"), protocol="modern")
    assert (err.value.kind, err.value.reason) == ("config", "protocol")
    assert "legacy" in err.value.message


def test_an_endpoint_on_another_origin_is_refused_and_nothing_is_sent_there(serve, start_client):
    elsewhere = serve()
    server = serve(endpoint=lambda s, sid: f"{elsewhere.base}/messages/?session_id={sid}")
    client = start_client(mcp.Sse(server.url, bearer="t0ken-never-sent-elsewhere"))
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", ADD, timeout=10)
    assert (err.value.kind, err.value.reason) == ("protocol", "endpoint_origin")
    assert err.value.data["detail"] == f"http://127.0.0.1:{elsewhere.port}"
    assert "t0ken" not in str(err.value)
    status = client.status()
    assert (status.state, status.reason) == ("closed", "endpoint_origin")
    assert elsewhere.requests == []  # not a byte: no POST, no GET
    assert server.messages == []  # and the stream's own server got no message either


@pytest.mark.parametrize(
    "endpoint",
    ["https://127.0.0.1:{port}/messages/", "http://localhost:{port}/messages/"],
)
def test_another_scheme_or_host_is_another_origin(serve, start_client, endpoint):
    server = serve(endpoint=lambda s, sid: endpoint.format(port=s.port))
    client = start_client(mcp.Sse(server.url))
    with pytest.raises(mcp.Error) as err:
        client.await_ready(timeout=10)
    assert err.value.reason == "endpoint_origin"
    assert server.messages == []


def test_a_post_redirected_to_another_origin_is_not_followed(serve, start_client):
    elsewhere = serve()
    server = serve(
        endpoint=lambda s, sid: f"/redirect/?session_id={sid}",
        redirect_to=f"{elsewhere.base}/messages/",
    )
    client = start_client(mcp.Sse(server.url, bearer="t0ken"), max_reconnects=0)
    with pytest.raises(mcp.Error) as err:
        client.await_ready(timeout=10)
    assert err.value.data["last_reason"] == "redirect"
    assert elsewhere.requests == []


def test_a_stream_redirected_to_another_origin_is_not_followed(serve, start_client):
    elsewhere = serve()
    server = serve(redirect_to=elsewhere.url)
    client = start_client(mcp.Sse(server.base + "/redirect-sse", bearer="t0ken"), max_reconnects=0)
    with pytest.raises(mcp.Error) as err:
        client.await_ready(timeout=10)
    assert err.value.data["last_reason"] == "redirect"
    assert elsewhere.requests == []


def test_a_lost_stream_fails_what_is_pending_with_transport_and_reconnects(serve, start_client):
    server = serve()
    client = start_client(mcp.Sse(server.url), backoff=lambda attempt: 0.05)
    client.await_ready(timeout=10)
    slow: list[BaseException] = []

    def wait_slow() -> None:
        try:
            client.call_tool("slow", {"seconds": 20}, timeout=25)
        except mcp.Error as exc:
            slow.append(exc)

    waiter = threading.Thread(target=wait_slow)
    waiter.start()
    assert server.wait_message("tools/call")  # the slow call is in flight
    with pytest.raises(mcp.Error) as err:
        client.call_tool("drop", {}, timeout=10)  # the server ends the stream instead
    assert (err.value.kind, err.value.reason) == ("transport", "stream_lost")
    waiter.join(10)
    assert [(e.kind, e.reason) for e in slow] == [("transport", "stream_lost")]  # it may have run
    client.await_ready(timeout=10)
    assert client.call_tool("add", ADD, timeout=5).text == "3"
    assert server.streams == 2
    assert server.methods().count("initialize") == 2  # a new session, initialized again


def test_a_session_the_server_forgot_is_a_lost_session(serve, start_client):
    server = serve()
    client = start_client(mcp.Sse(server.url), backoff=lambda attempt: 0.05)
    client.await_ready(timeout=10)
    assert client.call_tool("forget", {}, timeout=5).text == "forgotten"
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", ADD, timeout=5)  # its POST is answered 404
    assert (err.value.kind, err.value.reason) == ("transport", "session_lost")
    client.await_ready(timeout=10)
    assert client.call_tool("add", ADD, timeout=5).text == "3"


def test_an_event_over_max_response_loses_the_stream_not_the_client(serve, start_client):
    server = serve()
    client = start_client(mcp.Sse(server.url, max_response=4096), backoff=lambda attempt: 0.05)
    client.await_ready(timeout=10)
    assert len(client.call_tool("big", {"size": 3000}, timeout=5).text) == 3000  # at the edge
    with pytest.raises(mcp.Error) as err:
        client.call_tool("big", {"size": 5000}, timeout=5)
    assert (err.value.kind, err.value.reason) == ("transport", "response_too_large")
    assert "max_response" in err.value.message
    client.await_ready(timeout=10)
    assert client.call_tool("add", ADD, timeout=5).text == "3"


def test_a_stream_that_drips_and_never_names_an_endpoint_ends_at_the_deadline(serve, start_client):
    server = serve(endpoint="drip")
    client = start_client(mcp.Sse(server.url), request_timeout=0.5, max_reconnects=0)
    with pytest.raises(mcp.Error) as err:
        client.await_ready(timeout=10)
    assert err.value.kind == "closed"
    assert err.value.data["last_reason"] == "initialize_timeout"
    assert server.messages == []


def test_a_stream_that_stalls_on_a_dripped_event_is_found_by_the_health_check(serve, start_client):
    server = serve()
    client = start_client(
        mcp.Sse(server.url),
        health_check=0.2,
        health_timeout=0.3,
        backoff=lambda attempt: 0.05,
    )
    client.await_ready(timeout=10)
    with pytest.raises(mcp.Error) as err:
        client.call_tool("drip", {}, timeout=10)  # never answered: its event never ends
    assert (err.value.kind, err.value.reason) == ("transport", "health_check")
    assert server.wait_streams(2)  # the unanswered ping: a lost session, a new stream
    client.await_ready(timeout=10)
    assert client.call_tool("add", ADD, timeout=5).text == "3"


def test_a_flood_of_notifications_is_bounded_and_the_answer_still_comes(serve, start_client):
    server = serve()
    client = start_client(mcp.Sse(server.url), max_inbox=50)
    client.await_ready(timeout=10)
    assert client.call_tool("flood", {"count": 3000}, timeout=10).text == "flooded"
    assert client.call_tool("add", ADD, timeout=5).text == "3"
    assert client.status().state == "ready"


def dropped(reader: Any, kind: str) -> int:
    """``mcp.client.dropped`` of ``kind``, read from a client's own meter provider."""
    data = reader.get_metrics_data()
    return sum(
        point.value
        for rm in (data.resource_metrics if data is not None else ())
        for sm in rm.scope_metrics
        for metric in sm.metrics
        if metric.name == "mcp.client.dropped"
        for point in metric.data.data_points
        if point.attributes.get("kind") == kind
    )


def test_a_flood_of_server_requests_is_dropped_and_counted_within_the_bounds(serve, start_client):
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    server = serve()
    client = start_client(
        mcp.Sse(server.url), max_inbox=100, max_answer_backlog=0, meter_provider=provider
    )
    client.await_ready(timeout=10)
    assert client.call_tool("ping_flood", {"count": 2000}, timeout=10).text == "sent"
    # the pings came before that answer, so the connection handled them before this call
    assert client.call_tool("add", ADD, timeout=5).text == "3"
    answered = [m for m in server.messages if str(m.get("id", "")).startswith("flood-")]
    assert answered == []  # max_answer_backlog=0: no answer may wait to be POSTed
    assert dropped(reader, "answer") + dropped(reader, "inbound") == 2000
    assert client.status().state == "ready"
    provider.shutdown()


def test_the_server_pings_and_the_answer_is_posted_to_the_endpoint(serve, start_client):
    server = serve()
    client = start_client(mcp.Sse(server.url))
    client.await_ready(timeout=10)
    assert client.call_tool("ping_me", {}, timeout=10).text == "pong"
    answers = [m for m in server.messages if m.get("id") == "srv-1"]
    assert answers == [{"jsonrpc": "2.0", "id": "srv-1", "result": {}}]


def test_a_call_past_its_deadline_is_cancelled_with_the_notification(serve, start_client):
    server = serve()
    client = start_client(mcp.Sse(server.url))
    client.await_ready(timeout=10)
    with pytest.raises(mcp.Error) as err:
        client.call_tool("slow", {"seconds": 5}, timeout=0.3)
    assert err.value.kind == "timeout"
    call = next(m for m in server.messages if m.get("method") == "tools/call")
    client.call_tool("add", ADD, timeout=5)  # after the cancellation, in order on the wire
    cancels = [m for m in server.messages if m.get("method") == "notifications/cancelled"]
    assert [c["params"]["requestId"] for c in cancels] == [call["id"]]


def test_credentials_go_with_every_request_and_never_into_logs_or_reprs(
    serve, start_client, caplog
):
    server = serve(token="s3cret-token")
    caplog.set_level(logging.DEBUG, logger="conduit_mcp")
    spec = mcp.Sse(server.url + "?api_key=k3y-in-query", bearer="s3cret-token")
    client = start_client(spec)
    client.await_ready(timeout=10)
    assert client.call_tool("add", ADD, timeout=5).text == "3"
    assert all(h.get("Authorization") == "Bearer s3cret-token" for h in server.headers)
    shown = " ".join(
        [caplog.text, repr(spec), repr(client), repr(client.status()), str(client.status())]
    )
    for secret in ("s3cret-token", "k3y-in-query", "secret"):  # the session id ends in secret
        assert secret not in shown


def test_a_refused_token_closes_with_auth(serve, start_client):
    server = serve(token="right")
    client = start_client(mcp.Sse(server.url, bearer="wrong"))
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", ADD, timeout=10)
    assert (err.value.kind, err.value.reason) == ("auth", "unauthorized")
    assert err.value.data["challenges"][0].scheme == "bearer"
    assert server.messages == []  # refused at the stream: no POST at all


def test_a_url_that_is_not_an_event_stream_is_said_so(serve, start_client):
    server = serve()
    client = start_client(mcp.Sse(server.base + "/messages/"), max_reconnects=0)
    with pytest.raises(mcp.Error) as err:
        client.await_ready(timeout=10)
    assert err.value.kind == "closed"
    assert err.value.data["last_reason"] == "initialize_refused"
    assert err.value.data["detail"] == "http_405"


def test_sse_options_are_checked_in_their_own_words():
    with pytest.raises(mcp.Error) as err:
        mcp.Sse("http://127.0.0.1/sse", max_response=0)
    assert (err.value.kind, err.value.reason) == ("config", "sse.max_response")
    with pytest.raises(mcp.Error) as err:
        mcp.Sse("http://127.0.0.1/sse", sse_fallback=True)
    assert err.value.reason == "sse.sse_fallback"
    with pytest.raises(mcp.Error) as err:
        mcp.Http("http://127.0.0.1/mcp", sse_fallback="yes")  # type: ignore[arg-type]
    assert err.value.reason == "http.sse_fallback"


def test_a_silent_stream_is_lost_after_stream_idle_and_reopened(serve, start_client):
    server = serve()
    client = start_client(mcp.Sse(server.url, stream_idle=0.3), backoff=lambda attempt: 0.05)
    client.await_ready(timeout=10)
    assert server.wait_streams(2)  # silent past stream_idle: a lost session, a new stream
    client.await_ready(timeout=10)
    assert client.call_tool("add", ADD, timeout=5).text == "3"
    assert server.methods().count("initialize") >= 2


def test_set_auth_changes_the_token_of_the_next_posts(serve, start_client):
    server = serve()
    client = start_client(mcp.Sse(server.url, bearer="first"))
    client.await_ready(timeout=10)
    client.set_auth(bearer="second")
    assert client.call_tool("add", ADD, timeout=5).text == "3"
    assert server.headers[-1]["Authorization"] == "Bearer second"


def test_http_with_sse_fallback_stays_streamable_on_a_streamable_server(make_server, start_client):
    with make_server().http_server() as srv:
        client = start_client(mcp.Http(srv.url, sse_fallback=True))
        status = client.await_ready(timeout=10)
        assert (status.state, status.era) == ("ready", "modern")
        assert client.call_tool("add", ADD, timeout=5).text == "3"
    with make_server().http_server() as srv:
        client = start_client(mcp.Http(srv.url, sse_fallback=True), protocol="legacy")
        assert client.await_ready(timeout=10).era == "legacy"
        assert client.call_tool("add", ADD, timeout=5).text == "3"


def test_http_with_sse_fallback_pinned_legacy_switches_at_its_initialize(serve, start_client):
    server = serve()
    client = start_client(mcp.Http(server.url, sse_fallback=True), protocol="legacy")
    assert client.await_ready(timeout=10).era == "legacy"
    assert client.call_tool("add", ADD, timeout=5).text == "3"
    assert [r for r in server.requests if r[0] == "POST" and r[1] == "/sse"] == [("POST", "/sse")]
    assert server.methods()[0] == "initialize"  # the same initialize, again, over the stream


def test_http_with_sse_fallback_switches_on_405_and_stays_switched(serve, start_client):
    server = serve()
    # POST /sse is 405 on this server (GET only): the spec's recipe opens the GET stream
    client = start_client(mcp.Http(server.url, sse_fallback=True), backoff=lambda attempt: 0.05)
    status = client.await_ready(timeout=10)
    assert (status.state, status.era) == ("ready", "legacy")
    assert client.call_tool("add", ADD, timeout=5).text == "3"
    posts_to_stream = [r for r in server.requests if r == ("POST", "/sse")]
    assert 1 <= len(posts_to_stream) <= 2  # the probe and the initialize, once each
    with pytest.raises(mcp.Error):
        client.call_tool("drop", {}, timeout=10)
    client.await_ready(timeout=10)
    assert client.call_tool("add", ADD, timeout=5).text == "3"
    # the reconnect went straight to the stream: the switch is remembered
    assert [r for r in server.requests if r == ("POST", "/sse")] == posts_to_stream


def test_http_without_sse_fallback_does_not_open_the_stream(serve, start_client):
    server = serve()
    client = start_client(mcp.Http(server.url), max_reconnects=0)
    with pytest.raises(mcp.Error):
        client.await_ready(timeout=10)
    assert server.streams == 0


def test_oauth_client_credentials_authorizes_the_stream_and_the_posts(
    serve, start_client, tmp_path
):
    from conduit_mcp.testing import AuthServerProcess

    m2m = {
        "client_id": "m2m-sse",
        "client_secret": "s3cret-m2m-sse",
        "token_endpoint_auth_method": "client_secret_basic",
        "grant_types": ["client_credentials"],
    }
    auth = AuthServerProcess(tmp_path / "as", scopes="mcp", client=[orjson.dumps(m2m).decode()])
    try:
        server = serve(oauth=auth.issuer)
        oauth = mcp.OAuth(
            client_id=m2m["client_id"],
            client_secret=m2m["client_secret"],
            grant="client_credentials",
        )
        client = start_client(mcp.Sse(server.url, auth=oauth), request_timeout=5)
        assert client.call_tool("add", ADD, timeout=10).text == "3"
        assert client.status().state == "ready"
        # the first GET had no token and was refused; the stream and every POST since had one
        assert server.requests[0] == ("GET", "/sse") and "Authorization" not in server.headers[0]
        sent = [
            h
            for r, h in zip(server.requests, server.headers, strict=True)
            if r[1] in ("/sse", "/messages/")
        ]
        assert all(h["Authorization"].startswith("Bearer ") for h in sent[1:])
        assert server.streams == 1 and server.methods().count("initialize") == 1
    finally:
        auth.stop()
