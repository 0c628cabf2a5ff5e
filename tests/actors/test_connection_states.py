"""The connection's states are a closed set, and the same set the public Status shows."""

from __future__ import annotations

import ast
import inspect
import re
import typing
from typing import Any

from conduit_mcp import status
from conduit_mcp.actors import connection, core, handshake, http_outcomes
from conduit_mcp.actors.connection import Connection


def _public_states() -> tuple[str, ...]:
    """The states ``Status.state`` may hold: the ``status.State`` Literal's values, or (before
    that Literal exists) the ones Status's docstring lists as ``state``: a | b | ..."""
    literal = getattr(status, "State", None)
    if literal is not None:
        return tuple(typing.get_args(literal))
    doc = status.Status.__doc__ or ""
    found = re.search(r"``state``:\s*([a-z_ |]+)\.", doc)
    assert found, "Status's docstring lists the states as ``state``: a | b | ..."
    return tuple(s.strip() for s in found.group(1).split("|"))


def test_connection_states_are_the_states_status_shows() -> None:
    assert Connection.STATES == _public_states()


def test_every_state_has_its_handler_and_dispatch_table() -> None:
    for state in Connection.STATES:
        assert callable(getattr(Connection, f"on_{state}"))
        table = getattr(Connection, f"_IN_{state.upper()}")
        assert all(isinstance(t, type) for t in table)


def _assigned_attributes(module: Any) -> set[str]:
    """Every ``self.<name>`` a module assigns (plain, annotated or augmented)."""
    tree = ast.parse(inspect.getsource(module))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)):
            targets = [node.target]
        else:
            continue
        for target in targets:
            for sub in ast.walk(target):
                if (
                    isinstance(sub, ast.Attribute)
                    and isinstance(sub.value, ast.Name)
                    and sub.value.id == "self"
                ):
                    names.add(sub.attr)
    return names


def test_every_attribute_the_connection_shares_is_declared_in_connection_core() -> None:
    """A reader of handshake.py finds every attribute it uses in one place, with its type
    and what it holds: nothing assigns an attribute ConnectionCore does not declare."""
    declared = set(core.ConnectionCore.__annotations__)
    for module in (connection, handshake, http_outcomes, core):
        undeclared = _assigned_attributes(module) - declared
        assert not undeclared, f"{module.__name__} assigns undeclared {sorted(undeclared)}"
