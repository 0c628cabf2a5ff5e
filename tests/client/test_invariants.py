"""Property: whatever mix of answers, errors, silence, garbage and crashes a server produces,
every request gets exactly one answer (a result or an Error of a documented kind) by its
deadline, and the client comes back to ready afterwards. No hang, no lost request."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import conduit_mcp as mcp
from conduit_mcp.testing import ScriptedServer

pytestmark = pytest.mark.timeout(120)

OPS = {
    "add": ("add", {"a": 1, "b": 2}),
    "slow": ("slow", {"seconds": 0.05}),
    "never": ("never", {}),
    "garbage": ("garbage", {}),
    "crash": ("crash", {"code": 1}),
    "error": ("error", {"code": -32000, "message": "no"}),
    "fail": ("fail", {}),
    "progress": ("progress", {"steps": 2, "delay": 0.01}),
}
ALLOWED = {"timeout", "transport", "server", "overloaded"}


@settings(max_examples=12, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    ops=st.lists(st.sampled_from(sorted(OPS)), min_size=1, max_size=24),
    workers=st.integers(min_value=1, max_value=8),
    max_in_flight=st.integers(min_value=2, max_value=16),
)
def test_every_request_gets_one_answer_by_its_deadline(
    tmp_path_factory, ops, workers, max_in_flight
):
    server = ScriptedServer(tmp_path_factory.mktemp("inv"))
    client = mcp.Client.start(
        server.stdio(), max_in_flight=max_in_flight, backoff=lambda a: 0.01, max_reconnects=None
    )
    timeout = 0.5
    try:
        client.await_ready(timeout=10)

        def run(op: str) -> tuple[str, object, float]:
            name, args = OPS[op]
            started = time.monotonic()
            try:
                outcome: object = client.call_tool(
                    name, args, timeout=timeout, on_progress=lambda p: None
                )
            except mcp.Error as exc:
                outcome = exc
            return op, outcome, time.monotonic() - started

        with ThreadPoolExecutor(workers) as pool:
            results = list(pool.map(run, ops, timeout=60))
        assert len(results) == len(ops)
        for op, outcome, elapsed in results:
            # the connection answers at the deadline; the caller's own grace is 1 s
            assert elapsed < timeout + 1.0, (op, elapsed)
            if isinstance(outcome, mcp.Error):
                assert outcome.kind in ALLOWED, (op, outcome)
                if op in ("add", "fail", "progress", "garbage", "slow"):
                    # only a crash of the server (another op) or a limit explains these
                    assert outcome.kind in ("transport", "overloaded", "timeout"), (op, outcome)
            else:
                assert isinstance(outcome, mcp.CallToolResult)
                assert op not in ("never", "crash", "error"), (op, outcome)
        status = client.await_ready(timeout=10)
        assert status.state == "ready"
        assert client.call_tool("add", {"a": 2, "b": 2}, timeout=5).text == "4"
    finally:
        client.stop()
