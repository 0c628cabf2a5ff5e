"""The README's examples run: every ```python block, as written, in a fresh interpreter.

A block may be preceded by an HTML comment saying what the test must provide:
``<!-- readme-test: setup=http (...) -->`` starts a scripted streamable HTTP server that
requires a bearer token, and defines ``url`` and ``token`` before the block runs (the comment
and the prose around the block say so). Each block runs in its own subprocess with a deadline,
so a hanging example fails instead of hanging the suite.
"""

from __future__ import annotations

import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

pytestmark = pytest.mark.timeout(90)

README = Path(__file__).resolve().parent.parent / "README.md"
DEADLINE = 60.0
TOKEN = "readme-t0k"

# A block that fails today for a reason being fixed elsewhere: matched by a line of its code.
# Blocks known to fail, with the reason (a substring of the block -> why): none today.
KNOWN_FAILURES: dict[str, str] = {}

_BLOCK = re.compile(
    r"(?:<!--\s*readme-test:\s*(?P<marker>[^>]*?)\s*-->\s*\n)?```python\n(?P<code>.*?)^```",
    re.S | re.M,
)


@dataclass(frozen=True)
class Block:
    heading: str
    line: int
    code: str
    setup: str | None

    @property
    def id(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.heading.lower()).strip("-")
        return f"{slug}-line{self.line}"


def blocks() -> list[Block]:
    text = README.read_text(encoding="utf-8")
    found = []
    for match in _BLOCK.finditer(text):
        before = text[: match.start("code")]
        headings = re.findall(r"^#+ (.+)$", before, re.M)
        marker = match.group("marker") or ""
        setup = re.match(r"setup=(\w+)", marker)
        found.append(
            Block(
                heading=headings[-1] if headings else "top",
                line=before.count("\n") + 1,
                code=match.group("code"),
                setup=setup.group(1) if setup else None,
            )
        )
    return found


def test_the_readme_has_python_examples():
    found = blocks()
    assert len(found) >= 6
    assert {b.setup for b in found} <= {None, "http"}


def run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=DEADLINE,
        cwd=README.parent,
    )


@pytest.mark.parametrize("block", blocks(), ids=lambda b: b.id)
def test_readme_example_runs(block: Block, make_server, request: pytest.FixtureRequest):
    for needle, reason in KNOWN_FAILURES.items():
        if needle in block.code:
            request.applymarker(pytest.mark.xfail(reason=reason, strict=False))
    prelude = ""
    if block.setup == "http":
        server = make_server().http_server(require_bearer=TOKEN)
        request.addfinalizer(server.kill)
        prelude = f"url = {server.url!r}\ntoken = {TOKEN!r}\n"
    done = run(prelude + block.code)
    assert done.returncode == 0, f"README line {block.line}:\n{done.stderr}"
