"""HTTP outcomes, credentials and limits, through the public API against the
scripted server on loopback: 401/403 (kind ``auth``, the parsed challenges), 429
(``overloaded``, Retry-After, never retried), 5xx (``transport``), a broken modern stream (a
read re-issued once, a tool call failed), a refused connection (the reconnect path); static
headers, bearer tokens and auth callables, none of them ever in a log, a repr or an error;
``max_response``, large SSE events, ``pool_limit`` and ``connect_timeout``."""

from __future__ import annotations

import logging
import socket
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(30)

FAST = {"request_timeout": 5.0, "backoff_base": 0.05, "backoff_max": 0.2}
TOKEN = "tok-4b1d8a77c2"
WRONG = "tok-wrong-19e3f0"
API_KEY = "key-6c0e55d1ab"
HIDDEN = "chal-9f2c7e03d4"
CHALLENGE = f'Bearer realm="mcp", error="invalid_token", error_description="{HIDDEN}"'


def start(start_client, spec, **options):
    client = start_client(spec, **{**FAST, **options})
    assert client.await_ready(timeout=5).state == "ready"
    return client


def posts(server, method=None):
    return [
        e
        for e in server.events("http")
        if e["verb"] == "POST" and (method is None or e["headers"].get("mcp-method") == method)
    ]


def fail(client, name, arguments=None, **kw):
    with pytest.raises(mcp.Error) as err:
        client.call_tool(name, arguments or {}, **kw)
    return err.value


def assert_hidden(secrets, caplog, *things):
    """None of ``secrets`` in any log record (message, arguments, traceback) or in the
    str/repr of ``things``."""
    logged = [caplog.text]
    for record in caplog.records:
        logged += [record.getMessage(), repr(record.args), str(record.exc_info)]
    shown = [*logged, *(str(t) for t in things), *(repr(t) for t in things)]
    assert len(caplog.records) > 0  # DEBUG capture is on: the absence below means something
    for secret in secrets:
        for text in shown:
            assert secret not in text


def http_rule(tool, status, headers=None, body=None, nth=1):
    action = {"status": status, "headers": headers or {}}
    if body is not None:
        action["body"] = body
    return {"match": {"tool": tool, "nth": nth}, "action": {"http": action}}


# -- HTTP statuses ------------------------------------------------------------------------------


def test_401_and_403_fail_the_request_with_kind_auth_and_the_challenges(
    serve_http, start_client, caplog
):
    caplog.set_level(logging.DEBUG)
    challenge = {"WWW-Authenticate": CHALLENGE}
    rules = [http_rule("add", 401, challenge, nth=1), http_rule("add", 403, challenge, nth=2)]
    server, srv = serve_http(rules=rules, require_bearer=TOKEN)
    spec = srv.spec(bearer=TOKEN)
    client = start(start_client, spec)
    errors = [fail(client, "add", {"a": 1, "b": 2}) for _ in range(2)]
    assert [(e.kind, e.reason, e.data["status"]) for e in errors] == [
        ("auth", "unauthorized", 401),
        ("auth", "forbidden", 403),
    ]
    for err in errors:
        assert [(c.scheme, c.params) for c in err.data["challenges"]] == [
            ("bearer", {"realm": "mcp", "error": "invalid_token", "error_description": HIDDEN})
        ]
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"  # the connection is fine
    assert [e["status"] for e in posts(server, "tools/call")] == [401, 403, 200]
    assert client.status().state == "ready"
    assert_hidden([TOKEN, HIDDEN], caplog, client, spec, *errors)


def test_429_fails_with_overloaded_and_retry_after_and_is_never_retried(serve_http, start_client):
    # Only the first add is refused: a retry would have succeeded, and the call not raised.
    server, srv = serve_http(rules=[http_rule("add", 429, {"Retry-After": "7"})])
    client = start(start_client, srv.spec())
    err = fail(client, "add", {"a": 1, "b": 2})
    assert (err.kind, err.reason, err.data["retry_after"]) == ("overloaded", "http_429", 7.0)
    assert client.call_tool("add", {"a": 2, "b": 2}).text == "4"
    calls = server.received("tools/call")
    assert [c["params"]["arguments"]["a"] for c in calls] == [1, 2]  # the 429 went once
    assert [e["status"] for e in posts(server, "tools/call")] == [429, 200]
    assert client.status().state == "ready"


def test_5xx_fails_with_kind_transport(serve_http, start_client):
    rules = [http_rule("add", 500, nth=1), http_rule("add", 503, body="busy", nth=2)]
    server, srv = serve_http(rules=rules)
    client = start(start_client, srv.spec())
    errors = [fail(client, "add", {"a": 1, "b": 2}) for _ in range(2)]
    assert [(e.kind, e.reason) for e in errors] == [
        ("transport", "http_500"),
        ("transport", "http_503"),
    ]
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    assert [e["status"] for e in posts(server, "tools/call")] == [500, 503, 200]  # no retry


