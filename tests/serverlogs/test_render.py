"""The pure rules of server logs (conduit_mcp/protocol/server_logs.py), for any JSON a
server may send: one line, no unsafe character, bounded, and every level mapped."""

from __future__ import annotations

import logging
import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from conduit_mcp.protocol.server_logs import (
    LEVELS,
    MAX_LOGGER,
    MAX_TEXT,
    check_level,
    escape,
    python_level,
    render,
)

UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028-\u202e\u2066-\u2069\ud800-\udfff\ufeff]"
)
# The longest suffix a cut adds: "... (cut: N characters in all)".
SUFFIX = 60

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
params = st.fixed_dictionaries(
    {},
    optional={
        "level": st.sampled_from(LEVELS) | st.text() | json_values,
        "logger": st.text() | json_values,
        "data": json_values,
    },
)


@settings(max_examples=300, deadline=None)
@given(params | json_values)
def test_any_message_renders_to_one_safe_bounded_line(value: Any) -> None:
    line = render(value)
    assert UNSAFE.search(line.text) is None
    assert len(line.text) <= 32 + SUFFIX + 3 + MAX_LOGGER + SUFFIX + 2 + MAX_TEXT + SUFFIX
    assert line.logger is None or (
        UNSAFE.search(line.logger) is None and len(line.logger) <= MAX_LOGGER + SUFFIX
    )
    assert line.levelno in (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, 50)
    line.text.encode("utf-8")  # any encoder takes it (no lone surrogate)


@settings(max_examples=300, deadline=None)
@given(st.text(), st.integers(min_value=1, max_value=50))
def test_escape_is_bounded_and_keeps_safe_text(text: str, limit: int) -> None:
    out = escape(text, limit)
    assert UNSAFE.search(out) is None
    if len(text) <= limit and UNSAFE.search(text) is None:
        assert out == text
    else:
        assert out.endswith(f"(cut: {len(text)} characters in all)") or len(out) <= limit


def test_data_orjson_refuses_is_still_rendered() -> None:
    assert render({"level": "info", "data": 2**70}).text == str(2**70)
    assert render({"level": "info", "data": ["\ud800"]}).text == '["\\ud800"]'


def test_the_levels_map_as_the_issue_says() -> None:
    assert [python_level(level) for level in LEVELS] == [
        logging.DEBUG,
        logging.INFO,
        logging.INFO,
        logging.WARNING,
        logging.ERROR,
        logging.CRITICAL,
        logging.CRITICAL,
        logging.CRITICAL,
    ]
    assert [check_level(level) for level in LEVELS] == list(LEVELS)


@pytest.mark.parametrize("bad", ["Info", " info", "info\n", "trace", b"info", 20, True])
def test_check_level_refuses_everything_else(bad: Any) -> None:
    from conduit_mcp.errors import Error

    with pytest.raises(Error) as info:
        check_level(bad)
    assert (info.value.kind, info.value.reason) == ("argument", "level")
