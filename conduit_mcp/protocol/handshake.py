"""The two handshakes' answers: a modern ``DiscoverResult`` and a legacy ``InitializeResult``.

Pure parsing, shared by the probe classifier (``negotiation``) and by a ready connection
that re-discovers after ``-32022`` (``docs/connection.md``, "Era discovery").
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import Error
from .meta import META_SERVER_INFO
from .versions import era_of


@dataclass(frozen=True, slots=True)
class DiscoverInfo:
    """A parsed ``DiscoverResult`` (MCP spec 2026-07-28, Server, "Discover").

    ``raw`` is the result (do not mutate).
    """

    versions: tuple[str, ...]
    capabilities: dict[str, Any]
    server_info: dict[str, Any] | None
    instructions: str | None
    raw: dict[str, Any] = field(repr=False)


@dataclass(frozen=True, slots=True)
class InitInfo:
    """A checked legacy ``InitializeResult`` (MCP spec 2025-11-25, Basic, "Lifecycle").

    ``raw`` is the result.
    """

    version: str
    capabilities: dict[str, Any]
    server_info: dict[str, Any] | None
    instructions: str | None
    raw: dict[str, Any] = field(repr=False)


def parse_discover(result: Any) -> DiscoverInfo:
    """Read a ``DiscoverResult`` leniently: older servers omit fields.

    Its mark is a ``supportedVersions`` list: without one the answer is not a
    DiscoverResult and this raises ``Error("protocol", "bad_discover_result")`` (the
    classifier reads that as legacy evidence: a legacy server may answer anything).
    ``resultType``/``ttlMs``/``cacheScope`` are not required (older modern servers omit
    them); they stay in ``raw``. Identity comes from ``_meta[serverInfo]``, falling back
    to the pre-GA top-level ``serverInfo`` some SDKs and conformance mocks still send.
    """
    if type(result) is not dict or type(result.get("supportedVersions")) is not list:
        raise Error("protocol", "bad_discover_result", "not a DiscoverResult")
    versions = tuple(v for v in result["supportedVersions"] if type(v) is str)
    capabilities = result.get("capabilities")
    if capabilities is None:
        capabilities = {}
    elif type(capabilities) is not dict:
        raise Error("protocol", "bad_discover_result", "capabilities is not an object")
    meta = result.get("_meta")
    server_info = meta.get(META_SERVER_INFO) if type(meta) is dict else None
    if type(server_info) is not dict:
        server_info = result.get("serverInfo")
        if type(server_info) is not dict:
            server_info = None
    instructions = result.get("instructions")
    return DiscoverInfo(
        versions,
        capabilities,
        server_info,
        instructions if type(instructions) is str else None,
        result,
    )


def check_initialize(result: Any, offered: str) -> InitInfo:
    """Check a legacy ``InitializeResult`` against the version we offered.

    The server answers ``offered`` or another version it supports (legacy lifecycle). "If
    the client does not support the version in the server's response, it SHOULD
    disconnect": any version that is not one of our *legacy* versions raises
    ``Error("protocol", "unsupported_version")`` (a modern version has no handshake, so it
    is not acceptable here either). A result that is not an object, lacks a string
    ``protocolVersion``, or has ``capabilities``/``serverInfo`` that are not objects raises
    ``Error("protocol", "bad_initialize_result")``; absent ones default to ``{}``/None.
    """
    if type(result) is not dict:
        raise Error("protocol", "bad_initialize_result", "initialize result is not an object")
    version = result.get("protocolVersion")
    if type(version) is not str:
        raise Error("protocol", "bad_initialize_result", "initialize result has no protocolVersion")
    if era_of(version) != "legacy":
        raise Error(
            "protocol",
            "unsupported_version",
            f"offered protocol version {offered}, the server answered {version[:40]!r}, "
            "which this client does not support",
        )
    capabilities = result.get("capabilities")
    if capabilities is None:
        capabilities = {}
    elif type(capabilities) is not dict:
        raise Error("protocol", "bad_initialize_result", "capabilities is not an object")
    server_info = result.get("serverInfo")
    if server_info is not None and type(server_info) is not dict:
        raise Error("protocol", "bad_initialize_result", "serverInfo is not an object")
    instructions = result.get("instructions")
    return InitInfo(
        version,
        capabilities,
        server_info,
        instructions if type(instructions) is str else None,
        result,
    )
