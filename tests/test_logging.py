"""Logging follows library conventions: named loggers under ``conduit_mcp``, a ``NullHandler``,
and nothing on stderr unless the application configures logging.

A fresh interpreter each time, so no other test's logging configuration interferes; the server
writes a garbage line, which the connection drops with a WARNING on ``conduit_mcp.connection``.
"""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap

import pytest

import conduit_mcp  # noqa: F401  (importing it installs the handler)

pytestmark = pytest.mark.timeout(60)

SCRIPT = textwrap.dedent(
    """
    import logging, sys
    import conduit_mcp as mcp
    if sys.argv[1] == "configured":
        logging.basicConfig(level=logging.WARNING, format="%(name)s %(levelname)s %(message)s")
    server = mcp.Stdio(sys.executable, ["-m", "conduit_mcp.testing"])
    with mcp.Client.start(server) as client:
        client.await_ready(timeout=20)
        print(client.call_tool("garbage", {}, timeout=10).text)
    """
)


def run(mode: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", SCRIPT, mode], capture_output=True, text=True, timeout=50
    )


def test_nothing_on_stderr_unless_the_application_configures_logging():
    quiet = run("unconfigured")
    assert quiet.returncode == 0, quiet.stderr
    assert quiet.stderr == ""
    configured = run("configured")
    assert configured.returncode == 0, configured.stderr
    assert "conduit_mcp.connection WARNING dropped an unusable frame" in configured.stderr


def test_the_package_logger_has_a_null_handler():
    handlers = logging.getLogger("conduit_mcp").handlers
    assert any(isinstance(h, logging.NullHandler) for h in handlers)


def test_the_logging_page_lists_every_logger_of_the_package():
    import re
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    names = set()
    for source in (root / "conduit_mcp").rglob("*.py"):
        names |= set(re.findall(r'getLogger\("(conduit_mcp[\w.]*)"\)', source.read_text()))
    page = (root / "docs" / "telemetry.md").read_text()
    section = page[page.index("## Logging") :]
    section = section[: section.index("\n## ")] if "\n## " in section else section
    listed = set(re.findall(r"`(conduit_mcp[\w.]*)`", section))
    assert names - {"conduit_mcp"} <= listed, "add the new loggers to docs/telemetry.md, Logging"
