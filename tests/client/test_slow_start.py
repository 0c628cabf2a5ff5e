"""A server slower to start than ``probe_timeout`` still connects in the modern era (auto
mode, the default): a late ``server/discover`` result, or an ``initialize`` refused with
-32022 naming a modern version, is modern evidence, never a reason to close."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.timeout(40)

MODERN = "2026-07-28"
FAST = {"probe_timeout": 0.5, "request_timeout": 8.0, "backoff_base": 0.05, "backoff_max": 0.2}


@pytest.mark.parametrize("era", ["both", "modern"])
def test_a_stdio_server_that_starts_late_ends_up_modern(make_server, start_client, era) -> None:
    server = make_server(era=era, extra_args=["--startup-delay", "1.5"])
    client = start_client(server.stdio(), **FAST)
    status = client.await_ready(timeout=10)
    assert (status.state, status.era, status.version) == ("ready", "modern", MODERN)
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"


def test_an_http_server_whose_discover_answers_late_ends_up_modern(serve_http, start_client):
    # initialize is refused at once (-32601), the discover answered 1.5 s later: the refusal
    # says nothing final while the probe may still be answered.
    rules = [{"match": {"method": "server/discover"}, "action": {"delay": 1.5}, "times": 1}]
    _server, srv = serve_http(era="modern", rules=rules)
    client = start_client(srv.spec(), **FAST)
    status = client.await_ready(timeout=10)
    assert (status.state, status.era, status.version) == ("ready", "modern", MODERN)
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"


@pytest.mark.parametrize("era", ["both", "modern"])
def test_an_http_server_that_listens_late_ends_up_modern(serve_http, start_client, era):
    _server, srv = serve_http(era=era)
    spec = srv.spec()
    srv.kill()  # not listening yet: the client meets a refused connection first
    client = start_client(spec, **FAST, backoff=lambda attempt: 0.1, max_reconnects=None)
    client.wait_for_state(lambda s: s.state == "reconnecting", timeout=5)
    srv.restart()
    status = client.await_ready(timeout=10)
    assert (status.state, status.era, status.version) == ("ready", "modern", MODERN)
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"


def test_a_legacy_server_that_starts_late_is_still_legacy(make_server, start_client) -> None:
    server = make_server(era="legacy", extra_args=["--startup-delay", "1.5"])
    client = start_client(server.stdio(), **FAST)
    status = client.await_ready(timeout=10)
    assert (status.state, status.era) == ("ready", "legacy")
