"""The test servers forked by the fork server (``conduit_mcp.testing.common.zygote``) are the
processes a plain start makes: their own pid, the caller's environment and working
directory, their exit statuses; a start that cannot be forked is a plain one; and the fork
server ends, with the servers it started, when the process that used it ends."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import conduit_mcp as mcp
from conduit_mcp.testing import AuthServerProcess, ScriptedServer
from conduit_mcp.testing.common.zygote import ForkedProcess, plain_reason

pytestmark = pytest.mark.skipif(not hasattr(os, "pidfd_open"), reason="forks need pidfd_open")


@pytest.fixture(autouse=True, scope="module")
def _warm(tmp_path_factory: pytest.TempPathFactory) -> None:
    """A process's first start is a plain one (the fork server imports meanwhile)."""
    ScriptedServer(tmp_path_factory.mktemp("warm")).http_server().kill()


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        return int(f.read().rsplit(")", 1)[1].split()[1])


def _gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.02)
    return False


def test_a_forked_server_has_the_callers_environment_directory_and_a_pid_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = ScriptedServer(tmp_path / "s")
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    # read when used, not at an interpreter's start: no reason for a plain start (Ray's
    # driver sets it in os.environ for the rest of the process)
    monkeypatch.setenv("PYTHONBREAKPOINT", "0")
    with server.http_server(env={"ZYGOTE_PROBE": "from the caller"}) as srv:
        assert isinstance(srv.proc, ForkedProcess)
        pid = srv.proc.pid
        assert pid not in (os.getpid(), _parent(pid))
        assert _parent(_parent(pid)) == os.getpid()  # the fork server's child, it ours
        client = mcp.Client.start(mcp.Http(srv.url))
        try:
            assert client.call_tool("env", {"name": "ZYGOTE_PROBE"}).text == "from the caller"
            assert client.call_tool("env", {"name": "PYTHONBREAKPOINT"}).text == "0"
            assert client.call_tool("cwd", {}).text == str(work)
            assert client.call_tool("pid", {}).text == str(pid)
        finally:
            client.stop()
        assert server.wait_for({"event": "started"})["pid"] == pid
    assert srv.proc.returncode == -signal.SIGKILL  # the with block kills it


def test_exit_statuses_and_a_restart_are_a_processs(tmp_path: Path) -> None:
    server = ScriptedServer(tmp_path / "s")
    srv = server.http_server()
    first = srv.proc
    assert isinstance(first, ForkedProcess)
    assert srv.stop() == 0  # SIGTERM: the server's own clean end
    assert first.poll() == 0 and not srv.running()
    srv.restart()
    assert srv.proc is not first and srv.proc is not None and srv.proc.pid != first.pid
    srv.proc.send_signal(signal.SIGSTOP)  # a stopped process still dies of SIGKILL
    assert srv.kill() == -signal.SIGKILL
    proc = server.http_server().proc
    assert proc is not None
    try:
        with pytest.raises(subprocess.TimeoutExpired):  # wait's deadline, as Popen's
            proc.wait(timeout=0.05)
    finally:
        proc.kill()
        assert proc.wait(5) == -signal.SIGKILL
    auth = AuthServerProcess(tmp_path / "as")
    assert isinstance(auth.proc, ForkedProcess)
    assert auth.stop() == 0


def test_a_start_that_cannot_be_forked_is_a_plain_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = ScriptedServer(tmp_path / "s")
    # read when an interpreter starts or aiohttp is imported: not the fork server's value
    with server.http_server(env={"SSL_CERT_FILE": str(tmp_path / "ca.pem")}) as srv:
        assert isinstance(srv.proc, subprocess.Popen)
        assert plain_reason() == "SSL_CERT_FILE differ from the fork server's"
    monkeypatch.setenv("CONDUIT_TESTING_FORK", "0")
    with server.http_server() as srv:
        assert isinstance(srv.proc, subprocess.Popen)
        assert _parent(srv.proc.pid) == os.getpid()


def test_the_fork_server_ends_with_its_user_and_kills_the_servers_it_started(
    tmp_path: Path,
) -> None:
    script = textwrap.dedent(
        f"""\
        import os, signal, sys
        from pathlib import Path
        from conduit_mcp.testing import ScriptedServer
        server = ScriptedServer(Path({str(tmp_path / "s")!r}))
        from conduit_mcp.testing.common.zygote import plain_reason
        first = server.http_server()  # plain, while the fork server starts
        srv = server.http_server()
        first.kill()
        print(srv.proc.pid, type(first.proc).__name__, type(srv.proc).__name__, flush=True)
        print(plain_reason(), flush=True)
        os.kill(os.getpid(), signal.SIGKILL)  # no teardown: only the socket's end tells
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == -signal.SIGKILL, done.stderr
    words, reason = done.stdout.splitlines()[0].split(), done.stdout.splitlines()[1]
    assert words[1:] == ["Popen", "ForkedProcess"], (words, reason)
    pid = int(words[0])
    assert _gone(pid, 10), f"the server {pid} outlived the process that started it"
