"""The two real servers of the OAuth interop tests, each a subprocess on loopback:

* :class:`OidcProvider`: npm ``oidc-provider`` (``peers/oidc_provider.mjs``) on Node >= 22, an
  authorization server that writes each event a test waits for as a JSON line on its output;
* :class:`ProtectedServer`: the official ``mcp`` 2.3.0 server on uvicorn
  (``peers/protected_peer.py``), the resource it protects.

Both ports are chosen before either starts: the provider names the MCP server's URL as its one
resource, the MCP server names the provider as its authorization server.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from .http_peer import HttpPeer

PEERS = Path(__file__).resolve().parent / "peers"
PROVIDER_JS = PEERS / "oidc_provider.mjs"
PROTECTED_PY = PEERS / "protected_peer.py"

Event = dict[str, Any]


class OidcProvider:
    """``oidc_provider.mjs`` on ``127.0.0.1:port``; ``restart()`` starts it again on the same
    port with nothing remembered (no client, grant or token; new signing keys)."""

    def __init__(
        self,
        node: str,
        module: Path,
        port: int,
        resource: str,
        *,
        access_ttl: int = 600,
        service_clients: Sequence[dict[str, Any]] = (),
    ) -> None:
        self.port = port
        self.issuer = f"http://127.0.0.1:{port}"
        self.argv = [node, str(PROVIDER_JS), "--module", str(module), "--port", str(port)]
        self.argv += ["--resource", resource, "--access-ttl", str(access_ttl)]
        for client in service_clients:
            self.argv += ["--service-client", json.dumps(client)]
        self._earlier: list[Event] = []
        self._peer = self._start()

    def _start(self) -> HttpPeer:
        return HttpPeer(self.argv, self.port, ready=['"event":"listening"'], path="")

    def events(self, name: str | None = None) -> list[Event]:
        """The provider's events so far (across restarts), oldest first."""
        found = self._earlier + self._parse(self._peer.output)
        return [e for e in found if name is None or e["event"] == name]

    def wait_for(self, predicate: Callable[[list[Event]], bool], timeout: float = 10.0) -> bool:
        """Wait (with a deadline) until ``predicate(events())`` holds."""
        return self._peer.wait_until(lambda: predicate(self.events()), timeout)

    def restart(self) -> None:
        self._earlier = self.events()
        self._peer.kill()
        self._peer = self._start()

    def stop(self) -> None:
        self._peer.kill()

    @staticmethod
    def _parse(lines: list[str]) -> list[Event]:
        events = []
        for line in list(lines):
            if line.startswith("{"):
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict) and "event" in event:
                    events.append(event)
        return events


class ProtectedServer:
    """``protected_peer.py`` (mcp 2.3.0 on uvicorn) on ``127.0.0.1:port``; ``url`` is its MCP
    endpoint and the resource its tokens must name."""

    def __init__(self, port: int, issuer: str) -> None:
        self.port = port
        argv = [sys.executable, str(PROTECTED_PY), "--port", str(port), "--issuer", issuer]
        self._peer = HttpPeer(argv, port, ready=[])
        self.url = self._peer.url

    @property
    def output(self) -> list[str]:
        return self._peer.output

    def stop(self) -> None:
        self._peer.kill()