# -- broken modern streams ----------------------------------------------------------------------


def test_a_broken_stream_on_a_read_is_reissued_once_with_a_new_id(serve_http, start_client):
    rules = [
        {"match": {"method": method}, "action": {"drop_stream": 0}, "times": 1}
        for method in ("tools/list", "resources/read")
    ]
    server, srv = serve_http(rules=rules)
    client = start(start_client, srv.spec())
    assert "add" in {t.name for t in client.list_tools().items}
    assert client.read_resource("test://static/hello").contents[0]["text"] == "Hello, world!"
    for method in ("tools/list", "resources/read"):
        sent = server.received(method)
        assert len(sent) == 2 and sent[0]["id"] != sent[1]["id"]
    dropped = [e["id"] for e in server.events("stream_dropped")]
    assert dropped == [server.received(m)[0]["id"] for m in ("tools/list", "resources/read")]


def test_a_read_broken_twice_fails_with_transport(serve_http, start_client):
    rule = {"match": {"method": "tools/list"}, "action": {"drop_stream": 0}, "times": 2}
    server, srv = serve_http(rules=[rule])
    client = start(start_client, srv.spec())
    with pytest.raises(mcp.Error) as err:
        client.list_tools()
    assert (err.value.kind, err.value.reason) == ("transport", "stream_broken")
    assert len(server.received("tools/list")) == 2
    assert "add" in {t.name for t in client.list_tools().items}


def test_a_broken_stream_on_a_tool_call_fails_it_with_stream_broken(serve_http, start_client):
    rules = [
        {"match": {"tool": "add"}, "action": {"drop_stream": 0}, "times": 1},
        {"match": {"tool": "progress"}, "action": {"drop_stream": 1}, "times": 1},
    ]
    server, srv = serve_http(rules=rules)
    client = start(start_client, srv.spec())
    err = fail(client, "add", {"a": 1, "b": 2})
    assert (err.kind, err.reason) == ("transport", "stream_broken")
    seen: list[mcp.Progress] = []
    err = fail(client, "progress", {"steps": 3, "delay": 0.05}, on_progress=seen.append)
    assert (err.kind, err.reason) == ("transport", "stream_broken")
    assert [p.progress for p in seen] == [1]  # what came before the break was delivered
    # They may have run: never re-sent.
    assert [c["params"]["name"] for c in server.received("tools/call")] == ["add", "progress"]
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"


# -- an unreachable server ----------------------------------------------------------------------


def test_a_refused_connection_takes_the_reconnect_path(serve_http, start_client):
    server, srv = serve_http()
    client = start(start_client, srv.spec(), max_reconnects=None, backoff=lambda n: 0.1)
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    srv.kill()
    # A read: should a pooled connection to the dead server be picked, its broken stream is
    # re-issued on a new connection, which is refused.
    with pytest.raises(mcp.Error) as err:
        client.list_tools(timeout=3)
    assert err.value.kind == "transport"
    status = client.wait_for_state("reconnecting", timeout=5)
    assert status.reason == "unreachable"
    srv.restart()
    status = client.await_ready(timeout=5)
    assert (status.state, status.era) == ("ready", "modern")
    assert client.call_tool("add", {"a": 2, "b": 2}).text == "4"
    assert server.starts() == 2


# -- credentials --------------------------------------------------------------------------------


def test_static_headers_go_with_every_request_and_never_show(serve_http, start_client, caplog):
    caplog.set_level(logging.DEBUG)
    server, srv = serve_http()
    spec = srv.spec(headers={"X-Api-Key": API_KEY})
    client = start(start_client, spec)
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    errors = [fail(client, "never", timeout=0.2), fail(client, "nope")]
    # never's http event is logged once the client closed its stream (status None)
    server.wait_for(lambda e: e.get("event") == "http" and e["status"] is None)
    http = server.events("http")
    assert len(http) >= 4 and all(e["headers"]["x-api-key"] == API_KEY for e in http)
    assert_hidden([API_KEY], caplog, client, spec, *errors)


def test_a_bearer_token_is_sent_and_never_shows(serve_http, start_client, caplog):
    caplog.set_level(logging.DEBUG)
    server, srv = serve_http(require_bearer=TOKEN)
    spec = srv.spec(bearer=TOKEN)
    client = start(start_client, spec)
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    assert all(
        e["headers"]["authorization"] == f"Bearer {TOKEN}" and e["status"] == 200
        for e in server.events("http")
    )
    # Another (wrong) token from the next request on: that request fails with kind auth.
    client.set_auth(bearer=WRONG)
    err = fail(client, "add", {"a": 1, "b": 2})
    assert (err.kind, err.reason, err.data["status"]) == ("auth", "unauthorized", 401)
    (challenge,) = err.data["challenges"]
    assert challenge.scheme == "bearer" and challenge.params["scope"] == "mcp"
    assert challenge.params["resource_metadata"].endswith("/.well-known/oauth-protected-resource")
    client.set_auth(bearer=TOKEN)
    assert client.call_tool("add", {"a": 2, "b": 2}).text == "4"
    assert_hidden([TOKEN, WRONG], caplog, client, spec, err)


