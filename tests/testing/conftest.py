"""Fixtures for the scripted test server's own tests: real subprocesses, raw JSON lines."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from conduit_mcp.testing import ScriptedServer
from conduit_mcp.testing.http.process import HttpServerProcess
from conduit_mcp.testing.raw.stdio import RawPeer


class Spawner:
    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.peers: list[RawPeer] = []

    def server(self, **kw: Any) -> ScriptedServer:
        return ScriptedServer(self.tmp_path / "srv", **kw)

    def __call__(
        self,
        server: ScriptedServer | None = None,
        *,
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        **server_kw: Any,
    ) -> tuple[ScriptedServer, RawPeer]:
        srv = server if server is not None else self.server(**server_kw)
        peer = srv.spawn_raw(env=env, cwd=cwd)
        self.peers.append(peer)
        return srv, peer

    def close(self) -> None:
        for peer in self.peers:
            if peer.proc.poll() is None:
                peer.proc.kill()
            peer.close()


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Spawner]:
    spawner = Spawner(tmp_path)
    try:
        yield spawner
    finally:
        spawner.close()


class HttpStarter:
    """Starts scripted HTTP servers (subprocesses); kills whatever still runs at teardown."""

    def __init__(self, tmp_path: Path) -> None:
        self.tmp_path = tmp_path
        self.procs: list[HttpServerProcess] = []

    def __call__(
        self, *, options: Mapping[str, Any] | None = None, **server_kw: Any
    ) -> tuple[ScriptedServer, HttpServerProcess]:
        srv = ScriptedServer(self.tmp_path / "srv", **server_kw)
        proc = srv.http_server(**dict(options or {}))
        self.procs.append(proc)
        return srv, proc

    def close(self) -> None:
        for proc in self.procs:
            if proc.running():
                proc.kill()


@pytest.fixture
def http_server(tmp_path: Path) -> Iterator[HttpStarter]:
    starter = HttpStarter(tmp_path)
    try:
        yield starter
    finally:
        starter.close()
