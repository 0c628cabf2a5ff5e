"""Shared fixtures: where the interop peers are (``make peers`` installs them).

A missing peer skips the tests that need it on a developer's machine, with a message saying
how to install it; in CI (``CI=true``) it FAILS them, so a broken install step cannot hide
behind a green run.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent
PEERS_DIR = REPO_ROOT / "tests" / "peers"
LEGACY_VENV = REPO_ROOT / ".venv-legacy"
EVERYTHING_JS = (
    REPO_ROOT
    / ".peers"
    / "node"
    / "node_modules"
    / "@modelcontextprotocol"
    / "server-everything"
    / "dist"
    / "index.js"
)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


def missing_peer(what: str) -> None:
    """Skip (developer machine) or fail (CI) a test whose interop peer is not installed."""
    message = f"{what} is not installed: run `make peers` (it is part of `make test`)"
    if in_ci():
        pytest.fail(f"CI: {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture(scope="session")
def repo_root() -> Path:
    return REPO_ROOT


@pytest.fixture(scope="session")
def legacy_python() -> Path:
    """``.venv-legacy/bin/python``, a venv holding ``mcp==1.30.0`` (legacy-only FastMCP)."""
    python = LEGACY_VENV / "bin" / "python"
    fastmcp = list(LEGACY_VENV.glob("lib/python*/site-packages/mcp/server/fastmcp/__init__.py"))
    if not python.exists() or not fastmcp:
        missing_peer(f"the legacy peer venv ({LEGACY_VENV.name} with mcp==1.30.0)")
    return python


@pytest.fixture(scope="session")
def everything_js() -> Path:
    """``dist/index.js`` of npm ``@modelcontextprotocol/server-everything`` (run it with node)."""
    if shutil.which("node") is None:
        missing_peer("node (for @modelcontextprotocol/server-everything)")
    if not EVERYTHING_JS.exists():
        missing_peer("@modelcontextprotocol/server-everything (in .peers/node)")
    return EVERYTHING_JS


@pytest.fixture(scope="session")
def modern_peer_cmd() -> list[str]:
    """argv of the mcp 2.3.0 peer over stdio. For HTTP: ``cmd[:-1] + ["http", "--port", N]``."""
    if importlib.util.find_spec("mcp") is None:
        missing_peer(
            "mcp==2.3.0 (the test dependency group: make venv, or pip install --group test)"
        )
    return [sys.executable, str(PEERS_DIR / "modern_peer.py"), "stdio"]


@pytest.fixture(scope="session")
def legacy_peer_cmd(legacy_python: Path) -> list[str]:
    """argv of the mcp 1.30.0 peer over stdio. For HTTP: ``cmd[:-1] + ["http", "--port", N]``."""
    return [str(legacy_python), str(PEERS_DIR / "legacy_peer.py"), "stdio"]


@pytest.fixture(scope="session")
def everything_cmd(everything_js: Path) -> list[str]:
    """argv of server-everything over stdio (it logs one line to stderr at start).

    Start it with a scrubbed environment: its ``get-env`` tool returns the whole environment.
    """
    return [shutil.which("node") or "node", str(everything_js), "stdio"]


@pytest.fixture
def make_server(tmp_path: Path) -> Callable[..., Any]:
    """Build ``conduit_mcp.testing.ScriptedServer``s, each in its own folder of ``tmp_path``."""
    from conduit_mcp.testing import ScriptedServer

    count = 0

    def make(**kw: Any) -> ScriptedServer:
        nonlocal count
        count += 1
        workdir = tmp_path / f"server{count}"
        workdir.mkdir()
        return ScriptedServer(workdir, **kw)

    return make