def test_without_the_bearer_token_the_client_closes_without_retrying(serve_http, start_client):
    server, srv = serve_http(require_bearer=TOKEN)
    client = start_client(srv.spec(), **FAST)
    status = client.wait_for_state("closed", timeout=5)
    assert status.reason == "auth_required"
    with pytest.raises(mcp.Error):
        client.call_tool("add", {"a": 1, "b": 2})
    assert [e["status"] for e in server.events("http")] == [401]  # the probe, once
    assert server.received("server/discover") == []


def test_without_the_bearer_token_a_request_fails_with_kind_auth(serve_http, start_client):
    _, srv = serve_http(require_bearer=TOKEN)
    client = start_client(srv.spec(), **FAST)
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", {"a": 1, "b": 2}, timeout=3)
    assert (err.value.kind, err.value.reason) == ("auth", "unauthorized")
    assert [c.scheme for c in err.value.data["challenges"]] == ["bearer"]
    assert client.status().reason == "auth_required"
    assert err.value.data["challenges"][0].scheme == "bearer"


def test_an_auth_callable_is_called_for_each_request_off_the_connection_thread(
    serve_http, start_client, caplog
):
    caplog.set_level(logging.DEBUG)
    server, srv = serve_http(require_bearer=TOKEN)
    threads: list[str] = []
    lock = threading.Lock()

    def auth():
        with lock:
            threads.append(threading.current_thread().name)
            number = len(threads)
        return {"Authorization": f"Bearer {TOKEN}", "X-Request-Number": str(number)}

    spec = srv.spec(auth=auth, credential_id="user-1")
    client = start(start_client, spec)
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    client.read_resource("test://static/hello")
    with ThreadPoolExecutor(3) as pool:
        assert [
            f.result(5).text
            for f in [pool.submit(client.call_tool, "add", {"a": i, "b": 0}) for i in range(3)]
        ] == ["0", "1", "2"]
    http = server.events("http")
    numbers = sorted(int(e["headers"]["x-request-number"]) for e in http)
    assert numbers == list(range(1, len(threads) + 1))  # once per request, fresh each time
    assert len(http) == len(threads) >= 6
    assert all(e["status"] == 200 for e in http)
    assert all(name.startswith("conduit-mcp-auth") for name in threads), set(threads)
    assert threading.main_thread().name not in threads
    assert_hidden([TOKEN], caplog, client, spec)


def test_an_auth_callable_that_raises_fails_the_request_with_credentials_failed(
    serve_http, start_client, caplog
):
    caplog.set_level(logging.DEBUG)
    server, srv = serve_http(require_bearer=TOKEN)
    broken = threading.Event()

    def auth():
        if broken.is_set():
            raise RuntimeError(f"vault unreachable; token was {TOKEN}")
        return {"Authorization": f"Bearer {TOKEN}"}

    spec = srv.spec(auth=auth)
    # Without the schema check's first listing, whose cached list opens a listen stream in
    # the background: this test counts every HTTP request the server saw.
    client = start(start_client, spec, validate_output=False)
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    sent = len(server.events("http"))
    broken.set()
    err = fail(client, "add", {"a": 1, "b": 2})
    assert (err.kind, err.reason) == ("auth", "credentials_failed")
    assert len(server.events("http")) == sent  # nothing was sent without credentials
    broken.clear()
    assert client.call_tool("add", {"a": 2, "b": 2}).text == "4"
    assert_hidden([TOKEN], caplog, client, spec, err)


def test_an_auth_callable_failing_at_connect_keeps_reconnecting(serve_http, start_client):
    server, srv = serve_http()
    healthy = threading.Event()

    def auth():
        if not healthy.is_set():
            raise RuntimeError("not yet")
        return {}

    client = start_client(srv.spec(auth=auth), **FAST, max_reconnects=None, backoff=lambda n: 0.05)
    assert client.wait_for_state("reconnecting", timeout=5).reason == "credentials_failed"
    assert server.events("http") == []
    healthy.set()
    assert client.await_ready(timeout=5).era == "modern"
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"


