"""The table of compiled validators: one compile per definition, bounded by entries and by
bytes of schema (the oldest go first), safe to read from many threads."""

from __future__ import annotations

import threading

import pytest

from conduit_mcp.protocol.schema import SchemaProblem
from conduit_mcp.validation import Validators

pytestmark = pytest.mark.timeout(30)


def schema(i: int, pad: int = 0) -> dict[str, object]:
    return {"type": "object", "title": f"s{i}", "description": "x" * pad}


def test_one_compile_per_definition_whatever_the_object():
    table = Validators()
    first = table.get(schema(1))
    assert table.get(schema(1)) is first  # an equal schema, another object
    assert table.get({"description": "", "title": "s1", "type": "object"}) is first  # key order
    assert table.compiled == 1


def test_a_schema_that_does_not_compile_is_remembered_too():
    table = Validators()
    bad = {"type": "nope"}
    assert isinstance(table.get(bad), SchemaProblem)
    assert isinstance(table.get({"type": "nope"}), SchemaProblem)
    assert table.compiled == 1


def test_bounded_by_entries_at_the_edge():
    table = Validators(size=3)
    kept = [schema(i) for i in range(3)]
    for s in kept:
        table.get(s)
    for s in kept:
        table.get(s)
    assert table.compiled == 3  # three fit
    table.get(schema(3))  # a fourth: the oldest goes
    table.get(schema(0))
    assert table.compiled == 5


def test_bounded_by_bytes_at_the_edge():
    size = len(b'{"description":"","title":"s0","type":"object"}')
    table = Validators(size=100, most_bytes=2 * (size + 100))
    a, b = schema(0, 100), schema(1, 100)
    table.get(a)
    table.get(b)
    table.get(a)
    table.get(b)
    assert table.compiled == 2  # both fit exactly
    table.get(schema(2, 100))  # one byte budget over: the oldest goes
    table.get(schema(0, 100))
    assert table.compiled == 4


def test_many_threads_get_one_answer():
    table = Validators()
    s = schema(42)
    got: list[object] = []
    barrier = threading.Barrier(8)

    def run() -> None:
        barrier.wait(timeout=10)
        for _ in range(200):
            got.append(table.get(s))

    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=20)
    assert len(got) == 1600
    assert len({id(v) for v in got}) <= 8  # at most one compile per racing first reader
