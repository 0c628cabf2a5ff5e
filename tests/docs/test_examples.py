"""Every example on every page runs: each ```python block of README.md and docs/**/*.md, as
written, in a fresh interpreter with a deadline, so a hanging example fails instead of
hanging the suite.

A block of ``>>>`` lines runs as a doctest (its printed output is checked). A block may be
preceded by an HTML comment saying what the test must provide:
``<!-- docs-test: setup=http (...) -->`` starts a scripted streamable HTTP server that
requires a bearer token, and defines ``url`` and ``token`` before the block runs (the comment
and the prose around the block say so); ``setup=tls`` blocks need certificates and run in
tests/tls/test_tls_docs.py.
"""

from __future__ import annotations

import doctest
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(90)

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
DEADLINE = 60.0
TOKEN = "readme-t0k"
# Setups this file provides, and those another test file runs.
SETUPS = {None, "http"}
ELSEWHERE = {
    "tls": "tests/tls/test_tls_docs.py",
    "sse": "tests/sse/test_sse_docs.py",
    "ray": "tests/cluster/test_ray.py",
}

_BLOCK = re.compile(
    r"(?:<!--\s*docs-test:\s*(?P<marker>[^>]*?)\s*-->\s*\n)?^```python\n(?P<code>.*?)^```",
    re.S | re.M,
)


@dataclass(frozen=True)
class Block:
    page: str
    heading: str
    line: int
    code: str
    setup: str | None

    @property
    def id(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.heading.lower()).strip("-")
        return f"{self.page}-{slug}-line{self.line}"


def blocks() -> list[Block]:
    found = []
    for path in PAGES:
        text = path.read_text(encoding="utf-8")
        for match in _BLOCK.finditer(text):
            before = text[: match.start("code")]
            headings = re.findall(r"^#+ (.+)$", before, re.M)
            setup = re.match(r"setup=(\w+)", match.group("marker") or "")
            found.append(
                Block(
                    page=str(path.relative_to(ROOT)),
                    heading=headings[-1] if headings else "top",
                    line=before.count("\n") + 1,
                    code=match.group("code"),
                    setup=setup.group(1) if setup else None,
                )
            )
    return found


def test_the_pages_have_python_examples():
    found = blocks()
    assert len(found) >= 18
    assert {b.setup for b in found} <= SETUPS | set(ELSEWHERE)
    assert sum(b.page == "README.md" for b in found) >= 2


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        cwd=ROOT,
    )


def as_doctest(code: str) -> str:
    """A program that runs ``code`` (``>>>`` lines) as a doctest and fails if any fails."""
    return (
        "import doctest, sys\n"
        f"test = doctest.DocTestParser().get_doctest({code!r}, {{}}, 'page', 'page', 0)\n"
        "runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)\n"
        "runner.run(test)\n"
        "sys.exit(1 if runner.failures else 0)\n"
    )


RUNNABLE = [b for b in blocks() if b.setup not in ELSEWHERE]


@pytest.mark.parametrize("block", RUNNABLE, ids=lambda b: b.id)
def test_the_example_runs(block: Block, make_server, request: pytest.FixtureRequest):
    prelude = ""
    if block.setup == "http":
        server = make_server().http_server(require_bearer=TOKEN)
        request.addfinalizer(server.kill)
        prelude = f"url = {server.url!r}\ntoken = {TOKEN!r}\n"
    code = block.code
    if code.lstrip().startswith(">>>"):
        assert not prelude, "a doctest block takes no setup"
        code = as_doctest(code)
        assert doctest.DocTestParser().get_examples(block.code), block.id
    done = run(prelude + code)
    assert done.returncode == 0, f"{block.page} line {block.line}:\n{done.stdout}\n{done.stderr}"
