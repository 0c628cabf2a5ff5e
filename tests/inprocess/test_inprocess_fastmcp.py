"""Interop: ``InProcess`` with a ``fastmcp.FastMCP`` server object, in both eras.

fastmcp lives in ``make peers``'s venv (``.peers/python-time-*-fastmcp-*``), never in
``.venv``, so the client runs there, in a child interpreter (tests/inprocess/fastmcp_probe.py:
the server object and the client in that one process), and this test asserts on what it
observed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sysconfig
from pathlib import Path
from typing import Any

import pytest

from ..conftest import REPO_ROOT, missing_peer

pytestmark = pytest.mark.timeout(120)

PROBE = Path(__file__).with_name("fastmcp_probe.py")


def fastmcp_venv() -> Path:
    found = sorted((REPO_ROOT / ".peers").glob("python-time-*-fastmcp-*/.stamp-installed"))
    if not found:
        missing_peer("fastmcp (the .peers/python-time-*-fastmcp-* venv)")
    return found[-1].parent


@pytest.fixture(scope="module")
def report() -> dict[str, Any]:
    python = fastmcp_venv() / "bin" / "python"
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": os.environ.get("HOME", ""),
        "PYTHONPATH": str(REPO_ROOT),
        "CONDUIT_DEV_SITE": sysconfig.get_paths()["purelib"],
    }
    done = subprocess.run(
        [str(python), str(PROBE)], capture_output=True, env=env, timeout=90, check=False
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-3000:]
    return json.loads(done.stdout)  # type: ignore[no-any-return]


@pytest.mark.parametrize(("protocol", "era"), [("auto", "modern"), ("legacy", "legacy")])
def test_fastmcp_server_in_both_eras(report: dict[str, Any], protocol: str, era: str) -> None:
    seen = report[protocol]
    assert seen["spec"] == "InProcess(server='fastmcp.FastMCP', close_grace=2.0)"
    assert seen["era"] == era
    assert seen["add"] == {"result": 42}
    assert seen["server"] == "fast-demo"
    assert {"add", "where", "work"} <= set(seen["tools"])
    assert seen["resource"] == "Hello, world!"
    assert seen["prompt"] == "Hello, Ada!"
    assert seen["work"] == "did 3" and seen["progress"] == [1, 2, 3]
    assert seen["bad_is_error"] is True  # fastmcp's own argument validation
    # the server's code ran on the transport's thread, not the caller's
    assert seen["where"] == "conduit-mcp-inprocess" != seen["caller"]
