"""No secret in a repr, a log record, an exception text or a crash report (docs/secrets.md).

Each scenario plants a known secret where a user would put one (the server's environment and
arguments, tool arguments), drives the failures that produce logs and errors, crashes the
connection while it holds a call carrying the secret, then searches everything captured.
"""

from __future__ import annotations

import logging
import os
import signal
from concurrent.futures import ThreadPoolExecutor

import pytest

import conduit_mcp as mcp

pytestmark = pytest.mark.timeout(30)

SECRET = "sk-live-7f3a9c1e5b2d4068"


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.texts: list[str] = []
        self.setFormatter(logging.Formatter("%(name)s %(levelname)s %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.texts.append(self.format(record))  # includes the formatted traceback


@pytest.fixture
def captured():
    handler = _Capture()
    root = logging.getLogger()
    old = root.level
    root.setLevel(logging.DEBUG)
    root.addHandler(handler)
    yield handler
    root.removeHandler(handler)
    root.setLevel(old)


def test_no_secret_anywhere(make_server, captured, crashable):

    server = make_server(
        rules=[{"match": {"method": "tools/call", "tool": "echo"}, "action": "garbage", "times": 1}]
    )
    transport = server.stdio(env={"API_TOKEN": SECRET})
    texts: list[str] = [repr(transport), str(transport)]
    client = mcp.Client.start(transport, backoff=lambda a: 0.01)
    try:
        client.await_ready(timeout=10)
        args = {"text": SECRET, "token": SECRET}
        errors: list[BaseException] = []
        # a garbage answer, a timeout with cancel, a late answer, a server error
        for call in (
            lambda: client.call_tool("echo", args, timeout=0.3),
            lambda: client.call_tool("never", args, timeout=0.2),
            lambda: client.call_tool("error", {"code": -32000, "message": "bad", "x": SECRET}),
            lambda: client.call_tool("echo", {"x": object(), "token": SECRET}),
        ):
            try:
                call()
            except mcp.Error as exc:
                errors.append(exc)
        assert len(errors) == 4
        # the server dies with the secret call in flight
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(client.call_tool, "never", args, timeout=10)
            server.wait_for("tools/call", timeout=5)
            os.kill(server.pids()[-1], signal.SIGKILL)
            with pytest.raises(mcp.Error) as err:
                pending.result(timeout=5)
            errors.append(err.value)
        client.await_ready(timeout=10)
        # the connection crashes with the secret call in flight: a crash report is logged
        runtime = client._runtime()
        with ThreadPoolExecutor(1) as pool:
            pending = pool.submit(client.call_tool, "never", args, timeout=10)
            pid = server.pids()[-1]
            server.wait_for(
                lambda e: e.get("method") == "tools/call" and e.get("pid") == pid, timeout=5
            )
            conn = runtime.registry.get("connection")
            texts.append(repr(conn))
            conn.tell(crashable())
            with pytest.raises(mcp.Error) as err:
                pending.result(timeout=5)
            errors.append(err.value)
        texts += [
            repr(client),
            repr(client.status()),
            repr(runtime.shared.transport),
            repr(runtime.config),
        ]
    finally:
        client.stop()
    texts += [t for e in errors for t in (str(e), repr(e), repr(e.args))]
    texts += captured.texts
    assert any(
        "Unhandled exception" in t or "injected connection crash" in t for t in captured.texts
    )
    leaks = [t for t in texts if SECRET in t]
    assert leaks == []


def test_stdio_repr_hides_env_and_args():
    spec = mcp.Stdio("server", [f"--token={SECRET}"], env={"TOKEN": SECRET})
    assert SECRET not in repr(spec)
    assert SECRET not in str(spec)


@pytest.mark.parametrize("era", ["modern", "legacy"])
def test_no_secret_anywhere_over_http(make_server, captured, crashable, era):
    """Over HTTP the secrets are the bearer token, a header value, the session id and tool
    arguments mirrored into ``Mcp-Param-*`` headers: none may reach a repr, a log record
    (a 401's challenge and a crash report included) or an exception text."""
    server = make_server(
        rules=[
            {
                "match": {"method": "tools/call", "tool": "echo"},
                "action": {
                    "http": {
                        "status": 401,
                        "headers": {"WWW-Authenticate": f'Bearer error="{SECRET}"'},
                    }
                },
                "times": 1,
            }
        ]
    )
    with server.http_server(require_bearer=SECRET, header_tools=True) as srv:
        spec = srv.spec(bearer=SECRET, headers={"X-Api-Key": SECRET})
        texts: list[str] = [repr(spec), str(spec)]
        errors: list[BaseException] = []
        client = mcp.Client.start(spec, protocol=era, backoff=lambda a: 0.01)
        try:
            client.await_ready(timeout=10)
            client.list_all_tools()
            for call in (
                lambda: client.call_tool("echo", {"text": SECRET}, timeout=5),  # the 401
                lambda: client.call_tool("never", {"text": SECRET}, timeout=0.3),
                lambda: client.call_tool("weather", {"region": SECRET}, timeout=0.3),
            ):
                try:
                    call()
                except mcp.Error as exc:
                    errors.append(exc)
            assert [e.kind for e in errors][:2] == ["auth", "timeout"]
            runtime = client._runtime()
            texts += [repr(runtime.shared.transport), repr(client), repr(client.status())]
            sessions = {e["session"] for e in server.events("http") if e.get("session")}
            assert (len(sessions) > 0) == (era == "legacy")
            with ThreadPoolExecutor(1) as pool:
                pending = pool.submit(client.call_tool, "never", {"text": SECRET}, timeout=10)
                server.wait_for(
                    lambda e: (
                        e.get("method") == "tools/call"
                        and e.get("params", {}).get("name") == "never"
                    ),
                    count=2,
                    timeout=5,
                )
                conn = runtime.registry.get("connection")
                texts.append(repr(conn))
                conn.tell(crashable())
                with pytest.raises(mcp.Error) as err:
                    pending.result(timeout=5)
                errors.append(err.value)
        finally:
            client.stop()
    texts += [t for e in errors for t in (str(e), repr(e), repr(e.args))]
    texts += captured.texts
    assert any(
        "Unhandled exception" in t or "injected connection crash" in t for t in captured.texts
    )
    for secret in (SECRET, *sessions):
        assert [t for t in texts if secret in t] == []
