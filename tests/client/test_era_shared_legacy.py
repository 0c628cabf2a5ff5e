"""``protocol="auto"``: a modern server whose supported versions share only a legacy one
with the client leads to ``initialize`` with it, by the spec's versioning page (a deviation
from the behaviour spec, which closes: docs/connection.md, "Era discovery");
``protocol="modern"`` closes instead."""

from __future__ import annotations

from typing import Any

import pytest

pytestmark = pytest.mark.timeout(30)

ONLY_LEGACY_IN_COMMON = ["--versions", "2099-01-01,2025-06-18", "--advertise-legacy"]


def test_a_discover_result_sharing_only_a_legacy_version_initializes(
    make_server: Any, start_client: Any
) -> None:
    server = make_server(extra_args=ONLY_LEGACY_IN_COMMON)
    client = start_client(server.stdio())
    status = client.await_ready(timeout=10)
    assert (status.era, status.version) == ("legacy", "2025-06-18")
    assert [e["method"] for e in server.log() if e.get("dir") == "in"][:2] == [
        "server/discover",
        "initialize",
    ]


def test_a_32022_sharing_only_a_legacy_version_initializes(
    make_server: Any, start_client: Any
) -> None:
    refusal = {
        "code": -32022,
        "message": "Unsupported protocol version",
        "data": {"supported": ["2099-01-01", "2025-06-18"], "requested": "2026-07-28"},
    }
    rules = [{"match": {"method": "server/discover"}, "action": {"error": refusal}}]
    server = make_server(rules=rules)
    client = start_client(server.stdio())
    status = client.await_ready(timeout=10)
    assert (status.era, status.version) == ("legacy", "2025-06-18")


def test_modern_mode_closes_instead(make_server: Any, start_client: Any) -> None:
    server = make_server(extra_args=ONLY_LEGACY_IN_COMMON)
    client = start_client(server.stdio(), protocol="modern")
    status = client.wait_for_state(lambda s: s.state == "closed", timeout=10)
    assert status.reason == "no_mutual_version"
    assert server.received("initialize") == []
