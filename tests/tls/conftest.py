"""Fixtures for the TLS tests: one private CA and its certificates per session."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import conduit_mcp as mcp

from .certs import Certificates, make_certificates


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certificates:
    return make_certificates(Path(tmp_path_factory.mktemp("tls")))


@pytest.fixture
def start_client() -> Iterator[Callable[..., mcp.Client]]:
    clients: list[mcp.Client] = []

    def start(transport: Any, **options: Any) -> mcp.Client:
        options.setdefault("backoff", lambda attempt: 0.05)
        client = mcp.Client.start(transport, **options)
        clients.append(client)
        return client

    yield start
    for client in clients:
        client.stop()
