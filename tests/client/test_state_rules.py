"""Rules of the connection (docs/connection.md) that had no test of their own, each through
the public API against the scripted server: ``initializing`` -> ``authorizing`` on a 401;
``connecting`` bounded by ``request_timeout``; a ``subscribe`` before ``ready`` counting
against ``max_queued``; a dropped listen marking the cache stale; ``set_auth`` credentials
in no repr, log record or crash report."""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import pytest

import conduit_mcp as mcp
from conduit_mcp.testing import AuthServerProcess
from conduit_mcp.transports.stdio import StdioTransport

pytestmark = [pytest.mark.timeout(60), pytest.mark.filterwarnings("ignore::DeprecationWarning")]

HELLO = "test://static/hello"


def transitions(caplog: pytest.LogCaptureFixture) -> list[str]:
    """The connection's transitions, as logged at DEBUG ("connection a -> b (reason r)")."""
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == "conduit_mcp.connection" and r.getMessage().startswith("connection ")
    ]


# -- initializing -> authorizing on a 401 ---------------------------------------------------

M2M = {
    "client_id": "m2m-basic",
    "client_secret": "s3cret-m2m-5e1a",
    "token_endpoint_auth_method": "client_secret_basic",
    "grant_types": ["client_credentials"],
}


def test_a_401_to_initialize_enters_authorizing_and_initializes_again(
    tmp_path: Any, make_server: Any, start_client: Any, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="conduit_mcp.connection")
    auth = AuthServerProcess(
        tmp_path / "as", scopes="mcp,write,offline_access", client=[orjson.dumps(M2M).decode()]
    )
    try:
        server = make_server(era="legacy")
        with server.http_server(require_oauth=auth.issuer) as srv:
            oauth = mcp.OAuth(
                client_id=M2M["client_id"],
                client_secret=M2M["client_secret"],
                grant="client_credentials",
            )
            # protocol="legacy": the first request is initialize (no probe to take the 401).
            client = start_client(mcp.Http(srv.url, auth=oauth), protocol="legacy")
            assert client.await_ready(timeout=20).era == "legacy"
            assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
            posts = [e for e in server.events("http") if e["verb"] == "POST"]
            assert posts[0]["status"] == 401
    finally:
        auth.stop()
    logged = transitions(caplog)
    assert any(t.startswith("connection initializing -> authorizing") for t in logged), logged
    assert any(t.startswith("connection authorizing -> initializing") for t in logged), logged
    assert not any("discovering" in t for t in logged), logged


# -- connecting bounded by request_timeout ----------------------------------------------------


