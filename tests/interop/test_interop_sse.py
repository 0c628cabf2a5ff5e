"""conduit-mcp's HTTP+SSE transport (2024-11-05) against the official SDKs' SSE servers.

* ``tests/sse/sse_peers.py modern``: the official ``mcp`` 2.3.0 server's SSE app (``GET /sse``,
  ``POST /messages/``), the tools of ``tests/peers/modern_peer.py``.
* ``tests/sse/sse_peers.py legacy`` on ``.venv-legacy``: ``mcp`` 1.30.0's SSE app.
* server-everything ``sse`` (the TypeScript SDK 1.32's ``SSEServerTransport``: ``GET /sse``,
  ``POST /message``), bound to 127.0.0.1, with a clean environment.
* ``tests/peers/fastmcp_peer.py sse`` on ``make peers``'s fastmcp venv
  (``.peers/python-time-*-fastmcp-*``, never ``.venv``): fastmcp 4.1.6's SSE app; and the
  same peer's streamable HTTP app (``http``), in both eras, which ``sse_fallback`` must not
  fall back from.

Each over ``Sse(url)`` and over ``Http(url, sse_fallback=True)`` (streamable HTTP refused,
then the stream); both eras of the client's logic end legacy, as SSE is legacy only. Last,
``conduit-mcp tools --config FILE`` on a ``type: "sse"`` entry, the real script in a
subprocess.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import conduit_mcp as mcp

from ..conftest import REPO_ROOT, missing_peer
from .http_peer import HttpPeer, free_port

pytestmark = [pytest.mark.timeout(60), pytest.mark.interop]

READY_TIMEOUT = 20.0
SSE_PEERS = Path(__file__).resolve().parent.parent / "sse" / "sse_peers.py"
BIND_LOCALHOST = Path(__file__).resolve().parent.parent / "peers" / "bind-localhost.cjs"
FASTMCP_PEER = REPO_ROOT / "tests" / "peers" / "fastmcp_peer.py"


@pytest.fixture(scope="module")
def fastmcp_python() -> Path:
    """The interpreter of ``make peers``'s fastmcp venv (skipped, or failed in CI, without
    it: the rule of test_interop_hub.py)."""
    found = sorted((REPO_ROOT / ".peers").glob("python-time-*-fastmcp-*/.stamp-installed"))
    if not found:
        missing_peer("fastmcp (the .peers/python-time-*-fastmcp-* venv)")
    return found[-1].parent / "bin" / "python"


@pytest.fixture
def peers() -> Iterator[Callable[..., HttpPeer]]:
    started: list[HttpPeer] = []

    def start(argv: list[str], port: int, **kw: object) -> HttpPeer:
        peer = HttpPeer(argv, port, **kw)  # type: ignore[arg-type]
        started.append(peer)
        return peer

    yield start
    for peer in started:
        peer.kill()


def transports(url: str) -> list[mcp.Http]:
    return [mcp.Sse(url), mcp.Http(url, sse_fallback=True)]


class ProgressLog:
    def __init__(self) -> None:
        self.events: list[tuple[float, float | None]] = []
        self.threads: set[int] = set()

    def __call__(self, p: mcp.Progress) -> None:
        self.events.append((p.progress, p.total))
        self.threads.add(threading.get_ident())


@pytest.mark.parametrize("which", ["Sse", "fallback"])
def test_official_mcp_2_3_sse_server(
    start_client: Callable[..., mcp.Client],
    peers: Callable[..., HttpPeer],
    modern_peer_cmd: list[str],
    which: str,
) -> None:
    port = free_port()
    peer = peers(
        [sys.executable, str(SSE_PEERS), "modern", "--port", str(port)], port, ready=[], path="/sse"
    )
    spec = transports(peer.url)[which == "fallback"]
    client = start_client(spec)
    status = client.await_ready(timeout=READY_TIMEOUT)
    assert (status.state, status.era, status.version) == ("ready", "legacy", "2025-11-25")
    assert status.origin == ("pinned" if which == "Sse" else "probe")
    assert client.server_info().name == "conduit-modern-peer"
    names = {t.name for t in client.list_all_tools(timeout=10)}
    assert {"add", "echo", "slow_count"} <= names
    assert client.call_tool("add", {"a": 2, "b": 3}, timeout=10).text == "5"
    log = ProgressLog()
    result = client.call_tool(
        "slow_count", {"steps": 3, "delay": 0.01}, on_progress=log, timeout=15
    )
    assert result.text == "counted to 3"
    assert [e[0] for e in log.events] == [1.0, 2.0, 3.0]
    assert client.read_resource("peer://greeting", timeout=10).contents[0]["text"] == (
        "hello from the modern peer"
    )
    assert client.call_tool("no-such-tool", {}, timeout=10).is_error  # the SDK's way
    assert client.status().state == "ready"


def test_official_mcp_2_3_sse_server_oldest_version_and_restart(
    start_client: Callable[..., mcp.Client],
    peers: Callable[..., HttpPeer],
    modern_peer_cmd: list[str],
) -> None:
    port = free_port()
    argv = [sys.executable, str(SSE_PEERS), "modern", "--port", str(port)]
    peer = peers(argv, port, ready=[], path="/sse")
    # A restarted peer takes seconds to import mcp on a loaded machine: the budget of
    # reconnects (300 x 0.1 s) outlasts it, where the default 10 gave out after about 1 s
    client = start_client(
        mcp.Sse(peer.url), protocol="2024-11-05", backoff=lambda a: 0.1, max_reconnects=300
    )
    assert client.await_ready(timeout=READY_TIMEOUT).version == "2024-11-05"
    assert client.call_tool("add", {"a": 1, "b": 1}, timeout=10).text == "2"
    peer.kill()  # the stream is lost with the process: a new server, a new session
    peers(argv, port, ready=[], path="/sse")
    client.await_ready(timeout=READY_TIMEOUT)
    assert client.call_tool("add", {"a": 1, "b": 1}, timeout=10).text == "2"


@pytest.mark.parametrize("which", ["Sse", "fallback"])
def test_legacy_mcp_1_30_sse_server(
    start_client: Callable[..., mcp.Client],
    peers: Callable[..., HttpPeer],
    legacy_python: Path,
    which: str,
) -> None:
    port = free_port()
    peer = peers(
        [str(legacy_python), str(SSE_PEERS), "legacy", "--port", str(port)],
        port,
        ready=[],
        path="/sse",
    )
    client = start_client(transports(peer.url)[which == "fallback"])
    status = client.await_ready(timeout=READY_TIMEOUT)
    assert (status.state, status.era, status.version) == ("ready", "legacy", "2025-11-25")
    assert client.call_tool("add", {"a": 2, "b": 3}, timeout=10).text == "5"
    assert "echo" in {t.name for t in client.list_all_tools(timeout=10)}


@pytest.mark.parametrize("which", ["Sse", "fallback"])
def test_everything_sse_mode(
    start_client: Callable[..., mcp.Client],
    peers: Callable[..., HttpPeer],
    everything_js: Path,
    which: str,
) -> None:
    port = free_port()
    node = shutil.which("node") or "node"
    clean = {"PATH": "/usr/bin:/bin:/usr/local/bin", "PORT": str(port)}
    peer = peers(
        [node, "--require", str(BIND_LOCALHOST), str(everything_js), "sse"],
        port,
        ready=["listening on port"],
        env=clean,
        path="/sse",
    )
    client = start_client(transports(peer.url)[which == "fallback"])
    status = client.await_ready(timeout=READY_TIMEOUT)
    assert (status.state, status.era, status.version) == ("ready", "legacy", "2025-11-25")
    assert client.server_info().name == "mcp-servers/everything"
    names = {t.name for t in client.list_all_tools(timeout=10)}
    assert {"echo", "trigger-long-running-operation"} <= names
    echoed = client.call_tool("echo", {"message": "over sse"}, timeout=10)
    assert (echoed.is_error, echoed.text) == (False, "Echo: over sse")
    log = ProgressLog()
    result = client.call_tool(
        "trigger-long-running-operation", {"duration": 1, "steps": 2}, on_progress=log, timeout=15
    )
    assert result.text.startswith("Long running operation completed")
    assert log.events == [(1.0, 2.0), (2.0, 2.0)]


@pytest.mark.parametrize("which", ["Sse", "fallback"])
def test_fastmcp_sse_server(
    start_client: Callable[..., mcp.Client],
    peers: Callable[..., HttpPeer],
    fastmcp_python: Path,
    which: str,
) -> None:
    port = free_port()
    argv = [str(fastmcp_python), str(FASTMCP_PEER), "sse", "--port", str(port)]
    peer = peers(argv, port, ready=[], path="/sse")
    client = start_client(transports(peer.url)[which == "fallback"])
    status = client.await_ready(timeout=READY_TIMEOUT)
    assert (status.state, status.era) == ("ready", "legacy")
    assert status.origin == ("pinned" if which == "Sse" else "probe")
    assert client.server_info().name == "conduit-fastmcp-peer"
    assert {"add", "echo", "whoami"} <= {t.name for t in client.list_all_tools(timeout=10)}
    assert client.call_tool("add", {"a": 20, "b": 22}, timeout=10).text == "42"
    assert client.call_tool("whoami", {}, timeout=10).text == "fastmcp"
    refused = client.call_tool("add", {"a": "not a number", "b": 1}, timeout=10)
    assert refused.is_error  # fastmcp's own argument validation, over the stream
    assert client.status().state == "ready"


def test_fastmcp_streamable_http_server_in_both_eras(
    start_client: Callable[..., mcp.Client],
    peers: Callable[..., HttpPeer],
    fastmcp_python: Path,
) -> None:
    port = free_port()
    argv = [str(fastmcp_python), str(FASTMCP_PEER), "http", "--port", str(port)]
    peer = peers(argv, port, ready=[], path="/mcp")
    cases = [
        (mcp.Http(peer.url), {}, ("modern", "2026-07-28", "probe")),
        # The initialize POST is answered, so sse_fallback never opens the old stream: the
        # era stays modern (SSE is legacy only).
        (mcp.Http(peer.url, sse_fallback=True), {}, ("modern", "2026-07-28", "probe")),
        (mcp.Http(peer.url), {"protocol": "2025-11-25"}, ("legacy", "2025-11-25", "pinned")),
    ]
    for spec, options, expected in cases:
        client = start_client(spec, **options)
        status = client.await_ready(timeout=READY_TIMEOUT)
        assert (status.state, (status.era, status.version, status.origin)) == ("ready", expected)
        assert client.server_info().name == "conduit-fastmcp-peer"
        assert "whoami" in {t.name for t in client.list_all_tools(timeout=10)}
        assert client.call_tool("echo", {"text": "streamed"}, timeout=10).text == "streamed"
        client.stop()


def test_cli_reads_an_sse_entry_of_a_config(peers: Callable[..., HttpPeer], tmp_path: Path) -> None:
    port = free_port()
    argv = [sys.executable, str(SSE_PEERS), "modern", "--port", str(port)]
    peer = peers(argv, port, ready=[], path="/sse")
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"legacy_sse": {"type": "sse", "url": peer.url}}}))

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "conduit_mcp", *args, "--config", str(config)],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=45,
            check=False,
            env=dict(os.environ),
        )

    done = cli("tools")
    assert done.returncode == 0, done.stderr
    names = {line.split()[0] for line in done.stdout.splitlines()[1:] if line.strip()}
    assert {"add", "echo", "slow_count"} <= names, done.stdout
    done = cli("tools", "--json")
    assert done.returncode == 0, done.stderr
    add = {t["name"]: t for t in json.loads(done.stdout)}["add"]
    assert add["inputSchema"]["required"] == ["a", "b"]
    done = cli("call", "add", '{"a": 2, "b": 3}')
    assert (done.returncode, done.stdout) == (0, "5\n"), done.stderr
