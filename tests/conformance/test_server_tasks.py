"""The official conformance harness 0.2.0-alpha.12 judging the scripted test server's tasks.

``conformance server --url URL --scenario NAME`` connects to a server and checks what it
answers; its ten tasks scenarios (the ``io.modelcontextprotocol/tasks`` extension, SEP-2663)
run here against ``python -m conduit_mcp.testing --http --tasks-conformance`` (the fixture
tools the scenarios call: ``greet``, ``slow_compute``, ``failing_job``, ...). That proves the
fixture the client's task tests rely on. A scenario passes when the harness exits 0 and its
``checks.json`` holds SUCCESS checks and no FAILURE, WARNING or SKIPPED one (its
``wire-schema-valid`` check included: every message validated against the 2026-07-28 schema).

One scenario checks nothing in this harness version: ``tasks-status-notifications`` returns a
single SKIPPED check whose message says the harness still observes the old channel and
"needs a rewrite against the new channel" (``subscriptions/listen``). Its test asserts exactly
that, so a harness that starts checking fails it here and gets run for real; the server's
``notifications/tasks`` on the listen stream is tested in tests/testing/test_scripted_tasks.py.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conduit_mcp.testing import ScriptedServer
from conduit_mcp.testing.http.process import HttpServerProcess

ROOT = Path(__file__).resolve().parents[2]
HARNESS = (
    ROOT
    / ".peers/conformance-0.2.0-alpha.12/node_modules/@modelcontextprotocol/conformance/dist/index.js"
)
RUN_TIMEOUT = 60.0
SCENARIOS = [
    "tasks-lifecycle",
    "tasks-capability-negotiation",
    "tasks-wire-fields",
    "tasks-request-state-removal",
    "tasks-mrtr-input",
    "tasks-request-headers",
    "tasks-dispatch-and-envelope",
    "tasks-status-notifications",
    "tasks-required-task-error",
    "tasks-mrtr-composition",
]
# Scenarios the harness itself does not check yet: the one SKIPPED check it returns.
HARNESS_SKIPS = {"tasks-status-notifications": "needs a rewrite against the new channel"}

pytestmark = [pytest.mark.interop, pytest.mark.timeout(RUN_TIMEOUT + 20)]


@pytest.fixture(scope="module")
def node(node22: str) -> str:
    return node22


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[HttpServerProcess]:
    """One modern HTTP scripted server with the harness's fixtures, for every scenario."""
    srv = ScriptedServer(tmp_path_factory.mktemp("tasks-conformance"), tasks_conformance=True)
    with srv.http_server() as proc:
        yield proc


def harness() -> Path:
    if not HARNESS.is_file():
        pytest.fail(
            f"the conformance harness 0.2.0-alpha.12 is not installed at {HARNESS}: `make "
            "test` installs it (`make peers`)",
            pytrace=False,
        )
    return HARNESS


def checks(out: Path) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for path in sorted(out.rglob("checks.json")):
        found += json.loads(path.read_text(encoding="utf-8"))
    return found


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_tasks_server_scenario(
    node: str, server: HttpServerProcess, scenario: str, tmp_path: Path
) -> None:
    argv = [node, str(harness()), "server", "--url", server.url, "--scenario", scenario]
    argv += ["--timeout", "30000", "-o", str(tmp_path)]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=ROOT, check=False
    )
    tail = re.sub(r"\x1b\[[0-9;]*m", "", done.stdout)[-2000:]
    found = checks(tmp_path)
    statuses = [c["status"] for c in found]
    if scenario in HARNESS_SKIPS:
        assert done.returncode == 0, tail
        assert statuses == ["SKIPPED"], tail
        assert HARNESS_SKIPS[scenario] in found[0]["errorMessage"], found[0]
        return
    bad = [
        f"{c['status']} {c['id']}: {c.get('errorMessage') or c.get('description')}"
        for c in found
        if c["status"] not in ("SUCCESS", "INFO")
    ]
    assert done.returncode == 0 and not bad and "SUCCESS" in statuses, (
        f"conformance server {scenario}: exit {done.returncode}\n  " + "\n  ".join(bad) + tail
    )
    assert any(c["id"] == "wire-schema-valid" for c in found), tail


def test_every_tasks_server_scenario_of_the_harness_is_run(node: str) -> None:
    listed = subprocess.run(
        [node, str(harness()), "list", "--server"],
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
    ).stdout
    offered = set(re.findall(r"^\s*-\s+(tasks-\S+)", listed, re.M))
    assert offered == set(SCENARIOS)
