"""A client that cannot connect says why: the last attempt's reason and cause (the OS error,
the HTTP status, the tail of the server's stderr) in the error's message and data, at once
where retrying cannot help; a wait for ``ready`` that runs out names its deadline and the
option that set it."""

from __future__ import annotations

import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(30)

QUICK = {"request_timeout": 3.0, "backoff_base": 0.02, "backoff_max": 0.05}


def exits_with(message: str, code: int) -> mcp.Stdio:
    script = f"import sys; sys.stderr.write({message!r} + '\\n'); sys.exit({code})"
    return mcp.Stdio(sys.executable, ["-c", script])


def test_a_missing_command_closes_at_once_and_names_it() -> None:
    started = time.monotonic()
    with mcp.Client.start(
        mcp.Stdio("no-such-command-4f1c", ["--token", "arg-secret"]), **QUICK
    ) as client:
        with pytest.raises(mcp.Error) as info:
            client.await_ready(timeout=10)
        assert client.status().reason == "spawn_failed"
    assert time.monotonic() - started < 5  # not the whole deadline, not max_reconnects
    error = info.value
    assert (error.kind, error.reason) == ("closed", "spawn_failed")
    assert "no-such-command-4f1c" in str(error) and "PATH" in str(error)
    assert "arg-secret" not in str(error) and "arg-secret" not in repr(error.data)
    assert error.data["last_reason"] == "spawn_failed"
    assert error.data["detail"].startswith("FileNotFoundError")


def test_a_server_that_exits_at_start_says_its_exit_code_and_stderr() -> None:
    server = exits_with("fatal: config file /etc/x.toml missing", 3)
    with (
        mcp.Client.start(server, max_reconnects=2, **QUICK) as client,
        pytest.raises(mcp.Error) as info,
    ):
        client.await_ready(timeout=10)
    error = info.value
    assert (error.kind, error.reason) == ("closed", "max_reconnects")
    text = str(error)
    assert "3 failed attempts" in text and "max_reconnects=2" in text
    assert "exit code 3" in text
    assert "fatal: config file /etc/x.toml missing" in text
    assert error.data["stderr"].endswith("fatal: config file /etc/x.toml missing")
    # not "the client is closed (max_reconnects)" again: the message explains
    assert "closed (max_reconnects)" not in error.message


def test_await_ready_that_runs_out_names_its_deadline_and_the_last_failure() -> None:
    server = exits_with("boom", 1)
    with (
        mcp.Client.start(server, max_reconnects=None, **QUICK) as client,
        pytest.raises(mcp.Error) as info,
    ):
        client.await_ready(timeout=0.5)
    error = info.value
    assert (error.kind, error.reason) == ("timeout", "deadline")
    assert "within 0.5 s (its timeout argument)" in str(error)
    assert "exit code 1" in str(error) and "boom" in str(error)


def test_a_queued_call_that_runs_out_says_what_the_connection_met() -> None:
    server = exits_with("boom", 1)
    with (
        mcp.Client.start(server, max_reconnects=None, **QUICK) as client,
        pytest.raises(mcp.Error) as info,
    ):
        client.call_tool("add", {"a": 1, "b": 2}, timeout=0.5)
    error = info.value
    assert (error.kind, error.reason) == ("timeout", "deadline")
    assert "request_timeout" in str(error) and "boom" in str(error)


def test_a_refused_connection_says_so(free_tcp_port: int) -> None:
    spec = mcp.Http(f"http://127.0.0.1:{free_tcp_port}/mcp")
    with (
        mcp.Client.start(spec, max_reconnects=1, **QUICK) as client,
        pytest.raises(mcp.Error) as info,
    ):
        client.await_ready(timeout=10)
    error = info.value
    assert (error.kind, error.reason) == ("closed", "max_reconnects")
    assert error.data["last_reason"] == "unreachable"
    assert "ClientConnectorError" in error.data["detail"]
    assert "listening" in str(error)


class _NotMcp(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        self.send_response(404)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(b"<html>not here</html>")

    def do_GET(self) -> None:
        self.do_POST()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def plain_http():
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NotMcp)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()


def test_a_url_that_is_not_an_mcp_endpoint_closes_at_once_and_says_so(plain_http: int) -> None:
    spec = mcp.Http(f"http://127.0.0.1:{plain_http}/not-mcp")
    started = time.monotonic()
    with mcp.Client.start(spec, **QUICK) as client, pytest.raises(mcp.Error) as info:
        client.await_ready(timeout=10)
    assert time.monotonic() - started < 5
    error = info.value
    assert (error.kind, error.reason) == ("closed", "initialize_refused")
    assert "MCP" in str(error) and "http_404" in str(error)


def test_tls_to_a_plain_port_closes_at_once(plain_http: int) -> None:
    spec = mcp.Http(f"https://127.0.0.1:{plain_http}/mcp")
    started = time.monotonic()
    with mcp.Client.start(spec, **QUICK) as client, pytest.raises(mcp.Error) as info:
        client.await_ready(timeout=10)
    assert time.monotonic() - started < 5
    error = info.value
    assert (error.kind, error.reason) == ("closed", "tls_failed")
    assert "https://" in str(error)


def test_an_auth_callable_that_raises_says_so(plain_http: int) -> None:
    def broken() -> dict[str, str]:
        raise RuntimeError("vault unreachable")

    spec = mcp.Http(f"http://127.0.0.1:{plain_http}/mcp", auth=broken)
    with (
        mcp.Client.start(spec, max_reconnects=1, **QUICK) as client,
        pytest.raises(mcp.Error) as info,
    ):
        client.await_ready(timeout=10)
    assert info.value.data["last_reason"] == "credentials_failed"
    assert "auth callable" in str(info.value)
