"""The protocol versions this client speaks, their eras, and the ``protocol=`` option.

MCP spec 2026-07-28, Basic, "Versioning": *modern* versions (2026-07-28 and later) carry
version, client identity and capabilities in every request's ``_meta``; *legacy* versions
(2025-11-25 and earlier) establish a session with the ``initialize`` handshake. Version ids
are ``YYYY-MM-DD`` strings, so "newest" is plain string order, but every tuple here is kept
newest-first explicitly so no caller has to sort.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Final, Literal

from ..errors import Error

Era = Literal["modern", "legacy"]
Mode = Literal["auto", "modern", "legacy"]

#: Modern (stateless, per-request ``_meta``) versions we implement, newest first.
MODERN_VERSIONS: Final = ("2026-07-28",)
#: Legacy (``initialize`` handshake) versions we implement, newest first.
LEGACY_VERSIONS: Final = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
#: Every version we implement, newest first (modern ones are all newer than legacy ones).
KNOWN_VERSIONS: Final = MODERN_VERSIONS + LEGACY_VERSIONS
#: The version a modern probe or request offers unless the user pinned another.
LATEST_MODERN: Final = MODERN_VERSIONS[0]
#: The version ``initialize`` offers unless the user pinned another (legacy lifecycle: the
#: client sends the latest version it supports and the server may answer an older one).
LATEST_LEGACY: Final = LEGACY_VERSIONS[0]

_ERA: Final[dict[str, Era]] = {
    **{v: "modern" for v in MODERN_VERSIONS},
    **{v: "legacy" for v in LEGACY_VERSIONS},
}
_MODES: Final = ("auto", "modern", "legacy")
_BY_ERA: Final[dict[str | None, tuple[str, ...]]] = {
    None: KNOWN_VERSIONS,
    "modern": MODERN_VERSIONS,
    "legacy": LEGACY_VERSIONS,
}


def era_of(version: object) -> Era | None:
    """The era of a version we implement, or None for any other value (unknown or not a str).

    >>> era_of("2026-07-28"), era_of("2024-11-05"), era_of("1999-01-01")
    ('modern', 'legacy', None)
    """
    if type(version) is not str:
        return None
    return _ERA.get(version)


@dataclass(frozen=True, slots=True)
class ProtocolChoice:
    """The validated ``protocol=`` option.

    ``mode`` is how the connection negotiates (``docs/connection.md``, "Era discovery"):
    ``auto`` probes ``server/discover`` and may fall back to ``initialize``; ``modern``
    discovers without ever falling back; ``legacy`` goes straight to ``initialize``.
    ``version`` is the pinned version, or None to offer the newest one of the era.
    """

    mode: Mode
    version: str | None = None

    @property
    def preferred(self) -> str:
        """The version to offer first: the pinned one, else the newest of the mode's era.

        ``auto`` offers the newest modern version, because its first move is the modern
        ``server/discover`` probe (MCP spec 2026-07-28, Transports, "stdio": "setting its
        preferred modern version").
        """
        if self.version is not None:
            return self.version
        return LATEST_LEGACY if self.mode == "legacy" else LATEST_MODERN


def parse_protocol_option(value: object) -> ProtocolChoice:
    """Validate the ``protocol=`` option once, at start, like every option.

    Accepts ``"auto"``, ``"modern"``, ``"legacy"`` or one exact version we implement; an
    explicit version pins both the era and the version (``docs/connection.md``, "Era
    discovery").

    >>> parse_protocol_option("2025-06-18")
    ProtocolChoice(mode='legacy', version='2025-06-18')
    """
    if type(value) is str:
        if value in _MODES:
            return ProtocolChoice(value)  # type: ignore[arg-type]
        era = _ERA.get(value)
        if era is not None:
            return ProtocolChoice(era, value)
    valid = ", ".join(repr(v) for v in (*_MODES, *KNOWN_VERSIONS))
    raise Error("config", "protocol", f"protocol must be one of {valid}")


def mutual_version(supported: Iterable[object], era: Era | None = None) -> str | None:
    """The newest version we implement that is also in ``supported``, optionally of one era.

    ``supported`` is server data (``DiscoverResult.supportedVersions`` or the ``-32022``
    error's ``data.supported``), so it is read defensively: non-string entries are ignored,
    and anything that is not a list or tuple (a bare string, a dict, None) names nothing.
    The server's order is irrelevant: the *client* selects a mutually supported version
    (MCP spec 2026-07-28, Basic, "Versioning"), and we prefer the newest.

    >>> mutual_version(["2025-06-18", "2026-07-28"]), mutual_version(["2026-07-28"], "legacy")
    ('2026-07-28', None)
    """
    if not isinstance(supported, (list, tuple, frozenset, set)):
        return None
    theirs = {v for v in supported if type(v) is str}
    ours = _BY_ERA.get(era)
    if ours is None:
        raise Error("argument", "era", "era must be 'modern', 'legacy' or None")
    for version in ours:
        if version in theirs:
            return version
    return None