def test_connecting_is_bounded_by_request_timeout(
    make_server: Any, start_client: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A transport that never comes up (its first attempt never spawns the server): the
    # attempt ends at request_timeout with reason connect_timeout, and the next one connects.
    original = StdioTransport.connect
    attempts: list[float] = []

    def connect(self: StdioTransport) -> None:
        attempts.append(time.monotonic())
        if len(attempts) > 1:
            original(self)

    monkeypatch.setattr(StdioTransport, "connect", connect)
    server = make_server()
    started = time.monotonic()
    client = start_client(server.stdio(), request_timeout=0.5, probe_timeout=5)
    status = client.wait_for_state(lambda s: s.reason == "connect_timeout", timeout=10)
    assert status.state in ("reconnecting", "connecting")
    assert client.await_ready(timeout=10).state == "ready"
    assert len(attempts) == 2
    waited = attempts[1] - started
    assert 0.45 <= waited < 3.0, waited
    assert server.starts() == 1


# -- a subscribe before ready counts against max_queued -----------------------------------------


def test_a_subscribe_before_ready_counts_against_max_queued(
    make_server: Any, start_client: Any
) -> None:
    server = make_server(era="legacy", extra_args=["--startup-delay", "1.0"])
    client = start_client(server.stdio(), protocol="legacy", max_queued=1)
    assert client.status().state != "ready"
    subscribed = client.futures.subscribe(HELLO, timeout=20)
    # The queue is full with the subscribe: one more request is refused at once.
    began = time.monotonic()
    with pytest.raises(mcp.Error) as err:
        client.call_tool("add", {"a": 1, "b": 2}, timeout=20)
    assert (err.value.kind, err.value.reason) == ("overloaded", "max_queued")
    assert time.monotonic() - began < 0.9  # at once, not after the server's startup delay
    with pytest.raises(mcp.Error) as err:
        client.futures.subscribe("test://static/blob", timeout=20).get(timeout=5)
    assert (err.value.kind, err.value.reason) == ("overloaded", "max_queued")
    assert subscribed.get(timeout=20) is None
    assert [e["params"]["uri"] for e in server.received("resources/subscribe")] == [HELLO]


# -- a dropped listen marks the cache stale -----------------------------------------------------


def test_a_dropped_listen_marks_the_cache_stale(make_server: Any, start_client: Any) -> None:
    # The first listen's stream is acknowledged, then its TCP connection is cut: the
    # notifications it would have carried may be lost, so the fresh cached list is stale.
    rules = [{"match": {"method": "subscriptions/listen", "nth": 1}, "action": {"drop_stream": 1}}]
    server = make_server(era="modern", rules=rules)
    with server.http_server(ttl_ms=60000) as srv:
        client = start_client(srv.spec(), protocol="modern")
        client.await_ready(timeout=10)
        client.list_all_tools()
        assert len(server.received("tools/list")) == 1
        server.wait_for({"event": "stream_dropped"}, timeout=10)
        # The listen actor told the connection before it reopened the listen; a ping after
        # the reopen is handled after that, so the cache is marked by the ping's answer.
        server.wait_for({"dir": "in", "method": "subscriptions/listen"}, timeout=10, count=2)
        client.ping(timeout=10)
        client.list_all_tools()
        assert len(server.received("tools/list")) == 2


def test_a_listen_that_stays_keeps_the_cache_fresh(make_server: Any, start_client: Any) -> None:
    # The control for the test above: the same steps without the drop serve the cache.
    server = make_server(era="modern")
    with server.http_server(ttl_ms=60000) as srv:
        client = start_client(srv.spec(), protocol="modern")
        client.await_ready(timeout=10)
        client.list_all_tools()
        client.await_listening(timeout=10)
        client.ping(timeout=10)
        client.list_all_tools()
        assert len(server.received("tools/list")) == 1


# -- set_auth credentials in no repr, log or crash report ---------------------------------------

BEARER = "set-auth-bearer-9d81f2c7a4"
HEADER = "set-auth-header-3be05a6e1f"
DYNAMIC = "set-auth-dynamic-72c4d9ab03"
PENDING = "set-auth-pending-5c03e8d1b6"


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.texts: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record))  # with the formatted traceback


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_set_auth_credentials_never_show(make_server: Any, crashable: Any, era: str) -> None:
    captured = _Capture()
    root = logging.getLogger()
    old = root.level
    root.setLevel(logging.DEBUG)
    root.addHandler(captured)
    texts: list[str] = []
    server = make_server(era=era)
    try:
        with server.http_server(require_bearer=BEARER) as srv:
            client = mcp.Client.start(srv.spec(bearer="old-token"), protocol=era)
            try:
                status = client.wait_for_state("closed", timeout=10)
                assert status.reason == "auth_required"
                client.set_auth(bearer=BEARER, headers={"X-Api-Key": HEADER})
                client.reconnect()
                assert client.await_ready(timeout=10).state == "ready"
                assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
                runtime = client._runtime()
                texts += [repr(runtime.spec), repr(runtime.shared.transport), repr(client)]
                client.set_auth(
                    auth=lambda: {"Authorization": f"Bearer {BEARER}", "X-Dynamic": DYNAMIC},
                    headers={"X-Api-Key": HEADER},
                )
                assert client.call_tool("add", {"a": 2, "b": 2}).text == "4"
                last = server.events("http")[-1]["headers"]
                assert (last["x-api-key"], last["x-dynamic"]) == (HEADER, DYNAMIC)
                actors = [runtime.registry.get(n) for n in ("connection", "listen", "notifier")]
                texts += [repr(a) for a in actors if a is not None]
                texts += [
                    repr(client),
                    repr(client.status()),
                    repr(runtime.spec),
                    str(runtime.spec),
                    repr(runtime.shared.transport),
                    repr(runtime.config),
                ]
                # The connection crashes holding the credentials and a call: a crash report.
                with ThreadPoolExecutor(1) as pool:
                    pending = pool.submit(client.call_tool, "never", {}, timeout=10)
                    server.wait_for(
                        lambda e: (e.get("params") or {}).get("name") == "never", timeout=10
                    )
                    conn = runtime.registry.get("connection")
                    conn.tell(crashable())
                    # A set_auth told right behind the crash: still in the mailbox when the
                    # connection dies (answered by terminate), or applied by its successor.
                    try:
                        client.set_auth(
                            auth=lambda: {
                                "Authorization": f"Bearer {BEARER}",
                                "X-Dynamic": DYNAMIC,
                            },
                            headers={"X-Api-Key": HEADER, "X-Pending": PENDING},
                        )
                    except mcp.Error as exc:
                        texts += [str(exc), repr(exc)]
                    with pytest.raises(mcp.Error) as err:
                        pending.result(timeout=10)
                texts += [str(err.value), repr(err.value)]
                # The restarted connection goes on with them.
                client.wait_for_state(
                    lambda s: s.state == "ready" and runtime.registry.get("connection") is not conn,
                    timeout=10,
                )
                assert client.call_tool("add", {"a": 3, "b": 3}).text == "6"
                texts += [repr(runtime.registry.get("connection")), repr(runtime.shared.transport)]
            finally:
                client.stop()
    finally:
        root.removeHandler(captured)
        root.setLevel(old)
    texts += captured.texts
    assert any("injected connection crash" in t for t in captured.texts)
    for secret in (BEARER, HEADER, DYNAMIC, PENDING):
        assert [t for t in texts if secret in t] == [], secret