# -- limits -------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["json", "sse"])
def test_a_response_over_max_response_fails_and_the_connection_stays_usable(
    serve_http, start_client, mode
):
    _, srv = serve_http(http_response=mode)
    client = start(start_client, srv.spec(max_response=100_000))
    assert len(client.call_tool("big", {"size": 50_000}).text) == 50_000
    err = fail(client, "big", {"size": 200_000})
    assert (err.kind, err.reason) == ("protocol", "response_too_large")
    assert "max_response" in err.message  # the option to raise
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    assert client.status().state == "ready"


def test_an_sse_event_over_aiohttps_line_limit_is_read(serve_http, start_client):
    _, srv = serve_http(http_response="sse")
    client = start(start_client, srv.spec())
    size = 1_000_000  # one data: line, about twice aiohttp's 512 KiB readline limit
    text = client.call_tool("big", {"size": size}, timeout=10).text
    assert len(text) == size
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"


def max_concurrency(server, method="tools/call"):
    """Most requests the server worked on at once: from each request's arrival to its
    response leaving the protocol core (``--log-out``), matched by id."""
    arrived = {e["id"]: e["t"] for e in server.received(method)}
    answered = {
        e["id"]: e["t"]
        for e in server.log()
        if e.get("dir") == "out" and "method" not in e and e.get("id") in arrived
    }
    assert answered.keys() == arrived.keys()
    marks = [(t, 1) for t in arrived.values()] + [(t, -1) for t in answered.values()]
    running = peak = 0
    for _, step in sorted(marks):  # at equal times an answer (-1) sorts first
        running += step
        peak = max(peak, running)
    return peak


@pytest.mark.parametrize(("pool_limit", "expected"), [(2, 2), (None, 4)])
def test_pool_limit_caps_the_connections(serve_http, start_client, pool_limit, expected):
    server, srv = serve_http(log_out=True)
    client = start(start_client, srv.spec(pool_limit=pool_limit))
    with ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(client.call_tool, "slow", {"seconds": 0.3}) for _ in range(4)]
        assert all(not f.result(10).is_error for f in futures)
    assert len(server.received("tools/call")) == 4
    assert max_concurrency(server) == expected


@pytest.mark.parametrize("era", ["legacy", "modern"])
def test_pool_limit_leaves_the_long_lived_streams_out(serve_http, start_client, era):
    # The legacy GET stream and a modern listen stay open: were they counted in pool_limit=1,
    # no request would ever get a connection.
    server, srv = serve_http(era=era, log_out=True)
    client = start(start_client, srv.spec(pool_limit=1, connect_timeout=0.5), protocol=era)
    if era == "legacy":
        server.wait_for(lambda e: e.get("event") == "http" and e["verb"] == "GET")
    else:
        client.subscribe_notifications(lambda note: None)
        client.await_listening(timeout=5)
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(client.call_tool, "slow", {"seconds": 0.1}) for _ in range(2)]
        assert all(not f.result(10).is_error for f in futures)
    assert max_concurrency(server) == 1


def test_connect_timeout_bounds_waiting_for_a_pooled_connection(serve_http, start_client):
    server, srv = serve_http()
    client = start(start_client, srv.spec(pool_limit=1, connect_timeout=0.2))
    with ThreadPoolExecutor(1) as pool:
        busy = pool.submit(client.call_tool, "slow", {"seconds": 1.0})
        server.wait_for({"dir": "in", "method": "tools/call"})
        began = time.monotonic()
        err = fail(client, "add", {"a": 1, "b": 2})
        assert time.monotonic() - began < 0.8  # not the slow call's second: connect_timeout
        assert (err.kind, err.reason) == ("transport", "connect_timeout")
        assert not busy.result(10).is_error
    assert [c["params"]["name"] for c in server.received("tools/call")] == ["slow"]  # never sent
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"


@pytest.fixture
def blackhole():
    """A loopback port whose accept queue is full: a connect to it hangs (SYNs dropped)."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):
        s = socket.socket()
        s.setblocking(False)
        try:
            s.connect(("127.0.0.1", port))
        except BlockingIOError:
            pass
        fillers.append(s)
    yield port
    for s in [*fillers, listener]:
        s.close()


@pytest.mark.skipif(
    sys.platform != "linux",
    reason="relies on Linux dropping SYNs to a full "
    "accept queue (elsewhere the connect may be refused at once)",
)
def test_connect_timeout_bounds_connecting(blackhole, start_client):
    spec = mcp.Http(f"http://127.0.0.1:{blackhole}/mcp", connect_timeout=0.3)
    began = time.monotonic()
    # probe_timeout and request_timeout far above: only connect_timeout can end the attempt
    client = start_client(
        spec, request_timeout=20, probe_timeout=20, backoff=lambda n: 0.2, max_reconnects=None
    )
    status = client.wait_for_state("reconnecting", timeout=5)
    assert time.monotonic() - began < 3
    assert status.reason == "connect_timeout"
