"""protocol.versions: eras, the protocol= option, mutual version choice."""

from __future__ import annotations

import pytest

from conduit_mcp.errors import Error
from conduit_mcp.protocol.versions import (
    KNOWN_VERSIONS,
    LATEST_LEGACY,
    LATEST_MODERN,
    LEGACY_VERSIONS,
    MODERN_VERSIONS,
    ProtocolChoice,
    era_of,
    mutual_version,
    parse_protocol_option,
)

pytestmark = pytest.mark.timeout(20)


def test_constants_are_newest_first() -> None:
    assert MODERN_VERSIONS == ("2026-07-28",)
    assert LEGACY_VERSIONS == ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
    assert LATEST_MODERN == "2026-07-28"
    assert LATEST_LEGACY == "2025-11-25"
    assert list(KNOWN_VERSIONS) == sorted(KNOWN_VERSIONS, reverse=True)


@pytest.mark.parametrize(
    ("version", "era"),
    [
        ("2026-07-28", "modern"),
        ("2025-11-25", "legacy"),
        ("2024-11-05", "legacy"),
        ("2024-10-07", None),
        ("2099-01-01", None),
        ("", None),
        (None, None),
        (20260728, None),
    ],
)
def test_era_of(version: object, era: str | None) -> None:
    assert era_of(version) == era


@pytest.mark.parametrize(
    ("value", "choice"),
    [
        ("auto", ProtocolChoice("auto", None)),
        ("modern", ProtocolChoice("modern", None)),
        ("legacy", ProtocolChoice("legacy", None)),
        ("2026-07-28", ProtocolChoice("modern", "2026-07-28")),
        ("2025-06-18", ProtocolChoice("legacy", "2025-06-18")),
    ],
)
def test_parse_protocol_option(value: str, choice: ProtocolChoice) -> None:
    assert parse_protocol_option(value) == choice


@pytest.mark.parametrize("value", ["AUTO", " auto", "2099-01-01", "", None, 1, ["auto"]])
def test_parse_protocol_option_rejects(value: object) -> None:
    with pytest.raises(Error) as info:
        parse_protocol_option(value)
    assert (info.value.kind, info.value.reason) == ("config", "protocol")
    for valid in ("'auto'", "'modern'", "'legacy'", "'2026-07-28'", "'2024-11-05'"):
        assert valid in info.value.message


def test_preferred_version() -> None:
    assert ProtocolChoice("auto").preferred == LATEST_MODERN
    assert ProtocolChoice("modern").preferred == LATEST_MODERN
    assert ProtocolChoice("legacy").preferred == LATEST_LEGACY
    assert ProtocolChoice("legacy", "2025-03-26").preferred == "2025-03-26"


def test_protocol_choice_is_frozen() -> None:
    choice = ProtocolChoice("auto")
    with pytest.raises(AttributeError):
        choice.mode = "legacy"  # type: ignore[misc]


@pytest.mark.parametrize(
    ("supported", "era", "expected"),
    [
        (["2026-07-28", "2025-11-25"], None, "2026-07-28"),
        (["2025-11-25", "2026-07-28"], None, "2026-07-28"),  # server order is irrelevant
        (["2025-06-18", "2024-11-05"], None, "2025-06-18"),
        (["2026-07-28", "2025-11-25"], "legacy", "2025-11-25"),
        (["2025-11-25"], "modern", None),
        (["2027-01-01", "2026-07-28"], "modern", "2026-07-28"),
        (["2099-01-01"], None, None),
        ([], None, None),
        ([None, 3, {"v": 1}, "2025-03-26"], None, "2025-03-26"),  # junk entries ignored
        (("2026-07-28",), None, "2026-07-28"),
        ("2026-07-28", None, None),  # a bare string is not a list of versions
        (None, None, None),
        ({"2026-07-28": 1}, None, None),
    ],
)
def test_mutual_version(supported: object, era: str | None, expected: str | None) -> None:
    assert mutual_version(supported, era) == expected  # type: ignore[arg-type]


def test_mutual_version_rejects_bad_era() -> None:
    with pytest.raises(Error) as info:
        mutual_version(["2026-07-28"], "future")  # type: ignore[arg-type]
    assert (info.value.kind, info.value.reason) == ("argument", "era")