class _SlowBoom:
    """A message the patched connection holds its thread on until ``go`` is set, then
    crashes on: whatever is told meanwhile is still in its mailbox when it dies."""

    def __init__(self) -> None:
        self.go = threading.Event()


@pytest.fixture
def slow_crash(monkeypatch: pytest.MonkeyPatch) -> type[_SlowBoom]:
    from conduit_mcp.actors.connection import Connection

    original = Connection.on_ready

    def on_ready(self: Any, kind: str, ev: Any) -> Any:
        if isinstance(ev, _SlowBoom):
            assert ev.go.wait(10)
            raise RuntimeError("injected connection crash")
        return original(self, kind, ev)

    monkeypatch.setattr(Connection, "on_ready", on_ready)
    return _SlowBoom


@pytest.mark.parametrize("what", ["set_auth", "reconnect"])
def test_a_request_to_the_connection_pending_at_its_crash_is_answered(
    make_server: Any, start_client: Any, slow_crash: Any, what: str
) -> None:
    # set_auth and reconnect wait for the connection's answer: told just before it
    # crashes, they are answered at once (done: the next incarnation has the credentials,
    # and connects anyway), not left to wait out their timeout.
    server = make_server(era="modern")
    with server.http_server(require_bearer=BEARER) as srv:
        client = start_client(srv.spec(bearer=BEARER), protocol="modern")
        client.await_ready(timeout=10)
        runtime = client._runtime()
        conn = runtime.registry.get("connection")
        boom = slow_crash()
        conn.tell(boom)
        outcome: list[Any] = []

        def ask() -> None:
            began = time.monotonic()
            try:
                if what == "set_auth":
                    client.set_auth(bearer=BEARER, headers={"X-Api-Key": HEADER}, timeout=5)
                else:
                    client.reconnect(timeout=5)
                outcome.append(None)
            except mcp.Error as exc:
                outcome.append(exc)
            outcome.append(time.monotonic() - began)

        with ThreadPoolExecutor(1) as pool:
            done = pool.submit(ask)
            deadline = time.monotonic() + 10
            while conn.actor_inbox.qsize() < 1 and time.monotonic() < deadline:
                time.sleep(0.005)  # until its message waits behind the crash
            assert conn.actor_inbox.qsize() >= 1
            boom.go.set()
            done.result(timeout=10)
        assert outcome[0] is None, outcome
        assert outcome[1] < 3, outcome
        client.wait_for_state(
            lambda s: s.state == "ready" and runtime.registry.get("connection") is not conn,
            timeout=10,
        )
        assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
        if what == "set_auth":
            assert server.events("http")[-1]["headers"]["x-api-key"] == HEADER
