"""The ``conduit-mcp`` command: the demo, and list/call on any stdio server."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytestmark = pytest.mark.timeout(60)


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "conduit_mcp", *args],
        capture_output=True,
        text=True,
        timeout=50,
        check=False,
    )


def test_demo_prints_the_negotiated_era_and_a_tool_result():
    done = _run("demo")
    assert done.returncode == 0, done.stderr
    assert "era=modern version=2026-07-28" in done.stdout
    assert "progress 3/3" in done.stdout
    assert "add(20, 22) = 42" in done.stdout
    # then over streamable HTTP: the cache answered the second listing, and a change
    # notification refreshed it
    assert "1 tools/list sent" in done.stdout
    assert "notification: notifications/tools/list_changed" in done.stdout
    assert "tool('hello_http') -> hello_http" in done.stdout


def test_tools_and_call_on_an_http_server(make_server):
    with make_server(era="legacy").http_server() as srv:
        tools = _run("tools", "--url", srv.url)
        assert tools.returncode == 0, tools.stderr
        assert any(line.startswith("add:") for line in tools.stdout.splitlines())
        call = _run("call", "add", '{"a": 2, "b": 40}', "--url", srv.url)
        assert call.returncode == 0, call.stderr
        assert json.loads(call.stdout)["structuredContent"] == {"sum": 42}
    bad = _run("tools", "--url", "ftp://nowhere")
    assert bad.returncode == 1 and bad.stderr.startswith("error: config (http.url)")


def test_tools_and_call_on_any_stdio_server():
    server = ["--", sys.executable, "-m", "conduit_mcp.testing", "--era", "legacy"]
    tools = _run("tools", *server)
    assert tools.returncode == 0, tools.stderr
    assert any(line.startswith("add:") for line in tools.stdout.splitlines())
    call = _run("call", "add", '{"a": 2, "b": 40}', *server)
    assert call.returncode == 0, call.stderr
    assert json.loads(call.stdout)["structuredContent"] == {"sum": 42}
    failed = _run("call", "fail", "{}", *server)
    assert failed.returncode == 1  # a tool error is reported through the exit code


def test_a_missing_server_is_a_clear_error_not_a_traceback():
    done = _run("tools", "--", "/nonexistent/server")
    assert done.returncode == 1
    assert done.stderr.startswith("error: ")
    assert "Traceback" not in done.stderr
