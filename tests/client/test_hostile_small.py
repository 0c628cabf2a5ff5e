"""Hostile servers, the small cases: a stdio server that closes its stdout but keeps
running, and a redirect to another origin."""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(40)

FAST = {"request_timeout": 5.0, "backoff_base": 0.05, "backoff_max": 0.2}


def test_a_stdio_server_that_closes_stdout_but_keeps_running_is_a_lost_connection(
    make_server, start_client
) -> None:
    rules = [{"match": {"tool": "echo"}, "action": "close_stdout", "times": 1}]
    server = make_server(era="both", rules=rules, extra_args=["--ignore-eof"])
    client = start_client(server.stdio(close_grace=0.5), **FAST)
    client.await_ready(timeout=5)
    with pytest.raises(mcp.Error) as info:
        client.call_tool("echo", {"text": "x"}, timeout=20)
    assert info.value.kind == "transport"
    assert client.await_ready(timeout=10).state == "ready"
    assert client.call_tool("add", {"a": 1, "b": 2}).text == "3"
    assert server.starts() == 2


class _Recorder(BaseHTTPRequestHandler):
    seen: list[dict[str, str]] = []

    def do_POST(self) -> None:
        type(self).seen.append(dict(self.headers))
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.mark.parametrize("status", [307, 308])
def test_a_redirect_to_another_origin_is_refused_and_sends_no_credential(
    serve_http, start_client, status
) -> None:
    other = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=other.serve_forever, daemon=True).start()
    try:
        target = f"http://127.0.0.1:{other.server_address[1]}/mcp"
        rules = [
            {
                "match": {"tool": "add"},
                "action": {"http": {"status": status, "headers": {"Location": target}}},
            }
        ]
        _server, srv = serve_http(era="both", rules=rules)
        spec = mcp.Http(srv.url, headers={"X-Api-Key": "key-9d1f"})
        client = start_client(spec, **FAST)
        client.await_ready(timeout=5)
        with pytest.raises(mcp.Error) as info:
            client.call_tool("add", {"a": 1, "b": 2})
        assert info.value.reason == "redirect"
        assert f"127.0.0.1:{other.server_address[1]}" in str(info.value)
        assert _Recorder.seen == []
    finally:
        other.shutdown()
