"""The connection's states are a closed set, and the same set the public Status shows."""

from __future__ import annotations

import re
import typing

import pytest

from conduit_mcp import status
from conduit_mcp.actors.connection import Connection


def _documented_states() -> tuple[str, ...]:
    doc = status.Status.__doc__ or ""
    found = re.search(r"``state``:\s*([a-z_ |]+)\.", doc)
    assert found, "Status's docstring lists the states as ``state``: a | b | ..."
    return tuple(s.strip() for s in found.group(1).split("|"))


def test_connection_states_are_the_states_status_documents() -> None:
    assert Connection.STATES == _documented_states()


def test_connection_states_are_the_state_literal_when_there_is_one() -> None:
    # status.State (a Literal of the public state names) may not exist yet; when it does,
    # the connection must declare exactly its values.
    literal = getattr(status, "State", None)
    if literal is None:
        pytest.skip("conduit_mcp.status.State is not defined yet; compared with the docstring")
    assert set(Connection.STATES) == set(typing.get_args(literal))


def test_every_state_has_its_handler_and_dispatch_table() -> None:
    for state in Connection.STATES:
        assert callable(getattr(Connection, f"on_{state}"))
        table = getattr(Connection, f"_IN_{state.upper()}")
        assert all(isinstance(t, type) for t in table)
