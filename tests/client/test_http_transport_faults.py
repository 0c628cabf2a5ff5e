"""The HTTP transport's own faults and redirects, through the public API: a redirect within
the origin is followed, one elsewhere is refused before a byte goes there (see also
test_hostile_small.py), and an exception inside the HTTP client is never taken as evidence
about the server."""

from __future__ import annotations

import threading
from typing import Any

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(40)

FAST = {"request_timeout": 5.0, "backoff_base": 0.05, "backoff_max": 0.2}


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_a_redirect_within_the_origin_is_followed(serve_http, start_client, era) -> None:
    _server, srv = serve_http(
        era=era,
        rules=[
            {
                "match": {"tool": "add"},
                "action": {"http": {"status": 307, "headers": {"Location": "/mcp"}}},
                "times": 1,
            }
        ],
    )
    client = start_client(mcp.Http(srv.url, headers={"X-Api-Key": "key-77"}), **FAST)
    assert client.await_ready(timeout=5).era == era
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"


def test_a_redirect_to_another_port_names_only_the_origin(serve_http, start_client) -> None:
    # The target's path and query may be credentials: the error names its origin only.
    target = "http://127.0.0.1:9/elsewhere?token=tok-5521"
    rule = {
        "match": {"tool": "add"},
        "action": {"http": {"status": 308, "headers": {"Location": target}}},
    }
    _server, srv = serve_http(era="modern", rules=[rule])
    client = start_client(mcp.Http(srv.url), **FAST)
    client.await_ready(timeout=5)
    with pytest.raises(mcp.Error) as info:
        client.call_tool("add", {"a": 1, "b": 2})
    assert (info.value.kind, info.value.reason) == ("transport", "redirect")
    assert "http://127.0.0.1:9" in str(info.value)
    assert "tok-5521" not in str(info.value) and "elsewhere" not in str(info.value)
    # The connection is unharmed.
    assert client.call_tool("echo", {"text": "still"}).text == "still"


class _FlakyAuth:
    """An auth callable whose first answer aiohttp refuses (a CR/LF in a header value): an
    exception inside the transport, raised before a byte is sent."""

    def __init__(self, bad: int) -> None:
        self.bad = bad
        self.calls = 0
        self.lock = threading.Lock()

    def __call__(self) -> dict[str, str]:
        with self.lock:
            self.calls += 1
            bad = self.calls <= self.bad
        return {"X-Api-Key": "key\r\nX-Evil: 1" if bad else "key-ok"}


def test_a_transport_exception_during_the_probe_is_not_legacy_evidence(
    serve_http, start_client
) -> None:
    # Taken as evidence, the failed probe would send the client to the legacy era (or
    # close it): it is the client's own failure, so it reconnects and probes again.
    _server, srv = serve_http(era="both")
    auth = _FlakyAuth(bad=1)
    client = start_client(mcp.Http(srv.url, auth=auth), **FAST)
    status = client.await_ready(timeout=10)
    assert (status.state, status.era) == ("ready", "modern")
    assert auth.calls >= 2


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_a_transport_exception_fails_the_request_as_a_client_error(
    serve_http, start_client, era, caplog
) -> None:
    _server, srv = serve_http(era=era)
    state = {"bad": False}

    def auth() -> dict[str, str]:
        return {"X-Api-Key": "sec\r\nret-3141" if state["bad"] else "key-ok"}

    client = start_client(mcp.Http(srv.url, auth=auth), **FAST)
    assert client.await_ready(timeout=5).era == era
    state["bad"] = True
    with caplog.at_level("DEBUG", logger="conduit_mcp"), pytest.raises(mcp.Error) as info:
        client.call_tool("add", {"a": 1, "b": 2})
    assert (info.value.kind, info.value.reason) == ("transport", "client_error")
    assert "ValueError" in str(info.value)
    assert "ret-3141" not in str(info.value) and "ret-3141" not in caplog.text
    state["bad"] = False
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    assert client.status().state == "ready"


def test_a_redirect_loop_within_the_origin_is_bounded(serve_http, start_client) -> None:
    loop = {"http": {"status": 307, "headers": {"Location": "/mcp"}}}
    _server, srv = serve_http(era="modern", rules=[{"match": {"tool": "add"}, "action": loop}])
    client = start_client(mcp.Http(srv.url), **FAST)
    client.await_ready(timeout=5)
    with pytest.raises(mcp.Error) as info:
        client.call_tool("add", {"a": 1, "b": 2})
    assert (info.value.kind, info.value.reason) == ("transport", "redirect")
    assert "more than 10" in str(info.value)
    assert client.call_tool("echo", {"text": "still"}).text == "still"


def test_requests_racing_a_lost_legacy_session_wait_for_the_new_one(
    serve_http, start_client
) -> None:
    # Requests the connection sends before it hears that the session was lost reach the
    # transport after it forgot the session id: they wait for the new session and are sent
    # in it, never sent without one (which the server refuses: 400, -32600). A steady
    # stream of requests (one every millisecond or so) makes some land in that window.
    expire = [
        {"match": {"tool": "echo", "nth": nth}, "action": {"expire_session": True}}
        for nth in (1, 3, 5, 7, 9)
    ]  # each echo expires the session; its re-send (the next echo message) is answered
    _server, srv = serve_http(era="legacy", rules=expire)
    client = start_client(mcp.Http(srv.url), protocol="legacy", max_in_flight=5000, **FAST)
    client.await_ready(timeout=5)
    futures: list[Any] = []
    stop = threading.Event()

    def stream() -> None:
        n = 0
        while not stop.is_set():
            futures.append((n, client.futures.call_tool("add", {"a": n, "b": 1})))
            n += 1
            stop.wait(0.001)

    sender = threading.Thread(target=stream)
    sender.start()
    try:
        for _ in range(5):
            assert client.call_tool("echo", {"text": "x"}).text == "x"  # re-sent once
    finally:
        stop.set()
        sender.join(timeout=10)
    outcomes: set[str] = set()
    for n, future in futures:
        try:
            got = future.get(timeout=10).text
            outcomes.add("ok" if got == str(n + 1) else f"wrong {got}")
        except mcp.Error as exc:
            outcomes.add(f"{exc.kind}/{exc.reason}")
    assert futures and outcomes == {"ok"}, sorted(outcomes)
